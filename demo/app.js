// app.js - the demo's controller: reads the controls, builds API requests, hands the weights to the renderers,
// and keeps the whole view (inputs, rule, options, view, head, batch element, scale, pinned token) in the URL.

import { tokenize, tokenCount, embed, DEFAULT_DIM, MAX_TOKENS } from './embed.js';
import { postJSON, getJSON, decodeTensor, toMatrices } from './api.js';
import { heatmap, lineView, legendBar, coloredTokens, rowStats, fmt, markHover, markPin, arrowCell, tabKey, keyboardHeatmap, HEAD_COLOURS, SCALES,
  weightTable } from './render.js';
import { exportSVG, exportPNG, exportJSON } from './export.js';
import { createModelViews } from './models.js';
import { neuronSupport, neuronTerms, neuronFigure, neuronExplain } from './neuron.js';
import { applies, setRules, readModern, modernFields, hardField, windowField, structureOf, describeModern, companionOf,
  weightFormula, writeModernParams, readModernParams, MODERN_CONTROLS } from './options.js';

const RULES = ['dot', 'scaled_dot', 'general', 'additive', 'concat_tanh', 'concat', 'linear'];
const ALL_RULES = [...RULES, 'multihead'];
const VIEWS = ['heatmap', 'lines', 'compare', 'neuron', 'model'];
const FORMAT = 'attention-demo/1';

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
  linear: 'Linear attention (Katharopoulos et al. 2020): φ(q)·φ(k) replaces exp(q·k), so the sums over keys are computed once and the cost grows linearly with the length. Drawn beside softmax attention of the same inputs.',
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
const NARROW = window.matchMedia('(max-width: 860px)');
// What the readout says before a cell is read (written once, in index.html).
const READOUT_HINT = $('readout').textContent;
const COMPARE_HINT = $('compare-readout').textContent;

// What a rule's columns are: concat scores the Lv value positions (in
// sentence mode the source, as values), every other rule the keys.
const colWord = rule => (rule === 'concat' ? 'value' : 'key');
const CONCAT_FOOT = 'rows: target as query and key; columns: source as values';
// "1 query", "12 queries", "1 key", "7 values".
const count = (n, word) => `${n} ${n === 1 ? word : word === 'query' ? 'queries' : word + 's'}`;
// "scaled_dot: 12 queries × 12 keys" for the status line.
const shapeText = c => `${count(c.mats[0].length, 'query')} × ${count(c.mats[0][0]?.length ?? 0, colWord(c.rule))}`;

const S = {
  mode: 'sentences',
  padding: new Set(),   // indices of key tokens marked as padding
  rules: null,          // GET /rules, once loaded
  cur: null,            // {rule, request, response, mats, rows, cols, note, batches, source}
  head: 0,              // selected head in the detail heatmap; -1 = mean over heads
  batch: 0,             // the batch element shown when the weights are batched
  hiddenHeads: new Set(),
  view: 'heatmap',
  scale: 'abs',         // colour scale: abs | row | log
  pin: null,            // {side: 'q'|'k', index}: the pinned token, shared by every view
  seq: 0,
  compareSeq: 0,
  compare: null,        // {rows, cols, results: [{rule, request, response | error}]}: the last comparison
  compareSaved: null,   // a loaded comparison export, shown instead of re-running
  timer: 0,
  drawMs: 0,            // how long the last view took to draw (schedule waits as long)
  restoring: false,     // true while the URL is being applied
  neuronKey: null,      // the key the neuron view explains (null: the query's argmax)
  modelParams: null,    // the URL's parameters, kept until the models' views are ready
};

/* ------------------------------------------------------------- controls */

function readOptions() {
  // Numbers go to the API as typed: a window of 1.5 is refused there, with
  // its message by the field, rather than quietly sent as 1.
  const num = id => {
    const v = $(id).value.trim();
    if (v === '') return null;
    const n = Number(v);
    return Number.isFinite(n) ? n : null;
  };
  return {
    rule: $('rule').value,
    heads: Number($('heads').value),
    proj: $('proj').value,
    causal: $('causal').checked,
    window: num('window'),
    hard: $('hard').value,
    k: num('topk') ?? 1,
    scale: num('scale'),
    seed: num('seed') ?? 0,
    posWeight: num('pos-weight') ?? 0.5,
    m: readModern($),
  };
}

function sentences() {
  const self = $('self').checked;
  const src = tokenize($('source').value);
  const tgt = self ? src : tokenize($('target').value);
  const cut = [['source', tokenCount($('source').value)], ...(self ? [] : [['target', tokenCount($('target').value)]])]
    .filter(([, n]) => n > MAX_TOKENS);
  return { self, src, tgt, cut };
}

// The option fields that apply to a rule; the others are left out because
// the API rejects them (a user can still send them by pasting a request).
// Lq, Lk: the request's lengths (0 when unknown).
function optionFields(rule, o, Lq, Lk, keyMask) {
  const f = {};
  const A = n => applies(n, rule, o.m.att);
  if (rule === 'concat') {
    if (keyMask) f.mask = Array.from({ length: Lq }, () => keyMask.slice());
  } else if (keyMask) f.key_mask = keyMask;
  if (A('causal') && o.causal) f.causal = true;
  const win = windowField(o.window, o.m);
  if (A('window') && win !== null) f.window = win;
  const hard = hardField(o, o.m);
  if (A('hard') && hard !== undefined) f.hard = hard;
  if (A('scale') && o.scale !== null) f.scale = o.scale;
  return Object.assign(f, modernFields(rule, o, o.m, Lq, Lk, o.heads));
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
  // Linear attention has nothing to seed.
  if (rule !== 'linear') body.seed = o.seed;
  Object.assign(body, optionFields(rule, o, Q.length, K.length, keyMask));
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
  // A tensor's rows: the next-to-last dimension, or with qkv_layout "bshd" a
  // 4-D tensor's second, (B, L, H, D); nested arrays or {shape, ...} forms.
  const len = t => {
    const s = [];
    for (let x = t; Array.isArray(x); x = x[0]) s.push(x.length);
    const shape = s.length ? s : (t && Array.isArray(t.shape) ? t.shape : []);
    const r = shape.length;
    return r < 2 ? 0 : r === 4 && user.qkv_layout === 'bshd' ? shape[1] : shape[r - 2];
  };
  // Packed sequences (cu_seqlens_q): the longest one's rows.
  const longest = cu => (Array.isArray(cu) ? Math.max(0, ...cu.slice(1).map((c, i) => c - cu[i])) : null);
  const lq = longest(user.cu_seqlens_q) ?? len(user.query);
  const lk = longest(user.cu_seqlens_k ?? user.cu_seqlens_q) ?? len(user.key ?? user.query);
  const add = { ...(rule !== 'linear' ? { seed: o.seed } : {}), ...optionFields(rule, o, lq, lk, null) };
  if (rule === 'multihead') add.num_heads = o.heads;
  for (const [k, v] of Object.entries(add)) if (!(k in body)) body[k] = v;
  return body;
}

// The API's root: the page's directory, minus a trailing demo/ (the server
// also serves the page as /demo/index.html). Not plain "/", so the page
// still works behind a proxy that mounts the service under a path prefix.
const API_BASE = location.pathname.replace(/(?:demo\/)?[^/]*$/, '');
function apiPath(rule) { return API_BASE + (rule === 'multihead' ? 'multihead' : 'attention/' + rule); }

// The trained models' views (models.js), sharing the colour scale, the URL and the exports.
const MV = createModelViews({ apiBase: API_BASE, postJSON, getJSON, scale: () => S.scale, writeHash: () => writeHash(),
  loadText: text => loadResponse(text) });

/* --------------------------------------------------------------- errors */

const FIELD_TARGET = { window: 'err-window', scale: 'err-scale', seed: 'err-seed', num_heads: 'err-heads',
  hard: 'err-hard', causal: 'err-causal', key_mask: 'err-source', mask: 'err-source', align: 'err-align',
  softcap: 'err-softcap', alibi: 'err-alibi', sinks: 'err-sinks', rope: 'err-rope', sparsity: 'err-sparsity',
  return_layout: 'err-sparsity', feature_map: 'err-modern', attention: 'err-modern' };

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
  if (target.closest('#modern-fold')) $('modern-fold').open = true;
  document.querySelector('.views').classList.add('stale');
  // a network failure is no refusal: the service never answered
  setStatus(err.code === 'network' ? err.message : `The request was refused: ${err.message}`, true);
}

function setStatus(text, bad = false) {
  $('status').textContent = text;
  $('status').classList.toggle('bad', bad);
}

/* ------------------------------------------------------------------ run */

