// render.js - draws attention weights: SVG heatmaps with labels and a legend that states its scale, a head-coloured
// line view, and the sentence coloured by the attention from one token.
//
// SVG rather than canvas: every cell and line is an element with its weight
// in a data attribute (so tests and screen readers can read it), hovering
// needs no hit-testing, and the same markup exports as SVG or, drawn onto a
// canvas, as PNG. Colours and fonts are attributes, not CSS classes, so an
// exported file looks the same outside the page. Large matrices are built as
// one markup string (16k cells in a few tens of ms) and hover touches only a
// handful of elements, so a 128 x 128 heatmap still answers in a few ms.
//
// Extension point for the trained-model views (layers x heads, GRU seq2seq):
// everything here takes plain number[][] matrices plus row/column labels, so a
// "Model" view can call heatmap(), lineView() and coloredTokens() per layer
// and head without any change to this file.

const NS = 'http://www.w3.org/2000/svg';
export const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif';
let uid = 0;

export function el(name, attrs = {}, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

function esc(s) {
  return String(s).replace(/[&<>"]/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
}

// A light-to-dark sequential scale (ColorBrewer "Blues" end points, extended
// to a deep indigo): small weights stay pale so the strong ones stand out.
const STOPS = [
  [0.00, [247, 251, 255]],
  [0.20, [198, 219, 239]],
  [0.45, [107, 174, 214]],
  [0.70, [33, 113, 181]],
  [1.00, [8, 37, 103]],
];

export function colourRGB(t) {
  t = Math.max(0, Math.min(1, Number.isFinite(t) ? t : 0));
  for (let i = 1; i < STOPS.length; i++) {
    const [t1, c1] = STOPS[i];
    const [t0, c0] = STOPS[i - 1];
    if (t <= t1) {
      const f = (t - t0) / (t1 - t0);
      return c0.map((x, k) => Math.round(x + f * (c1[k] - x)));
    }
  }
  return [8, 37, 103];
}
export function colour(t) {
  const c = colourRGB(t);
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

// WCAG's relative luminance of an sRGB colour [r, g, b] (0-255).
function luminance(rgb) {
  const lin = v => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2]);
}

// The colour of text written on colour(t): white or black, whichever
// contrasts more. Below luminance 0.179 white wins; either way the contrast
// is at least 4.6:1 anywhere on the scale (WCAG AA asks 4.5:1; the page's
// dark grey ink would fall to 4:1 on the middle blues).
export function textOn(t) {
  return luminance(colourRGB(t)) < 0.179 ? '#ffffff' : '#000000';
}

// Colours for heads, chosen to stay apart for 8+ heads.
export const HEAD_COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#e377c2', '#8c564b',
  '#7f7f7f', '#bcbd22', '#393b79', '#637939', '#843c39', '#7b4173', '#3182bd', '#e6550d'];

// One number rule for the whole page: three significant digits; below 0.001
// the same three digits in e-notation (0.00400, 0.0600, 0.123, 1.00, 6.00e-4).
export function fmt(w) {
  w = Number(w);
  if (w === 0) return '0';
  if (!Number.isFinite(w)) return String(w);
  if (Math.abs(w) < 0.001) return w.toExponential(2);
  return w.toPrecision(3);
}

// A text's width in px, measured in the figures' font (an estimate from its
// length where there is no canvas); weight as in CSS (600: the titles).
const measurer = typeof document !== 'undefined' ? document.createElement('canvas').getContext('2d') : null;
export function textWidth(s, px, weight = 400) {
  if (!measurer) return Math.ceil(String(s).length * px * (weight > 400 ? 0.68 : 0.6));
  measurer.font = `${weight} ${px}px ${FONT}`;
  return Math.ceil(measurer.measureText(String(s)).width);
}

// Breaks text at spaces into lines of at most n characters, or lines that
// fits(line) accepts when n is a function (a longer word keeps its own line).
function wrapText(text, n) {
  const fits = typeof n === 'function' ? n : line => line.length <= n;
  const lines = [];
  let cur = '';
  for (const w of String(text).split(/\s+/)) {
    if (cur && !fits(cur + ' ' + w)) { lines.push(cur); cur = w; } else cur = cur ? cur + ' ' + w : w;
  }
  if (cur) lines.push(cur);
  return lines;
}

// Lines of text at most maxW px wide as drawn at px and weight.
export function wrapWidth(text, maxW, px, weight = 400) {
  return wrapText(text, line => textWidth(line, px, weight) <= maxW);
}

/* ------------------------------------------------------------ colour scales
 * abs: the weight itself, 0 = white, 1 = darkest (the default everywhere, so
 *      near-uniform attention is pale and panels compare).
 * row: each row's own maximum is darkest (shows the shape of flat rows).
 * log: log10 from 1e-4 to 1 (shows the tail of small weights). */
export const SCALES = {
  abs: { label: 'absolute scale: 0 = white, 1 = darkest', short: 'absolute 0–1',
    ticks: [[0, '0'], [0.25, '0.25'], [0.5, '0.5'], [0.75, '0.75'], [1, '1']] },
  row: { label: 'per-row scale: each row’s largest weight is darkest', short: 'per row (÷ row max)',
    ticks: [[0, '0'], [0.5, '½ row max'], [1, 'row max']] },
  log: { label: 'log scale: 10⁻⁴ (white) to 1 (darkest)', short: 'log 10⁻⁴–1',
    ticks: [[0, '≤1e-4'], [0.25, '0.001'], [0.5, '0.01'], [0.75, '0.1'], [1, '1']] },
};
export function scaleT(mode, w, rowMax) {
  if (!(w > 0)) return 0;
  if (mode === 'row') return rowMax > 0 ? w / rowMax : 0;
  if (mode === 'log') return Math.max(0, Math.min(1, (Math.log10(w) + 4) / 4));
  return Math.min(1, w);
}
export function rowMaxes(matrix) {
  return matrix.map(r => { let m = 0; for (const w of r) if (w > m) m = w; return m; });
}

// Entropies below this many bits are float32 rounding, not spread: the
// service's weights are float32 (ε = 2⁻²³ ≈ 1.2e-7), so a one-hot row can
// come back as 0.99999988 on its key plus a few ε elsewhere, about
// ε / ln 2 ≈ 1.7e-7 bits per rounded weight. 1e-5 bits leaves room for some
// 60 such weights and is still far below any spread a picture can show
// (a row with 0.9999 on one key has 1.5e-3 bits).
export const ENTROPY_NOISE_BITS = 1e-5;

// Per-row statistics: entropy (bits) over the row's weights (0 below
// ENTROPY_NOISE_BITS), argmax (lowest index on ties, as the API's hard
// argmax), and whether the row was fully masked (the contract gives such a
// row all-zero weights).
export function rowStats(matrix) {
  return matrix.map(row => {
    let sum = 0, h = 0, arg = 0;
    for (let j = 0; j < row.length; j++) {
      const w = row[j];
      sum += w;
      if (w > 0) h -= w * Math.log2(w);
      if (w > row[arg]) arg = j;
    }
    const masked = row.every(w => w === 0);
    return { entropy: masked || h < ENTROPY_NOISE_BITS ? 0 : h, argmax: masked ? -1 : arg, max: masked ? 0 : row[arg], sum, masked };
  });
}

function patterns(id) {
  // pad: a key marked as padding; mask: a cell the options forbid (causal,
  // window, mask); sparse: a cell outside the sparse pattern (dotted green).
  // All differ from a learned zero, which is plain white.
  return `<pattern id="${id}-pad" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
    `<rect width="6" height="6" fill="#e4e6ea"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9aa1ad" stroke-width="2"/></pattern>` +
    `<pattern id="${id}-mask" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(-45)">` +
    `<rect width="6" height="6" fill="#f1f2f4"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c9cdd4" stroke-width="1.5"/></pattern>` +
    `<pattern id="${id}-sparse" width="6" height="6" patternUnits="userSpaceOnUse">` +
    `<rect width="6" height="6" fill="#eef5ec"/><circle cx="3" cy="3" r="1.1" fill="#8fb58a"/></pattern>` +
    `<pattern id="${id}-row" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
    `<rect width="6" height="6" fill="#fff5f5" fill-opacity="0.6"/><line x1="0" y1="0" x2="0" y2="6" stroke="#e0a0a0" stroke-width="2"/></pattern>`;
}

/* Heatmap of one Lq x Lk matrix.
 * opts: rows, cols (labels); title; caption (a line under the title);
 *   cell (px); labels (false for thumbnails); legend (bool); scale ('abs',
 *   'row', 'log'); kind(i, j) -> '' | 'pad' | 'mask' | 'sparse' (cells the
 *   request did not allow); structure (drawn over the cells, see
 *   structureMarkup); foot (text under the grid, kept in exports);
 *   fontSize (label px, at least 11 when labels are drawn); wrap (px: the
 *   title, caption and foot are broken into lines of at most that width, as
 *   drawn, instead of widening the figure past its box); colWord ('key',
 *   or 'value' for concat, whose columns are value positions): what the
 *   columns' axis title calls them. */
export function heatmap(matrix, opts = {}) {
  const id = 'hm' + (++uid);
  const Lq = matrix.length, Lk = Lq ? matrix[0].length : 0;
  const rows = opts.rows || matrix.map((_, i) => 'q' + i);
  const cols = opts.cols || (matrix[0] || []).map((_, j) => 'k' + j);
  const labels = opts.labels !== false;
  const legend = opts.legend !== false;
  const mode = SCALES[opts.scale] ? opts.scale : 'abs';
  const cell = opts.cell || Math.max(14, Math.min(36, Math.floor(480 / Math.max(1, Lq, Lk))));
  const fs = labels ? (opts.fontSize || Math.min(13, Math.max(11, cell * 0.5))) : 0;
  const kind = opts.kind || (() => '');
  const stats = rowStats(matrix);
  const rmax = rowMaxes(matrix);
  const anyMasked = stats.some(s => s.masked);
  const big = Lq * Lk > 2500;

  // Lines as drawn (a word longer than the width keeps a line of its own).
  const lines = (text, px, weight) => (!text ? [] : opts.wrap ? wrapWidth(text, Math.max(60, opts.wrap - 8), px, weight) : wrapText(text, Infinity));
  const titleLines = lines(opts.title, 14, 600);
  const titleH = titleLines.length ? 18 * titleLines.length + 4 : 0;
  const capLines = lines(opts.caption, 11, 400);
  const capH = 16 * capLines.length;
  const footLines = lines(opts.foot, 11, 400);
  // Axis titles in the corner above the row labels: "keys →", then "queries ↓".
  const colWords = (opts.colWord || 'key') + 's';
  const AXES = [`${colWords} →`, 'queries ↓'];
  const axisW = labels ? 10 + Math.max(...AXES.map(a => textWidth(a, 10))) : 0;
  const left = labels ? Math.max(axisW, Math.min(140, 12 + Math.max(0, ...rows.map(r => textWidth(r, fs))))) : 2;
  // Rotated column labels need their length times sin 45 plus the font's height.
  const colLabelH = labels ? Math.min(120, Math.ceil(0.72 * Math.max(0, ...cols.map(c => textWidth(c, fs))) + fs * 1.4 + 8)) : 2;
  const top = titleH + capH + colLabelH;
  const gridW = Lk * cell, gridH = Lq * cell;
  const maskW = anyMasked && labels ? 58 : 0;
  const legendW = legend ? 118 : 0;
  const footH = footLines.length ? 14 * footLines.length + 4 : 0;
  const legendH = legend ? 210 : 0;
  // The last rotated column label reaches past the grid's right edge.
  const tail = labels && !legend && Lk ? Math.ceil(0.72 * textWidth(cols[Lk - 1], fs)) : 0;
  const width = Math.ceil(Math.max(left + gridW + maskW + legendW + Math.max(8, tail), ...titleLines.map(l => textWidth(l, 14, 600) + 8),
    ...[...capLines, ...footLines].map(l => textWidth(l, 11) + 8)));
  const height = Math.ceil(top + Math.max(gridH + footH, legendH) + 8);

  const parts = [];
  parts.push(`<defs>${patterns(id)}<linearGradient id="${id}-grad" x1="0" y1="1" x2="0" y2="0">` +
    Array.from({ length: 21 }, (_, k) => `<stop offset="${k / 20}" stop-color="${colour(k / 20)}"/>`).join('') + '</linearGradient></defs>');
  parts.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);

  const showValues = labels && cell >= 30;
  const sw = labels && cell >= 10 ? 1 : 0.5;
  // Thumbnails and overview panels of large matrices: one pixel per weight in
  // an embedded image instead of thousands of elements (exports keep it).
  const raster = opts.raster ?? (!labels && Lq * Lk > 1600);
  let g = raster ? `<image class="cells-raster" x="${left}" y="${top}" width="${gridW}" height="${gridH}" preserveAspectRatio="none" ` +
    `image-rendering="pixelated" style="image-rendering:pixelated" href="${rasterURL(matrix, mode, rmax, kind)}"/><g class="cells">` : '<g class="cells">';
  let values = ''; // the printed weights, drawn over the structure's lines
  for (let i = 0; i < Lq && !raster; i++) {
    const y = top + i * cell;
    for (let j = 0; j < Lk; j++) {
      const w = matrix[i][j];
      const k = w === 0 ? kind(i, j) : '';
      const t = scaleT(mode, w, rmax[i]);
      const fill = k ? `url(#${id}-${k})` : colour(t);
      g += `<rect x="${left + j * cell}" y="${y}" width="${cell}" height="${cell}" fill="${fill}" stroke="#ffffff" stroke-width="${sw}" ` +
        `class="cell" data-row="${i}" data-col="${j}" data-weight="${w}"${k ? ` data-mask="${k}"` : ''}>` +
        (big ? '' : `<title>${esc(rows[i])} → ${esc(cols[j])}: ${fmt(w)}${KIND_WORDS[k] ? ` (${KIND_WORDS[k]})` : ''}</title>`) + '</rect>';
      if (showValues && w >= 0.1) {
        values += `<text x="${left + j * cell + cell / 2}" y="${y + cell / 2 + 4}" font-size="${Math.min(11, cell * 0.32)}" text-anchor="middle" ` +
          `fill="${textOn(t)}" stroke="${colour(t)}" stroke-width="3" paint-order="stroke" pointer-events="none">${fmt(w).replace(/^0\./, '.')}</text>`;
      }
    }
  }
  for (let i = 0; i < Lq; i++) {
    const y = top + i * cell;
    if (stats[i].masked) {
      g += `<rect x="${left}" y="${y}" width="${gridW}" height="${cell}" fill="url(#${id}-row)" class="masked-row" data-row="${i}" pointer-events="none"/>`;
      if (labels) g += `<text x="${left + gridW + 6}" y="${y + cell / 2 + 4}" font-size="11" fill="#b42318">masked</text>`;
    }
  }
  parts.push(g + '</g>');
  if (opts.structure) parts.push(structureMarkup(opts.structure, { left, top, cell, Lq, Lk, thin: !labels }));
  if (values) parts.push(`<g class="values" pointer-events="none">${values}</g>`);
  // Overlays: the pinned row/column and the hovered cell (moved, never rebuilt).
  // The hovered cell's box is amber edged in dark grey, so it shows on the
  // palest and the darkest cells alike (it is the keyboard's cursor too).
  parts.push(`<g class="overlay" pointer-events="none"><rect class="pin-box" fill="none" stroke="#e8590c" stroke-width="${labels ? 2.5 : 1.5}" visibility="hidden"/>` +
    `<rect class="hover-box" fill="none" stroke="#1d2433" stroke-width="5" visibility="hidden"/>` +
    `<rect class="hover-box" fill="none" stroke="#ffb020" stroke-width="2.5" visibility="hidden"/></g>`);
  // The label bands come after the cells, on white, so that when a large
  // heatmap scrolls they can be moved to stay in view over the cells
  // (the page sets their transforms; exports drop them).
  const titles = (titleLines.length ? `<text class="title" font-size="14" font-weight="600" fill="#1d2433">${tspans(titleLines, 16, 18)}</text>` : '') +
    capLines.map((l, k) => `<text class="caption" x="4" y="${titleH + 12 + 16 * k}" font-size="11" fill="#5b6475">${esc(l)}</text>`).join('');
  if (labels) {
    let s = `<g class="row-band"><rect x="0" y="${top}" width="${left}" height="${gridH}" fill="#ffffff"/><g class="row-labels" font-size="${fs}" fill="#333" text-anchor="end">`;
    rows.forEach((r, i) => { s += `<text x="${left - 6}" y="${top + i * cell + cell / 2 + fs * 0.35}" class="row-label" data-row="${i}">${esc(r)}</text>`; });
    s += `</g></g><g class="col-band"><rect x="0" y="0" width="${left + gridW}" height="${top}" fill="#ffffff"/>${titles}<g class="col-labels" font-size="${fs}" fill="#333">`;
    cols.forEach((c, j) => {
      const x = left + j * cell + cell / 2 + fs * 0.3, y = top - 5;
      s += `<text x="${x}" y="${y}" transform="rotate(-45 ${x} ${y})" class="col-label" data-col="${j}">${esc(c)}</text>`;
    });
    s += `</g></g><rect class="corner" x="0" y="0" width="${left}" height="${top}" fill="#ffffff" visibility="hidden"/>`;
    s += `<g class="axes" font-size="10" font-style="italic" fill="#5b6475" text-anchor="end">` +
      AXES.map((a, k) => `<text class="axis" x="${left - 6}" y="${top - 20 + 14 * k}">${a}</text>`).join('') + '</g>';
    parts.push(s);
  } else if (titles) parts.push(titles);
  if (footLines.length) parts.push(`<text class="foot" font-size="11" fill="#5b6475">${tspans(footLines, top + gridH + 14, 14)}</text>`);

  if (legend) {
    const lx = left + gridW + maskW + 14, ly = top, lh = 120;
    let s = `<g class="legend" font-size="11" fill="#333" data-scale="${mode}">`;
    s += `<text x="${lx - 2}" y="${ly - 8}" font-size="11" fill="#555">${mode === 'abs' ? 'weight' : mode === 'row' ? 'weight ÷ row max' : 'weight (log)'}</text>`;
    s += `<rect x="${lx}" y="${ly}" width="12" height="${lh}" fill="url(#${id}-grad)" stroke="#999" stroke-width="0.5"/>`;
    for (const [f, lab] of SCALES[mode].ticks) {
      const y = ly + lh - f * lh;
      s += `<line x1="${lx + 12}" x2="${lx + 16}" y1="${y}" y2="${y}" stroke="#666"/><text x="${lx + 18}" y="${y + 3.5}">${esc(lab)}</text>`;
    }
    let sy = ly + lh + 22;
    const sw2 = (pat, lab) => { s += `<rect x="${lx}" y="${sy - 9}" width="12" height="12" fill="url(#${id}-${pat})" stroke="#999" stroke-width="0.5"/><text x="${lx + 18}" y="${sy + 1}">${lab}</text>`; sy += 18; };
    s += `<rect x="${lx}" y="${sy - 9}" width="12" height="12" fill="${colour(0)}" stroke="#999" stroke-width="0.5"/><text x="${lx + 18}" y="${sy + 1}">0 (computed)</text>`; sy += 18;
    sw2('pad', 'padding key');
    sw2('mask', 'masked');
    if (opts.structure && opts.structure.blocks) sw2('sparse', 'outside pattern');
    parts.push(s + '</g>');
  }

  const svg = el('svg', { xmlns: NS, width, height, viewBox: `0 0 ${width} ${height}`, class: 'heatmap', role: 'img',
    'aria-label': (opts.title ? opts.title + ': ' : '') + `attention weights, ${Lq} queries by ${Lk} ${colWords}, ${SCALES[mode].label}`,
    'font-family': FONT, 'data-rows': Lq, 'data-cols': Lk, 'data-scale': mode, 'data-cell': cell });
  svg.innerHTML = parts.join('');
  svg._geom = { left, top, cell, Lq, Lk, gridW, gridH };
  return svg;
}

