// neuron.js - the neuron view (after bertviz, Vig 2019) of the tensors demo: for one query token and head, the query
// and key vectors, their elementwise product and its sum, the score explained term by term, and the softmax that
// gives the API's weight.
//
// Only where the page knows every number that goes into a score: dot and
// scaled_dot (the vectors it sent), general (the vectors and the W, b the
// service returns with return_params) and multihead with identity
// projections (head h scores its own E/H slice of the vectors). Masks
// (key_mask, mask, causal, window) make a key's score -inf, as in the API.

import { el, FONT, divColour, fmt, textWidth, wrapWidth } from './render.js';

const NS = 'http://www.w3.org/2000/svg';
const NEW_OPTIONS = ['bias', 'alibi', 'softcap', 'sinks', 'rope', 'sparsity', 'align', 'learned_positions', 'feature_map', 'temperature'];

const is2D = a => Array.isArray(a) && a.length > 0 && Array.isArray(a[0]) && typeof a[0][0] === 'number';

function isIdentity(p, E) {
  if (!p || !is2D(p.in_proj_weight) || !is2D(p['out_proj.weight'])) return false;
  const W = p.in_proj_weight;
  if (W.length !== 3 * E) return false;
  for (let r = 0; r < 3 * E; r++) for (let c = 0; c < E; c++) if (W[r][c] !== (r % E === c ? 1 : 0)) return false;
  const zero = b => !b || b.every(x => x === 0);
  return zero(p.in_proj_bias) && zero(p['out_proj.bias']);
}

// Says whether the page can explain this request's scores; {ok, why, heads}.
export function neuronSupport(rule, req) {
  if (!req || typeof req !== 'object') return { ok: false, why: 'a loaded bare response has no vectors: the neuron view needs the request (use Sentences, Paste, or a JSON export of this page).' };
  if (!['dot', 'scaled_dot', 'general', 'multihead'].includes(rule)) {
    const how = rule === 'linear' ? 'linear attention multiplies feature maps φ(q)·φ(k), with no softmax'
      : `${rule} scores through a hidden layer, not a product of q and k`;
    return { ok: false, why: `the neuron view explains dot, scaled_dot, general and multihead (identity projections); ${how}.` };
  }
  const Q = req.query, K = req.key ?? (rule === 'multihead' ? req.query : undefined);
  if (!is2D(Q) || !is2D(K)) return { ok: false, why: 'the neuron view needs query and key as unbatched nested arrays.' };
  const used = NEW_OPTIONS.filter(o => req[o] !== undefined && req[o] !== false && req[o] !== null);
  if (Array.isArray(req.window)) used.push('a [left, right] window');
  if (req.hard && typeof req.hard === 'object' && req.hard.sample) used.push('sampled hard attention');
  if (req.attention === 'linear') used.push('linear attention');
  if (used.length) return { ok: false, why: `this request uses ${used.join(', ')}; the neuron view explains plain scores with masks only.` };
  if (rule === 'multihead') {
    const E = Q[0].length, H = Number(req.num_heads) || 1;
    if (!isIdentity(req.params, E)) return { ok: false, why: 'multihead with seeded random projections: the page does not know the projected vectors; choose “identity” projections.' };
    return { ok: true, heads: H };
  }
  return { ok: true, heads: 1 };
}

// The score of query i against every key, term by term. params: the
// general rule's {'attn.weight', 'attn.bias'}. Returns {q, keys: [{k, prod,
// dot, score, masked}], scale, weights, D, formula}.
export function neuronTerms(rule, req, i, head = 0, params = null) {
  const Q = req.query, K = req.key ?? req.query;
  const Lk = K.length;
  let q = Q[i].slice(), ks = K.map(r => r.slice());
  let scale = 1, formula = 'score_j = Σ_d q_d · k_jd';
  if (rule === 'scaled_dot') {
    scale = typeof req.scale === 'number' ? req.scale : 1 / Math.sqrt(ks[0].length);
    formula = `score_j = (Σ_d q_d · k_jd) × ${typeof req.scale === 'number' ? 'scale ' + fmt(scale) : '1/√Dk = ' + fmt(scale)}`;
  } else if (rule === 'general') {
    const W = params && params['attn.weight'], b = params && params['attn.bias'];
    if (!is2D(W)) throw new Error('the service did not return the general rule’s W');
    ks = ks.map(k => W.map((row, d) => row.reduce((s, w, e) => s + w * k[e], 0) + (b ? b[d] : 0)));
    formula = 'score_j = Σ_d q_d · (W k_j + b)_d';
  } else if (rule === 'multihead') {
    const E = q.length, H = Number(req.num_heads) || 1, dh = E / H;
    q = q.slice(head * dh, (head + 1) * dh);
    ks = ks.map(k => k.slice(head * dh, (head + 1) * dh));
    scale = 1 / Math.sqrt(dh);
    formula = `head ${head}: score_j = (Σ_d q_d · k_jd, d = ${head * dh}…${(head + 1) * dh - 1}) × 1/√${dh}`;
  }
  const km = Array.isArray(req.key_mask) && !Array.isArray(req.key_mask[0]) ? req.key_mask : null;
  const m = Array.isArray(req.mask) && Array.isArray(req.mask[0]) ? req.mask : null;
  const win = Number.isInteger(req.window) ? req.window : null;
  const keys = ks.map((k, j) => {
    const prod = k.map((x, d) => q[d] * x);
    const dot = prod.reduce((s, x) => s + x, 0);
    const masked = (km && !km[j]) || (m && !m[i][j]) || (req.causal && j > i) || (win !== null && Math.abs(i - j) > win);
    return { k, prod, dot, score: masked ? -Infinity : dot * scale, masked: !!masked };
  });
  let mx = -Infinity;
  for (const x of keys) if (x.score > mx) mx = x.score;
  const ex = keys.map(x => (x.masked || mx === -Infinity ? 0 : Math.exp(x.score - mx)));
  const z = ex.reduce((s, x) => s + x, 0);
  return { q, keys, scale, weights: ex.map(x => (z > 0 ? x / z : 0)), D: q.length, formula, Lk, max: mx, z };
}