// Redraws wait for a pause in typing at least as long as the last drawing
// took (120 ms to 1 s): at 128 tokens a drawing takes a few hundred ms, and
// one after every key held the typing up.
function schedule() {
  clearTimeout(S.timer);
  S.timer = setTimeout(run, Math.max(120, Math.min(1000, S.drawMs)));
}

// Says, beside the sentence, how many tokens are used and when text was cut.
function renderTokenNotice() {
  const { src, tgt, cut, self } = sentences();
  const box = $('token-notice');
  if (cut.length) {
    box.textContent = cut.map(([which, n]) => `The ${self ? 'sentence' : which} has ${n} tokens; only the first ${MAX_TOKENS} are used (the page’s limit), the rest is cut.`).join(' ');
    box.classList.add('warn');
  } else {
    box.textContent = self ? `${src.length} token${src.length === 1 ? '' : 's'} (up to ${MAX_TOKENS})` :
      `${tgt.length} query and ${src.length} key tokens (up to ${MAX_TOKENS} each)`;
    box.classList.remove('warn');
  }
}

async function run() {
  clearTimeout(S.timer);
  const o = readOptions();
  const rule = o.rule;
  let request, rows, cols, cutNote = '';
  if (S.mode === 'sentences') {
    const sent = sentences();
    if (sent.src.length === 0 || sent.tgt.length === 0) {
      clearErrors();
      $(sent.src.length === 0 ? 'err-source' : 'err-target').textContent = 'Type at least one word.';
      // The picture no longer matches the inputs: dim it, and say so.
      if (S.cur) {
        document.querySelector('.views').classList.add('stale');
        setStatus(`Type at least one word in the ${sent.src.length === 0 ? 'sentence' : 'target sentence'}; the dimmed picture is the previous result.`, true);
      }
      return;
    }
    request = sentenceRequest(rule, o, sent);
    rows = sent.tgt.slice();
    cols = sent.src.map((t, j) => (S.padding.has(j) ? t + ' (pad)' : t));
    if (sent.cut.length) cutNote = `text cut to ${MAX_TOKENS} tokens`;
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
  // Linear attention and sampling are drawn beside a second answer: softmax
  // of the same inputs, the soft weights a draw came from.
  const comp = companionOf(rule, typeof request === 'object' ? request : null);
  const [res, cres] = await Promise.all([postJSON(apiPath(rule), request), comp ? postJSON(apiPath(comp.rule), comp.request) : null]);
  if (seq !== S.seq) return; // a newer request superseded this one
  const trip = performance.now() - t0; // the network's part, before the drawing
  clearErrors();
  if (!res.ok) { showError(res.error); return; }
  try {
    show(rule, request, res.body, rows, cols, S.mode, comp && { ...comp, response: cres.ok ? cres.body : null, error: cres.ok ? null : cres.error });
  } catch (e) {
    showError({ code: 'bad_response', message: e.message, field: '' });
    return;
  }
  const compute = /compute;dur=([\d.]+)/.exec(res.timing || '');
  const c = S.cur;
  S.drawMs = performance.now() - t0 - trip;
  setStatus(`${rule}: ${shapeText(c)}` +
    (c.mats.length > 1 ? `, ${c.mats.length} heads` : '') +
    ` · round trip ${trip.toFixed(0)} ms, drawn in ${S.drawMs.toFixed(0)} ms` +
    (compute ? ` · server compute ${compute[1]} ms` : '') +
    (c.note ? ` · ${c.note}` : '') + (cutNote ? ` · ${cutNote}` : ''), !!cutNote);
  if (S.view === 'compare') runCompare();
}

// Weights -> per-head matrices of one batch element: b when the weights are
// batched and b is in range, else element 0. Multi-head weights have a head
// dimension unless the request averaged them over the heads, and so do a
// rule's when its query has heads, (B, H, Lq, Dq): (B, H, Lq, Lk). Returns
// {mats, note, batch, batches}; batches is 0 when the weights have no batch
// dimension.
function weightMatrices(rule, request, response, b = 0) {
  if (!response || !('weights' in response)) throw new Error('the response has no "weights" (was need_weights false?)');
  const t = decodeTensor(response.weights, 'weights');
  const r = t.shape.length;
  let note = '', batch = 0, batches = 0;
  let mats = toMatrices(t);
  const multi = (rule === 'multihead' && !(request && request.average_weights)) || r === 4;
  if ((!multi && r === 3) || (multi && r === 4)) {
    const per = multi ? t.shape[1] : 1;
    batches = t.shape[0];
    batch = Number.isInteger(b) && b >= 0 && b < batches ? b : 0;
    note = `showing batch element ${batch} of ${batches}`;
    mats = mats.slice(batch * per, (batch + 1) * per);
  } else if (r > (multi ? 4 : 3)) {
    throw new Error(`weights have ${r} dimensions; expected at most ${multi ? 4 : 3}`);
  }
  if (mats.length === 0 || mats[0].length === 0 || mats[0][0].length === 0) throw new Error('the weights are empty');
  return { mats, note, batch, batches };
}

// Which cells the request did not allow and the structure drawn over them (options.js).
function structureFor(rule, req, response, Lq, Lk) {
  return structureOf(rule, req, Lq, Lk, response && response.layout, S.batch);
}

// companion: {role, rule, request, response | null, error} drawn beside (see options.js companionOf).
function show(rule, request, response, rows, cols, source, companion = null) {
  const { mats, note, batch, batches } = weightMatrices(rule, request, response, S.batch);
  S.batch = batch;
  const Lq = mats[0].length, Lk = mats[0][0].length;
  if (!rows || rows.length !== Lq) rows = Array.from({ length: Lq }, (_, i) => 'q' + i);
  if (!cols || cols.length !== Lk) cols = Array.from({ length: Lk }, (_, j) => (rule === 'concat' ? 'v' : 'k') + j);
  const prevHeads = S.cur ? S.cur.mats.length : 0;
  const struct = structureFor(rule, request, response, Lq, Lk);
  S.cur = { rule, request, response, mats, rows, cols, note, batches, source, kind: struct.kind, struct, companion: null };
  if (companion) {
    const cm = companion.response ? weightMatrices(companion.rule, companion.request, companion.response, batch).mats : null;
    S.cur.companion = { ...companion, mats: cm && cm[0].length === Lq && cm[0][0].length === Lk ? cm : null,
      struct: structureFor(companion.rule, companion.request, companion.response, Lq, Lk) };
  }
  // A new head count resets the head choices, except right after a link or
  // an export set them.
  if (mats.length !== prevHeads && !S.restoring && !S.keepHeads) { S.head = 0; S.hiddenHeads.clear(); }
  S.keepHeads = false;
  if (S.head >= mats.length) S.head = 0;
  if (S.pin && (S.pin.side === 'q' ? S.pin.index >= Lq : S.pin.index >= Lk)) S.pin = null;
  $('batch-pick').hidden = !batches;
  $('batch').max = String(Math.max(0, batches - 1));
  $('batch').value = String(batch);
  $('batch-of').textContent = `of ${batches}`;
  render();
}

// Shows another batch element of the response already received: no new
// request. The status line's note follows; an out-of-range b is ignored.
function showBatch(b) {
  const c = S.cur;
  if (!c || !c.batches || !Number.isInteger(b) || b < 0 || b >= c.batches || b === S.batch) return;
  S.batch = b;
  show(c.rule, c.request, c.response, c.rows, c.cols, c.source, c.companion);
  if (S.view === 'compare' && S.compare && !S.compareSaved) renderCompare(S.compare);
  $('status').textContent = $('status').textContent.replace(c.note, S.cur.note);
}

/* --------------------------------------------------------------- render */

function meanMatrix(mats) {
  return mats[0].map((row, i) => row.map((_, j) => mats.reduce((s, m) => s + m[i][j], 0) / mats.length));
}

// The options a request carried, in words, so an exported picture says what it shows.
function describeOptions(req, rule) {
  if (!req || typeof req !== 'object') return '';
  const parts = [];
  if (req.causal) parts.push('causal');
  if (req.window !== undefined) parts.push(`window ${Array.isArray(req.window) ? `[${req.window.map(x => x ?? '∞').join(', ')}]` : req.window}`);
  if (req.key_mask !== undefined || req.mask !== undefined) parts.push('masked keys');
  const sample = req.hard && typeof req.hard === 'object' && req.hard.sample;
  if (req.hard === 'argmax') parts.push('hard argmax');
  else if (req.hard && req.hard.top_k !== undefined) parts.push(`top-${req.hard.top_k}`);
  else if (sample) parts.push(`sampled, T ${sample.temperature ?? 1}, seed ${req.seed ?? 0}`);
  if (req.scale !== undefined) parts.push(`scale ${req.scale}`);
  parts.push(...describeModern(req));
  if (req.params && rule === 'multihead') parts.push('identity projections');
  else if (req.seed && !sample && !['dot', 'scaled_dot'].includes(rule)) parts.push(`seed ${req.seed}`);
  return parts.join(' · ');
}

// The line every exported picture carries: what the numbers are and how they are coloured.
function captionLine(source) {
  const what = source === 'sentences' ? 'hashed vectors, not learned' : source === 'paste' ? 'pasted tensors' : 'saved response';
  return `${SCALES[S.scale].short} · ${what}`;
}

function detailMatrix() {
  const m = S.cur.mats;
  const opts = [S.cur.batches ? `batch element ${S.batch}` : '', describeOptions(S.cur.request, S.cur.rule)].filter(Boolean).join(' · ');
  const sfx = opts ? ` (${opts})` : '';
  if (m.length === 1) return { matrix: m[0], title: `${S.cur.rule}${sfx}` };
  if (S.head === -1) return { matrix: meanMatrix(m), title: `${S.cur.rule}: mean over ${m.length} heads${sfx}` };
  return { matrix: m[S.head], title: `${S.cur.rule}: head ${S.head}${sfx}` };
}

function render() {
  renderFormula();
  if (!S.cur) return;
  renderHeatmapView();
  if (S.view === 'lines') renderLinesView(); // else setView draws it when its tab opens
  if (S.view === 'neuron') renderNeuronView();
  if (S.view === 'compare' && S.compareSaved) renderCompare(S.compareSaved);
  writeHash();
}

// A cell size that fits the matrix in the space the view has (its width, and
// the screen's height below the figure's top), within readable bounds; past
// that the figure scrolls with its labels kept in view.
function cellSize(Lq, Lk, avail, labelW, availH) {
  const fitW = Math.floor((avail - labelW - 16) / Math.max(1, Lk));
  const fitH = Math.floor(availH / Math.max(1, Lq));
  return Math.max(14, Math.min(36, fitW, fitH));
}

function renderHeatmapView() {
  const c = S.cur;
  const { matrix, title } = detailMatrix();
  const comp = c.companion;
  $('scale-legend').replaceChildren(legendBar(S.scale, [...new Set([...c.struct.keys, ...(comp ? comp.struct.keys : []),
    ...(comp && comp.role === 'soft' ? ['drawn'] : [])])]));
  const grid = $('heads-grid');
  grid.replaceChildren();
  grid.hidden = c.mats.length < 2;
  if (c.mats.length > 1) {
    const addThumb = (idx, m, label) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'head-thumb';
      b.dataset.head = idx;
      b.setAttribute('aria-pressed', String(S.head === idx));
      b.setAttribute('aria-label', `Show ${label} in detail`);
      if (idx >= 0) b.style.borderTopColor = HEAD_COLOURS[idx % HEAD_COLOURS.length];
      const cell = Math.max(2, Math.min(10, Math.floor(96 / Math.max(m.length, m[0].length))));
      const svg = heatmap(m, { labels: false, legend: false, cell, scale: S.scale, kind: c.kind, caption: label, structure: c.struct.overlay });
      markPin(svg, S.pin);
      b.append(svg);
      b.addEventListener('click', () => { S.head = idx; renderHeatmapView(); writeHash(); });
      grid.append(b);
    };
    c.mats.forEach((m, h) => addThumb(h, m, `head ${h}`));
    addThumb(-1, meanMatrix(c.mats), 'mean of heads');
  }
  const fig = $('heatmap');
  // Two panels side by side share the width (on a phone they stack).
  const two = !!comp && !NARROW.matches;
  fig.parentElement.classList.toggle('two', !!comp);
  $('companion').hidden = !comp;
  const avail = two ? Math.floor((fig.parentElement.clientWidth || 1000) / 2) - 8 : fig.clientWidth || 500;
  const labelW = Math.min(140, 12 + 8 * Math.max(...c.rows.map(r => String(r).length)));
  const availH = Math.max(200, window.innerHeight - (fig.getBoundingClientRect().top + window.scrollY) - 120);
  const cell = cellSize(matrix.length, matrix[0].length, avail, labelW, availH);
  const role = comp ? (comp.role === 'soft' ? 'sample' : 'linear') : '';
  const caption = captionLine(c.source) + (role ? ' · ' + weightFormula(role, c.request) : '');
  const svg = heatmap(matrix, { rows: c.rows, cols: c.cols, title, caption, wrap: avail - 8, scale: S.scale,
    kind: c.kind, cell, legend: false, structure: c.struct.overlay, colWord: colWord(c.rule),
    foot: c.rule === 'concat' && c.source === 'sentences' ? CONCAT_FOOT : undefined });
  readable(svg, { rule: c.rule, rows: c.rows, cols: c.cols, matrix, kind: c.kind, readout: 'readout' });
  fig.replaceChildren(svg);
  fig.scrollTop = 0; fig.scrollLeft = 0;
  markPin(svg, S.pin);
  renderCompanion(cell, avail);
  $('readout').textContent = READOUT_HINT;
  $('heat-hint').textContent = 'Each row is a query (the word doing the looking); ' +
    (c.rule === 'concat' ? 'each column a value position (concat scores the values: the source words). ' : 'each column a key (a word looked at). ') +
    'A row’s weights add up to 1; hatched grey cells were not allowed (padding or masked), white ones were computed as ~0.';
  renderStats(matrix);
  renderTokenText();
}