const KIND_WORDS = { pad: 'padding key', mask: 'masked', sparse: 'outside the sparse pattern' };
export const STRUCT_COLOURS = { diag: '#9c36b5', band: '#c2255c', block: '#2b8a3e', drawn: '#e8590c' };

/* The structure of a request drawn over its cells (pointer-events none):
 *   diag: offset d, the dashed line through the cells (i, i + d) where the
 *     diagonal i' = j sits (d = Lk - Lq for align bottom_right, else 0);
 *   lo, hi: i -> the first / last key row i may see by causal and window
 *     (null: no bound on that side), drawn as solid staircase edges;
 *   blocks: {size, layout}: an outline around each block the sparse
 *     layout allows (layout[qb][kb] true; the last blocks may be cut);
 *   marks: [[i, j], ...] cells to ring. */
export function structureMarkup(st, g) {
  const { left, top, cell, Lq, Lk } = g;
  const w = g.thin ? 1.2 : 2;
  let s = '<g class="structure" pointer-events="none" fill="none">';
  if (st.blocks && Array.isArray(st.blocks.layout)) {
    const b = st.blocks.size;
    st.blocks.layout.forEach((row, qb) => row.forEach((on, kb) => {
      if (!on) return;
      const x0 = Math.min(Lk, kb * b), x1 = Math.min(Lk, (kb + 1) * b), y0 = Math.min(Lq, qb * b), y1 = Math.min(Lq, (qb + 1) * b);
      if (x1 <= x0 || y1 <= y0) return;
      s += `<rect class="layout-block" data-qb="${qb}" data-kb="${kb}" x="${left + x0 * cell + 1}" y="${top + y0 * cell + 1}" ` +
        `width="${(x1 - x0) * cell - 2}" height="${(y1 - y0) * cell - 2}" stroke="${STRUCT_COLOURS.block}" stroke-width="${w}" rx="2"/>`;
    }));
  }
  const edge = (bound, side) => {
    // One vertical segment per row at the bound's cell edge, joined row to row.
    let d = '';
    let prev = null;
    for (let i = 0; i < Lq; i++) {
      const v = bound(i);
      if (v === null || v === undefined) { prev = null; continue; }
      const x = Math.max(0, Math.min(Lk, side === 'lo' ? v : v + 1));
      const X = left + x * cell, y0 = top + i * cell, y1 = y0 + cell;
      d += prev === null ? `M${X} ${y0}` : `L${prev} ${y0}L${X} ${y0}`;
      d += `L${X} ${y1}`;
      prev = X;
    }
    return d ? `<path class="band-edge" data-side="${side}" d="${d}" stroke="${STRUCT_COLOURS.band}" stroke-width="${w}" stroke-linejoin="round"/>` : '';
  };
  // marks: [i, j] cells ringed (a sampled draw's keys on the soft weights it came from).
  for (const [i, j] of st.marks || []) {
    if (i < 0 || i >= Lq || j < 0 || j >= Lk) continue;
    s += `<rect class="drawn" data-row="${i}" data-col="${j}" x="${left + j * cell + 2}" y="${top + i * cell + 2}" width="${cell - 4}" ` +
      `height="${cell - 4}" stroke="${STRUCT_COLOURS.drawn}" stroke-width="${w}" rx="${cell / 2}"/>`;
  }
  if (st.lo) s += edge(st.lo, 'lo');
  if (st.hi) s += edge(st.hi, 'hi');
  if (st.diag !== null && st.diag !== undefined) {
    const d = st.diag;
    const i0 = Math.max(0, -d), i1 = Math.min(Lq, Lk - d) - 1;
    if (i0 <= i1) {
      s += `<line class="diag" data-offset="${d}" x1="${left + (i0 + d) * cell}" y1="${top + i0 * cell}" x2="${left + (i1 + d + 1) * cell}" ` +
        `y2="${top + (i1 + 1) * cell}" stroke="${STRUCT_COLOURS.diag}" stroke-width="${w}" stroke-dasharray="${g.thin ? '3 2' : '6 4'}"/>`;
    }
  }
  return s + '</g>';
}

