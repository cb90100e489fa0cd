// options.js - the tensors view's request options: which rules take which, the fields they add to a request, the cells
// they forbid and the structure (diagonal, causal/window edges, sparse layout) drawn over the grid.
//
// The page sends an option only to a rule that takes it (the API answers 422
// otherwise); the same table disables the controls. The table is the
// service's own: GET /rules lists each rule's "not_applicable" fields, and
// multi-head's by its attention (softmax or linear).

// rule name, or 'multihead/softmax' and 'multihead/linear' -> Set of fields
// it does not take; null until setRules has the service's answer, and while
// it is null every option counts as taken (the page draws first after it).
let notTaken = null;

export function setRules(rules) {
  if (!rules || !Array.isArray(rules.rules)) return;
  const t = {};
  for (const r of rules.rules) t[r.name] = new Set(r.not_applicable || []);
  const by = (rules.multihead && rules.multihead.not_applicable_by_attention) || {};
  for (const att of ['softmax', 'linear']) t['multihead/' + att] = new Set(by[att] || []);
  notTaken = t;
}

// att: the multi-head "attention" control ('softmax' or 'linear').
export function applies(option, rule, att = 'softmax') {
  const not = notTaken && notTaken[rule === 'multihead' ? 'multihead/' + att : rule];
  return !not || !not.has(option);
}

// Whether a setting that belongs to another is in use (get: id -> control):
// RoPE's numbers while RoPE is on, the temperature while hard is sample, a
// sparse pattern's numbers while that pattern is chosen, and so on.
const on = id => get => get(id).checked;
const is = (id, ...values) => get => values.includes(get(id).value);
const linearUsed = get => get('rule').value === 'linear' || (get('rule').value === 'multihead' && get('mh-attention').value === 'linear');

// [URL key, control id, default, in use (optional; absent: always)]: the new
// options' controls, in the URL in this order.
export const MODERN_CONTROLS = [
  ['al', 'align', 'top_left'], ['wl', 'win-left', ''], ['wr', 'win-right', ''], ['cap', 'softcap', ''],
  ['alibi', 'alibi', false], ['slopes', 'alibi-slopes', '', on('alibi')], ['sinks', 'sinks', ''],
  ['rope', 'rope', false], ['rb', 'rope-base', '10000', on('rope')], ['rs', 'rope-style', 'half', on('rope')],
  ['rd', 'rope-dims', '', on('rope')], ['ro', 'rope-offset', '', on('rope')],
  ['temp', 'temperature', '1', is('hard', 'sample')], ['sp', 'sparsity', ''],
  ['spw', 'sp-window', '2', is('sparsity', 'local_global')], ['spg', 'sp-global', '0', is('sparsity', 'local_global')],
  ['spb', 'sp-block', '2', is('sparsity', 'bigbird', 'blocks')], ['spwb', 'sp-wblocks', '3', is('sparsity', 'bigbird')],
  ['spgb', 'sp-gblocks', '1', is('sparsity', 'bigbird')], ['sprb', 'sp-rblocks', '1', is('sparsity', 'bigbird')],
  ['spl', 'sp-layout', '', is('sparsity', 'blocks')],
  ['fm', 'feature-map', 'elu', linearUsed], ['att', 'mh-attention', 'softmax', is('rule', 'multihead')],
];

const controlValue = e => (e.type === 'checkbox' ? e.checked : e.value);

// Writes the controls that differ from their defaults and are in use: a
// setting of an option that is off (RoPE's base with RoPE off) is dead state
// and stays out of the URL. Links that still carry one load as before.
export function writeModernParams(p, get) {
  for (const [key, id, def, used] of MODERN_CONTROLS) {
    const v = controlValue(get(id));
    if (v !== def && (!used || used(get))) p.set(key, v === true ? '1' : String(v));
  }
}

// Sets the controls from URL parameters (a select keeps its default for a
// value it does not offer); returns true when any of them is set.
export function readModernParams(p, get) {
  let any = false;
  for (const [key, id, def] of MODERN_CONTROLS) {
    const e = get(id), v = p.get(key);
    if (v !== null && v !== String(def)) any = true;
    if (e.type === 'checkbox') e.checked = v === '1';
    else if (e.tagName === 'SELECT') e.value = v !== null && [...e.options].some(o => o.value === v) ? v : def;
    else e.value = v ?? def;
  }
  return any;
}