// The panel beside the main heatmap: softmax weights of the same inputs
// (linear attention), or the soft weights a sampled draw came from, with the
// seed, each row's draw and a button that draws again with the next seed.
function renderCompanion(cell, avail) {
  const c = S.cur, comp = c.companion, box = $('companion');
  if (!comp) { box.replaceChildren(); return; }
  const parts = [];
  if (!comp.mats) {
    parts.push(Object.assign(document.createElement('p'), { className: 'field-error',
      textContent: `${comp.role === 'soft' ? 'The soft weights' : 'Softmax of the same inputs'}: ${comp.error ? comp.error.message : 'the answer does not fit the main panel'}` }));
  } else {
    const h = S.head, m = comp.mats.length === 1 ? comp.mats[0] : h === -1 ? meanMatrix(comp.mats) : comp.mats[Math.min(h, comp.mats.length - 1)];
    const opts = describeOptions(comp.request, comp.rule);
    const headTxt = comp.mats.length > 1 ? (h === -1 ? ': mean over heads' : `: head ${h}`) : '';
    const title = comp.role === 'soft' ? `soft weights before the draw${headTxt}` : `softmax (${comp.rule})${headTxt}${opts ? ` (${opts})` : ''}`;
    // A draw's keys are ringed on the weights they were drawn from.
    const marks = comp.role === 'soft' ? detailMatrix().matrix.map((r, i) => [i, r.indexOf(1)]).filter(x => x[1] >= 0) : [];
    const svg = heatmap(m, { rows: c.rows, cols: c.cols, title, caption: weightFormula(comp.role, comp.request), wrap: avail - 8,
      scale: S.scale, kind: comp.struct.kind, structure: { ...(comp.struct.overlay || {}), marks }, cell, legend: false });
    svg.classList.add('companion-map');
    svg.dataset.role = comp.role;
    markPin(svg, S.pin);
    const fig = document.createElement('div');
    fig.className = 'figure heat-figure';
    fig.append(svg);
    parts.push(fig);
  }
  if (comp.role === 'soft') {
    const p = document.createElement('p');
    p.className = 'draws';
    const req = c.request, seed = req.seed ?? 0;
    const main = detailMatrix().matrix;
    const drawn = main.map(r => r.indexOf(1));
    p.dataset.seed = String(seed);
    p.dataset.draws = drawn.join(',');
    p.textContent = `Seed ${seed}, temperature ${req.hard.sample.temperature ?? 1}: ` +
      drawn.map((j, i) => `“${c.rows[i]}” → ${j < 0 ? '(none)' : `“${c.cols[j]}”`}`).join(', ') + '. ';
    const b = Object.assign(document.createElement('button'), { type: 'button', id: 'redraw-view', textContent: 'Re-draw (seed + 1)' });
    b.addEventListener('click', redraw);
    p.append(b);
    parts.push(p);
  }
  box.replaceChildren(...parts);
}

// A new draw: the next seed (the URL keeps it, so a link gives the same draw).
function redraw() {
  $('seed').value = String((Number($('seed').value) || 0) + 1);
  syncControls();
  schedule();
}

