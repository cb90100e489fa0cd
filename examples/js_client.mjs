// examples/js_client.mjs - calls the attention service with fetch; runs in Node 18+ and, unchanged, in a browser.
//
// Node:    node examples/js_client.mjs [BASE_URL]        (default http://127.0.0.1:8080)
// Browser: <script type="module">
//            import { runExamples } from "./js_client.mjs";
//            runExamples(location.origin, console.log);
//          </script>
//
// Posts a causal scaled-dot attention with the query sent as base64 float32
// and the output asked back as base64, checks the answer against a plain
// JavaScript reference, then shows how an error reads. Exits 1 (Node) or
// throws (browser) on a wrong answer. No dependencies: fetch, atob and btoa
// are globals in both places.

// The contract's base64 form is little-endian float32; typed arrays use the
// host's byte order, which is little-endian on every platform Node and the
// major browsers run on.
export function toB64(shape, floats) {
  const bytes = new Uint8Array(Float32Array.from(floats).buffer);
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000)
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return { shape, dtype: "float32", b64: btoa(bin) };
}

export function fromB64(t) {
  const bin = atob(t.b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return { shape: t.shape, data: new Float32Array(bytes.buffer) };
}

// POST a JSON body; resolves to { status, body, timing }.
export async function post(base, path, body) {
  const res = await fetch(base + path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json(), timing: res.headers.get("Server-Timing") };
}

// Reference: softmax(Q K^T / sqrt(D) with a causal mask) V, rows of arrays.
function referenceCausal(q, k, v) {
  const d = q[0].length;
  return q.map((qi, i) => {
    const s = k.map((kj, j) => (j <= i ? qi.reduce((acc, x, t) => acc + x * kj[t], 0) / Math.sqrt(d) : -Infinity));
    const m = Math.max(...s);
    const e = s.map((x) => Math.exp(x - m));
    const z = e.reduce((a, b) => a + b, 0);
    return v[0].map((_, c) => e.reduce((acc, w, j) => acc + (w / z) * v[j][c], 0));
  });
}

function matrix(rows, cols, seed) {
  // A tiny LCG so the example is reproducible without a library.
  let x = seed;
  const next = () => ((x = (x * 1103515245 + 12345) % 2147483648) / 2147483648) * 2 - 1;
  return Array.from({ length: rows }, () => Array.from({ length: cols }, next));
}

export async function runExamples(base, log = console.log) {
  const [L, D, Dv] = [4, 8, 3];
  const q = matrix(L, D, 1), k = matrix(L, D, 2), v = matrix(L, Dv, 3);

  const ans = await post(base, "/attention/scaled_dot", {
    query: toB64([L, D], q.flat()),
    key: k,
    value: v,
    causal: true,
    need_weights: false,
    output_format: "b64",
  });
  if (ans.status !== 200) throw new Error(`scaled_dot answered ${ans.status}: ${JSON.stringify(ans.body)}`);
  const out = fromB64(ans.body.output);
  const want = referenceCausal(q, k, v);
  let maxDiff = 0;
  want.flat().forEach((w, i) => (maxDiff = Math.max(maxDiff, Math.abs(w - out.data[i]))));
  const shapeOk = out.shape.join("x") === `${L}x${Dv}`;
  log(`POST /attention/scaled_dot causal, b64 in and out: shape ${out.shape.join("x")}, ` +
      `max |diff| vs JS reference ${maxDiff.toExponential(2)}  (Server-Timing: ${ans.timing})`);
  if (!shapeOk || !(maxDiff <= 1e-5)) throw new Error("scaled_dot answer differs from the reference");

  // A typo is an error, never ignored; every error says what and where.
  const bad = await post(base, "/attention/scaled_dot", { querry: q, key: k, value: v });
  log(`POST with a typo "querry": ${bad.status} ${bad.body.error?.code}: ${bad.body.error?.message}`);
  if (bad.status !== 400 || !bad.body.error?.code) throw new Error("a typo was not reported as a 400 error");
  return true;
}

// Run as a script under Node; stay a plain module when a page imports it.
if (typeof window === "undefined" && typeof process !== "undefined" && process.argv?.[1]?.endsWith("js_client.mjs")) {
  const base = (process.argv[2] || "http://127.0.0.1:8080").replace(/\/$/, "");
  runExamples(base).then(
    () => console.log("js client: ok"),
    (e) => { console.error(`js client: ${e.message}`); process.exit(1); },
  );
}
