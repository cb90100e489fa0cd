// render.js - draws attention weights as SVG: heatmaps with labels and a colour legend, and a bertviz-style line view.
//
// SVG rather than canvas: every cell and line is an element with its weight
// in a data attribute (so tests and screen readers can read it), hovering
// needs no hit-testing, and the same markup exports as SVG or, drawn onto a
// canvas, as PNG. Colours and fonts are attributes, not CSS classes, so an
// exported file looks the same outside the page.

const NS = 'http://www.w3.org/2000/svg';
const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif';
let uid = 0;

export function el(name, attrs = {}, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
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

export function colour(t) {
  t = Math.max(0, Math.min(1, Number.isFinite(t) ? t : 0));
  for (let i = 1; i < STOPS.length; i++) {
    const [t1, c1] = STOPS[i];
    const [t0, c0] = STOPS[i - 1];
    if (t <= t1) {
      const f = (t - t0) / (t1 - t0);
      const c = c0.map((x, k) => Math.round(x + f * (c1[k] - x)));
      return `rgb(${c[0]},${c[1]},${c[2]})`;
    }
  }
  return 'rgb(8,37,103)';
}

// Colours for heads in the line view, chosen to stay apart for 8+ heads.
export const HEAD_COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#e377c2', '#8c564b',
  '#7f7f7f', '#bcbd22', '#393b79', '#637939', '#843c39', '#7b4173', '#3182bd', '#e6550d'];

export function fmt(w, digits = 3) {
  if (w === 0) return '0';
  if (Math.abs(w) < 0.001) return w.toExponential(1);
  return w.toFixed(digits);
}

function textWidth(s, px) { return Math.ceil(String(s).length * px * 0.6); }

export function rowMax(matrix) {
  let m = 0;
  for (const r of matrix) for (const w of r) if (w > m) m = w;
  return m;
}

// Per-row statistics: entropy (bits) over the row's weights, argmax (lowest
// index on ties, as the API's hard argmax), and whether the row was fully
// masked (the contract gives such a row all-zero weights).
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
    return { entropy: masked ? 0 : Math.max(0, h), argmax: masked ? -1 : arg, max: masked ? 0 : row[arg], sum, masked };
  });
}

/* Heatmap of one Lq x Lk matrix.
 * opts: rows, cols (labels), title, cell (px), labels (false for thumbnails),
 * max (top of the colour scale; default the largest weight), legend (bool). */
