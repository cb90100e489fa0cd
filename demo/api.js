// api.js - the demo's only talk with the service: POST a request, decode tensors, keep API errors intact.

// Every result is {ok, status, body, error}. error is the contract's
// {code, message, field} so the page can show the API's own words; a network
// failure is turned into the same form, so callers have one path for both.
export async function postJSON(path, body) {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  let res;
  try {
    res = await fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: text });
  } catch (e) {
    return { ok: false, status: 0, error: { code: 'network', message: 'Cannot reach the service: ' + e.message, field: '' } };
  }
  return readResponse(res);
}

export async function getJSON(path) {
  let res;
  try {
    res = await fetch(path, { headers: { Accept: 'application/json' } });
  } catch (e) {
    return { ok: false, status: 0, error: { code: 'network', message: 'Cannot reach the service: ' + e.message, field: '' } };
  }
  return readResponse(res);
}

async function readResponse(res) {
  const raw = await res.text();
  let body = null;
  try { body = JSON.parse(raw); } catch { /* reported below */ }
  if (res.ok && body !== null) return { ok: true, status: res.status, body, timing: res.headers.get('Server-Timing') || '' };
  if (body && body.error && typeof body.error.message === 'string') {
    return { ok: false, status: res.status, error: { code: body.error.code || '', message: body.error.message, field: body.error.field || '' } };
  }
  return { ok: false, status: res.status, error: { code: 'http_' + res.status, message: `HTTP ${res.status}: ${raw.slice(0, 200) || res.statusText}`, field: '' } };
}

// Any of the contract's three tensor forms -> {shape, data: number[]}.
// Throws an Error with a readable message on malformed input (used when
// loading a saved response, where the API is not there to check it).
export function decodeTensor(t, name = 'tensor') {
  if (Array.isArray(t)) {
    const shape = [];
    for (let x = t; Array.isArray(x); x = x[0]) shape.push(x.length);
    const data = [];
    const walk = (a, d) => {
      if (d === shape.length) {
        if (typeof a === 'boolean') a = a ? 1 : 0;
        if (typeof a !== 'number') throw new Error(`${name}: expected a number, found ${JSON.stringify(a)}`);
        data.push(a);
        return;
      }
      if (!Array.isArray(a) || a.length !== shape[d]) throw new Error(`${name} is ragged at depth ${d}`);
      for (const y of a) walk(y, d + 1);
    };
    walk(t, 0);
    return { shape, data };
  }
  if (t && typeof t === 'object' && Array.isArray(t.shape)) {
    const n = t.shape.reduce((a, b) => a * b, 1);
    let data;
    if (Array.isArray(t.data)) data = t.data.map(Number);
    else if (typeof t.b64 === 'string') {
      const bin = atob(t.b64);
      const bytes = new Uint8Array(bin.length);
      for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      if (t.dtype === 'bool') data = Array.from(bytes);
      else {
        if (bytes.length !== 4 * n) throw new Error(`${name}: base64 holds ${bytes.length} bytes, shape needs ${4 * n}`);
        data = Array.from(new Float32Array(bytes.buffer));
      }
    } else throw new Error(`${name}: a tensor object needs "data" or "b64"`);
    if (data.length !== n) throw new Error(`${name}: shape needs ${n} values, found ${data.length}`);
    return { shape: t.shape.slice(), data };
  }
  throw new Error(`${name}: not a tensor (nested arrays, {shape, data} or {shape, dtype, b64})`);
}

// {shape, data} with shape (..., R, C) -> list of R x C matrices (number[][]).
export function toMatrices(t) {
  const r = t.shape.length;
  if (r < 2) throw new Error('weights must have at least two dimensions');
  const R = t.shape[r - 2], C = t.shape[r - 1];
  const mats = [];
  for (let off = 0; off < t.data.length; off += R * C) {
    const m = [];
    for (let i = 0; i < R; i++) m.push(t.data.slice(off + i * C, off + (i + 1) * C));
    mats.push(m);
  }
  return mats;
}
