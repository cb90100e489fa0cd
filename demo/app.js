// app.js - the demo's controller: reads the controls, builds API requests, and hands the weights to the renderers.

import { tokenize, embed, DEFAULT_DIM } from './embed.js';
import { postJSON, getJSON, decodeTensor, toMatrices } from './api.js';
import { heatmap, lineView, legendBar, rowStats, fmt, HEAD_COLOURS } from './render.js';
import { exportSVG, exportPNG, exportJSON } from './export.js';

const RULES = ['dot', 'scaled_dot', 'general', 'additive', 'concat_tanh', 'concat'];
const ALL_RULES = [...RULES, 'multihead'];

const EXAMPLES = [
  { name: 'Self-attention: repeated words', self: true, rule: 'scaled_dot',
    source: 'The cat sat on the mat because the cat was tired .' },
  { name: 'Cross-attention: similar words', self: false, rule: 'scaled_dot',
    source: 'the cats were sitting on the mats', target: 'a cat sat on a mat' },
  { name: 'Misspellings find their word', self: false, rule: 'dot',
    source: 'attention is all you need', target: 'atention iz al yu ned' },
  { name: 'Causal multi-head (language model)', self: true, rule: 'multihead', heads: 4, causal: true,
    source: 'to be or not to be , that is the question' },
];

// Short explanations for a reader new to the rules; the formula itself comes
// from GET /rules so it always matches the server.
const RULE_NOTES = {
  dot: 'Luong “dot”: the score is how well q and k line up. Needs Dq = Dk. Without scaling, long vectors make the softmax very peaked.',
  scaled_dot: 'The Transformer’s attention: the dot product divided by √Dk, which keeps the softmax soft as vectors grow.',
  general: 'Luong “general”: a learned matrix W sits between q and k (here seeded at random, like an untrained model).',
  additive: 'Bahdanau: a small one-layer network scores each (q, k) pair. Its weights are seeded at random here.',
  concat_tanh: 'Concatenate q and k, one tanh layer, sum the hidden units. Seeded random weights.',
  concat: 'The PyTorch seq2seq decoder recipe: a Linear over [q_i; k_i] scores the Lv value positions. It pairs key row i with query row i (Lk = Lq), so this page uses the target vectors as query and key, and the source vectors as the values; causal and window do not apply.',
  multihead: 'PyTorch nn.MultiheadAttention: project q, k and v, split them into heads, run scaled dot attention in each head, join the heads and project again.',
};

// GET /rules lists the /attention/{rule} rules; this one is from the contract.
const MULTIHEAD_FORMULA = {
  title: 'nn.MultiheadAttention',
  formula: 'head_h = softmax(q_h k_hᵀ / √(E/H)) v_h with q = Q Wqᵀ + bq, k = K Wkᵀ + bk, v = V Wvᵀ + bv; O = [head_1 … head_H] Woᵀ + bo',
};

const PASTE_EXAMPLE = {
  query: [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
  key: [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1]],
  value: [[1, 0], [0, 1], [0.5, 0.5]],
};

const $ = id => document.getElementById(id);

const S = {
  mode: 'sentences',
  padding: new Set(),   // indices of key tokens marked as padding
  rules: null,          // GET /rules, once loaded
  cur: null,            // {rule, request, response, mats, rows, cols, note}
  head: 0,              // selected head in the detail heatmap; -1 = mean over heads
  hiddenHeads: new Set(),
  view: 'heatmap',
  seq: 0,
  compareSeq: 0,
  timer: 0,
  cursor: null,         // {i, j}: the heatmap cell last read out
};

/* ------------------------------------------------------------- controls */

function readOptions() {
  const num = (id, int) => {
    const v = $(id).value.trim();
    if (v === '') return null;
    const n = Number(v);
    if (!Number.isFinite(n)) return null;
    return int ? Math.trunc(n) : n;
  };
  return {
    rule: $('rule').value,
    heads: Number($('heads').value),
    proj: $('proj').value,
    causal: $('causal').checked,
    window: num('window', true),
    hard: $('hard').value,
    k: num('topk', true) ?? 1,
    scale: num('scale', false),
    seed: num('seed', true) ?? 0,
    posWeight: num('pos-weight', false) ?? 0.5,
  };
}