// The matrix as a PNG data URL, one pixel per weight (padding and masked cells
// in the greys of their hatching).
function rasterURL(matrix, mode, rmax, kind) {
  const Lq = matrix.length, Lk = matrix[0].length;
  const c = document.createElement('canvas');
  c.width = Lk; c.height = Lq;
  const g = c.getContext('2d');
  const img = g.createImageData(Lk, Lq);
  for (let i = 0; i < Lq; i++) {
    for (let j = 0; j < Lk; j++) {
      const w = matrix[i][j];
      const k = w === 0 ? kind(i, j) : '';
      const rgb = k === 'pad' ? [190, 195, 203] : k === 'mask' ? [232, 234, 238] : k === 'sparse' ? [214, 232, 210] : colourRGB(scaleT(mode, w, rmax[i]));
      const o = 4 * (i * Lk + j);
      img.data[o] = rgb[0]; img.data[o + 1] = rgb[1]; img.data[o + 2] = rgb[2]; img.data[o + 3] = 255;
    }
  }
  g.putImageData(img, 0, 0);
  return c.toDataURL('image/png');
}

// Cached lookups for a heatmap's labels and overlays, so hover is O(1).
function parts(svg) {
  if (!svg._parts) {
    svg._parts = {
      rowLabels: [...svg.querySelectorAll('.row-label')],
      colLabels: [...svg.querySelectorAll('.col-label')],
      pinBox: svg.querySelector('.pin-box'),
      hoverBoxes: [...svg.querySelectorAll('.hover-box')],
      bold: [],
    };
  }
  return svg._parts;
}