// "0.5, 0.25" -> [0.5, 0.25]; '' -> null; text that is not a list of numbers
// is passed on as typed, so the API's own message says what is wrong.
function numberList(text) {
  const t = text.trim();
  if (t === '') return null;
  const parts = t.split(/[\s,;]+/).filter(Boolean);
  const nums = parts.map(Number);
  return nums.every(Number.isFinite) ? nums : t;
}
const numOrNull = t => (t.trim() === '' || !Number.isFinite(Number(t)) ? null : Number(t));

export function readModern(get) {
  const v = id => get(id).value;
  return {
    align: v('align'), winL: numOrNull(v('win-left')), winR: numOrNull(v('win-right')), softcap: numOrNull(v('softcap')),
    alibi: get('alibi').checked, slopes: numberList(v('alibi-slopes')), sinks: numberList(v('sinks')),
    rope: get('rope').checked, ropeBase: numOrNull(v('rope-base')), ropeStyle: v('rope-style'),
    ropeDims: numOrNull(v('rope-dims')), ropeOffset: numOrNull(v('rope-offset')),
    temperature: numOrNull(v('temperature')) ?? 1,
    sparsity: v('sparsity'), spWindow: numOrNull(v('sp-window')), spGlobal: numberList(v('sp-global')),
    spBlock: numOrNull(v('sp-block')), spWinBlocks: numOrNull(v('sp-wblocks')), spGlobBlocks: numOrNull(v('sp-gblocks')),
    spRandBlocks: numOrNull(v('sp-rblocks')), spLayout: v('sp-layout').trim(),
    featureMap: v('feature-map'), att: v('mh-attention'),
  };
}

// The window field: [left, right] when either side is set (an empty side is
// null, unbounded), else the symmetric w (null: no window).
export function windowField(w, m) {
  if (m.winL !== null || m.winR !== null) return [m.winL, m.winR];
  return w;
}

// One value per head on /multihead (a single number is used for every head),
// one number on /attention; anything else goes to the API as typed.
function perHead(list, rule, H) {
  if (typeof list === 'string') return list;
  if (rule === 'multihead') return list.length === 1 ? new Array(H).fill(list[0]) : list;
  return list.length === 1 ? list[0] : list;
}

// "100 110 011" (or 1/0 rows split by spaces, commas or semicolons) -> bool[][];
// empty: the diagonal blocks and the first key block, of the shape Lq, Lk and b need.
function layoutField(text, Lq, Lk, b) {
  if (text) return text.split(/[\s,;]+/).filter(Boolean).map(r => [...r].map(ch => ch === '1'));
  const R = Math.max(1, Math.ceil(Lq / b)), C = Math.max(1, Math.ceil(Lk / b));
  return Array.from({ length: R }, (_, q) => Array.from({ length: C }, (_, k) => k === 0 || k === q));
}

// The new options' fields for one rule (the caller adds causal, window, hard,
// masks and scale). Lq, Lk: the request's lengths (0 when unknown); H: heads.
export function modernFields(rule, o, m, Lq, Lk, H) {
  const f = {};
  const A = n => applies(n, rule, m.att);
  if (rule === 'multihead' && m.att === 'linear') f.attention = 'linear';
  if (A('align') && m.align === 'bottom_right') f.align = 'bottom_right';
  if (A('softcap') && m.softcap !== null) f.softcap = m.softcap;
  if (A('alibi') && m.alibi) f.alibi = m.slopes === null ? true : perHead(m.slopes, rule, H);
  if (A('sinks') && m.sinks !== null) f.sinks = perHead(m.sinks, rule, H);
  if (A('rope') && m.rope) {
    f.rope = { base: m.ropeBase ?? 10000, style: m.ropeStyle };
    if (m.ropeDims !== null) f.rope.dims = m.ropeDims;
    if (m.ropeOffset !== null) f.rope.offset = m.ropeOffset;
  }
  if (A('sparsity') && m.sparsity) {
    const s = { pattern: m.sparsity };
    if (m.sparsity === 'local_global') {
      s.window = m.spWindow ?? 0;
      s.global = m.spGlobal === null ? [] : m.spGlobal;
    } else {
      s.block = m.spBlock ?? 1;
      if (m.sparsity === 'bigbird') {
        if (m.spWinBlocks !== null) s.window_blocks = m.spWinBlocks;
        if (m.spGlobBlocks !== null) s.global_blocks = m.spGlobBlocks;
        if (m.spRandBlocks !== null) s.random_blocks = m.spRandBlocks;
      } else {
        s.layout = layoutField(m.spLayout, Lq, Lk, Math.max(1, s.block));
      }
    }
    f.sparsity = s;
    f.return_layout = true;
  }
  if (A('feature_map')) f.feature_map = m.featureMap;
  return f;
}