function sentences() {
  const self = $('self').checked;
  const src = tokenize($('source').value);
  const tgt = self ? src : tokenize($('target').value);
  return { self, src, tgt };
}

// The option fields that apply to a rule; the others are left out because
// the API rejects them (a user can still send them by pasting a request).
function optionFields(rule, o, Lq, keyMask) {
  const f = {};
  if (rule === 'concat') {
    if (keyMask) f.mask = Array.from({ length: Lq }, () => keyMask.slice());
  } else {
    if (o.causal) f.causal = true;
    if (o.window !== null) f.window = o.window;
    if (keyMask) f.key_mask = keyMask;
  }
  if (rule !== 'multihead') {
    if (o.hard === 'argmax') f.hard = 'argmax';
    else if (o.hard === 'top_k') f.hard = { top_k: o.k };
  }
  if (rule === 'scaled_dot' && o.scale !== null) f.scale = o.scale;
  return f;
}

function sentenceRequest(rule, o, sent) {
  const Q = embed(sent.tgt, DEFAULT_DIM, o.posWeight);
  const K = sent.self ? Q : embed(sent.src, DEFAULT_DIM, o.posWeight);
  const keyMask = S.padding.size ? sent.src.map((_, j) => !S.padding.has(j)) : null;
  const body = rule === 'concat' ? { query: Q, key: Q, value: K } : { query: Q, key: K, value: K };
  if (rule === 'multihead') {
    body.num_heads = o.heads;
    if (o.proj === 'identity') body.params = identityParams(Q[0].length);
  }
  body.seed = o.seed;
  Object.assign(body, optionFields(rule, o, Q.length, keyMask));
  return body;
}

// nn.MultiheadAttention parameters that change nothing: each head then runs
// scaled dot attention on its own E/H slice of the token vectors, so the heads
// show real (if untrained) differences instead of random projections' noise.
function identityParams(E) {
  const I = Array.from({ length: E }, (_, i) => Array.from({ length: E }, (_, j) => (i === j ? 1 : 0)));
  return { in_proj_weight: [...I, ...I, ...I], in_proj_bias: new Array(3 * E).fill(0),
    'out_proj.weight': I, 'out_proj.bias': new Array(E).fill(0) };
}

// A pasted request: the user's fields win; the controls fill in the rest.
function pasteRequest(rule, o, user) {
  const body = { ...user };
  const add = { seed: o.seed, ...optionFields(rule, o, 0, null) };
  if (rule === 'multihead') add.num_heads = o.heads;
  for (const [k, v] of Object.entries(add)) if (!(k in body)) body[k] = v;
  return body;
}

// The API's root: the page's directory, minus a trailing demo/ (the server
// also serves the page as /demo/index.html). Not plain "/", so the page
// still works behind a proxy that mounts the service under a path prefix.
const API_BASE = location.pathname.replace(/(?:demo\/)?[^/]*$/, '');
function apiPath(rule) { return API_BASE + (rule === 'multihead' ? 'multihead' : 'attention/' + rule); }

/* --------------------------------------------------------------- errors */

const FIELD_TARGET = { window: 'err-window', scale: 'err-scale', seed: 'err-seed', num_heads: 'err-heads',
  hard: 'err-hard', causal: 'err-causal', key_mask: 'err-source', mask: 'err-source' };