// Keeps the label bands of a large, scrolled heatmap in view (sticky labels).
function stickLabels() {
  const fig = $('heatmap');
  const svg = fig.querySelector('svg');
  if (!svg) return;
  const sx = fig.scrollLeft, sy = fig.scrollTop;
  const set = (sel, tr) => { const g = svg.querySelector(sel); if (g) { if (tr) g.setAttribute('transform', tr); else g.removeAttribute('transform'); } };
  set('.row-band', sx ? `translate(${sx} 0)` : '');
  set('.col-band', sy ? `translate(0 ${sy})` : '');
  set('.corner', sx || sy ? `translate(${sx} ${sy})` : '');
  set('.axes', sx || sy ? `translate(${sx} ${sy})` : '');
  const corner = svg.querySelector('.corner');
  if (corner) corner.setAttribute('visibility', sx || sy ? 'visible' : 'hidden');
}

function renderStats(matrix) {
  const c = S.cur;
  const stats = rowStats(matrix);
  const Lk = matrix[0].length;
  const table = document.createElement('table');
  table.className = 'stats';
  table.innerHTML = `<caption>Per query: where it looks most, and how spread out its attention is
    (entropy in bits: 0 = all on one ${colWord(c.rule)}, ${fmt(Math.log2(Lk))} = spread evenly over all ${Lk}).</caption>
    <thead><tr><th scope="col">#</th><th scope="col">query</th><th scope="col">argmax ${colWord(c.rule)}</th>
    <th scope="col">weight</th><th scope="col">entropy (bits)</th><th scope="col"><span class="sr-only">note</span></th></tr></thead>`;
  const tb = document.createElement('tbody');
  stats.forEach((s, i) => {
    const tr = document.createElement('tr');
    if (s.masked) tr.className = 'masked';
    const cells = [String(i), c.rows[i], s.masked ? '—' : c.cols[s.argmax], s.masked ? '—' : fmt(s.max),
      s.masked ? '—' : fmt(s.entropy), s.masked ? 'fully masked' : ''];
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

// Attention on the text: the sentence coloured by the attention from the
// pinned query (or, for a pinned key, how much each query takes from it).
function renderTokenText() {
  const c = S.cur;
  const box = $('token-text');
  if (!c) { box.replaceChildren(); return; }
  const { matrix } = detailMatrix();
  const self = c.rows.length === c.cols.length && c.rows.every((r, i) => r === c.cols[i].replace(/ \(pad\)$/, ''));
  const head = document.createElement('p');
  head.className = 'ctok-head';
  const parts = [head];
  const pin = S.pin;
  const col = colWord(c.rule), cols = col + 's';
  const line = (label, toks, weights, side, marked) => {
    const wrap = document.createElement('div');
    wrap.className = 'ctok-line';
    const l = document.createElement('span');
    l.className = 'ctok-label';
    l.textContent = label;
    wrap.append(l, coloredTokens(toks, weights, { scale: S.scale, side, marked }));
    parts.push(wrap);
  };
  if (!pin) {
    head.textContent = 'Click a word (here, on a heatmap row or in the lines) to pin it: the text is then coloured by its attention.';
    if (self) line('', c.rows, null, 'q', -1);
    else { line('queries', c.rows, null, 'q', -1); line(cols, c.cols, null, 'k', -1); }
  } else if (pin.side === 'q') {
    const w = matrix[pin.index];
    head.innerHTML = '';
    head.append(`Attention from query “${c.rows[pin.index]}” (row ${pin.index}) to each ${col}, ${SCALES[S.scale].short}; click it again to release.`);
    if (self) line('', c.cols, w, 'q', pin.index);
    else { line('queries', c.rows, null, 'q', pin.index); line(cols, c.cols, w, 'k', -1); }
  } else {
    const w = matrix.map(r => r[pin.index]);
    head.textContent = `How much each query takes from ${col} “${c.cols[pin.index]}” (column ${pin.index}), ${SCALES[S.scale].short}; click it again to release.`;
    if (self) line('', c.rows, w, 'k', pin.index);
    else { line('queries', c.rows, w, 'q', -1); line(cols, c.cols, null, 'k', pin.index); }
  }
  box.replaceChildren(...parts);
}

function setPin(side, index) {
  if (S.pin && S.pin.side === side && S.pin.index === index) S.pin = null;
  else S.pin = { side, index };
  applyPin();
  writeHash();
}

// Shows the pin in every view at once (no re-render of the heatmaps).
function applyPin() {
  for (const svg of document.querySelectorAll('#heatmap svg.heatmap, #companion svg.heatmap, #heads-grid svg.heatmap, #compare-grid svg.heatmap')) markPin(svg, S.pin);
  const lv = $('lines').querySelector('svg.lineview');
  if (lv && lv._setPin) lv._setPin(S.pin);
  renderTokenText();
  if (S.view === 'neuron') renderNeuronView();
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
        writeHash();
      });
      tog.append(b);
    });
  }
  const heads = c.mats.map((matrix, index) => ({ index, matrix })).filter(h => !S.hiddenHeads.has(h.index));
  const dual = colWord(c.rule) + 's';
  // The key under the lines: the rule and its options, and which colour is which head.
  const opts = describeOptions(c.request, c.rule);
  const key = { title: `${c.rule}${c.mats.length > 1 ? `, ${count(c.mats.length, 'head')}` : ''}${opts ? ` (${opts})` : ''}`,
    heads: c.mats.length > 1 ? c.mats.map((_, index) => ({ index, shown: !S.hiddenHeads.has(index) })) : [] };
  $('line-readout').replaceChildren();
  $('lines').replaceChildren(heads.length
    ? lineView(heads, { rows: c.rows, cols: c.cols, rowTitle: 'queries', colTitle: dual, pin: S.pin, fit: $('lines').clientWidth, key,
      onPin: setPin, onFocus: (side, idx) => lineReadout(heads, side, idx) })
    : Object.assign(document.createElement('p'), { className: 'hint', textContent: 'All heads are hidden: press a head above to show it.' }));
}

// The numbers behind the lines of the focused token, one column per head shown.
function lineReadout(heads, side, idx) {
  const box = $('line-readout');
  const c = S.cur;
  if (side === null || !c) { box.innerHTML = '<p class="hint">Hover a token for its weights; click to pin it.</p>'; return; }
  box.innerHTML = weightTable(heads, side, idx, c.rows, c.cols, { scale: S.scale, many: heads.length > 1 || c.mats.length > 1, colWord: colWord(c.rule) });
}