// The cell an arrow key moves a heatmap's keyboard cursor to, kept on its
// R x C grid; null for any other key. Without a cursor the first key starts
// from the first row, one step before the first column.
export function arrowCell(key, cursor, R, C) {
  const d = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] }[key];
  if (!d) return null;
  const from = cursor || { i: 0, j: -d[1] };
  return { i: Math.max(0, Math.min(R - 1, from.i + d[0])), j: Math.max(0, Math.min(C - 1, from.j + d[1])) };
}

// The tab a key moves to from cur among the shown tabs (WAI-ARIA tabs
// pattern: the arrows wrap around, Home and End go to the ends); null for
// any other key.
export function tabKey(key, shown, cur) {
  const i = shown.indexOf(cur), n = shown.length;
  if (key === 'ArrowRight') return shown[(i + 1) % n];
  if (key === 'ArrowLeft') return shown[(i - 1 + n) % n];
  if (key === 'Home') return shown[0];
  if (key === 'End') return shown[n - 1];
  return null;
}

// Outlines the hovered cell and bolds its row and column labels.
export function markHover(svg, i, j) {
  const p = parts(svg), g = svg._geom;
  for (const l of p.bold) l.removeAttribute('font-weight');
  p.bold = [];
  if (i === null || i === undefined) { for (const b of p.hoverBoxes) b.setAttribute('visibility', 'hidden'); return; }
  for (const l of [p.rowLabels[i], p.colLabels[j]]) if (l) { l.setAttribute('font-weight', 700); p.bold.push(l); }
  for (const b of p.hoverBoxes) {
    b.setAttribute('x', g.left + j * g.cell); b.setAttribute('y', g.top + i * g.cell);
    b.setAttribute('width', g.cell); b.setAttribute('height', g.cell);
    b.setAttribute('visibility', 'visible');
  }
}