function errorTarget(field) {
  if (S.mode === 'paste') return 'err-paste';
  if (S.mode === 'load') return 'err-load';
  const base = String(field || '').split(/[.[]/)[0];
  if (FIELD_TARGET[base]) return FIELD_TARGET[base];
  if (base === 'query') return $('self').checked ? 'err-source' : 'err-target';
  if (base === 'key' || base === 'value') return 'err-source';
  return 'err-general';
}

function clearErrors() {
  for (const e of document.querySelectorAll('.field-error')) e.textContent = '';
  for (const e of document.querySelectorAll('[aria-invalid]')) e.removeAttribute('aria-invalid');
  document.querySelector('.views').classList.remove('stale');
}

function showError(err) {
  const target = $(errorTarget(err.field));
  target.textContent = err.message + (err.field ? ` (field: ${err.field})` : '') + (err.code ? ` [${err.code}]` : '');
  const input = document.querySelector(`[aria-describedby~="${target.id}"]`);
  if (input) input.setAttribute('aria-invalid', 'true');
  document.querySelector('.views').classList.add('stale');
  setStatus(`The request was refused: ${err.message}`, true);
}

function setStatus(text, bad = false) {
  $('status').textContent = text;
  $('status').classList.toggle('bad', bad);
}

/* ------------------------------------------------------------------ run */

function schedule() {
  clearTimeout(S.timer);
  S.timer = setTimeout(run, 120);
}

async function run() {
  clearTimeout(S.timer);
  const o = readOptions();
  const rule = o.rule;
  let request, rows, cols;
  if (S.mode === 'sentences') {
    const sent = sentences();
    if (sent.src.length === 0 || sent.tgt.length === 0) {
      clearErrors();
      $(sent.src.length === 0 ? 'err-source' : 'err-target').textContent = 'Type at least one word.';
      return;
    }
    request = sentenceRequest(rule, o, sent);
    rows = sent.tgt.slice();
    cols = sent.src.map((t, j) => (S.padding.has(j) ? t + ' (pad)' : t));
  } else if (S.mode === 'paste') {
    const text = $('paste').value;
    let user;
    try { user = JSON.parse(text); } catch { user = undefined; }
    // Text that is not a JSON object goes to the API as is, so the message
    // the user sees is the API's own (invalid_json with its position).
    request = (user && typeof user === 'object' && !Array.isArray(user)) ? pasteRequest(rule, o, user) : text;
  } else {
    return;
  }
  const seq = ++S.seq;
  setStatus('Computing…');
  const t0 = performance.now();
  const res = await postJSON(apiPath(rule), request);
  if (seq !== S.seq) return; // a newer request superseded this one
  clearErrors();
  if (!res.ok) { showError(res.error); return; }
  try {
    show(rule, request, res.body, rows, cols);
  } catch (e) {
    showError({ code: 'bad_response', message: e.message, field: '' });
    return;
  }
  const compute = /compute;dur=([\d.]+)/.exec(res.timing || '');
  const c = S.cur;
  setStatus(`${rule}: ${c.mats[0].length} queries × ${c.mats[0][0]?.length ?? 0} keys` +
    (c.mats.length > 1 ? `, ${c.mats.length} heads` : '') +
    ` · round trip ${(performance.now() - t0).toFixed(0)} ms` + (compute ? ` · server compute ${compute[1]} ms` : '') +
    (c.note ? ` · ${c.note}` : ''));
  if (S.view === 'compare') runCompare();
}

// Weights -> per-head matrices, dropping a batch dimension (first element shown).
function weightMatrices(rule, response) {
  if (!('weights' in response)) throw new Error('the response has no "weights" (was need_weights false?)');
  const t = decodeTensor(response.weights, 'weights');
  const r = t.shape.length;
  let note = '';
  let mats = toMatrices(t);
  const multi = rule === 'multihead';
  if ((!multi && r === 3) || (multi && r === 4)) {
    const per = multi ? t.shape[1] : 1;
    note = `showing batch element 0 of ${t.shape[0]}`;
    mats = mats.slice(0, per);
  } else if (r > (multi ? 4 : 3)) {
    throw new Error(`weights have ${r} dimensions; expected at most ${multi ? 4 : 3}`);
  }
  if (mats.length === 0 || mats[0].length === 0 || mats[0][0].length === 0) throw new Error('the weights are empty');
  return { mats, note };
}

function show(rule, request, response, rows, cols) {
  const { mats, note } = weightMatrices(rule, response);
  const Lq = mats[0].length, Lk = mats[0][0].length;
  if (!rows || rows.length !== Lq) rows = Array.from({ length: Lq }, (_, i) => 'q' + i);
  if (!cols || cols.length !== Lk) cols = Array.from({ length: Lk }, (_, j) => (rule === 'concat' ? 'v' : 'k') + j);
  const prevHeads = S.cur ? S.cur.mats.length : 0;
  S.cur = { rule, request, response, mats, rows, cols, note };
  if (mats.length !== prevHeads) { S.head = 0; S.hiddenHeads.clear(); }
  if (S.head >= mats.length) S.head = 0;
  render();
}

/* --------------------------------------------------------------- render */

function meanMatrix(mats) {
  return mats[0].map((row, i) => row.map((_, j) => mats.reduce((s, m) => s + m[i][j], 0) / mats.length));
}

// The options a request carried, in words, so an exported picture says what it shows.
function describeOptions(req) {
  if (!req || typeof req !== 'object') return '';
  const parts = [];
  if (req.causal) parts.push('causal');
  if (req.window !== undefined) parts.push(`window ${req.window}`);
  if (req.key_mask !== undefined || req.mask !== undefined) parts.push('masked keys');
  if (req.hard === 'argmax') parts.push('hard argmax');
  else if (req.hard && req.hard.top_k !== undefined) parts.push(`top-${req.hard.top_k}`);
  if (req.scale !== undefined) parts.push(`scale ${req.scale}`);
  if (req.params && S.cur.rule === 'multihead') parts.push('identity projections');
  else if (req.seed && !['dot', 'scaled_dot'].includes(S.cur.rule)) parts.push(`seed ${req.seed}`);
  return parts.join(' · ');
}

function detailMatrix() {
  const m = S.cur.mats;
  const opts = describeOptions(S.cur.request);
  const sfx = opts ? ` (${opts})` : '';
  if (m.length === 1) return { matrix: m[0], title: `${S.cur.rule}${sfx}` };
  if (S.head === -1) return { matrix: meanMatrix(m), title: `${S.cur.rule}: mean over ${m.length} heads${sfx}` };
  return { matrix: m[S.head], title: `${S.cur.rule}: head ${S.head}${sfx}` };
}

function render() {
  renderFormula();
  if (!S.cur) return;
  renderHeatmapView();
  renderLinesView();
}

function renderHeatmapView() {
  const c = S.cur;
  const grid = $('heads-grid');
  grid.replaceChildren();
  grid.hidden = c.mats.length < 2;
  if (c.mats.length > 1) {
    const addThumb = (idx, matrix, label) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'head-thumb';
      b.dataset.head = idx;
      b.setAttribute('aria-pressed', String(S.head === idx));
      b.setAttribute('aria-label', `Show ${label} in detail`);
      const cell = Math.max(3, Math.min(12, Math.floor(110 / Math.max(matrix.length, matrix[0].length))));
      b.append(heatmap(matrix, { labels: false, legend: false, cell }));
      const cap = document.createElement('span');
      cap.textContent = label;
      b.append(cap);
      b.addEventListener('click', () => { S.head = idx; renderHeatmapView(); });
      grid.append(b);
    };
    c.mats.forEach((m, h) => addThumb(h, m, `head ${h}`));
    addThumb(-1, meanMatrix(c.mats), 'mean');
  }
  const { matrix, title } = detailMatrix();
  const fig = $('heatmap');
  const svg = heatmap(matrix, { rows: c.rows, cols: c.cols, title });
  svg.setAttribute('tabindex', '0');
  svg.setAttribute('aria-describedby', 'readout');
  S.cursor = null;
  fig.replaceChildren(svg);
  renderStats(matrix);
}