export function heatmap(matrix, opts = {}) {
  const id = 'hm' + (++uid);
  const Lq = matrix.length, Lk = Lq ? matrix[0].length : 0;
  const rows = opts.rows || matrix.map((_, i) => 'q' + i);
  const cols = opts.cols || (matrix[0] || []).map((_, j) => 'k' + j);
  const labels = opts.labels !== false;
  const legend = opts.legend !== false;
  const cell = opts.cell || Math.max(14, Math.min(44, Math.floor(520 / Math.max(1, Lq, Lk))));
  const fs = labels ? Math.min(13, Math.max(10, cell * 0.45)) : 0;
  const max = opts.max || rowMax(matrix) || 1;
  const stats = rowStats(matrix);
  const anyMasked = stats.some(s => s.masked);

  const titleH = opts.title ? 24 : 0;
  const left = labels ? Math.min(130, 10 + Math.max(0, ...rows.map(r => textWidth(r, fs)))) : 4;
  const colLabelH = labels ? Math.min(110, 10 + 0.72 * Math.max(0, ...cols.map(c => textWidth(c, fs)))) : 4;
  const top = titleH + colLabelH;
  const gridW = Lk * cell, gridH = Lq * cell;
  const maskW = anyMasked && labels ? 64 : 0;
  const legendW = legend ? 70 : 0;
  const width = Math.ceil(left + gridW + maskW + legendW + 8);
  const height = Math.ceil(top + Math.max(gridH, legend ? 120 : 0) + 10);

  const svg = el('svg', { xmlns: NS, width, height, viewBox: `0 0 ${width} ${height}`, class: 'heatmap', role: 'img',
    'aria-label': (opts.title ? opts.title + ': ' : '') + `attention weights, ${Lq} queries by ${Lk} keys`,
    'font-family': FONT, 'data-rows': Lq, 'data-cols': Lk });
  const defs = el('defs');
  const grad = el('linearGradient', { id: id + '-grad', x1: 0, y1: 1, x2: 0, y2: 0 });
  for (const [t] of STOPS) grad.append(el('stop', { offset: t, 'stop-color': colour(t) }));
  const hatch = el('pattern', { id: id + '-hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' });
  hatch.append(el('rect', { width: 6, height: 6, fill: '#fff5f5' }), el('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#e0a0a0', 'stroke-width': 2 }));
  defs.append(grad, hatch);
  svg.append(defs, el('rect', { width, height, fill: '#ffffff' }));

  if (opts.title) svg.append(el('text', { x: 4, y: 16, 'font-size': 14, 'font-weight': 600, fill: '#1d2433' }, opts.title));

  if (labels) {
    const gc = el('g', { class: 'col-labels', 'font-size': fs, fill: '#333' });
    cols.forEach((c, j) => {
      const x = left + j * cell + cell / 2, y = top - 6;
      gc.append(el('text', { x, y, transform: `rotate(-45 ${x} ${y})`, class: 'col-label', 'data-col': j }, c));
    });
    const gr = el('g', { class: 'row-labels', 'font-size': fs, fill: '#333', 'text-anchor': 'end' });
    rows.forEach((r, i) => gr.append(el('text', { x: left - 6, y: top + i * cell + cell / 2 + fs * 0.35, class: 'row-label', 'data-row': i }, r)));
    svg.append(gc, gr);
  }

  const g = el('g', { class: 'cells' });
  const showValues = labels && cell >= 30;
  for (let i = 0; i < Lq; i++) {
    for (let j = 0; j < Lk; j++) {
      const w = matrix[i][j];
      const r = el('rect', { x: left + j * cell, y: top + i * cell, width: cell, height: cell,
        fill: colour(w / max), stroke: '#ffffff', 'stroke-width': labels ? 1 : 0.5,
        class: 'cell', 'data-row': i, 'data-col': j, 'data-weight': String(w) });
      r.append(el('title', {}, `${rows[i]} → ${cols[j]}: ${fmt(w, 4)}`));
      g.append(r);
      if (showValues && w >= 0.005) {
        g.append(el('text', { x: left + j * cell + cell / 2, y: top + i * cell + cell / 2 + 4, 'font-size': Math.min(11, cell * 0.32),
          'text-anchor': 'middle', fill: w / max > 0.55 ? '#ffffff' : '#1d2433', 'pointer-events': 'none' }, fmt(w, 2).replace(/^0\./, '.')));
      }
    }
    if (stats[i].masked) {
      g.append(el('rect', { x: left, y: top + i * cell, width: gridW, height: cell, fill: `url(#${id}-hatch)`,
        class: 'masked-row', 'data-row': i, 'pointer-events': 'none' }));
      if (labels) g.append(el('text', { x: left + gridW + 6, y: top + i * cell + cell / 2 + 4, 'font-size': 11, fill: '#b42318' }, 'masked'));
    }
  }
  svg.append(g);

  if (legend) {
    const lx = left + gridW + maskW + 14, ly = top, lh = Math.max(100, Math.min(gridH, 220));
    const lg = el('g', { class: 'legend', 'font-size': 10, fill: '#333' });
    lg.append(el('rect', { x: lx, y: ly, width: 12, height: lh, fill: `url(#${id}-grad)`, stroke: '#999', 'stroke-width': 0.5 }));
    for (const f of [0, 0.5, 1]) {
      const y = ly + lh - f * lh;
      lg.append(el('line', { x1: lx + 12, x2: lx + 16, y1: y, y2: y, stroke: '#666' }));
      lg.append(el('text', { x: lx + 18, y: y + 3.5 }, fmt(f * max, 2)));
    }
    lg.append(el('text', { x: lx - 2, y: ly - 8, 'font-size': 10, fill: '#555' }, 'weight'));
    svg.append(lg);
  }
  return svg;
}

/* A horizontal colour bar from 0 to max, for views whose panels share one scale. */
export function legendBar(max, label = 'weight') {
  const id = 'lg' + (++uid);
  const width = 300, height = 40;
  const svg = el('svg', { xmlns: NS, width, height, viewBox: `0 0 ${width} ${height}`, class: 'legend-bar', role: 'img',
    'aria-label': `colour scale from 0 to ${fmt(max, 2)}`, 'font-family': FONT });
  const grad = el('linearGradient', { id: id + '-grad', x1: 0, y1: 0, x2: 1, y2: 0 });
  for (const [t] of STOPS) grad.append(el('stop', { offset: t, 'stop-color': colour(t) }));
  const defs = el('defs');
  defs.append(grad);
  svg.append(defs, el('rect', { width, height, fill: '#ffffff' }));
  svg.append(el('text', { x: 4, y: 22, 'font-size': 11, fill: '#555' }, label));
  const x0 = 56, w = 220;
  svg.append(el('rect', { x: x0, y: 12, width: w, height: 12, fill: `url(#${id}-grad)`, stroke: '#999', 'stroke-width': 0.5 }));
  for (const f of [0, 0.5, 1]) {
    svg.append(el('line', { x1: x0 + f * w, x2: x0 + f * w, y1: 24, y2: 28, stroke: '#666' }));
    svg.append(el('text', { x: x0 + f * w, y: 38, 'font-size': 10, fill: '#333', 'text-anchor': 'middle' }, fmt(f * max, 2)));
  }
  return svg;
}

/* Line view after bertviz (Vig 2019): queries on the left, keys on the right,
 * one line per (query, key, head) whose opacity is the weight. heads is a
 * list of {index, matrix}; hidden heads are left out by the caller. */