// Makes a drawn heatmap the keyboard's: it takes focus, its arrow keys walk
// the cells (the caller listens) and describedBy (an element's id) is where
// the cell under the cursor is written. The role is "application" so that a
// screen reader hands it the arrow keys instead of reading on.
export function keyboardHeatmap(svg, describedBy) {
  svg.setAttribute('tabindex', '0');
  svg.setAttribute('role', 'application');
  svg.setAttribute('aria-describedby', describedBy);
}

// Outlines the pinned query row or key column (pin = {side: 'q'|'k', index} or null).
export function markPin(svg, pin) {
  const p = parts(svg), g = svg._geom;
  const b = p.pinBox;
  for (const l of [...p.rowLabels, ...p.colLabels]) l.removeAttribute('fill');
  if (!pin || (pin.side === 'q' ? pin.index >= g.Lq : pin.index >= g.Lk)) { b.setAttribute('visibility', 'hidden'); svg.dataset.pin = ''; return; }
  if (pin.side === 'q') {
    b.setAttribute('x', g.left); b.setAttribute('y', g.top + pin.index * g.cell); b.setAttribute('width', g.gridW); b.setAttribute('height', g.cell);
    if (p.rowLabels[pin.index]) p.rowLabels[pin.index].setAttribute('fill', '#e8590c');
  } else {
    b.setAttribute('x', g.left + pin.index * g.cell); b.setAttribute('y', g.top); b.setAttribute('width', g.cell); b.setAttribute('height', g.gridH);
    if (p.colLabels[pin.index]) p.colLabels[pin.index].setAttribute('fill', '#e8590c');
  }
  b.setAttribute('visibility', 'visible');
  svg.dataset.pin = pin.side + pin.index;
}