function renderStats(matrix) {
  const c = S.cur;
  const stats = rowStats(matrix);
  const Lk = matrix[0].length;
  const table = document.createElement('table');
  table.className = 'stats';
  table.innerHTML = `<caption>Per query: where it looks most, and how spread out its attention is
    (entropy in bits: 0 = all on one key, ${fmt(Math.log2(Lk), 2)} = spread evenly over all ${Lk}).</caption>
    <thead><tr><th scope="col">#</th><th scope="col">query</th><th scope="col">argmax key</th>
    <th scope="col">weight</th><th scope="col">entropy (bits)</th><th scope="col"></th></tr></thead>`;
  const tb = document.createElement('tbody');
  stats.forEach((s, i) => {
    const tr = document.createElement('tr');
    if (s.masked) tr.className = 'masked';
    const cells = [String(i), c.rows[i], s.masked ? '—' : c.cols[s.argmax], s.masked ? '—' : fmt(s.max, 3),
      s.masked ? '—' : fmt(s.entropy, 2), s.masked ? 'fully masked' : ''];
    for (const v of cells) {
      const td = document.createElement('td');
      td.textContent = v;
      tr.append(td);
    }
    const bar = document.createElement('span');
    bar.className = 'ebar';
    bar.style.width = `${s.masked ? 0 : Math.round(60 * s.entropy / Math.max(1e-9, Math.log2(Math.max(2, Lk))))}px`;
    tr.children[4].prepend(bar);
    tb.append(tr);
  });
  table.append(tb);
  $('stats').replaceChildren(table);
}