function esc(s) {
  return String(s).replace(/[&<>"]/g, c => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
}

/* The neuron view's figure: the query vector on top, then per key two thin
 * rows aligned number by number with it: the key's (mapped) vector and the
 * product q ⊙ k; on the right their sum, the score, the page's softmax and
 * the API's weight. api = the API's weights for this query row. The figure
 * fits opts.width (px) where it can: the number cells narrow down to 2 px,
 * the number columns are as wide as their widest entry, and the texts wrap. */
export function neuronFigure(T, opts) {
  const { rows, cols, i, api, rule } = opts;
  const D = T.D;
  const box = opts.width || 600;
  const scaled = T.scale !== 1;
  const heads = scaled ? ['Σ', 'score', 'softmax', 'API'] : ['score = Σ', 'softmax', 'API'];
  const nums = T.keys.map((x, j) => {
    const r = scaled ? [[x.dot, 'n-sum'], [x.score, 'n-score'], [T.weights[j], 'n-weight'], [api ? api[j] : NaN, 'n-api']]
      : [[x.dot, 'n-sum n-score'], [T.weights[j], 'n-weight'], [api ? api[j] : NaN, 'n-api']];
    return r.map(([v, cls]) => [v, cls, cls.includes('n-score') && x.masked ? '−∞' : Number.isNaN(v) ? '' : fmt(v)]);
  });
  const numW = heads.map((hd, n) => 10 + Math.max(textWidth(hd, 11, 600), ...nums.map(r => textWidth(r[n][2], 11))));
  const numTot = numW.reduce((a, b) => a + b, 0);
  const qLabel = `q: ${rows[i]}`;
  const labelW = Math.min(120, 10 + Math.max(textWidth(qLabel, 11, 700), ...cols.map(x => textWidth(x, 11))));
  const c = Math.max(2, Math.min(14, Math.floor((box - labelW - numTot - 16) / D)));
  // A tick every 8 numbers, or 16 or 32 where 8 cells are too narrow for "d 56".
  let tick = 8;
  while (tick < D && tick * c < textWidth(`d ${D - tick}`, 10) + 4) tick *= 2;
  const sub = 7, keyH = 2 * sub + 5;
  const x1 = labelW, xn = x1 + D * c + 10;
  const layoutW = xn + numTot + 6;
  const wrapW = Math.max(layoutW, box) - 8;
  const kName = rule === 'general' ? 'W k_j + b' : 'k_j';
  const title = wrapWidth(opts.title || '', wrapW, 14, 600);
  const notes = [...wrapWidth(`${T.formula}; weight_j = softmax_j(score)`, wrapW, 11),
    ...wrapWidth(`per key: upper row ${kName}, lower row q ⊙ ${kName} (their sum is Σ)`, wrapW, 11)];
  const vmax = Math.max(1e-9, ...T.q.map(Math.abs), ...T.keys.flatMap(x => x.k.map(Math.abs)));
  const pmax = Math.max(1e-9, ...T.keys.flatMap(x => x.prod.map(Math.abs)));
  const foot = wrapWidth(`blue below zero, red above (vectors ÷ ${fmt(vmax)}, products ÷ ${fmt(pmax)}); API: the service’s weight`, wrapW, 11);
  const width = Math.ceil(Math.max(layoutW, ...title.map(l => textWidth(l, 14, 600) + 8),
    ...[...notes, ...foot].map(l => textWidth(l, 11) + 8)));
  const top = 18 * title.length + 14 * notes.length + 26;
  const keysEnd = top + 18 + keyH * T.Lk;
  const height = keysEnd + 14 * foot.length + 6;
  const lines = (ls, y0, dy) => ls.map((l, n) => `<tspan x="4" y="${y0 + n * dy}">${esc(l)}</tspan>`).join('');
  let s = `<rect width="${width}" height="${height}" fill="#ffffff"/>`;
  s += `<text font-size="14" font-weight="600" fill="#1d2433" class="title">${lines(title, 16, 18)}</text>`;
  s += `<text font-size="11" fill="#5b6475" class="caption">${lines(notes, 18 * title.length + 14, 14)}</text>`;
  s += '<g font-size="10" fill="#888">';
  for (let d = 0; d < D; d += tick) s += `<text x="${x1 + d * c}" y="${top - 6}">d ${d}</text>`;
  s += '</g><g font-size="11" fill="#555" font-weight="600">';
  let nx = xn;
  heads.forEach((hd, n) => { s += `<text x="${nx + numW[n] - 4}" y="${top - 6}" text-anchor="end">${hd}</text>`; nx += numW[n]; });
  s += '</g>';
  s += `<text x="${x1 - 6}" y="${top + 10}" font-size="11" text-anchor="end" fill="#e8590c" font-weight="700">${esc(qLabel)}</text><g class="qvec">`;
  T.q.forEach((v, d) => { s += `<rect x="${x1 + d * c}" y="${top}" width="${c - 0.5}" height="13" fill="${divColour(v / vmax)}" class="qv" data-d="${d}" data-value="${v}"><title>q[${d}] = ${fmt(v)}</title></rect>`; });
  s += '</g>';
  T.keys.forEach((x, j) => {
    const y = top + 18 + keyH * j;
    s += `<g class="nkey" data-key="${j}"${x.masked ? ' data-masked="1"' : ''}><rect class="nrow-bg" x="0" y="${y - 2}" width="${width}" height="${keyH}" fill="#ffffff"/>`;
    s += `<text x="${x1 - 6}" y="${y + sub + 3}" font-size="11" text-anchor="end" fill="${x.masked ? '#9aa1ad' : '#333'}">${esc(cols[j])}</text>`;
    x.k.forEach((v, d) => { s += `<rect x="${x1 + d * c}" y="${y}" width="${c - 0.5}" height="${sub}" fill="${divColour(v / vmax)}" class="kv" data-d="${d}" data-value="${v}"/>`; });
    x.prod.forEach((v, d) => { s += `<rect x="${x1 + d * c}" y="${y + sub + 1}" width="${c - 0.5}" height="${sub}" fill="${divColour(v / pmax)}" class="term" data-d="${d}" data-value="${v}"/>`; });
    let px = xn;
    nums[j].forEach(([v, cls, txt], n) => {
      s += `<text x="${px + numW[n] - 4}" y="${y + sub + 3}" font-size="11" text-anchor="end" class="${cls}" data-value="${v}" fill="${cls === 'n-api' ? '#1f5fbf' : '#1d2433'}">${txt}</text>`;
      px += numW[n];
    });
    s += '</g>';
  });
  s += `<text font-size="11" fill="#5b6475" class="foot">${lines(foot, keysEnd + 12, 14)}</text>`;
  const svg = el('svg', { xmlns: NS, width, height, viewBox: `0 0 ${width} ${height}`, class: 'neuron', role: 'img', 'font-family': FONT,
    'aria-label': `neuron view: query ${rows[i]}, ${T.Lk} keys, ${D} numbers each`, 'data-query': i });
  svg.innerHTML = s;
  return svg;
}

// The score of one key written out term by term (HTML), for the readout.
export function neuronExplain(T, j, opts) {
  const { rows, cols, i, api, rule } = opts;
  const x = T.keys[j];
  const kName = rule === 'general' ? '(W k + b)' : 'k';
  let s = `<p class="n-head"><strong>“${esc(rows[i])}” → “${esc(cols[j])}”</strong> (key ${j})</p>`;
  if (x.masked) return s + '<p>This key is masked for this query (padding, causal, window or mask): score −∞, weight 0.</p>';
  // The result first, then the terms it is made of (a table as long as the vectors).
  s += `<p>score = Σ ${fmt(x.dot)}${T.scale !== 1 ? ` × ${fmt(T.scale)} = ${fmt(x.score)}` : ''}</p>`;
  s += `<p class="n-result">weight = exp(${fmt(x.score)} − ${fmt(T.max)}) ÷ ${fmt(T.z)} = <strong>${fmt(T.weights[j])}</strong>` +
    (api ? ` · API: <strong>${fmt(api[j])}</strong>` : '') + '</p>';
  s += `<table class="line-table n-terms"><thead><tr><th>d</th><th>q_d</th><th>${kName}_d</th><th>product</th></tr></thead><tbody>`;
  x.prod.forEach((p, d) => { s += `<tr data-d="${d}"><td>${d}</td><td>${fmt(T.q[d])}</td><td>${fmt(x.k[d])}</td><td data-value="${p}">${fmt(p)}</td></tr>`; });
  s += `</tbody><tfoot><tr><td colspan="3">Σ (sum of the ${T.D} products)</td><td class="n-total">${fmt(x.dot)}</td></tr></tfoot></table>`;
  return s;
}