/* A horizontal colour bar for views whose panels share one scale. */
export function legendBar(mode = 'abs', keys = null) {
  const id = 'lg' + (++uid);
  const width = 246, height = 62 + (keys && keys.length ? 18 * keys.length : 0);
  const m = SCALES[mode] ? mode : 'abs';
  const svg = el('svg', { xmlns: NS, width, height, viewBox: `0 0 ${width} ${height}`, class: 'legend-bar', role: 'img',
    'aria-label': SCALES[m].label, 'font-family': FONT, 'data-scale': m });
  const x0 = 8, w = 226;
  let s = `<defs>${patterns(id)}<linearGradient id="${id}-grad" x1="0" y1="0" x2="1" y2="0">` +
    Array.from({ length: 21 }, (_, k) => `<stop offset="${k / 20}" stop-color="${colour(k / 20)}"/>`).join('') + '</linearGradient></defs>';
  s += `<rect width="${width}" height="${height}" fill="#ffffff"/>`;
  s += `<text x="${x0}" y="11" font-size="11" fill="#555">${esc(SCALES[m].short === 'absolute 0–1' ? 'weight, absolute scale 0–1' : m === 'row' ? 'weight ÷ its row’s largest' : 'weight, log scale')}</text>`;
  s += `<rect x="${x0}" y="16" width="${w}" height="10" fill="url(#${id}-grad)" stroke="#999" stroke-width="0.5"/>`;
  for (const [f, lab] of SCALES[m].ticks) {
    s += `<line x1="${x0 + f * w}" x2="${x0 + f * w}" y1="26" y2="29" stroke="#666"/>` +
      `<text x="${x0 + f * w}" y="40" font-size="11" fill="#333" text-anchor="${f === 0 ? 'start' : f === 1 ? 'end' : 'middle'}">${esc(lab)}</text>`;
  }
  s += `<rect x="${x0}" y="48" width="10" height="10" fill="url(#${id}-pad)" stroke="#999" stroke-width="0.5"/><text x="${x0 + 14}" y="57" font-size="11" fill="#333">padding key</text>`;
  s += `<rect x="${x0 + 90}" y="48" width="10" height="10" fill="url(#${id}-mask)" stroke="#999" stroke-width="0.5"/><text x="${x0 + 104}" y="57" font-size="11" fill="#333">masked (not allowed)</text>`;
  // The structure drawn over the grid, one key per line (keys: 'diag', 'band', 'block', 'sparse').
  const words = { diag: 'diagonal i′ = j (alignment)', band: 'causal / window edge', block: 'sparse layout block', sparse: 'outside the sparse pattern',
    drawn: 'the key a row drew' };
  (keys || []).forEach((k, n) => {
    const y = 66 + 18 * n;
    if (k === 'sparse') s += `<rect x="${x0}" y="${y}" width="10" height="10" fill="url(#${id}-sparse)" stroke="#999" stroke-width="0.5"/>`;
    else if (k === 'block') s += `<rect x="${x0}" y="${y}" width="10" height="10" fill="none" stroke="${STRUCT_COLOURS.block}" stroke-width="2"/>`;
    else if (k === 'drawn') s += `<circle cx="${x0 + 5}" cy="${y + 5}" r="5" fill="none" stroke="${STRUCT_COLOURS.drawn}" stroke-width="2"/>`;
    else s += `<line x1="${x0}" x2="${x0 + 12}" y1="${y + 5}" y2="${y + 5}" stroke="${STRUCT_COLOURS[k]}" stroke-width="2"${k === 'diag' ? ' stroke-dasharray="4 2"' : ''}/>`;
    s += `<text x="${x0 + 18}" y="${y + 9}" font-size="11" fill="#333" class="legend-key" data-key="${k}">${esc(words[k] || k)}</text>`;
  });
  svg.innerHTML = s;
  return svg;
}

/* Line view after bertviz (Vig 2019): queries on the left, keys on the right,
 * one line per (query, key, head) in the head's colour, opacity = weight.
 * heads: [{index, matrix}] (hidden heads left out by the caller).
 * opts: rows, cols, rowTitle, colTitle, pin, maxLines (past it only the
 * focused token's lines are drawn), onPin(side, index), onFocus(side, index)
 * (side null when nothing is focused), gap (px between the two columns),
 * fit (px: the width to keep within, by a narrower gap), key ({title,
 * heads: [{index, shown}]}, both optional: drawn under the tokens, so a saved
 * picture says what it shows and which colour is which head, the hidden
 * ones named as hidden). */