function renderLinesView() {
  const c = S.cur;
  const tog = $('head-toggles');
  tog.replaceChildren();
  if (c.mats.length > 1) {
    c.mats.forEach((_, h) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'chip head-toggle';
      b.dataset.head = h;
      b.setAttribute('aria-pressed', String(!S.hiddenHeads.has(h)));
      b.innerHTML = `<span class="swatch" style="background:${HEAD_COLOURS[h % HEAD_COLOURS.length]}"></span>head ${h}`;
      b.addEventListener('click', () => {
        if (S.hiddenHeads.has(h)) S.hiddenHeads.delete(h); else S.hiddenHeads.add(h);
        renderLinesView();
      });
      tog.append(b);
    });
  }
  const heads = c.mats.map((matrix, index) => ({ index, matrix })).filter(h => !S.hiddenHeads.has(h.index));
  const dual = c.rule !== 'concat' ? 'keys' : 'values';
  $('lines').replaceChildren(heads.length
    ? lineView(heads, { rows: c.rows, cols: c.cols, rowTitle: 'queries', colTitle: dual })
    : Object.assign(document.createElement('p'), { className: 'hint', textContent: 'All heads are hidden: press a head above to show it.' }));
}

function formulaOf(rule) {
  const r = S.rules;
  if (!r) return null;
  let list = Array.isArray(r) ? r : Array.isArray(r.rules) ? r.rules : null;
  if (list) return list.find(x => x && (x.name === rule || x.rule === rule || x.id === rule)) || null;
  const src = r.rules && typeof r.rules === 'object' ? r.rules : r;
  return src[rule] ? { name: rule, ...(typeof src[rule] === 'object' ? src[rule] : { formula: String(src[rule]) }) } : null;
}

function describeParams(p) {
  if (!p) return [];
  const shape = s => (Array.isArray(s) ? `(${s.join(', ')})` : typeof s === 'string' ? s : JSON.stringify(s));
  if (Array.isArray(p)) return p.map(x => (typeof x === 'string' ? x : `${x.name ?? '?'} ${x.shape ? shape(x.shape) : ''}${x.optional ? ' optional' : ''}`));
  if (typeof p === 'object') return Object.entries(p).map(([k, v]) => `${k} ${typeof v === 'object' && v && !Array.isArray(v) ? shape(v.shape) : shape(v)}`);
  return [String(p)];
}

function renderFormula() {
  const rule = $('rule').value;
  $('rule-note').textContent = RULE_NOTES[rule] || '';
  const box = $('formula');
  box.replaceChildren();
  const f = formulaOf(rule) || (rule === 'multihead' && S.rules !== null ? MULTIHEAD_FORMULA : null);
  const h = document.createElement('strong');
  h.textContent = f && typeof f.title === 'string' && f.title ? `${rule} (${f.title})` : rule;
  box.append(h);
  if (!f) {
    box.append(S.rules === null ? ' · loading the formula…' : ' · (no formula published by GET /rules)');
    return;
  }
  const formula = f.formula || f.score || f.description;
  if (formula) {
    const code = document.createElement('code');
    code.className = 'formula-text';
    code.textContent = typeof formula === 'string' ? formula : JSON.stringify(formula);
    box.append(' ', code);
  }
  const params = describeParams(f.params || f.parameters);
  const extra = [];
  if (params.length) extra.push('parameters: ' + params.join('; '));
  if (f.needs_same_dim === true) extra.push('needs Dq = Dk');
  else if (f.needs_same_dim === false) extra.push('Dq and Dk may differ');
  if (extra.length) {
    const p = document.createElement('div');
    p.className = 'formula-extra';
    p.textContent = extra.join(' · ');
    box.append(p);
  }
}