// The hard field: argmax, top_k or a seeded sample.
export function hardField(o, m) {
  if (o.hard === 'argmax') return 'argmax';
  if (o.hard === 'top_k') return { top_k: o.k };
  if (o.hard === 'sample') return { sample: { temperature: m.temperature } };
  return undefined;
}

function decodeLayout(t) {
  if (Array.isArray(t) && t.every(Array.isArray)) return t.map(r => r.map(Boolean));
  if (t && Array.isArray(t.shape) && typeof t.b64 === 'string' && t.shape.length === 2) {
    const bin = atob(t.b64), [R, C] = t.shape;
    return Array.from({ length: R }, (_, i) => Array.from({ length: C }, (_, j) => bin.charCodeAt(i * C + j) !== 0));
  }
  return null;
}

/* What a request forbids, cell by cell, and the structure to draw over the
 * grid: {kind(i, j) -> '' | 'pad' | 'mask' | 'sparse', overlay, keys}.
 * 'pad': a key marked as padding (key_mask false, or a column the concat mask
 * closes in every row); 'mask': causal, window or mask; 'sparse': outside the
 * sparse pattern (for bigbird and blocks the response's layout, for
 * local_global the request's window and global tokens). Only zero weights
 * are ever marked, so a wrong guess cannot hide a value. layout: the
 * response's "layout" (optional). */
export function structureOf(rule, req, Lq, Lk, layout, batch = 0) {
  const none = { kind: () => '', overlay: null, keys: [] };
  if (!req || typeof req !== 'object') return none;
  // Packed sequences (cu_seqlens_q): the weights are padded to the longest
  // sequence; this one's rows and keys end at its own lengths.
  const seqLen = cu => (Array.isArray(cu) && Number.isInteger(cu[batch]) && Number.isInteger(cu[batch + 1])
    ? cu[batch + 1] - cu[batch] : null);
  const lqSeq = seqLen(req.cu_seqlens_q), lkSeq = seqLen(req.cu_seqlens_k ?? req.cu_seqlens_q);
  const packed = lqSeq !== null && lkSeq !== null;
  const km = Array.isArray(req.key_mask) && !Array.isArray(req.key_mask[0]) && req.key_mask.length === Lk ? req.key_mask : null;
  const m = Array.isArray(req.mask) && Array.isArray(req.mask[0]) && req.mask.length === Lq && req.mask[0].length === Lk ? req.mask : null;
  const padCol = new Array(Lk).fill(false);
  for (let j = 0; j < Lk; j++) {
    if (km && !km[j]) padCol[j] = true;
    if (m && m.every(row => !row[j])) padCol[j] = true;
  }
  const off = req.align === 'bottom_right' && rule !== 'concat' ? (packed ? lkSeq - lqSeq : Lk - Lq) : 0;
  const causal = !!req.causal && rule !== 'concat';
  const w = rule === 'concat' ? null : req.window;
  let wl = null, wr = null;
  if (Number.isInteger(w)) { wl = w; wr = w; } else if (Array.isArray(w) && w.length === 2) {
    wl = Number.isInteger(w[0]) ? w[0] : null; wr = Number.isInteger(w[1]) ? w[1] : null;
  }
  const lo = wl !== null ? i => i + off - wl : null;
  const hi = causal || wr !== null ? i => Math.min(causal ? i + off : Infinity, wr !== null ? i + off + wr : Infinity) : null;

  // The sparse pattern: allowed(i, j), and the blocks to outline.
  const sp = req.sparsity && typeof req.sparsity === 'object' ? req.sparsity : null;
  let allowed = null, blocks = null;
  if (sp && sp.pattern === 'local_global') {
    const g = new Set(Array.isArray(sp.global) ? sp.global : []);
    const sw = Number.isInteger(sp.window) ? sp.window : 0;
    allowed = (i, j) => Math.abs(i + off - j) <= sw || g.has(i) || g.has(j);
    // The service summarises this pattern in blocks of a size of its own;
    // a single block covers the grid whatever that size, so only then is it drawn.
    const lay = decodeLayout(layout);
    if (lay && lay.length === 1 && lay[0].length === 1) blocks = { size: Math.max(Lq, Lk), layout: lay };
  } else if (sp && (sp.pattern === 'bigbird' || sp.pattern === 'blocks') && Number.isInteger(sp.block) && sp.block > 0) {
    const lay = decodeLayout(layout) || (sp.pattern === 'blocks' ? decodeLayout(sp.layout) : null);
    if (lay) {
      const b = sp.block;
      blocks = { size: b, layout: lay };
      allowed = (i, j) => !!(lay[Math.floor(i / b)] && lay[Math.floor(i / b)][Math.floor(j / b)]);
    }
  }

  const kind = (i, j) => {
    if (padCol[j] || (packed && (i >= lqSeq || j >= lkSeq))) return 'pad';
    const ip = i + off;
    if (causal && j > ip) return 'mask';
    if (wl !== null && j < ip - wl) return 'mask';
    if (wr !== null && j > ip + wr) return 'mask';
    if (m && !m[i][j]) return 'mask';
    if (allowed && !allowed(i, j)) return 'sparse';
    return '';
  };
  const diagonal = rule !== 'concat' && (causal || w !== undefined && w !== null || off !== 0 || req.alibi || req.rope ||
    (sp && sp.pattern === 'local_global'));
  const keys = [];
  if (diagonal) keys.push('diag');
  if (lo || hi) keys.push('band');
  if (blocks) keys.push('block');
  if (allowed) keys.push('sparse');
  const overlay = keys.length ? { diag: diagonal ? off : null, lo, hi, blocks } : null;
  return { kind, overlay, keys };
}