export function lineView(heads, opts = {}) {
  const first = heads[0] ? heads[0].matrix : [];
  const Lq = first.length, Lk = Lq ? first[0].length : 0;
  const rows = opts.rows || first.map((_, i) => 'q' + i);
  const cols = opts.cols || (first[0] || []).map((_, j) => 'k' + j);
  const fs = 13, rowH = 24;
  const labelW = Math.min(140, 16 + Math.max(40, ...rows.map(r => textWidth(r, fs)), ...cols.map(c => textWidth(c, fs))));
  const gap = opts.gap || 300;
  const top = 44;
  const pad = 48; // room outside the labels for the weight notes
  const qx = pad + labelW, kx = pad + labelW + gap;
  const width = 2 * pad + 2 * labelW + gap;
  const height = top + Math.max(Lq, Lk) * rowH + 12;
  const svg = el('svg', { xmlns: NS, width, height, viewBox: `0 0 ${width} ${height}`, class: 'lineview', role: 'group',
    'aria-label': 'attention lines: hover or focus a token to show only its lines', 'font-family': FONT });
  svg.append(el('rect', { width, height, fill: '#ffffff' }));
  svg.append(el('text', { x: qx, y: 18, 'text-anchor': 'end', 'font-size': 12, fill: '#555', 'font-weight': 600 }, opts.rowTitle || 'queries'));
  svg.append(el('text', { x: kx, y: 18, 'font-size': 12, fill: '#555', 'font-weight': 600 }, opts.colTitle || 'keys'));

  const yq = i => top + i * rowH + rowH / 2;
  const lines = el('g', { class: 'lines' });
  for (const h of heads) {
    const colourH = HEAD_COLOURS[h.index % HEAD_COLOURS.length];
    h.matrix.forEach((row, i) => row.forEach((w, j) => {
      if (!(w > 0)) return;
      lines.append(el('line', { x1: qx + 6, y1: yq(i), x2: kx - 6, y2: yq(j), stroke: colourH,
        'stroke-opacity': Math.min(1, w).toFixed(4), 'stroke-width': 2.5, class: 'attn-line',
        'data-q': i, 'data-k': j, 'data-head': h.index, 'data-weight': String(w) }));
    }));
  }
  svg.append(lines);

  const tokens = el('g', { class: 'tokens', 'font-size': fs });
  const addTok = (side, i, label) => {
    const x = side === 'q' ? qx : kx;
    const g = el('g', { class: 'tok', tabindex: 0, role: 'button', 'data-side': side, 'data-index': i,
      'aria-label': `${side === 'q' ? 'query' : 'key'} ${i}: ${label}; show only its lines` });
    g.append(el('rect', { x: side === 'q' ? x - labelW + 4 : x, y: yq(i) - rowH / 2 + 2, width: labelW - 4, height: rowH - 4, rx: 4,
      fill: '#ffffff', 'fill-opacity': 0, class: 'tok-bg' }));
    g.append(el('text', { x: side === 'q' ? x - 4 : x + 4, y: yq(i) + 4.5, 'text-anchor': side === 'q' ? 'end' : 'start', fill: '#1d2433' }, label));
    tokens.append(g);
  };
  rows.forEach((r, i) => addTok('q', i, r));
  cols.forEach((c, j) => addTok('k', j, c));
  svg.append(tokens);

  // With one head drawn, focusing a token also writes the weights beside the
  // tokens on the other side, so the numbers behind the lines can be read.
  const notes = el('g', { class: 'weight-notes', 'font-size': 11, fill: '#8a5a00' });
  svg.append(notes);
  const annotate = (side, idx) => {
    notes.replaceChildren();
    if (side === null || heads.length !== 1) return;
    const m = heads[0].matrix;
    const n = side === 'q' ? Lk : Lq;
    for (let t = 0; t < n; t++) {
      const w = side === 'q' ? m[idx][t] : m[t][idx];
      const x = side === 'q' ? width - 4 : 4;
      notes.append(el('text', { x, y: yq(t) + 4, 'text-anchor': side === 'q' ? 'end' : 'start', class: 'weight-note' }, fmt(w, 2)));
    }
  };

  // Hover or keyboard focus on a token keeps only the lines that touch it.
  const focus = (side, idx) => {
    for (const ln of lines.children) {
      const keep = side === null || ln.getAttribute(side === 'q' ? 'data-q' : 'data-k') === String(idx);
      ln.style.display = keep ? '' : 'none';
    }
    for (const t of tokens.children) {
      const on = side !== null && t.dataset.side === side && t.dataset.index === String(idx);
      t.classList.toggle('active', on);
      t.querySelector('rect').setAttribute('fill-opacity', on ? 1 : 0);
      t.querySelector('rect').setAttribute('fill', on ? '#fff1b8' : '#ffffff');
    }
    annotate(side, idx);
    svg.dataset.focus = side === null ? '' : `${side}${idx}`;
  };
  for (const t of tokens.children) {
    const side = t.dataset.side, idx = Number(t.dataset.index);
    t.addEventListener('mouseenter', () => focus(side, idx));
    t.addEventListener('focus', () => focus(side, idx));
    t.addEventListener('mouseleave', () => focus(null));
    t.addEventListener('blur', () => focus(null));
  }
  return svg;
}