/* -------------------------------------------------------------- compare */

async function runCompare() {
  const seq = ++S.compareSeq;
  const grid = $('compare-grid');
  const o = readOptions();
  if (S.mode === 'load') {
    grid.replaceChildren(Object.assign(document.createElement('p'), { className: 'hint', textContent: 'A loaded response has no inputs to re-run: switch to Sentences or Paste tensors to compare rules.' }));
    return;
  }
  let build, rows, cols;
  if (S.mode === 'sentences') {
    const sent = sentences();
    if (!sent.src.length || !sent.tgt.length) return;
    build = rule => sentenceRequest(rule, { ...o, heads: o.heads }, sent);
    rows = sent.tgt;
    cols = sent.src.map((t, j) => (S.padding.has(j) ? t + ' (pad)' : t));
  } else {
    let user;
    try { user = JSON.parse($('paste').value); } catch { user = null; }
    if (!user || typeof user !== 'object') {
      grid.replaceChildren(Object.assign(document.createElement('p'), { className: 'hint', textContent: 'Paste a valid request first.' }));
      return;
    }
    build = rule => pasteRequest(rule, o, user);
  }
  const results = await Promise.all(ALL_RULES.map(async rule => {
    const req = build(rule);
    if (rule === 'multihead') req.average_weights = true;
    return { rule, res: await postJSON(apiPath(rule), req) };
  }));
  if (seq !== S.compareSeq) return;
  const cells = Math.max(...results.filter(r => r.res.ok).map(r => {
    try { return decodeTensor(r.res.body.weights).shape.slice(-2).reduce((a, b) => Math.max(a, b)); } catch { return 1; }
  }), 1);
  const cell = Math.max(10, Math.min(24, Math.floor(190 / cells)));
  // One colour scale for every panel, so a flat rule looks flat next to a peaked one.
  let max = 0;
  for (const r of results) {
    if (!r.res.ok) continue;
    try { max = Math.max(max, ...decodeTensor(r.res.body.weights).data); } catch { /* shown per panel */ }
  }
  const legend = document.createElement('div');
  legend.className = 'compare-legend';
  legend.append(legendBar(max || 1, 'weight'));
  grid.replaceChildren(legend, ...results.map(({ rule, res }) => {
    const fig = document.createElement('figure');
    fig.className = 'compare-item';
    fig.dataset.rule = rule;
    if (!res.ok) {
      const cap = document.createElement('figcaption');
      cap.textContent = rule;
      const err = document.createElement('p');
      err.className = 'field-error';
      err.textContent = res.error.message;
      fig.append(cap, err);
      return fig;
    }
    try {
      const { mats } = weightMatrices(rule, res.body);
      const title = rule === 'multihead' ? `multihead (mean of ${o.heads})` : rule;
      fig.append(heatmap(mats[0], { rows, cols, title, cell, max: max || 1, legend: false }));
      if (rule === 'concat' && S.mode === 'sentences') {
        fig.append(Object.assign(document.createElement('figcaption'), { className: 'hint',
          textContent: 'rows: target as query and key (paired); columns: source as values' }));
      }
    } catch (e) {
      fig.append(Object.assign(document.createElement('p'), { className: 'field-error', textContent: `${rule}: ${e.message}` }));
    }
    return fig;
  }));
}

/* ------------------------------------------------------------ load mode */

function loadResponse(text) {
  clearErrors();
  let obj;
  try { obj = JSON.parse(text); } catch (e) { $('err-load').textContent = 'Not valid JSON: ' + e.message; return; }
  if (obj && obj.error && obj.error.message) { $('err-load').textContent = 'This is an error response: ' + obj.error.message; return; }
  if (!obj || typeof obj !== 'object' || !('weights' in obj)) {
    $('err-load').textContent = 'Expected an API response with a "weights" field ({"rule": ..., "output": ..., "weights": ...}).';
    return;
  }
  const rule = typeof obj.rule === 'string' ? obj.rule : 'multihead';
  try {
    show(rule, null, obj, null, null);
    setStatus(`Loaded a saved ${rule} response: ${S.cur.mats[0].length} queries × ${S.cur.mats[0][0].length} keys` + (S.cur.note ? ` · ${S.cur.note}` : ''));
  } catch (e) {
    $('err-load').textContent = e.message;
  }
}