// The new options of a request, in words (for titles and exported pictures).
export function describeModern(req) {
  const parts = [];
  if (req.attention === 'linear') parts.push('linear attention');
  if (req.feature_map) parts.push(`φ = ${req.feature_map === 'relu' ? 'relu' : 'elu + 1'}`);
  if (req.align === 'bottom_right') parts.push('bottom-right');
  if (req.softcap !== undefined) parts.push(`softcap ${req.softcap}`);
  if (req.alibi !== undefined) parts.push(req.alibi === true ? 'ALiBi' : `ALiBi ${[].concat(req.alibi).join(', ')}`);
  if (req.sinks !== undefined) parts.push(`sinks ${[].concat(req.sinks).join(', ')}`);
  if (req.rope) parts.push(`RoPE ${req.rope.style || 'half'}`);
  if (req.sparsity) parts.push(`${req.sparsity.pattern}${req.sparsity.block ? ' b=' + req.sparsity.block : ''}`);
  return parts;
}

// The second panel beside the main heatmap, or null: linear attention beside
// softmax attention of the same inputs; a sampled draw beside the soft
// weights it was drawn from (the same request without "hard").
export function companionOf(rule, req) {
  if (!req || typeof req !== 'object') return null;
  if (req.hard && typeof req.hard === 'object' && req.hard.sample) {
    const r = { ...req };
    delete r.hard;
    return { role: 'soft', rule, request: r };
  }
  if (rule === 'linear' || (rule === 'multihead' && req.attention === 'linear')) {
    const r = { ...req };
    delete r.feature_map;
    delete r.attention;
    return { role: 'softmax', rule: rule === 'linear' ? 'scaled_dot' : 'multihead', request: r };
  }
  return null;
}

// The weight formulas the two panels show.
export function weightFormula(role, req) {
  const phi = req && req.feature_map === 'relu' ? 'φ = relu' : 'φ = elu(x) + 1';
  if (role === 'linear') return `linear: A_ij = φ(q_i)·φ(k_j) / (Σ_j′ φ(q_i)·φ(k_j′) + 10⁻⁶), ${phi}`;
  if (role === 'softmax') return 'softmax: w_ij = exp(q_i·k_j/√d) / Σ_j′ exp(q_i·k_j′/√d)';
  if (role === 'sample') {
    const s = req && req.hard && req.hard.sample ? req.hard.sample : {};
    return `one key per row, drawn with p_ij ∝ w_ij^(1/T), T = ${s.temperature ?? 1}, seed ${req && req.seed !== undefined ? req.seed : 0}`;
  }
  if (role === 'soft') return 'w_ij: the softmax weights the draw came from (the same request without hard)';
  return '';
}
