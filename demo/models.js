// models.js - the views of the trained English-to-French models: every model's French and cross-attention side by
// side (Translate), and for the Transformer the layers x heads grid, the head view, attention on the text and rollout.
//
// Everything drawn comes from GET /models and POST /models/{name}/translate
// (its "attention": "cross" (Tout, Tin) for a GRU seq2seq model or
// (layers, H, Tout, Tin) for the Transformer, which adds "encoder"
// (layers, H, Tin, Tin) and "decoder" (layers, H, Tout, Tout)); the page
// computes only means over heads and the rollout. It reuses render.js
// (heatmap, lineView, coloredTokens, weightTable) and the page's colour
// scale, URL fragment and exports through the hooks app.js passes in.

import { heatmap, lineView, coloredTokens, legendBar, markPin, markHover, arrowCell, tabKey, keyboardHeatmap, fmt, HEAD_COLOURS, SCALES,
  weightTable } from './render.js';
import { decodeTensor, toMatrices } from './api.js';

// Ten sentences of the test split (training/data/test.tsv, lines 265, 96,
// 425, 555, 971, 1054, 223, 686, 13, 1314): no model trained on them. (Not
// the held-out packages, training/data/heldout.tsv: those are not shown.)
export const MODEL_EXAMPLES = [
  'Print the initial values of the variables.',
  'The certificate type is not supported.',
  'The movie could not be read.',
  'The file that you dropped is not an image.',
  'The location of the file cannot be mounted.',
  'The width of the effects video window, in pixels.',
  'Select the spell checking language.',
  'There was an error displaying help.',
  'Sets the default statistics target.',
  'This could be due to hardware limitations.',
];

// The score of answering with the English unchanged on the same test split
// (README, training/results.json): the floor any translation must beat.
const COPY_FLOOR_BLEU = 7.39;

// What the readout says before a cell is read.
const READOUT_HINT = 'Hover a cell, or focus a heatmap (Tab) and press the arrow keys, to read its weight; click a token, or press Enter on a cell, to pin it in every view.';

// The rules as the teaching material names them, in the order it compares them.
const RULE_NAMES = { concat: 'concat (the seq2seq tutorial’s rule)', additive: 'additive (Bahdanau)', general: 'general (Luong)', multihead: 'multi-head (Transformer)' };
const ORDER = ['concat', 'additive', 'general', 'transformer'];
const ATTN = {
  encoder: { label: 'Encoder self-attention', short: 'encoder', rows: 'src', cols: 'src', desc: 'English → English' },
  decoder: { label: 'Decoder self-attention', short: 'decoder', rows: 'tgt', cols: 'tgt', desc: 'French → earlier French (causal)' },
  cross: { label: 'Cross-attention', short: 'cross', rows: 'tgt', cols: 'src', desc: 'French → English' },
};
const SUBS = ['translate', 'grid', 'heads', 'rollout'];

/* ---------------------------------------------------------------- maths */

export function meanOfHeads(mats) {
  return mats[0].map((row, i) => row.map((_, j) => mats.reduce((s, m) => s + m[i][j], 0) / mats.length));
}
export function matmul(A, B) {
  return A.map(row => B[0].map((_, j) => row.reduce((s, a, k) => s + a * B[k][j], 0)));
}
// Abnar & Zuidema (2020), "Quantifying Attention Flow in Transformers":
// each layer's attention, averaged over heads, is mixed with the identity for
// the residual connection, A' = 0.5 A + 0.5 I, rows renormalised; the
// rollout is the product A'_L ... A'_1 (first layer on the right).
export function withResidual(A) {
  return A.map((row, i) => {
    const r = row.map((a, j) => 0.5 * a + (i === j ? 0.5 : 0));
    const s = r.reduce((x, y) => x + y, 0);
    return r.map(x => (s > 0 ? x / s : 0));
  });
}
export function rollout(layers) {
  let R = null;
  for (const heads of layers) {
    const A = withResidual(meanOfHeads(heads));
    R = R ? matmul(A, R) : A;
  }
  return R;
}

/* ------------------------------------------------------------ the views */

const $ = id => document.getElementById(id);
function h(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v === true ? '' : String(v));
  }
  e.append(...kids.filter(x => x !== null && x !== undefined));
  return e;
}
function bleuOf(m) {
  const b = m && m.bleu;
  if (!b) return null;
  return b.greedy ?? b.beam4 ?? null;
}
// The share of copy tokens whose strongest cross-attention points at the
// English token copied (GET /models "alignment"), as "69%"; null without it.
const pct = x => `${Math.round(100 * x)}%`;
function alignOf(m) {
  const a = m && m.alignment;
  return a && typeof a.accuracy === 'number' ? a : null;
}
// "layer 1, head 1" of the Transformer's best-aligning head, or null.
function bestHead(m) {
  const b = alignOf(m) && m.alignment.best_head;
  return b ? b : null;
}
// The number of the Transformer's heads and their mean alignment, from
// per_layer_head (layers x heads), or null: its best head was picked on the
// same test split, so the note gives the mean beside it.
function headMeans(m) {
  const g = alignOf(m) && m.alignment.per_layer_head;
  if (!Array.isArray(g) || !g.length || !g.every(r => Array.isArray(r) && r.length)) return null;
  const all = g.flat();
  return { heads: all.length, all: all.reduce((a, b) => a + b, 0) / all.length };
}
function fmtRange(xs) {
  const lo = Math.min(...xs), hi = Math.max(...xs);
  return lo === hi ? lo.toFixed(2) : `${lo.toFixed(2)}–${hi.toFixed(2)}`;
}
function bleuText(m) {
  const b = m && m.bleu;
  if (!b) return 'BLEU not reported';
  const parts = [];
  if (typeof b.greedy === 'number') parts.push(`greedy ${b.greedy.toFixed(2)}`);
  if (typeof b.beam4 === 'number') parts.push(`beam-4 ${b.beam4.toFixed(2)}`);
  return parts.length ? `BLEU ${parts.join(', ')}` : 'BLEU not reported';
}
// One figure for a title: the test BLEU of the search in use (greedy, else beam 4; bleuSearch names it).
function bleuSearch(m, beam = 1) {
  const b = (m && m.bleu) || {};
  return (beam === 4 && typeof b.beam4 === 'number') || typeof b.greedy !== 'number' ? 'beam 4' : 'greedy';
}
function shortBleu(m, beam = 1) {
  const b = (m && m.bleu) || {};
  const g = typeof b.greedy === 'number' ? b.greedy : null, k = typeof b.beam4 === 'number' ? b.beam4 : null;
  if (beam === 4 && k !== null) return `BLEU ${k.toFixed(2)}`;
  if (g !== null) return `BLEU ${g.toFixed(2)}`;
  return k !== null ? `BLEU ${k.toFixed(2)}` : 'BLEU n/a';
}