export function lineView(heads, opts = {}) {
  const first = heads[0] ? heads[0].matrix : [];
  const Lq = first.length, Lk = Lq ? first[0].length : 0;
  const rows = opts.rows || first.map((_, i) => 'q' + i);
  const cols = opts.cols || (first[0] || []).map((_, j) => 'k' + j);
  const n = Math.max(Lq, Lk);
  const fs = n > 60 ? 11 : 13, rowH = n > 60 ? 15 : n > 30 ? 19 : 24;
  const labelW = Math.min(140, 16 + Math.max(40, ...rows.map(r => textWidth(r, fs)), ...cols.map(c => textWidth(c, fs))));
  const pad = heads.length === 1 ? 48 : 6; // room for the weight notes (one head; several heads: the table below)
  // fit (px): the box to fit, so the lines narrow (to 100 px) before the keys' labels leave a phone's screen
  const gap = Math.min(opts.gap || (n > 60 ? 200 : 280), opts.fit ? Math.max(100, Math.floor(opts.fit - 2 * pad - 2 * labelW)) : Infinity);
  const top = 44;
  const qx = pad + labelW, kx = pad + labelW + gap;
  const width = 2 * pad + 2 * labelW + gap;
  const keyTop = top + n * rowH + 12;
  const key = keyMarkup(opts.key, keyTop, width - 8);
  const height = keyTop + key.height;
  const total = heads.length * Lq * Lk;
  const maxLines = opts.maxLines ?? 2000;
  const focusOnly = total > maxLines;

  const svg = el('svg', { xmlns: NS, width, height, viewBox: `0 0 ${width} ${height}`, class: 'lineview', role: 'group',
    'aria-label': 'attention lines: hover or focus a token to show only its lines, click to pin it', 'font-family': FONT,
    'data-focus-only': focusOnly ? '1' : '0' });
  svg.append(el('rect', { width, height, fill: '#ffffff' }));
  if (key.markup) { const g = el('g', { class: 'line-key' }); g.innerHTML = key.markup; svg.append(g); }
  svg.append(el('text', { x: qx, y: 18, 'text-anchor': 'end', 'font-size': 12, fill: '#555', 'font-weight': 600 }, opts.rowTitle || 'queries'));
  svg.append(el('text', { x: kx, y: 18, 'font-size': 12, fill: '#555', 'font-weight': 600 }, opts.colTitle || 'keys'));
  if (focusOnly) {
    svg.append(el('text', { x: width / 2, y: 34, 'text-anchor': 'middle', 'font-size': 11, fill: '#8a5a00', class: 'focus-only-note' },
      `${total.toLocaleString('en')} lines: only the hovered or pinned token’s are drawn`));
  }

  const yq = i => top + i * rowH + rowH / 2;
  const lines = el('g', { class: 'lines' });
  svg.append(lines);
  const drawLines = (side, idx) => {
    let s = '';
    for (const h of heads) {
      const c = HEAD_COLOURS[h.index % HEAD_COLOURS.length];
      const m = h.matrix;
      const one = (i, j) => {
        const w = m[i][j];
        if (!(w > 0)) return;
        s += `<line x1="${qx + 6}" y1="${yq(i)}" x2="${kx - 6}" y2="${yq(j)}" stroke="${c}" stroke-opacity="${Math.min(1, w).toFixed(4)}" ` +
          `stroke-width="2.5" class="attn-line" data-q="${i}" data-k="${j}" data-head="${h.index}" data-weight="${w}"/>`;
      };
      if (focusOnly) {
        // Past the threshold one token has up to heads x L lines; they are
        // drawn as one path per head and opacity step of 1/50 (a few dozen
        // elements instead of a thousand), so hovering stays fast. The exact
        // numbers are in the page's table.
        if (side === null) continue;
        const paths = new Map();
        const n = side === 'q' ? Lk : Lq;
        for (let t = 0; t < n; t++) {
          const [i, j] = side === 'q' ? [idx, t] : [t, idx];
          const w = m[i][j];
          if (!(w > 0)) continue;
          const b = Math.max(1, Math.round(Math.min(1, w) * 50));
          paths.set(b, (paths.get(b) || '') + `M${qx + 6} ${yq(i)}L${kx - 6} ${yq(j)}`);
        }
        for (const [b, d] of paths) {
          s += `<path d="${d}" stroke="${c}" stroke-opacity="${b / 50}" stroke-width="2.5" fill="none" class="attn-path" data-head="${h.index}" data-${side}="${idx}"/>`;
        }
        continue;
      }
      if (side === 'q') for (let j = 0; j < Lk; j++) one(idx, j);
      else if (side === 'k') for (let i = 0; i < Lq; i++) one(i, idx);
      else for (let i = 0; i < Lq; i++) for (let j = 0; j < Lk; j++) one(i, j);
    }
    lines.innerHTML = s;
  };

  const tokens = el('g', { class: 'tokens', 'font-size': fs });
  const addTok = (side, i, label) => {
    const x = side === 'q' ? qx : kx;
    const g = el('g', { class: 'tok', tabindex: 0, role: 'button', 'data-side': side, 'data-index': i,
      'aria-label': `${side === 'q' ? 'query' : 'key'} ${i}: ${label}; show only its lines, press to pin` });
    g.append(el('rect', { x: side === 'q' ? x - labelW + 4 : x, y: yq(i) - rowH / 2 + 1, width: labelW - 4, height: rowH - 2, rx: 4,
      fill: '#ffffff', 'fill-opacity': 0, class: 'tok-bg' }));
    g.append(el('text', { x: side === 'q' ? x - 4 : x + 4, y: yq(i) + fs * 0.35, 'text-anchor': side === 'q' ? 'end' : 'start', fill: '#1d2433' }, label));
    tokens.append(g);
  };
  rows.forEach((r, i) => addTok('q', i, r));
  cols.forEach((c, j) => addTok('k', j, c));
  svg.append(tokens);
  const toks = { q: [...tokens.children].filter(t => t.dataset.side === 'q'), k: [...tokens.children].filter(t => t.dataset.side === 'k') };

  // With one head drawn, focusing a token also writes the weights beside the
  // tokens on the other side (several heads: the page's table does it).
  const notes = el('g', { class: 'weight-notes', 'font-size': 11, fill: '#8a5a00' });
  svg.append(notes);
  const annotate = (side, idx) => {
    if (side === null || heads.length !== 1) { notes.replaceChildren(); return; }
    const m = heads[0].matrix;
    const cnt = side === 'q' ? Lk : Lq;
    let s = '';
    for (let t = 0; t < cnt; t++) {
      const w = side === 'q' ? m[idx][t] : m[t][idx];
      s += `<text x="${side === 'q' ? width - 4 : 4}" y="${yq(t) + 4}" text-anchor="${side === 'q' ? 'end' : 'start'}" class="weight-note">${fmt(w)}</text>`;
    }
    notes.innerHTML = s;
  };

  let pin = opts.pin && (opts.pin.side === 'q' ? opts.pin.index < Lq : opts.pin.index < Lk) ? opts.pin : null;
  let active = null;
  const focus = (side, idx) => {
    if (active) { active.classList.remove('active'); active.querySelector('rect').setAttribute('fill-opacity', 0); }
    active = side === null ? null : toks[side][idx];
    if (active) {
      active.classList.add('active');
      const r = active.querySelector('rect');
      r.setAttribute('fill-opacity', 1);
      r.setAttribute('fill', pin && pin.side === side && pin.index === idx ? '#ffd8a8' : '#fff1b8');
    }
    drawLines(side, idx);
    annotate(side, idx);
    svg.dataset.focus = side === null ? '' : `${side}${idx}`;
    if (opts.onFocus) opts.onFocus(side, idx);
  };
  const rest = () => (pin ? focus(pin.side, pin.index) : focus(null));
  svg._setPin = p => { pin = p && (p.side === 'q' ? p.index < Lq : p.index < Lk) ? p : null; svg.dataset.pin = pin ? pin.side + pin.index : ''; rest(); };
  for (const t of tokens.children) {
    const side = t.dataset.side, idx = Number(t.dataset.index);
    t.addEventListener('mouseenter', () => focus(side, idx));
    t.addEventListener('focus', () => focus(side, idx));
    t.addEventListener('mouseleave', rest);
    t.addEventListener('blur', rest);
    const press = () => { if (opts.onPin) opts.onPin(side, idx); };
    t.addEventListener('click', press);
    t.addEventListener('keydown', e => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); press(); } });
  }
  svg.dataset.pin = pin ? pin.side + pin.index : '';
  rest();
  return svg;
}