/* ------------------------------------------------------------ ui wiring */

function renderTokenChips() {
  const { src } = sentences();
  for (const j of [...S.padding]) if (j >= src.length) S.padding.delete(j);
  const box = $('source-tokens');
  box.replaceChildren(...src.map((t, j) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'chip token';
    b.dataset.index = j;
    b.textContent = t;
    b.setAttribute('aria-pressed', String(S.padding.has(j)));
    b.title = S.padding.has(j) ? 'padding: press to attend again' : 'press to mark as padding';
    b.addEventListener('click', () => {
      if (S.padding.has(j)) S.padding.delete(j); else S.padding.add(j);
      renderTokenChips();
      schedule();
    });
    return b;
  }));
}

function syncControls() {
  const o = readOptions();
  const self = $('self').checked;
  $('target-wrap').hidden = self;
  $('source-label').textContent = self ? 'Sentence' : 'Source sentence (keys and values)';
  $('mh-opts').hidden = o.rule !== 'multihead';
  $('topk-row').hidden = o.hard !== 'top_k';
  const dis = (id, off) => { $(id).disabled = off; $(id).closest('label').classList.toggle('off', off); };
  dis('scale', o.rule !== 'scaled_dot');
  dis('causal', o.rule === 'concat');
  dis('window', o.rule === 'concat');
  dis('hard', o.rule === 'multihead');
  dis('topk', o.rule === 'multihead');
  for (const m of ['sentences', 'paste', 'load']) $('input-' + m).hidden = S.mode !== m;
  renderFormula();
}

function setView(v) {
  S.view = v;
  for (const name of ['heatmap', 'lines', 'compare']) {
    const tab = $('tab-' + name);
    tab.setAttribute('aria-selected', String(name === v));
    tab.tabIndex = name === v ? 0 : -1;
    $('view-' + name).hidden = name !== v;
  }
  if (v === 'compare') runCompare();
}

function applyExample(ex) {
  $('self').checked = ex.self;
  $('source').value = ex.source;
  $('target').value = ex.target || '';
  $('rule').value = ex.rule || 'scaled_dot';
  if (ex.heads) $('heads').value = String(ex.heads);
  $('causal').checked = !!ex.causal;
  S.padding.clear();
  syncControls();
  renderTokenChips();
}

function currentViewContainer() {
  return S.view === 'heatmap' ? $('view-heatmap') : S.view === 'lines' ? $('lines') : $('compare-grid');
}

async function doExport(kind) {
  $('err-general').textContent = '';
  try {
    const name = `attention-${S.cur ? S.cur.rule : 'view'}-${S.view}`;
    if (kind === 'json') {
      if (!S.cur) throw new Error('no response yet');
      exportJSON(S.cur.response, name + '.json');
    } else if (kind === 'svg') exportSVG(currentViewContainer(), name + '.svg');
    else await exportPNG(currentViewContainer(), name + '.png');
  } catch (e) {
    $('err-general').textContent = 'Export failed: ' + e.message;
  }
}