function esc(s) {
  return String(s).replace(/[&<>"]/g, ch => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[ch]));
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

/* --------------------------------------------------------------- neuron */

// The neuron view: for the pinned query (else query 0) and the chosen head,
// every number behind its scores. The general rule's W and b come from the
// service (return_params), fetched once per request.
async function renderNeuronView() {
  const c = S.cur;
  const fig = $('neuron'), note = $('neuron-note'), out = $('neuron-readout');
  if (!c) return;
  const sup = neuronSupport(c.rule, c.request);
  const numbered = words => words.map((w, k) => `${k}: ${w}`);
  setOptions($('neuron-query'), numbered(c.rows));
  setOptions($('neuron-key'), numbered(c.cols));
  const i = S.pin && S.pin.side === 'q' && S.pin.index < c.rows.length ? S.pin.index : 0;
  $('neuron-query').value = String(i);
  const H = sup.ok ? sup.heads : 1;
  $('neuron-head-row').hidden = H < 2;
  setOptions($('neuron-head'), Array.from({ length: H }, (_, k) => `head ${k}`));
  const head = S.head >= 0 && S.head < H ? S.head : 0;
  $('neuron-head').value = String(head);
  // Nothing to read out: no empty box either.
  out.hidden = !sup.ok;
  if (!sup.ok) { fig.replaceChildren(); out.textContent = ''; note.textContent = 'Not available: ' + sup.why; return; }
  let params = null;
  if (c.rule === 'general') {
    if (!c.params) {
      const res = await postJSON(apiPath('general'), { ...c.request, return_params: true });
      if (S.cur !== c) return;
      if (!res.ok || !res.body.params) { note.textContent = 'The service did not return the general rule’s W: ' + (res.error ? res.error.message : 'no params'); return; }
      c.params = res.body.params;
    }
    params = c.params;
  }
  const T = neuronTerms(c.rule, c.request, i, head, params);
  const api = c.mats[c.rule === 'multihead' ? head : 0][i];
  const opts = { rows: c.rows, cols: c.cols, i, api, rule: c.rule };
  note.textContent = (c.request.hard ? 'This request asks for hard attention: the API column holds the hard weights, the softmax column the scores’ softmax before it. ' : '') +
    (c.source === 'sentences' ? 'The vectors are hashed from letters and position (not learned): the view shows how a score is made, not what words mean.' : '');
  const svg = neuronFigure(T, { ...opts, width: fig.clientWidth || 800,
    title: `${c.rule}${c.rule === 'multihead' ? ', head ' + head : ''}: query “${c.rows[i]}” (row ${i}) against every key` });
  fig.replaceChildren(svg);
  let best = 0;
  T.weights.forEach((w, j) => { if (w > T.weights[best]) best = j; });
  const sel = S.neuronKey !== null && S.neuronKey < T.Lk ? S.neuronKey : best;
  $('neuron-key').value = String(sel);
  const show = j => {
    for (const g of svg.querySelectorAll('.nkey')) g.querySelector('.nrow-bg').setAttribute('fill', Number(g.dataset.key) === j ? '#fff1b8' : Number(g.dataset.key) === sel ? '#ffe8cc' : '#ffffff');
    out.innerHTML = neuronExplain(T, j, opts);
    out.dataset.key = String(j);
  };
  show(sel);
  svg.addEventListener('mouseover', e => { const g = e.target.closest('.nkey'); if (g) show(Number(g.dataset.key)); });
  svg.addEventListener('mouseleave', () => show(sel));
  svg.addEventListener('click', e => {
    const g = e.target.closest('.nkey');
    if (g) keepNeuronKey(Number(g.dataset.key));
  });
}

// The key the neuron view explains, chosen by a click on its row or in the Key token menu.
function keepNeuronKey(j) {
  S.neuronKey = j;
  renderNeuronView();
  writeHash();
}

// Gives a menu one option per label (values 0, 1, …), leaving it alone when it already has them.
function setOptions(select, labels) {
  if (select.options.length === labels.length && labels.every((l, k) => select.options[k].textContent === l)) return;
  select.replaceChildren(...labels.map((l, k) => new Option(l, String(k))));
}

/* -------------------------------------------------------------- compare */

async function runCompare() {
  const seq = ++S.compareSeq;
  const grid = $('compare-grid');
  const o = readOptions();
  if (S.mode === 'load') {
    if (S.compareSaved) { renderCompare(S.compareSaved); return; }
    grid.replaceChildren(Object.assign(document.createElement('p'), { className: 'hint', textContent: 'A loaded response has no inputs to re-run: switch to Sentences or Paste tensors to compare rules (or load a comparison export).' }));
    return;
  }
  let build, rows, cols;
  if (S.mode === 'sentences') {
    const sent = sentences();
    if (!sent.src.length || !sent.tgt.length) return;
    build = rule => sentenceRequest(rule, o, sent);
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
    const request = build(rule);
    if (rule === 'multihead') request.average_weights = true;
    const res = await postJSON(apiPath(rule), request);
    return res.ok ? { rule, request, response: res.body } : { rule, request, error: res.error };
  }));
  if (seq !== S.compareSeq) return;
  renderCompare({ rows, cols, source: S.mode, results });
}

// Fields of a compared request that are not options a user sets for every
// rule: inputs, the page's own, and one rule's own settings (linear's
// feature map, multi-head's attention kind).
const NOT_OPTIONS = new Set(['query', 'key', 'value', 'seed', 'num_heads', 'params', 'average_weights', 'mask', 'key_mask',
  'feature_map', 'attention', 'return_layout']);

// For each compared rule, the options some other rule's request carries and
// its own does not (the rule does not take them): said under its panel, so
// a rule drawn without the causal mask is not read as one drawn with it.
function droppedOptions(results) {
  const keys = r => Object.keys(r.request || {}).filter(k => !NOT_OPTIONS.has(k));
  const all = new Set(results.flatMap(keys));
  return results.map(r => { const own = new Set(keys(r)); return [...all].filter(k => !own.has(k)); });
}

function renderCompare(cmp) {
  S.compare = cmp;
  const grid = $('compare-grid');
  const dropped = droppedOptions(cmp.results);
  const dims = cmp.results.filter(r => r.response).map(r => {
    try { return decodeTensor(r.response.weights).shape.slice(-2); } catch { return [1, 1]; }
  });
  const n = Math.max(1, ...dims.map(d => Math.max(...d)));
  // Past ~48 tokens the panels are overviews: no labels, one pixel block per weight.
  const labels = n <= 48;
  const cell = labels ? Math.max(8, Math.min(24, Math.floor(190 / n))) : Math.max(2, Math.floor(256 / n));
  const legend = document.createElement('div');
  legend.className = 'compare-legend';
  // One colour scale for every panel (and the same as the heatmap's), so a
  // flat rule looks flat next to a peaked one.
  legend.append(legendBar(S.scale));
  $('compare-readout').textContent = COMPARE_HINT;
  grid.replaceChildren(legend, ...cmp.results.map(({ rule, request, response, error }) => {
    const fig = document.createElement('figure');
    fig.className = 'compare-item';
    fig.dataset.rule = rule;
    if (!response) {
      const cap = document.createElement('figcaption');
      cap.textContent = rule;
      const err = document.createElement('p');
      err.className = 'field-error';
      err.textContent = error ? error.message : 'no response';
      fig.append(cap, err);
      return fig;
    }
    try {
      const { mats } = weightMatrices(rule, request, response, S.batch);
      const m = mats[0];
      const title = rule === 'multihead' ? `multihead (mean of ${request && request.num_heads || mats.length} heads)` : rule;
      const foot = rule === 'concat' && cmp.source === 'sentences' ? CONCAT_FOOT : undefined;
      const rows = cmp.rows && cmp.rows.length === m.length ? cmp.rows : m.map((_, i) => 'q' + i);
      const cols = cmp.cols && cmp.cols.length === m[0].length ? cmp.cols : m[0].map((_, j) => (rule === 'concat' ? 'v' : 'k') + j);
      const st = structureFor(rule, request, response, m.length, m[0].length);
      const svg = heatmap(m, { rows, cols, title, cell, scale: S.scale, legend: false, foot, fontSize: 11, labels, colWord: colWord(rule),
        kind: st.kind, structure: st.overlay });
      // Tab reaches each panel; its arrow keys walk its cells, read out with the rule first.
      readable(svg, { rule, rows, cols, matrix: m, kind: st.kind, readout: 'compare-readout', name: title });
      markPin(svg, S.pin);
      fig.append(svg);
    } catch (e) {
      fig.append(Object.assign(document.createElement('p'), { className: 'field-error', textContent: `${rule}: ${e.message}` }));
    }
    return fig;
  }));
  grid.querySelectorAll('.compare-item').forEach((fig, r) => {
    if (!dropped[r].length) return;
    fig.append(Object.assign(document.createElement('p'), { className: 'hint compare-dropped',
      textContent: `Drawn without ${dropped[r].join(', ')}: ${fig.dataset.rule} does not take ${dropped[r].length === 1 ? 'it' : 'them'}.` }));
  });
}

/* ------------------------------------------------------------ load mode */

function loadResponse(text) {
  clearErrors();
  let obj;
  try { obj = JSON.parse(text); } catch (e) { $('err-load').textContent = 'Not valid JSON: ' + e.message; return; }
  if (obj && obj.error && obj.error.message) { $('err-load').textContent = 'This is an error response: ' + obj.error.message; return; }
  try {
    if (obj && typeof obj.format === 'string' && obj.format.startsWith('attention-demo/') && obj.kind === 'models') {
      if (!MV.ready) throw new Error('this export holds trained-model views, but the service lists no models');
      if (obj.view && SCALES[obj.view.scale]) { S.scale = obj.view.scale; $('colour-scale').value = S.scale; }
      MV.load(obj);
      setView('model');
      return;
    }
    if (obj && typeof obj.format === 'string' && obj.format.startsWith('attention-demo/')) {
      loadExport(obj);
      return;
    }
    if (!obj || typeof obj !== 'object' || !('weights' in obj)) {
      throw new Error('Expected an API response with a "weights" field ({"rule": ..., "output": ..., "weights": ...}) or a JSON export of this page.');
    }
    const rule = typeof obj.rule === 'string' ? obj.rule : 'multihead';
    S.compareSaved = null;
    show(rule, null, obj, null, null, 'response');
    setStatus(`Loaded a saved ${rule} response: ${shapeText(S.cur)}` +
      ' · a bare response has no tokens, so rows and columns are numbered' + (S.cur.note ? ` · ${S.cur.note}` : ''));
  } catch (e) {
    $('err-load').textContent = e.message;
  }
}

// A JSON export of this page: the request, the tokens, the response(s) and the view.
function loadExport(obj) {
  const v = obj.view || {};
  S.restoring = true;
  try {
    if (SCALES[v.scale]) { S.scale = v.scale; $('colour-scale').value = v.scale; }
    S.pin = v.pin && (v.pin.side === 'q' || v.pin.side === 'k') && Number.isInteger(v.pin.index) ? { side: v.pin.side, index: v.pin.index } : null;
    S.head = Number.isInteger(v.head) ? v.head : 0;
    S.batch = Number.isInteger(v.batch) ? v.batch : 0;
    S.hiddenHeads = new Set(Array.isArray(v.hiddenHeads) ? v.hiddenHeads : []);
    if (obj.kind === 'compare') {
      if (!Array.isArray(obj.results)) throw new Error('a comparison export needs "results"');
      S.compareSaved = { rows: obj.rows, cols: obj.cols, source: obj.source, results: obj.results };
      const first = obj.results.find(r => r.rule === (obj.rule || 'scaled_dot') && r.response) || obj.results.find(r => r.response);
      if (!first) throw new Error('the comparison holds no response');
      show(first.rule, first.request, first.response, obj.rows, obj.cols, obj.source);
      setView('compare');
    } else {
      if (!obj.response) throw new Error('the export has no "response"');
      S.compareSaved = null;
      const cp = obj.companion && typeof obj.companion === 'object' && typeof obj.companion.rule === 'string' ? obj.companion : null;
      show(obj.rule || 'multihead', obj.request || null, obj.response, obj.rows, obj.cols, obj.source, cp);
      S.neuronKey = Number.isInteger(v.neuronKey) ? v.neuronKey : null;
      if (['heatmap', 'lines', 'neuron'].includes(v.view)) setView(v.view);
    }
  } finally {
    S.restoring = false;
  }
  render();
  setStatus(`Loaded a saved ${obj.kind === 'compare' ? 'comparison of ' + obj.results.length + ' rules' : S.cur.rule + ' view'}: ` +
    `${shapeText(S.cur)}, with its words` + (obj.saved ? ` (saved ${obj.saved})` : ''));
}

/* ------------------------------------------------------------ URL state */

// The whole view in the URL's fragment, so a link reopens the same picture:
// the sentences (or a pasted request up to 4000 characters; larger ones are
// shared as a JSON export), the rule and options, and the view state.
const MAX_PASTE_IN_URL = 4000;
function stateParams() {
  const p = new URLSearchParams();
  const o = readOptions();
  // The sentences ride along in paste mode, so going back to them finds them as they were.
  if (S.mode === 'paste' && $('paste').value.length <= MAX_PASTE_IN_URL) {
    p.set('m', 'paste');
    p.set('paste', $('paste').value);
  }
  if (S.mode === 'sentences' || p.has('paste')) {
    p.set('s', $('source').value);
    if (!$('self').checked) p.set('t', $('target').value);
  }
  if (p.has('s')) {
    p.set('r', o.rule);
    if (o.rule === 'multihead') { p.set('h', String(o.heads)); if (o.proj !== 'identity') p.set('proj', o.proj); }
    if (o.causal) p.set('causal', '1');
    if (o.window !== null) p.set('win', String(o.window));
    if (o.hard) p.set('hard', o.hard);
    if (o.hard === 'top_k') p.set('k', String(o.k));
    if (o.scale !== null) p.set('scale', String(o.scale));
    if (o.seed) p.set('seed', String(o.seed));
    if (o.posWeight !== 0.5) p.set('pw', String(o.posWeight));
    writeModernParams(p, $);
    if (S.padding.size && S.mode === 'sentences') p.set('pad', [...S.padding].sort((a, b) => a - b).join(','));
  }
  if (S.view !== 'heatmap') p.set('v', S.view);
  if (S.head !== 0) p.set('head', String(S.head));
  if (S.batch !== 0) p.set('b', String(S.batch));
  if (S.hiddenHeads.size) p.set('hide', [...S.hiddenHeads].sort((a, b) => a - b).join(','));
  if (S.scale !== 'abs') p.set('cs', S.scale);
  if (S.pin) p.set('pin', S.pin.side + S.pin.index);
  if (S.view === 'neuron' && S.neuronKey !== null) p.set('nk', String(S.neuronKey));
  if (S.view === 'model' && MV.ready) MV.params(p);
  return p;
}

// A new question (other words, rule, options or view) is a new history
// entry, so Back returns to the one before; edits within a second of the
// last entry (typing) and view details (head, pin, colours) change it in place.
const DETAIL_PARAMS = ['head', 'b', 'hide', 'cs', 'pin', 'nk', 'ma', 'ml', 'mh', 'mhide', 'mpin'];
function question(p) {
  const q = new URLSearchParams(p);
  for (const k of DETAIL_PARAMS) q.delete(k);
  return q.toString();
}
let lastPush = 0;
function writeHash() {
  if (S.restoring) return;
  const p = stateParams();
  const h = '#' + p.toString();
  if (location.hash === h) return;
  const was = question(new URLSearchParams(location.hash.slice(1)));
  if (was !== '' && was !== question(p) && Date.now() - lastPush > 1000) {
    history.pushState(null, '', h);
    lastPush = Date.now();
  } else {
    history.replaceState(null, '', h);
  }
}

// Sets the controls from the fragment; returns false when there is none.
function readHash() {
  const raw = location.hash.slice(1);
  if (!raw) return false;
  const p = new URLSearchParams(raw);
  S.restoring = true;
  try {
    if (p.has('s') || p.has('paste')) {
      S.mode = p.has('paste') && (p.get('m') === 'paste' || !p.has('s')) ? 'paste' : 'sentences';
      document.querySelector(`input[name="mode"][value="${S.mode}"]`).checked = true;
      if (p.has('s')) {
        $('source').value = p.get('s');
        $('self').checked = !p.has('t');
        $('target').value = p.get('t') || '';
      }
      if (p.has('paste')) $('paste').value = p.get('paste');
      if (ALL_RULES.includes(p.get('r'))) $('rule').value = p.get('r');
      if (p.has('h') && [...$('heads').options].some(x => x.value === p.get('h'))) $('heads').value = p.get('h');
      $('proj').value = p.get('proj') === 'seeded' ? 'seeded' : 'identity';
      $('causal').checked = p.get('causal') === '1';
      $('window').value = p.get('win') || '';
      $('hard').value = ['argmax', 'top_k', 'sample'].includes(p.get('hard')) ? p.get('hard') : '';
      $('topk').value = p.get('k') || '2';
      $('scale').value = p.get('scale') || '';
      $('seed').value = p.get('seed') || '0';
      $('pos-weight').value = p.get('pw') || '0.5';
      // A link that sets a new option opens their fold, so the reader sees why the picture looks as it does.
      if (readModernParams(p, $)) $('modern-fold').open = true;
      S.padding = new Set((p.get('pad') || '').split(',').filter(x => /^\d+$/.test(x)).map(Number));
    }
    const v = p.get('v');
    S.view = VIEWS.includes(v) ? v : 'heatmap';
    S.neuronKey = /^\d+$/.test(p.get('nk') || '') ? Number(p.get('nk')) : null;
    S.modelParams = p;
    S.wantModel = v === 'model';
    if (MV.ready) MV.restore(p);
    S.head = /^-?\d+$/.test(p.get('head') || '') ? Number(p.get('head')) : 0;
    S.batch = /^\d+$/.test(p.get('b') || '') ? Number(p.get('b')) : 0;
    S.hiddenHeads = new Set((p.get('hide') || '').split(',').filter(x => /^\d+$/.test(x)).map(Number));
    S.scale = SCALES[p.get('cs')] ? p.get('cs') : 'abs';
    $('colour-scale').value = S.scale;
    S.keepHeads = true;
    const pin = /^([qk])(\d+)$/.exec(p.get('pin') || '');
    S.pin = pin ? { side: pin[1], index: Number(pin[2]) } : null;
  } finally {
    S.restoring = false;
  }
  return true;
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
  renderTokenNotice();
}

function syncControls() {
  const o = readOptions();
  const self = $('self').checked;
  $('target-wrap').hidden = self;
  $('source-label').textContent = self ? 'Sentence' : 'Source sentence (keys and values)';
  $('mh-opts').hidden = o.rule !== 'multihead';
  $('topk-row').hidden = o.hard !== 'top_k';
  $('sample-row').hidden = o.hard !== 'sample';
  $('rope-opts').hidden = !o.m.rope;
  $('sp-opts').hidden = !o.m.sparsity;
  const spKey = { local_global: 'sp-lg', bigbird: 'sp-bb', blocks: 'sp-bl' }[o.m.sparsity];
  for (const e of $('sp-opts').querySelectorAll('.sp-lg, .sp-bb, .sp-bl')) e.hidden = !spKey || !e.classList.contains(spKey);
  // A control whose option the rule does not take is disabled and dimmed (the page would not send it).
  const dis = (id, off) => { $(id).disabled = off; $(id).closest('label, .row').classList.toggle('off', off); };
  const A = n => applies(n, o.rule, o.m.att);
  dis('scale', !A('scale'));
  for (const [id, opt] of [['causal', 'causal'], ['window', 'window'], ['win-left', 'window'], ['win-right', 'window'],
    ['hard', 'hard'], ['topk', 'hard'], ['temperature', 'hard'], ['align', 'align'], ['softcap', 'softcap'],
    ['alibi', 'alibi'], ['alibi-slopes', 'alibi'], ['sinks', 'sinks'], ['rope', 'rope'], ['rope-base', 'rope'],
    ['rope-style', 'rope'], ['rope-dims', 'rope'], ['rope-offset', 'rope'], ['sparsity', 'sparsity'], ['feature-map', 'feature_map']]) {
    dis(id, !A(opt));
  }
  $('redraw').disabled = !A('hard');
  // The symmetric w gives way to a [left, right] pair.
  if (o.m.winL !== null || o.m.winR !== null) dis('window', true);
  for (const m of ['sentences', 'paste', 'load']) $('input-' + m).hidden = S.mode !== m;
  syncExampleMenu();
  renderFormula();
}

// The Example menu names the example only while the inputs still are it.
function syncExampleMenu() {
  const sel = $('example');
  const self = $('self').checked, rule = $('rule').value;
  const idx = EXAMPLES.findIndex(ex => ex.self === self && ex.source === $('source').value &&
    (self || (ex.target || '') === $('target').value) && (ex.rule || 'scaled_dot') === rule &&
    (rule !== 'multihead' || String(ex.heads || 2) === $('heads').value) && !!ex.causal === $('causal').checked);
  sel.value = idx >= 0 ? String(idx) : 'custom';
}

function setView(v) {
  if (v === 'model' && !MV.ready) v = 'heatmap';
  S.view = v;
  // The trained models have their own input: the tensors demo's controls step aside.
  document.querySelector('.layout').classList.toggle('model-mode', v === 'model');
  for (const name of VIEWS) {
    const tab = $('tab-' + name);
    tab.setAttribute('aria-selected', String(name === v));
    tab.tabIndex = name === v ? 0 : -1;
    $('view-' + name).hidden = name !== v;
  }
  if (v === 'compare') runCompare();
  if (v === 'heatmap' && S.cur) renderHeatmapView();
  if (v === 'lines' && S.cur) renderLinesView(); // drawn when shown, so it measures its box
  if (v === 'neuron') renderNeuronView();
  if (v === 'model') MV.show();
  writeHash();
}

function applyExample(ex) {
  $('self').checked = ex.self;
  $('source').value = ex.source;
  $('target').value = ex.target || '';
  $('rule').value = ex.rule || 'scaled_dot';
  if (ex.heads) $('heads').value = String(ex.heads);
  $('causal').checked = !!ex.causal;
  S.padding.clear();
  S.pin = null;
  syncControls();
  renderTokenChips();
}

function currentViewContainer() {
  return S.view === 'heatmap' ? $('view-heatmap') : S.view === 'lines' ? $('lines') : S.view === 'neuron' ? $('neuron') : $('compare-grid');
}

function viewState() {
  return { view: S.view, head: S.head, batch: S.batch, hiddenHeads: [...S.hiddenHeads], scale: S.scale, pin: S.pin, neuronKey: S.neuronKey };
}

// The JSON export: everything needed to redraw the picture with its words.
function exportObject() {
  if (!S.cur) throw new Error('no response yet');
  if (S.view === 'model') return MV.exportObject({ format: FORMAT, saved: new Date().toISOString(), view: viewState() });
  const base = { format: FORMAT, saved: new Date().toISOString(), source: S.cur.source, rule: S.cur.rule, view: viewState() };
  if (S.view === 'compare') {
    if (!S.compare) throw new Error('the comparison is not ready yet');
    return { ...base, kind: 'compare', rows: S.compare.rows || null, cols: S.compare.cols || null, source: S.compare.source,
      results: S.compare.results };
  }
  const cp = S.cur.companion;
  return { ...base, kind: 'view', rows: S.cur.rows, cols: S.cur.cols, request: S.cur.request, response: S.cur.response,
    ...(cp ? { companion: { role: cp.role, rule: cp.rule, request: cp.request, response: cp.response, error: cp.error } } : {}) };
}

function exportCaption() {
  if (!S.cur) return '';
  const src = S.view === 'compare' && S.compare ? S.compare.source : S.cur.source;
  return `Attention demo · ${S.view === 'compare' ? 'all rules' : S.cur.rule} · ${captionLine(src)}`;
}

async function doExport(kind) {
  $('err-general').textContent = '';
  const msg = $('export-msg');
  msg.textContent = '';
  msg.classList.remove('bad');
  try {
    const mt = S.view === 'model' ? MV.exportTarget() : null;
    // attention-compare, attention-scaled_dot-heatmap, …
    const name = mt ? mt.name : S.view === 'compare' ? 'attention-compare' : `attention-${S.cur ? S.cur.rule : 'view'}-${S.view}`;
    const box = mt ? mt.container : currentViewContainer();
    const caption = mt ? mt.caption : exportCaption();
    let saved;
    // Hover marks are not part of the picture.
    for (const svg of document.querySelectorAll('svg.heatmap')) markHover(svg, null);
    if (kind === 'json') saved = exportJSON(exportObject(), name + '.json');
    else if (kind === 'svg') saved = exportSVG(box, name + '.svg', caption);
    else saved = await exportPNG(box, name + '.png', caption);
    msg.textContent = `Saved ${saved.filename} (${(saved.size / 1024).toFixed(1)} KB)` +
      (kind === 'json' ? ' · reload it with “Load response”' : '') + '.';
  } catch (e) {
    msg.textContent = 'Export failed: ' + e.message;
    msg.classList.add('bad');
  }
}

function wire() {
  const sel = $('example');
  EXAMPLES.forEach((ex, i) => sel.append(new Option(ex.name, String(i))));
  sel.append(Object.assign(new Option('(your own text)', 'custom'), { disabled: true }));
  sel.addEventListener('change', () => { if (sel.value !== 'custom') { applyExample(EXAMPLES[Number(sel.value)]); schedule(); } });

  for (const r of document.querySelectorAll('input[name="mode"]')) {
    r.addEventListener('change', () => {
      S.mode = r.value;
      clearErrors();
      syncControls();
      if (S.mode === 'sentences') schedule();
    });
  }
  $('controls').addEventListener('submit', e => { e.preventDefault(); run(); });
  // New words: a pinned index would now point at another word, so let go.
  for (const id of ['source', 'target']) $(id).addEventListener('input', () => { S.pin = null; renderTokenChips(); syncExampleMenu(); schedule(); });
  $('self').addEventListener('change', () => { syncControls(); renderTokenChips(); schedule(); });
  for (const id of ['rule', 'heads', 'proj', 'causal', 'window', 'hard', 'topk', 'scale', 'seed', 'pos-weight',
    ...MODERN_CONTROLS.map(c => c[1])]) {
    $(id).addEventListener('change', () => { syncControls(); if (S.mode !== 'load') schedule(); });
    if ($(id).type === 'number' || $(id).type === 'text') $(id).addEventListener('input', () => { if (S.mode === 'sentences') { syncControls(); schedule(); } });
  }
  $('redraw').addEventListener('click', redraw);
  $('colour-scale').addEventListener('change', () => {
    S.scale = $('colour-scale').value;
    if (S.cur) render();
    if (S.view === 'compare' && S.compare) renderCompare(S.compare);
    if (S.view === 'model') MV.render();
    writeHash();
  });

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

  const tabs = VIEWS;
  tabs.forEach(name => {
    const tab = $('tab-' + name);
    tab.addEventListener('click', () => setView(name));
    // Arrow keys move between tabs, Home and End to the first and last, as in the WAI-ARIA tabs pattern.
    tab.addEventListener('keydown', e => {
      const shown = tabs.filter(t => !$('tab-' + t).hidden);
      const next = tabKey(e.key, shown, name);
      if (!next) return;
      e.preventDefault();
      setView(next);
      $('tab-' + next).focus();
    });
  });

  // Arrow keys and typing switch at once; a value left out of range goes back on leaving the field.
  $('batch').addEventListener('input', () => showBatch(Number($('batch').value)));
  $('batch').addEventListener('change', () => { $('batch').value = String(S.batch); });
  $('neuron-query').addEventListener('change', () => { S.neuronKey = null; S.pin = { side: 'q', index: Number($('neuron-query').value) }; applyPin(); writeHash(); });
  $('neuron-key').addEventListener('change', () => keepNeuronKey(Number($('neuron-key').value)));
  $('neuron-head').addEventListener('change', () => { S.head = Number($('neuron-head').value); if (S.cur) render(); });
  $('export-png').addEventListener('click', () => doExport('png'));
  $('export-svg').addEventListener('click', () => doExport('svg'));
  $('export-json').addEventListener('click', () => doExport('json'));

  // Hover readout for the detail heatmap; the hovered cell is outlined.
  const hm = $('heatmap');
  hm.addEventListener('mouseover', e => {
    const t = e.target;
    if (t.classList && t.classList.contains('cell')) readCell(t.ownerSVGElement, Number(t.dataset.row), Number(t.dataset.col));
  });
  hm.addEventListener('mouseleave', () => { const svg = hm.querySelector('svg'); if (svg) markHover(svg, null); });
  hm.addEventListener('scroll', stickLabels, { passive: true });
  // Click: a cell or a row label pins its query, a column label its key.
  const pinFrom = e => {
    const t = e.target.closest('.cell, .row-label, .col-label');
    if (!t) return;
    if (t.classList.contains('col-label')) setPin('k', Number(t.dataset.col));
    else setPin('q', Number(t.dataset.row));
  };
  hm.addEventListener('click', pinFrom);
  // The second panel reads out its weight beside the main panel's for the same cell, and pins the same way.
  const cp = $('companion');
  cp.addEventListener('click', pinFrom);
  cp.addEventListener('mouseover', e => {
    const t = e.target, comp = S.cur && S.cur.companion;
    if (!comp || !t.classList || !t.classList.contains('cell')) return;
    const i = Number(t.dataset.row), j = Number(t.dataset.col);
    const main = detailMatrix().matrix[i][j];
    $('readout').textContent = `query “${S.cur.rows[i]}” (row ${i}) → ${colWord(S.cur.rule)} “${S.cur.cols[j]}” (column ${j}): ` +
      (comp.role === 'soft' ? `soft weight ${fmt(Number(t.dataset.weight))}, drawn weight ${fmt(main)}`
        : `softmax ${fmt(Number(t.dataset.weight))}, linear ${fmt(main)}`);
    markHover(t.ownerSVGElement, i, j);
  });
  cp.addEventListener('mouseleave', () => { const svg = cp.querySelector('svg'); if (svg) markHover(svg, null); });
  // Compare: each panel reads out and walks its cells as the heatmap does, into the view's own readout.
  const cg = $('compare-grid');
  cg.addEventListener('click', pinFrom);
  cg.addEventListener('mouseover', e => {
    const t = e.target;
    if (t.classList && t.classList.contains('cell')) readCell(t.ownerSVGElement, Number(t.dataset.row), Number(t.dataset.col));
  });
  cg.addEventListener('mouseout', e => {
    const svg = e.target.closest && e.target.closest('svg.heatmap');
    if (svg && !svg.contains(e.relatedTarget)) markHover(svg, null);
  });
  $('token-text').addEventListener('click', e => {
    const t = e.target.closest('.ctok');
    if (t) setPin(t.dataset.side, Number(t.dataset.index));
  });
  // Keyboard: the heatmap and each Compare panel take focus and the arrow keys walk their cells; Enter pins.
  for (const box of [hm, cg]) {
    box.addEventListener('keydown', cellKey);
    box.addEventListener('focusin', cellFocus);
    box.addEventListener('focusout', cellFocus);
  }

  // Phone: the results come first and the controls fold away.
  const fold = $('controls-fold');
  const setFold = () => { fold.open = !NARROW.matches; };
  setFold();
  $('to-controls').addEventListener('click', () => { fold.open = true; fold.scrollIntoView({ behavior: 'smooth' }); $('source').focus({ preventScroll: true }); });
  // and back: after an edit the figure it changed is a screen or more above
  $('to-figure').addEventListener('click', () => { document.querySelector('.views').scrollIntoView({ behavior: 'smooth' }); $('to-controls').focus({ preventScroll: true }); });
  NARROW.addEventListener('change', () => { setFold(); if (S.cur) renderHeatmapView(); });
  window.addEventListener('hashchange', () => { if (readHash()) { syncControls(); renderTokenChips(); setView(S.view); run(); } });
}

// How many of a row's n keys it may see (kind(c) says why key c is not
// seen: 'pad', 'mask' or 'sparse'); a row that sees none counts them all.
function seen(n, kind) {
  let k = 0;
  for (let c = 0; c < n; c++) if (!['pad', 'mask', 'sparse'].includes(kind(c))) k++;
  return k || n;
}

// Makes a drawn heatmap one the keyboard and the readout can read
// (keyboardHeatmap): cells = {rule, rows, cols, matrix, kind, readout (the
// live region's id), name (said first: the rule, where panels sit side by
// side)}. The cursor, the cell last read, is kept with them (a new drawing
// starts without one).
function readable(svg, cells) {
  keyboardHeatmap(svg, cells.readout);
  svg._cells = { ...cells, cursor: null };
  return svg;
}

// Shows one cell's weight in the readout of a readable heatmap, outlines the
// cell and marks its row and column labels. Touches a handful of elements
// whatever the size.
function readCell(svg, i, j) {
  const p = svg && svg._cells;
  if (!p || !p.matrix[i] || p.matrix[i][j] === undefined) return;
  p.cursor = { i, j };
  const w = p.matrix[i][j], col = colWord(p.rule);
  const k = w === 0 ? p.kind(i, j) : '';
  $(p.readout).textContent = (p.name ? `${p.name}: ` : '') + `query “${p.rows[i]}” (row ${i}) → ${col} “${p.cols[j]}” (column ${j}): weight ${fmt(w)}` +
    (k === 'pad' ? ` (padding ${col}: not attended)` : k === 'mask' ? ' (masked by the options: not computed)' : k === 'sparse' ? ' (outside the sparse pattern: not computed)' : '') +
    ` · uniform would be ${fmt(1 / seen(p.matrix[i].length, c => p.kind(i, c)))}`;
  markHover(svg, i, j);
}

// The keys of a focused readable heatmap: the arrows walk its cells (arrowCell),
// Enter or Space pins the query under the cursor.
function cellKey(e) {
  const svg = e.target.closest && e.target.closest('svg.heatmap');
  const p = svg && svg._cells;
  if (!p) return;
  if ((e.key === 'Enter' || e.key === ' ') && p.cursor) { e.preventDefault(); setPin('q', p.cursor.i); return; }
  const to = arrowCell(e.key, p.cursor, p.matrix.length, p.matrix[0].length);
  if (!to) return;
  e.preventDefault();
  readCell(svg, to.i, to.j);
}

// A readable heatmap's cursor shows while it has focus: leaving hides it (the
// cell is kept) and coming back reads that cell again, so of Compare's
// panels only the one being walked shows a cursor.
function cellFocus(e) {
  const svg = e.target;
  const p = svg && svg._cells;
  if (!p || !p.cursor) return;
  if (e.type === 'focusin') readCell(svg, p.cursor.i, p.cursor.j);
  else markHover(svg, null);
}

// GET /rules: the formulas, and which options each rule takes (options.js's
// table), which the controls and the first request wait for.
async function loadRules() {
  const res = await getJSON(API_BASE + 'rules');
  S.rules = res.ok ? res.body : false;
  setRules(S.rules);
  syncControls();
  renderFormula();
}

wire();
if (readHash() && $('source').value + $('paste').value !== '') {
  syncControls();
  renderTokenChips();
  setView(S.view);
} else if (S.wantModel) {
  // A link to the models' views alone: the tensors demo starts from its first example.
  applyExample(EXAMPLES[0]);
} else {
  applyExample(EXAMPLES[0]);
}
loadRules().finally(run);
MV.init($('tab-model'), $('view-model')).then(ok => {
  if (!ok) { if (S.view === 'model') setView('heatmap'); return; }
  // Where a newcomer looks first: the learned attention is one click away.
  const a = Object.assign(document.createElement('a'), { href: '#v=model', id: 'lead-models', textContent: 'translate English to French with trained models' });
  a.addEventListener('click', e => { e.preventDefault(); setView('model'); });
  $('lead').append(' Or ', a, '.');
  if (S.modelParams) MV.restore(S.modelParams);
  if (S.wantModel) setView('model');
}).catch(e => console.warn('models:', e));

// For the browser tests and the curious: the current state.
window.attnDemo = { get current() { return S.cur; }, get state() { return S; }, get models() { return MV.state; }, run, fmt };