// Lines of one text element as tspans at x = 4 from baseline y0, dy apart, so
// the text reads whole (a space ends each line but the last).
function tspans(lines, y0, dy) {
  return lines.map((l, k) => `<tspan x="4" y="${y0 + dy * k}">${esc(l)}${k < lines.length - 1 ? ' ' : ''}</tspan>`).join('');
}

// A line view's key (see lineView), at most maxW px wide from y0: the title's
// lines, then one swatch per head, flowing into rows. Returns {markup, height}.
function keyMarkup(key, y0, maxW) {
  if (!key) return { markup: '', height: 0 };
  const title = key.title ? wrapWidth(key.title, maxW, 12, 600) : [];
  let y = y0 + 2;
  const s = title.length ? `<text class="key-title" font-size="12" font-weight="600" fill="#1d2433">${tspans(title, y + 12, 16)}</text>` : '';
  y += 16 * title.length;
  const heads = key.heads || [];
  let x = 4, items = '';
  for (const h of heads) {
    const label = `head ${h.index}${h.shown ? '' : ' (hidden)'}`;
    const w = 16 + textWidth(label, 11) + 14;
    if (x > 4 && x + w > maxW) { x = 4; y += 18; }
    items += `<g class="key-head" data-head="${h.index}" data-shown="${h.shown ? 1 : 0}"${h.shown ? '' : ' opacity="0.45"'}>` +
      `<rect x="${x}" y="${y + 4}" width="11" height="11" rx="2" fill="${HEAD_COLOURS[h.index % HEAD_COLOURS.length]}"/>` +
      `<text x="${x + 16}" y="${y + 14}" font-size="11" fill="#1d2433">${esc(label)}</text></g>`;
    x += w;
  }
  if (heads.length) y += 18;
  return { markup: s + items, height: y - y0 + 8 };
}

/* The sentence coloured by the attention from one token (after CircuitsVis
 * colored_tokens): tokens = labels, weights = one per token (null: uncoloured),
 * mode = the colour scale, marked = the index of the token the weights come from. */
export function coloredTokens(tokens, weights, opts = {}) {
  const box = document.createElement('div');
  box.className = 'ctokens';
  const mode = SCALES[opts.scale] ? opts.scale : 'abs';
  let rmax = 0;
  if (weights) for (const w of weights) if (w > rmax) rmax = w;
  tokens.forEach((t, i) => {
    const s = document.createElement('button');
    s.type = 'button';
    s.className = 'ctok';
    s.dataset.index = i;
    s.dataset.side = opts.side || 'q';
    s.textContent = t;
    if (weights && weights[i] !== null && weights[i] !== undefined) {
      const w = weights[i];
      const tt = scaleT(mode, w, rmax);
      s.style.background = colour(tt);
      s.style.color = textOn(tt);
      s.dataset.weight = String(w);
      s.title = `${fmt(w)}`;
    }
    if (opts.marked === i) s.classList.add('pinned');
    s.setAttribute('aria-pressed', String(opts.marked === i));
    box.append(s);
  });
  return box;
}

/* The numbers behind a line view's focused token: one column per head shown,
 * each cell coloured on the given scale (per-row: the head's largest weight
 * for this token is darkest). heads: [{index, matrix}]; side 'q' lists the
 * token's weight on each key, 'k' the weight each query puts on it. Past 24
 * tokens only the 16 largest are listed. opts: scale, many (a column per
 * head), colWord ('key', or 'value' for concat). Returns HTML for a table. */
export function weightTable(heads, side, idx, rows, cols, opts = {}) {
  const other = side === 'q' ? cols : rows;
  const at = (m, t) => (side === 'q' ? m[idx][t] : m[t][idx]);
  const many = opts.many ?? heads.length > 1;
  const col = opts.colWord || 'key'; // 'value' for concat, whose columns are value positions
  let s = `<table class="line-table"><caption>${side === 'q' ? 'query' : col} “${esc(side === 'q' ? rows[idx] : cols[idx])}”: ` +
    `${side === 'q' ? 'its weight on each ' + col : 'the weight each query puts on it'}</caption><thead><tr><th scope="col">${side === 'q' ? col : 'query'}</th>`;
  for (const h of heads) s += `<th scope="col"><span class="swatch" style="background:${HEAD_COLOURS[h.index % HEAD_COLOURS.length]}"></span>${many ? (heads.length > 4 ? 'h' : 'head ') + h.index : 'weight'}</th>`;
  s += '</tr></thead><tbody>';
  const mode = SCALES[opts.scale] ? opts.scale : 'abs';
  const mx = heads.map(h => { let m = 0; for (let t = 0; t < other.length; t++) m = Math.max(m, at(h.matrix, t)); return m; });
  let order = other.map((_, t) => t);
  if (other.length > 24) {
    const best = t => Math.max(...heads.map(h => at(h.matrix, t)));
    order = order.sort((a, b) => best(b) - best(a)).slice(0, 16);
  }
  for (const t of order) {
    s += `<tr><td>${esc(other[t])}${order.length < other.length ? ` <span class="idx">#${t}</span>` : ''}</td>`;
    heads.forEach((h, hi) => {
      const w = at(h.matrix, t);
      const tt = scaleT(mode, w, mx[hi]);
      s += `<td data-head="${h.index}" data-weight="${w}" style="background:${colour(tt)};color:${textOn(tt)}">${fmt(w)}</td>`;
    });
    s += '</tr>';
  }
  s += '</tbody>';
  if (order.length < other.length) s += `<tfoot><tr><td colspan="${heads.length + 1}">the ${order.length} largest of ${other.length}; hover or pin another token for its own</td></tr></tfoot>`;
  return s + '</table>';
}

/* A diverging colour for signed numbers (vector entries, products): blue
 * below zero, red above, white at zero; t in [-1, 1]. */
export function divColour(t) {
  t = Math.max(-1, Math.min(1, Number.isFinite(t) ? t : 0));
  const end = t < 0 ? [33, 102, 172] : [178, 24, 43];
  const a = Math.abs(t);
  return `rgb(${[0, 1, 2].map(k => Math.round(255 + a * (end[k] - 255))).join(',')})`;
}