// ctx: {apiBase, postJSON, getJSON, scale(), writeHash(), loadText(text), onShown()}
export function createModelViews(ctx) {
  const M = {
    list: [], text: MODEL_EXAMPLES[0], beam: 1, sub: 'translate',
    results: new Map(),           // name -> {request, response} | {request, error}
    sel: { attn: 'cross', layer: -1, head: -1 }, // the open cell (-1 layer: the last; -1 head: mean of heads)
    hidden: new Set(),            // heads hidden in the head view
    pin: null,                    // {lang: 'en'|'fr', index}
    seq: 0, timer: 0, saved: null, restoring: false,
  };
  let panel, tab;

  const tokLabel = t => t; // the model's own sub-word tokens; ▁ starts a word

  function tfm() {
    const r = M.results.get('transformer');
    if (!r || !r.response) return null;
    if (r.parsed) return r.parsed;
    const a = r.response.attention || {};
    const split = (t, name) => {
      const d = decodeTensor(t, name);
      if (d.shape.length !== 4) throw new Error(`${name}: expected (layers, H, T, T'), got (${d.shape.join(', ')})`);
      const mats = toMatrices(d);
      const L = d.shape[0], H = d.shape[1];
      return Array.from({ length: L }, (_, l) => mats.slice(l * H, (l + 1) * H));
    };
    const p = { src: r.response.source_tokens, tgt: r.response.target_tokens, encoder: split(a.encoder, 'encoder'), decoder: split(a.decoder, 'decoder'), cross: split(a.cross, 'cross') };
    p.L = { encoder: p.encoder.length, decoder: p.decoder.length, cross: p.cross.length };
    p.H = p.cross[0].length;
    r.parsed = p;
    return p;
  }
  function crossOf(name) {
    const r = M.results.get(name);
    if (!r || !r.response) return null;
    const d = decodeTensor(r.response.attention && r.response.attention.cross, name + ' cross');
    return d;
  }
  const layerOf = (P, attn) => (M.sel.layer < 0 || M.sel.layer >= P.L[attn] ? P.L[attn] - 1 : M.sel.layer);

  // One matrix of the Transformer with its labels: attn, layer, head (-1: mean).
  function tmatrix(attn, layer, head) {
    const P = tfm();
    const heads = P[attn][layer];
    const m = head < 0 ? meanOfHeads(heads) : heads[head];
    const lab = x => (x === 'src' ? P.src : P.tgt).map(tokLabel);
    return { m, rows: lab(ATTN[attn].rows), cols: lab(ATTN[attn].cols), attn, layer, head,
      title: `${ATTN[attn].label}, layer ${layer}, ${head < 0 ? 'mean of ' + P.H + ' heads' : 'head ' + head}`,
      kind: attn === 'decoder' ? (i, j) => (j > i ? 'mask' : '') : () => '' };
  }

  // The shared pin as a row or column of one matrix kind.
  function pinFor(attn) {
    const p = M.pin;
    if (!p) return null;
    if (attn === 'encoder') return p.lang === 'en' ? { side: 'q', index: p.index } : null;
    if (attn === 'decoder') return p.lang === 'fr' ? { side: 'q', index: p.index } : null;
    return { side: p.lang === 'fr' ? 'q' : 'k', index: p.index };
  }
  const langOf = (attn, side) => (attn === 'encoder' ? 'en' : attn === 'decoder' ? 'fr' : side === 'q' ? 'fr' : 'en');

  function setPin(lang, index) {
    M.pin = M.pin && M.pin.lang === lang && M.pin.index === index ? null : { lang, index };
    applyPin();
    ctx.writeHash();
  }
  function applyPin() {
    for (const svg of panel.querySelectorAll('svg.heatmap')) if (svg._mm) markPin(svg, pinFor(svg._mm.attn));
    const lv = panel.querySelector('#m-lines svg.lineview');
    if (lv && lv._setPin) lv._setPin(pinFor(M.sel.attn));
    for (const s of panel.querySelectorAll('.m-strip')) s._paint && s._paint(null);
    renderText();
  }

  /* ---------------------------------------------------------- skeleton */

  function build() {
    panel.replaceChildren();
    const sel = h('select', { id: 'm-example', 'aria-label': 'Example sentences from the test split' });
    MODEL_EXAMPLES.forEach((s, i) => sel.append(new Option(s, String(i))));
    sel.append(Object.assign(new Option('(your own text)', 'custom'), { disabled: true }));
    const beam = h('select', { id: 'm-beam', 'aria-label': 'Search' });
    beam.append(new Option('greedy', '1'), new Option('beam 4', '4'));
    const input = h('input', { id: 'm-text', type: 'text', spellcheck: 'false', autocomplete: 'off', 'aria-label': 'English text to translate' });
    const load = h('input', { id: 'm-load', type: 'file', accept: '.json,application/json', class: 'm-load-file' });
    panel.append(
      h('div', { class: 'm-input' },
        h('label', { for: 'm-text', class: 'm-label', text: 'English' }), input,
        h('label', { class: 'm-small', text: 'Examples (test split) ' }, sel),
        h('label', { class: 'm-small', text: 'Search ' }, beam),
        h('label', { class: 'm-small m-load', title: 'Load a JSON export of this view' }, 'Load export ', load)),
      h('p', { id: 'm-notice', class: 'hint' }),
      h('div', { class: 'm-subtabs', role: 'tablist', 'aria-label': 'Model views' },
        // [id, label's start, a part dropped on a phone (.m-long) so the four fit one row, label's end]
        ...[['translate', 'Translate', ': all models', ''], ['grid', '', 'Transformer: ', 'layers × heads'], ['heads', 'Head view', '', ''], ['rollout', 'Rollout', '', '']]
          .map(([id, a, long, b]) => h('button', { type: 'button', role: 'tab', id: 'msub-' + id, 'data-sub': id },
            a, ...(long ? [h('span', { class: 'm-long', text: long })] : []), b))),
      h('p', { id: 'm-status', class: 'status', role: 'status', 'aria-live': 'polite' }),
      h('div', { class: 'm-body' },
        h('div', { class: 'm-main' },
          h('div', { id: 'm-translate', class: 'm-sub' }),
          h('div', { id: 'm-grid', class: 'm-sub' }),
          h('div', { id: 'm-heads', class: 'm-sub' }),
          h('div', { id: 'm-rollout', class: 'm-sub' })),
        h('aside', { class: 'm-side', 'aria-label': 'Readout' },
          h('div', { id: 'm-legend' }),
          h('p', { id: 'm-readout', class: 'readout', 'aria-live': 'polite', text: READOUT_HINT }),
          h('div', { id: 'm-text-view', class: 'token-text', role: 'group', 'aria-label': 'Attention on the text' }))));
    input.value = M.text;
    input.addEventListener('input', () => { M.text = input.value; M.pin = null; syncExample(); schedule(); });
    input.addEventListener('keydown', e => { if (e.key === 'Enter') { e.preventDefault(); translate(); } });
    sel.addEventListener('change', () => { if (sel.value !== 'custom') { M.text = MODEL_EXAMPLES[Number(sel.value)]; input.value = M.text; M.pin = null; translate(); } });
    beam.addEventListener('change', () => { M.beam = Number(beam.value); translate(); });
    load.addEventListener('change', async () => { const f = load.files[0]; if (f) ctx.loadText(await f.text()); });
    for (const b of panel.querySelectorAll('.m-subtabs button')) {
      b.addEventListener('click', () => { M.sub = b.dataset.sub; render(); ctx.writeHash(); });
      // Arrow keys move between the views, Home and End to the first and last, as in the WAI-ARIA tabs pattern.
      b.addEventListener('keydown', e => {
        const next = tabKey(e.key, SUBS, b.dataset.sub);
        if (!next) return;
        e.preventDefault();
        M.sub = next;
        render();
        ctx.writeHash();
        $('msub-' + M.sub).focus();
      });
    }
    wireHover();
  }

  function syncExample() {
    const i = MODEL_EXAMPLES.indexOf(M.text);
    $('m-example').value = i >= 0 ? String(i) : 'custom';
  }

  function status(text, bad = false) {
    const s = $('m-status');
    s.textContent = text;
    s.classList.toggle('bad', bad);
  }

  /* ---------------------------------------------------------- requests */

  function schedule() {
    clearTimeout(M.timer);
    M.timer = setTimeout(translate, 350);
  }

  function ordered() {
    const names = M.list.map(m => m.name);
    return [...ORDER.filter(n => names.includes(n)), ...names.filter(n => !ORDER.includes(n))];
  }

  async function translate() {
    clearTimeout(M.timer);
    const text = M.text;
    const main = panel.querySelector('.m-main');
    if (!text.trim()) {
      // The figures no longer match the empty box: dim them, and say so.
      main.classList.toggle('stale', M.results.size > 0);
      status(M.results.size ? 'Type an English sentence; the dimmed figures are the previous translation.' : 'Type an English sentence.', true);
      return;
    }
    main.classList.remove('stale');
    const seq = ++M.seq;
    M.saved = null;
    status('Translating…');
    const t0 = performance.now();
    const names = ordered();
    const got = await Promise.all(names.map(async name => {
      const request = { text, beam: M.beam };
      const res = await ctx.postJSON(`${ctx.apiBase}models/${encodeURIComponent(name)}/translate`, request);
      return [name, res.ok ? { request, response: res.body } : { request, error: res.error }];
    }));
    if (seq !== M.seq) return;
    M.results = new Map(got);
    const bad = got.filter(([, r]) => r.error);
    status(`${names.length} models · round trip ${(performance.now() - t0).toFixed(0)} ms` +
      (bad.length ? ` · refused by ${bad.map(([n]) => n).join(', ')}: ${bad[0][1].error.message}` : ''), bad.length > 0);
    clampSel();
    render();
    ctx.writeHash();
  }

  function clampSel() {
    const P = tfm();
    if (!P) return;
    if (M.sel.layer >= P.L[M.sel.attn]) M.sel.layer = -1;
    if (M.sel.head >= P.H) M.sel.head = -1;
    if (M.pin) {
      const n = M.pin.lang === 'en' ? P.src.length : P.tgt.length;
      if (M.pin.index >= n) M.pin = null;
    }
  }

  /* ------------------------------------------------------------ render */

  function render() {
    if (!panel) return;
    for (const b of panel.querySelectorAll('.m-subtabs button')) {
      b.setAttribute('aria-selected', String(b.dataset.sub === M.sub));
      b.tabIndex = b.dataset.sub === M.sub ? 0 : -1;
      // A phone scrolls the row sideways: keep the chosen view in sight.
      if (b.dataset.sub === M.sub && b.parentElement.scrollWidth > b.parentElement.clientWidth) b.parentElement.scrollLeft = b.offsetLeft - b.parentElement.offsetLeft - 8;
    }
    for (const s of SUBS) $('m-' + s).hidden = s !== M.sub;
    $('m-text').value = M.text;
    $('m-beam').value = String(M.beam);
    syncExample();
    $('m-legend').replaceChildren(legendBar(ctx.scale()));
    const limit = Math.min(...M.list.map(m => (m.sizes && m.sizes.max_src_tokens) || Infinity));
    $('m-notice').textContent = `Up to ${Number.isFinite(limit) ? limit - 1 : '?'} English sub-word tokens (the models’ own limit, with <eos> ${Number.isFinite(limit) ? limit : '?'}): longer text is refused with the service’s message, never cut. ▁ marks the start of a word.` +
      (M.saved ? ` Showing a saved export (${M.saved}).` : '');
    if (M.results.size === 0) return;
    if (M.sub === 'translate') renderTranslate();
    else if (!tfm()) {
      const r = M.results.get('transformer');
      $('m-' + M.sub).replaceChildren(h('p', { class: 'field-error', text: r && r.error ? `transformer: ${r.error.message}` : 'The service lists no Transformer model.' }));
    } else if (M.sub === 'grid') renderGrid();
    else if (M.sub === 'heads') renderHeads();
    else renderRollout();
    applyPin();
    $('m-readout').textContent = READOUT_HINT;
  }

  function heat(mm, opts) {
    const svg = heatmap(mm.m, { rows: mm.rows, cols: mm.cols, scale: ctx.scale(), kind: mm.kind, legend: false, ...opts });
    svg._mm = mm;
    if (!opts.raster) keyboardHeatmap(svg, 'm-readout'); // the arrow keys walk its cells (onKey)
    return svg;
  }

  // Cell size so that `count` panels fit side by side in the main column.
  function fitCell(Lq, Lk, count, labelW) {
    // Room for the gap, the panel's padding and the last rotated column label.
    const avail = ($('m-translate').parentElement.clientWidth || 900) / count - labelW - 44;
    const availH = Math.max(160, window.innerHeight - 430);
    return Math.max(11, Math.min(24, Math.floor(avail / Math.max(1, Lk)), Math.max(12, Math.floor(availH / Math.max(1, Lq)))));
  }

  function renderTranslate() {
    const box = $('m-translate');
    const names = ordered();
    const gru = M.list.filter(m => m.kind === 'seq2seq' && bleuOf(m) !== null);
    const t = M.list.find(m => m.name === 'transformer');
    const note = h('p', { class: 'caveat m-honest' });
    const gb = gru.map(bleuOf);
    const weak = gb.filter(b => b < COPY_FLOOR_BLEU).length;
    const aligned = M.list.filter(alignOf);
    const bh = bestHead(t), hm = headMeans(t);
    note.innerHTML = '<strong>Read with care:</strong> ' +
      (weak === gru.length && gru.length ? `the GRU models are weak short trainings: test BLEU ${fmtRange(gb)}, below the ${COPY_FLOOR_BLEU} of answering with the English unchanged; ` +
        'their French is mostly wrong and their attention barely follows the words. '
        : gru.length ? `the GRU models score test BLEU ${fmtRange(gb)} (answering with the English unchanged scores ${COPY_FLOOR_BLEU}). ` : '') +
      (t ? `The Transformer (${bleuText(t)}) is the one to read. ` : '') +
      (aligned.length ? `How often the strongest attention points at the English word that a French word copies (numbers, names, options): ${aligned.map(m => `${m.name} ${pct(m.alignment.accuracy)}`).join(', ')}` +
        `${bh ? ` (Transformer: its best head, layer ${bh.layer} head ${bh.head}` +
          `${hm ? `, best of ${hm.heads} on this test split; mean of the ${hm.heads}: ${pct(hm.all)}` : ''})` : ''}; chance ${pct(aligned[0].alignment.chance)}. ` : '') +
      'Rows: the French tokens each model wrote; columns: the English tokens it read.';
    const narrow = window.matchMedia('(max-width: 860px)').matches;
    // All panels in one row up to 10 English tokens (cells of 11 px and up
    // then fit), else two per row. Every model reads the same tokens.
    const first = names.map(n => M.results.get(n)).find(r => r && r.response);
    const across = !first || first.response.source_tokens.length <= 10 ? names.length : Math.min(2, names.length);
    const figs = names.map(name => {
      const m = M.list.find(x => x.name === name) || { name };
      const r = M.results.get(name);
      const fig = h('figure', { class: 'm-panel', 'data-model': name });
      const rule = RULE_NAMES[m.rule] || m.rule || '';
      fig.append(h('figcaption', { text: m.kind === 'transformer' ? `Transformer, ${m.sizes ? `${m.sizes.enc_layers}+${m.sizes.dec_layers} layers × ${m.sizes.heads} heads` : ''}` : `GRU encoder-decoder, ${rule}` }));
      if (!r || r.error) { fig.append(h('p', { class: 'field-error', text: r ? r.error.message : 'no answer' })); return fig; }
      let mm;
      if (m.kind === 'transformer' || name === 'transformer') {
        const P = tfm();
        const l = layerOf(P, 'cross');
        mm = tmatrix('cross', l, M.sel.head);
        mm.title = `${name} · ${shortBleu(m, M.beam)}`;
      } else {
        const d = crossOf(name);
        mm = { m: toMatrices(d)[0], rows: r.response.target_tokens.map(tokLabel), cols: r.response.source_tokens.map(tokLabel), attn: 'cross',
          title: `${name} · ${shortBleu(m, M.beam)}`, kind: () => '' };
      }
      mm.model = name;
      const labelW = Math.min(110, 12 + 7 * Math.max(...mm.rows.map(x => String(x).length)));
      const cell = narrow ? Math.max(13, Math.min(22, Math.floor((window.innerWidth - 60 - labelW) / mm.cols.length))) : fitCell(mm.rows.length, mm.cols.length, across, labelW);
      fig.style.flexBasis = `calc(${100 / across}% - 10px)`;
      const which = ` (${mm.layer !== undefined ? `cross-attention, layer ${mm.layer}, ${mm.head < 0 ? 'mean of heads' : 'head ' + mm.head}; ` : ''}test BLEU with ${bleuSearch(m, M.beam)})`;
      const svg = heat(mm, { title: mm.title, caption: `→ ${r.response.translation}${which}`, cell, fontSize: 11,
        wrap: Math.max(170, Math.min(300, mm.cols.length * cell + labelW)) });
      svg.dataset.model = name;
      const wrap = h('div', { class: 'figure m-fig' }, svg);
      const strip = h('div', { class: 'm-strip', role: 'group', 'aria-label': `${name}: the English coloured by the hovered or pinned French token` });
      strip._paint = row => {
        const p = pinFor('cross');
        const i = row ?? (p && p.side === 'q' ? p.index : null);
        const w = i !== null && mm.m[i] ? mm.m[i] : null;
        strip.replaceChildren(h('span', { class: 'ctok-label', text: w ? `“${mm.rows[i]}” reads:` : 'hover a French token:' }),
          coloredTokens(mm.cols, w, { scale: ctx.scale(), side: 'en', marked: p && p.side === 'k' ? p.index : -1 }));
      };
      strip._paint(null);
      svg._strip = strip;
      const sel = name === 'transformer' ? tfmPicker() : null;
      fig.append(wrap, strip);
      if (sel) fig.append(sel);
      return fig;
    });
    box.replaceChildren(note, h('div', { class: 'm-panels' }, ...figs));
  }

  // Which cross-attention the Translate view shows for the Transformer.
  function tfmPicker() {
    const P = tfm();
    const bh = bestHead(M.list.find(m => m.name === 'transformer'));
    const s = h('select', { id: 'm-tfm-pick', 'aria-label': 'Transformer cross-attention shown' });
    for (let l = 0; l < P.L.cross; l++) {
      s.append(new Option(`layer ${l}, mean of heads`, `${l}:-1`));
      for (let hh = 0; hh < P.H; hh++) {
        const best = bh && bh.layer === l && bh.head === hh;
        s.append(new Option(`layer ${l}, head ${hh}${best ? ` · aligns best (${pct(bh.accuracy)})` : ''}`, `${l}:${hh}`));
      }
    }
    s.value = `${layerOf(P, 'cross')}:${M.sel.head}`;
    s.addEventListener('change', () => { const [l, hh] = s.value.split(':').map(Number); M.sel = { attn: 'cross', layer: l, head: hh }; render(); ctx.writeHash(); });
    return h('label', { class: 'm-small' }, 'shown: ', s);
  }

  function renderGrid() {
    const P = tfm();
    const box = $('m-grid');
    const blocks = Object.keys(ATTN).map(attn => {
      const tbl = h('div', { class: 'm-block', 'data-attn': attn });
      // The grid's labels are HTML; data-export-text draws them into the PNG and SVG too.
      tbl.append(h('h3', { text: `${ATTN[attn].label} (${ATTN[attn].desc})`, 'data-export-text': true }));
      const grid = h('div', { class: 'm-cells', style: `grid-template-columns: auto repeat(${P.H + 1}, auto)` });
      grid.append(h('span'), ...Array.from({ length: P.H }, (_, hh) => h('span', { class: 'm-colhead', style: `color:${HEAD_COLOURS[hh % HEAD_COLOURS.length]}`, text: `head ${hh}`, 'data-export-text': true })),
        h('span', { class: 'm-colhead', text: 'mean', 'data-export-text': true }));
      for (let l = 0; l < P.L[attn]; l++) {
        grid.append(h('span', { class: 'm-rowhead', text: `layer ${l}`, 'data-export-text': true }));
        for (let hh = 0; hh < P.H + 1; hh++) {
          const head = hh === P.H ? -1 : hh;
          const mm = tmatrix(attn, l, head);
          const n = Math.max(mm.rows.length, mm.cols.length);
          // one image a thumbnail: as SVG cells, 30 thumbnails of a long
          // sentence were 86,000 elements and blocked the page for 2 s
          const svg = heat(mm, { labels: false, raster: true, cell: Math.max(2, Math.min(4, Math.floor(44 / n))) });
          const open = attn === M.sel.attn && l === layerOf(P, attn) && head === M.sel.head;
          const b = h('button', { type: 'button', class: 'head-thumb m-thumb', 'data-attn': attn, 'data-layer': l, 'data-head': head, 'aria-pressed': String(open),
            'aria-label': `Open ${mm.title}` }, svg);
          b.addEventListener('click', () => { M.sel = { attn, layer: l, head }; render(); ctx.writeHash(); });
          grid.append(b);
        }
      }
      tbl.append(grid);
      return tbl;
    });
    const mm = tmatrix(M.sel.attn, layerOf(P, M.sel.attn), M.sel.head);
    const labelW = Math.min(110, 12 + 7 * Math.max(...mm.rows.map(x => String(x).length)));
    const narrow = window.matchMedia('(max-width: 860px)').matches;
    // the last column's rotated label reaches past the grid by about 0.72 of its length
    const tail = Math.ceil(0.72 * 7 * String(mm.cols[mm.cols.length - 1]).length);
    const avail = (box.parentElement.clientWidth || 700) - (narrow ? 0 : 330) - labelW - 20 - tail;
    const availH = Math.max(180, window.innerHeight - (narrow ? 200 : 420));
    const cell = Math.max(12, Math.min(28, Math.floor(avail / mm.cols.length), Math.floor(availH / mm.rows.length)));
    // The title and caption wrap to the detail's box (a phone's is the screen's width).
    const svg = heat(mm, { title: mm.title, caption: `transformer · “${M.text}” · ${SCALES[ctx.scale()].short}`, cell, wrap: avail + labelW + tail });
    svg.id = 'm-detail-svg';
    box.replaceChildren(h('p', { class: 'hint', text: 'Every layer and head of the trained Transformer (bertviz’s model view); press a cell to open it large. Decoder self-attention is causal: the hatched cells were not allowed.' }),
      h('div', { class: 'm-gridwrap' }, h('div', { class: 'm-blocks' }, ...blocks), h('div', { class: 'figure heat-figure m-detail' }, svg)));
  }

  function renderHeads() {
    const P = tfm();
    const box = $('m-heads');
    const attn = M.sel.attn, l = layerOf(P, attn);
    const pick = h('select', { id: 'm-heads-pick', 'aria-label': 'Attention and layer' });
    for (const a of Object.keys(ATTN)) for (let k = 0; k < P.L[a]; k++) pick.append(new Option(`${ATTN[a].label}, layer ${k}`, `${a}:${k}`));
    pick.value = `${attn}:${l}`;
    pick.addEventListener('change', () => { const [a, k] = pick.value.split(':'); M.sel = { attn: a, layer: Number(k), head: M.sel.head }; render(); ctx.writeHash(); });
    const toggles = h('div', { class: 'chips', id: 'm-head-toggles', role: 'group', 'aria-label': 'Heads shown' });
    for (let hh = 0; hh < P.H; hh++) {
      const b = h('button', { type: 'button', class: 'chip head-toggle', 'data-head': hh, 'aria-pressed': String(!M.hidden.has(hh)) });
      b.innerHTML = `<span class="swatch" style="background:${HEAD_COLOURS[hh % HEAD_COLOURS.length]}"></span>head ${hh}`;
      b.addEventListener('click', () => { if (M.hidden.has(hh)) M.hidden.delete(hh); else M.hidden.add(hh); render(); ctx.writeHash(); });
      toggles.append(b);
    }
    const base = tmatrix(attn, l, 0);
    const heads = P[attn][l].map((matrix, index) => ({ index, matrix })).filter(x => !M.hidden.has(x.index));
    const table = h('div', { id: 'm-line-readout', class: 'line-readout' });
    const fig = h('div', { id: 'm-lines', class: 'figure' });
    if (heads.length) {
      fig.append(lineView(heads, { rows: base.rows, cols: base.cols, rowTitle: attn === 'encoder' ? 'English' : 'French',
        colTitle: attn === 'decoder' ? 'French' : 'English', pin: pinFor(attn), gap: 220, fit: $('m-heads').clientWidth,
        // the key under the lines: which attention and layer, which colour is which head, which are hidden
        key: { title: `Transformer · ${ATTN[attn].label}, layer ${l} (${ATTN[attn].desc})`,
          heads: Array.from({ length: P.H }, (_, index) => ({ index, shown: !M.hidden.has(index) })) },
        onPin: (side, idx) => setPin(langOf(attn, side), idx),
        onFocus: (side, idx) => {
          table.innerHTML = side === null ? '<p class="hint">Hover a token for every shown head’s weights; click to pin it.</p>' :
            weightTable(heads, side, idx, base.rows, base.cols, { scale: ctx.scale(), many: true });
        } }));
    } else fig.append(h('p', { class: 'hint', text: 'All heads are hidden: press a head above to show it.' }));
    box.replaceChildren(h('p', { class: 'hint', text: 'Each line joins a query to a key in its head’s colour, darker for a larger weight (bertviz’s head view). Hover a token for its lines and numbers; click to pin it.' }),
      h('div', { class: 'm-row' }, h('label', { class: 'm-small' }, 'Attention: ', pick), toggles),
      h('div', { class: 'lines-row' }, fig, table));
  }

  function renderRollout() {
    const P = tfm();
    const box = $('m-rollout');
    const Le = P.L.encoder, Lc = P.L.cross;
    const R = rollout(P.encoder);
    const C = meanOfHeads(P.cross[Lc - 1]);
    const src = P.src.map(tokLabel), tgt = P.tgt.map(tokLabel);
    const mats = [
      { key: 'enc-raw', m: meanOfHeads(P.encoder[Le - 1]), rows: src, cols: src, attn: 'encoder', title: `Encoder, layer ${Le - 1}: raw`, caption: 'A: mean of heads', foot: 'last layer only' },
      { key: 'enc-rollout', m: R, rows: src, cols: src, attn: 'encoder', title: `Encoder rollout`, caption: `R = Ã${Le - 1} ⋯ Ã0`, foot: `through ${Le} layers` },
      { key: 'cross-raw', m: C, rows: tgt, cols: src, attn: 'cross', title: `Cross, layer ${Lc - 1}: raw`, caption: 'C: mean of heads', foot: 'last decoder layer' },
      { key: 'cross-rollout', m: matmul(C, R), rows: tgt, cols: src, attn: 'cross', title: 'Cross · encoder rollout', caption: 'C · R', foot: 'French → English input tokens' },
    ];
    const narrow = window.matchMedia('(max-width: 860px)').matches;
    const labelW = Math.min(110, 12 + 7 * Math.max(...tgt.map(x => String(x).length), ...src.map(x => String(x).length)));
    // Two figures a row (one on a phone), so cells and rotated labels keep a readable size.
    const figW = narrow ? window.innerWidth - 40 : ((box.parentElement.clientWidth || 900) - 12) / 2;
    const avail = figW - labelW - 24;
    const cell = Math.max(11, Math.min(24, Math.floor(avail / src.length)));
    const formula = h('div', { class: 'formula m-formula' });
    formula.innerHTML = '<strong>Attention rollout</strong> (Abnar &amp; Zuidema 2020): per layer <code>Ã = rownorm(0.5 · mean<sub>heads</sub> A + 0.5 · I)</code> ' +
      `(I: the residual connection), multiplied through the encoder's layers, <code>R = Ã<sub>${Le - 1}</sub> ⋯ Ã<sub>0</sub></code>. ` +
      'For the French side the page rolls out <em>the encoder only</em>: <code>C · R</code>, with <code>C</code> the last decoder layer’s cross-attention (mean of heads), ' +
      'so a French token reads English input tokens rather than encoder states; the decoder’s self-attention is left out.';
    const figs = mats.map(x => {
      const mm = { ...x, kind: () => '' };
      const svg = heat(mm, { title: x.title, caption: `${x.caption} · ${SCALES[ctx.scale()].short}`, foot: x.foot, cell, fontSize: 11, wrap: figW - 12 });
      svg.dataset.matrix = x.key;
      return h('div', { class: 'figure m-roll', 'data-matrix': x.key }, svg);
    });
    box.replaceChildren(formula, h('div', { class: 'm-rolls' }, ...figs));
  }

  // Attention on the text: both sentences, the pinned token marked and the
  // other tokens coloured by the weights of the matrix in focus.
  function focusMatrix() {
    const P = tfm();
    if (M.sub === 'translate' || !P) {
      if (!P) return null;
      return tmatrix('cross', layerOf(P, 'cross'), M.sel.head);
    }
    if (M.sub === 'rollout') {
      const svg = panel.querySelector('#m-rollout svg[data-matrix="cross-rollout"]');
      return svg ? svg._mm : null;
    }
    if (M.sub === 'heads') {
      const l = layerOf(P, M.sel.attn);
      const shown = P[M.sel.attn][l].filter((_, hh) => !M.hidden.has(hh));
      const mm = tmatrix(M.sel.attn, l, 0);
      mm.m = shown.length ? meanOfHeads(shown) : mm.m.map(r => r.map(() => 0));
      mm.title = `${ATTN[M.sel.attn].label}, layer ${l}, mean of the shown heads`;
      return mm;
    }
    return tmatrix(M.sel.attn, layerOf(P, M.sel.attn), M.sel.head);
  }

  function renderText() {
    const box = $('m-text-view');
    const mm = focusMatrix();
    const P = tfm();
    if (!mm || !P) { box.replaceChildren(); return; }
    const head = h('p', { class: 'ctok-head' });
    const src = P.src, tgt = P.tgt;
    const p = M.pin;
    const pin = pinFor(mm.attn);
    let wEn = null, wFr = null;
    if (pin && pin.side === 'q') {
      const w = mm.m[pin.index];
      if (mm.attn === 'decoder') wFr = w; else wEn = w;
    } else if (pin && pin.side === 'k') {
      wFr = mm.m.map(r => r[pin.index]);
    }
    head.textContent = !p ? `Transformer, ${mm.title}: click a token (here or in a figure) to colour the text by its attention.` :
      !pin ? `The pinned ${p.lang === 'en' ? 'English' : 'French'} token does not appear in ${mm.title}.` :
        pin.side === 'q' ? `${mm.title}: what “${mm.rows[pin.index]}” reads, ${SCALES[ctx.scale()].short}. Click it again to release.` :
          `${mm.title}: how much each French token reads “${mm.cols[pin.index]}”, ${SCALES[ctx.scale()].short}.`;
    const line = (label, toks, w, lang) => h('div', { class: 'ctok-line' }, h('span', { class: 'ctok-label', text: label }),
      coloredTokens(toks.map(tokLabel), w, { scale: ctx.scale(), side: lang, marked: p && p.lang === lang ? p.index : -1 }));
    box.replaceChildren(head, line('EN', src, wEn, 'en'), line('FR', tgt, wFr, 'fr'));
  }

  /* ------------------------------------------------------------- hover */

  function wireHover() {
    panel.addEventListener('mouseover', e => {
      const t = e.target;
      const cell = t.closest && t.closest('.cell, .row-label');
      if (!cell) return;
      const svg = cell.ownerSVGElement;
      if (!svg || !svg._mm) return;
      const i = Number(cell.dataset.row), j = cell.classList.contains('cell') ? Number(cell.dataset.col) : null;
      readCell(svg, i, j);
    });
    panel.addEventListener('mouseout', e => {
      const svg = e.target.ownerSVGElement || (e.target.tagName === 'svg' ? e.target : null);
      if (svg && svg._mm && !svg.contains(e.relatedTarget)) { markHover(svg, null); if (svg._strip) svg._strip._paint(null); }
    });
    panel.addEventListener('keydown', onKey);
    panel.addEventListener('click', e => {
      const t = e.target.closest('.cell, .row-label, .col-label, .ctok');
      if (!t || t.closest('.head-thumb')) return; // a thumbnail only opens its cell
      if (t.classList.contains('ctok')) { setPin(t.dataset.side, Number(t.dataset.index)); return; }
      const svg = t.ownerSVGElement;
      if (!svg || !svg._mm) return;
      if (t.classList.contains('col-label')) setPin(langOf(svg._mm.attn, 'k'), Number(t.dataset.col));
      else setPin(langOf(svg._mm.attn, 'q'), Number(t.dataset.row));
    });
  }

  // Keyboard: a focused heatmap's cells are walked with the arrow keys, as on
  // the tensors heatmap; Enter pins the query token under the cursor.
  function onKey(e) {
    const svg = e.target.closest && e.target.closest('svg');
    if (!svg || !svg._mm || !svg.hasAttribute('tabindex')) return;
    const mm = svg._mm, c = svg._cursor;
    if ((e.key === 'Enter' || e.key === ' ') && c) { e.preventDefault(); setPin(langOf(mm.attn, 'q'), c.i); return; }
    const to = arrowCell(e.key, c, mm.m.length, mm.m[0].length);
    if (!to) return;
    e.preventDefault();
    svg._cursor = to;
    readCell(svg, to.i, to.j);
  }

  function readCell(svg, i, j) {
    const mm = svg._mm;
    if (!mm.m[i]) return;
    const who = mm.model ? `${mm.model}: ` : '';
    if (j === null) {
      let arg = 0;
      mm.m[i].forEach((w, k) => { if (w > mm.m[i][arg]) arg = k; });
      $('m-readout').textContent = `${who}“${mm.rows[i]}” (row ${i}) reads most “${mm.cols[arg]}” (${fmt(mm.m[i][arg])})`;
      markHover(svg, null);
    } else {
      const w = mm.m[i][j];
      $('m-readout').textContent = `${who}“${mm.rows[i]}” (row ${i}) → “${mm.cols[j]}” (column ${j}): weight ${fmt(w)}` +
        (w === 0 && mm.kind(i, j) === 'mask' ? ' (masked: a later token)' : '') + ` · uniform would be ${fmt(1 / (mm.m[i].filter((_, c) => mm.kind(i, c) !== 'mask').length || mm.m[i].length))}`;
      markHover(svg, i, j);
    }
    if (svg._strip) svg._strip._paint(i);
  }

  /* ------------------------------------------------------- state, export */

  function params(p) {
    p.set('mt', M.text);
    if (M.beam !== 1) p.set('mb', String(M.beam));
    if (M.sub !== 'translate') p.set('ms', M.sub);
    if (M.sel.attn !== 'cross') p.set('ma', M.sel.attn);
    if (M.sel.layer >= 0) p.set('ml', String(M.sel.layer));
    if (M.sel.head >= 0) p.set('mh', String(M.sel.head));
    if (M.hidden.size) p.set('mhide', [...M.hidden].sort((a, b) => a - b).join(','));
    if (M.pin) p.set('mpin', M.pin.lang + M.pin.index);
  }
  function restore(p) {
    const was = [M.text, M.beam].join('\n');
    if (p.has('mt')) M.text = p.get('mt');
    M.beam = p.get('mb') === '4' ? 4 : 1;
    if ([M.text, M.beam].join('\n') !== was) { M.results = new Map(); M.saved = null; } // a link to another sentence: translate it
    M.sub = SUBS.includes(p.get('ms')) ? p.get('ms') : 'translate';
    M.sel = { attn: ATTN[p.get('ma')] ? p.get('ma') : 'cross', layer: /^\d+$/.test(p.get('ml') || '') ? Number(p.get('ml')) : -1,
      head: /^\d+$/.test(p.get('mh') || '') ? Number(p.get('mh')) : -1 };
    M.hidden = new Set((p.get('mhide') || '').split(',').filter(x => /^\d+$/.test(x)).map(Number));
    const pin = /^(en|fr)(\d+)$/.exec(p.get('mpin') || '');
    M.pin = pin ? { lang: pin[1], index: Number(pin[2]) } : null;
  }

  function exportObject(base) {
    if (M.results.size === 0) throw new Error('no translation yet');
    return { ...base, kind: 'models', text: M.text, beam: M.beam,
      modelView: { sub: M.sub, sel: M.sel, hidden: [...M.hidden], pin: M.pin },
      models: M.list, results: [...M.results].map(([model, r]) => ({ model, ...r, parsed: undefined })) };
  }
  // What each view's picture is called in its caption.
  function viewName() {
    if (M.sub === 'translate') return 'cross-attention of every model';
    if (M.sub === 'grid') return 'Transformer layers × heads';
    if (M.sub === 'rollout') return 'Transformer attention rollout';
    const P = tfm();
    if (!P) return 'Transformer head view';
    const hidden = [...M.hidden].filter(x => x < P.H).sort((a, b) => a - b);
    return `Transformer head view, ${ATTN[M.sel.attn].label.toLowerCase()}, layer ${layerOf(P, M.sel.attn)}` +
      (hidden.length ? `, head${hidden.length > 1 ? 's' : ''} ${hidden.join(', ')} hidden` : `, all ${P.H} heads`);
  }
  function exportTarget() {
    return { container: $('m-' + M.sub), name: `attention-models-${M.sub}`,
      caption: `Trained EN→FR models · ${viewName()} · “${M.text}” · ${SCALES[ctx.scale()].short}` +
        (M.sub === 'translate' && M.list.some(m => m.kind === 'seq2seq' && bleuOf(m) !== null && bleuOf(m) < COPY_FLOOR_BLEU) ? ' · GRU models weak (see BLEU)' : '') };
  }
  function load(obj) {
    if (!Array.isArray(obj.results)) throw new Error('a models export needs "results"');
    if (Array.isArray(obj.models) && obj.models.length) M.list = obj.models;
    M.text = typeof obj.text === 'string' ? obj.text : '';
    M.beam = obj.beam === 4 ? 4 : 1;
    const v = obj.modelView || {};
    M.sub = SUBS.includes(v.sub) ? v.sub : 'translate';
    M.sel = v.sel && ATTN[v.sel.attn] ? { attn: v.sel.attn, layer: Number.isInteger(v.sel.layer) ? v.sel.layer : -1, head: Number.isInteger(v.sel.head) ? v.sel.head : -1 } : { attn: 'cross', layer: -1, head: -1 };
    M.hidden = new Set(Array.isArray(v.hidden) ? v.hidden.filter(Number.isInteger) : []);
    M.pin = v.pin && (v.pin.lang === 'en' || v.pin.lang === 'fr') && Number.isInteger(v.pin.index) ? { lang: v.pin.lang, index: v.pin.index } : null;
    M.results = new Map(obj.results.map(r => [r.model, { request: r.request, response: r.response, error: r.error }]));
    M.seq++;
    panel.querySelector('.m-main')?.classList.remove('stale');
    M.saved = obj.saved ? `saved ${obj.saved}` : 'saved';
    clampSel();
    status(`Loaded a saved export of ${M.results.size} models for “${M.text}”, with its words.`);
  }

  return {
    state: M,
    async init(tabEl, panelEl) {
      tab = tabEl; panel = panelEl;
      const r = await ctx.getJSON(ctx.apiBase + 'models');
      const list = r.ok && r.body && Array.isArray(r.body.models) ? r.body.models.filter(m => m && typeof m.name === 'string') : [];
      if (!list.length) return false;
      M.list = list;
      tab.hidden = false;
      build();
      return true;
    },
    get ready() { return !!panel && M.list.length > 0; },
    show() { if (M.results.size === 0 && !M.saved) translate(); else render(); },
    render, params, restore, exportObject, exportTarget, load,
    translate,
  };
}