function wire() {
  const sel = $('example');
  EXAMPLES.forEach((ex, i) => sel.append(new Option(ex.name, String(i))));
  sel.addEventListener('change', () => { applyExample(EXAMPLES[Number(sel.value)]); schedule(); });

  for (const r of document.querySelectorAll('input[name="mode"]')) {
    r.addEventListener('change', () => {
      S.mode = r.value;
      clearErrors();
      syncControls();
      if (S.mode === 'sentences') schedule();
    });
  }
  $('controls').addEventListener('submit', e => { e.preventDefault(); run(); });
  for (const id of ['source', 'target']) $(id).addEventListener('input', () => { renderTokenChips(); schedule(); });
  $('self').addEventListener('change', () => { syncControls(); renderTokenChips(); schedule(); });
  for (const id of ['rule', 'heads', 'proj', 'causal', 'window', 'hard', 'topk', 'scale', 'seed', 'pos-weight']) {
    $(id).addEventListener('change', () => { syncControls(); if (S.mode !== 'load') schedule(); });
    if ($(id).type === 'number') $(id).addEventListener('input', () => { if (S.mode === 'sentences') schedule(); });
  }

  $('paste-example').addEventListener('click', () => { $('paste').value = JSON.stringify(PASTE_EXAMPLE, null, 1); });
  $('paste-run').addEventListener('click', run);
  $('paste').addEventListener('keydown', e => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); } });
  $('load-run').addEventListener('click', () => loadResponse($('load-text').value));
  $('load-file').addEventListener('change', async () => {
    const f = $('load-file').files[0];
    if (!f) return;
    const text = await f.text();
    $('load-text').value = text;
    loadResponse(text);
  });

  const tabs = ['heatmap', 'lines', 'compare'];
  tabs.forEach((name, i) => {
    const tab = $('tab-' + name);
    tab.addEventListener('click', () => setView(name));
    // Arrow keys move between tabs, as in the WAI-ARIA tabs pattern.
    tab.addEventListener('keydown', e => {
      const d = e.key === 'ArrowRight' ? 1 : e.key === 'ArrowLeft' ? -1 : 0;
      if (!d) return;
      const next = tabs[(i + d + tabs.length) % tabs.length];
      setView(next);
      $('tab-' + next).focus();
    });
  });

  $('export-png').addEventListener('click', () => doExport('png'));
  $('export-svg').addEventListener('click', () => doExport('svg'));
  $('export-json').addEventListener('click', () => doExport('json'));

  // Hover readout for the detail heatmap (the cell's <title> also shows it).
  $('heatmap').addEventListener('mouseover', e => {
    const cell = e.target.closest('.cell');
    if (cell) readCell(Number(cell.dataset.row), Number(cell.dataset.col));
  });
  // Keyboard: the heatmap takes focus and the arrow keys walk its cells.
  $('heatmap').addEventListener('keydown', e => {
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    if (!moves[e.key] || !S.cur) return;
    e.preventDefault();
    const svg = $('heatmap').querySelector('svg');
    const R = Number(svg.dataset.rows), C = Number(svg.dataset.cols);
    const [di, dj] = moves[e.key];
    const c = S.cursor || { i: 0, j: -dj };
    readCell(Math.max(0, Math.min(R - 1, c.i + di)), Math.max(0, Math.min(C - 1, c.j + dj)), true);
  });
}

// Shows one cell's weight under the heatmap and marks its row and column
// labels; with mark, also outlines the cell (the keyboard cursor).
function readCell(i, j, mark = false) {
  const fig = $('heatmap');
  const cell = fig.querySelector(`.cell[data-row="${i}"][data-col="${j}"]`);
  if (!cell || !S.cur) return;
  S.cursor = { i, j };
  $('readout').textContent = `query “${S.cur.rows[i]}” (row ${i}) → key “${S.cur.cols[j]}” (column ${j}): weight ${Number(cell.dataset.weight).toPrecision(6)}`;
  for (const l of fig.querySelectorAll('.row-label, .col-label')) {
    const on = l.dataset.row === String(i) || l.dataset.col === String(j);
    l.setAttribute('font-weight', on ? 700 : 400);
  }
  for (const b of fig.querySelectorAll('.cursor-box')) b.remove();
  if (mark) {
    const box = document.createElementNS('http://www.w3.org/2000/svg', 'rect');
    for (const a of ['x', 'y', 'width', 'height']) box.setAttribute(a, cell.getAttribute(a));
    box.setAttribute('class', 'cursor-box');
    box.setAttribute('fill', 'none');
    box.setAttribute('stroke', '#ffb020');
    box.setAttribute('stroke-width', 3);
    box.setAttribute('pointer-events', 'none');
    cell.ownerSVGElement.append(box);
  }
}

async function loadRules() {
  const res = await getJSON(API_BASE + 'rules');
  S.rules = res.ok ? res.body : false;
  renderFormula();
}

wire();
applyExample(EXAMPLES[0]);
loadRules();
run();

// For the browser tests and the curious: the current request and response.
window.attnDemo = { get current() { return S.cur; }, run };
