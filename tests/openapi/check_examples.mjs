// check_examples.mjs - posts every example in openapi.yaml to a live server and validates each response against the schema the document declares for it.
//
// usage: node check_examples.mjs --bin build/attn-server [--spec openapi.yaml]
//        node check_examples.mjs --url http://127.0.0.1:8080 [--spec openapi.yaml]
//
// With --bin the server is started on a free loopback port (ATTN_PORT) and
// stopped with SIGTERM at the end. Checks, each counted as one test:
//   - every example in the document is valid against its own schema
//     (request bodies, responses, and the error responses in components);
//   - every request example, posted to its route, gets 200, a body valid
//     against the 200 schema, and a Server-Timing header matching its pattern;
//     examples of /attention/{rule} are named after their rule
//     (`scaled_dot_causal` is posted to /attention/scaled_dot);
//   - every GET route answers 200 with its declared media type and body schema;
//   - a set of bad requests gets the status the document declares for it,
//     with a body valid against that response's schema (and Allow for 405).
// Ends with "N passed, N failed"; exits 1 on any failure.
import { readFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : def;
};
const specPath = opt('--spec', path.join(here, '..', '..', 'openapi.yaml'));
const spec = YAML.parse(readFileSync(specPath, 'utf8'));

let passed = 0;
let failed = 0;
function check(ok, name, detail) {
  if (ok) {
    passed++;
    if (args.includes('-v')) console.log(`ok   ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name}: ${detail ?? ''}`);
  }
  return ok;
}

// The component schemas as one JSON Schema 2020-12 document, so that
// '#/components/schemas/X' references resolve as '#/$defs/X'.
const defs = JSON.parse(
  JSON.stringify(spec.components.schemas).replaceAll('#/components/schemas/', 'openapi-defs#/$defs/'),
);
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true });
addFormats(ajv);
ajv.addSchema({ $id: 'openapi-defs', $defs: defs });

const resolve = (obj) => {
  // follows one $ref inside the document (responses, headers, parameters)
  while (obj && obj.$ref && obj.$ref.startsWith('#/')) {
    obj = obj.$ref.slice(2).split('/').reduce((o, k) => o[k.replaceAll('~1', '/').replaceAll('~0', '~')], spec);
  }
  return obj;
};
const validators = new Map();
function validatorFor(schema) {
  const key = JSON.stringify(schema);
  if (!validators.has(key)) {
    const s = JSON.parse(key.replaceAll('#/components/schemas/', 'openapi-defs#/$defs/'));
    validators.set(key, ajv.compile(s));
  }
  return validators.get(key);
}
function validate(schema, value) {
  const v = validatorFor(schema);
  return v(value) ? null : ajv.errorsText(v.errors, { separator: '; ' }).slice(0, 400);
}

// ------------------------------------------------------------ the server

async function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

let child = null;
let base = opt('--url', null);
if (!base) {
  const bin = opt('--bin', null);
  if (!bin) {
    console.error('usage: check_examples.mjs --bin SERVER | --url URL [--spec FILE]');
    process.exit(2);
  }
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  child = spawn(bin, [], {
    env: { ...process.env, ATTN_PORT: String(port), ATTN_BIND: '127.0.0.1', ATTN_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  let up = false;
  for (let i = 0; i < 300 && !up; i++) {
    try {
      up = (await fetch(`${base}/healthz`)).status === 200;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  if (!check(up, 'server starts', `${bin} did not answer /healthz on ${base}`)) finish();
}

async function send(method, url, body, headers = {}) {
  const init = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    if (!('Content-Type' in init.headers)) init.headers['Content-Type'] = 'application/json';
  }
  let r;
  try {
    r = await fetch(base + url, init);
  } catch (e) {
    return { status: 0, headers: new Headers(), text: `no response: ${e.cause?.message ?? e.message}`, json: undefined };
  }
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, headers: r.headers, text, json };
}

function checkHeaders(name, response, declared) {
  for (const [hname, h0] of Object.entries(declared?.headers ?? {})) {
    const h = resolve(h0);
    const got = response.headers.get(hname);
    if (!check(got !== null, `${name}: header ${hname}`, 'missing')) continue;
    const value = h.schema?.type === 'integer' ? Number(got) : got;
    const err = validate(h.schema, value);
    check(!err, `${name}: header ${hname} matches its schema`, `${got}: ${err}`);
  }
}

function checkResponse(name, op, r, wantStatus) {
  check(r.status === wantStatus, `${name}: status ${wantStatus}`, `got ${r.status}: ${r.text.slice(0, 300)}`);
  const declared = resolve(op.responses?.[String(r.status)]);
  if (!check(declared, `${name}: status ${r.status} is declared`, 'not in the document')) return;
  checkHeaders(name, r, declared);
  const [media, content] = Object.entries(declared.content ?? {})[0] ?? [];
  if (!media) return;
  const ctype = r.headers.get('content-type') ?? '';
  check(ctype.startsWith(media), `${name}: Content-Type ${media}`, `got ${ctype}`);
  if (media === 'application/json') {
    if (!check(r.json !== undefined, `${name}: body is JSON`, r.text.slice(0, 200))) return;
    const err = validate(content.schema, r.json);
    check(!err, `${name}: body matches the ${r.status} schema`, err);
  }
}

// ------------------------------------------------------------ 1. examples against their own schemas

function examplesOf(content) {
  const out = [];
  for (const [media, c] of Object.entries(content ?? {})) {
    if (media !== 'application/json') continue;
    if (c.example !== undefined) out.push(['example', c.example, c.schema]);
    for (const [k, e] of Object.entries(c.examples ?? {})) out.push([k, resolve(e).value, c.schema]);
  }
  return out;
}

for (const [p, item] of Object.entries(spec.paths)) {
  for (const [method, op] of Object.entries(item)) {
    if (method === 'parameters') continue;
    for (const [k, value, schema] of examplesOf(op.requestBody?.content)) {
      const err = validate(schema, value);
      check(!err, `spec: request example ${method.toUpperCase()} ${p} ${k} matches its schema`, err);
    }
    for (const [status, r0] of Object.entries(op.responses ?? {})) {
      for (const [k, value, schema] of examplesOf(resolve(r0).content)) {
        const err = validate(schema, value);
        check(!err, `spec: ${status} example ${method.toUpperCase()} ${p} ${k} matches its schema`, err);
      }
    }
  }
}

// ------------------------------------------------------------ 2. post every request example

// The status an operation answers on success (201 for a creation).
const successOf = (op) => Number(Object.keys(op.responses ?? {}).find((c) => c.startsWith('2')) ?? 200);

// A new session's id, made from the first example of POST /sessions; with
// bare = false it then holds the first example of its step route.
async function freshSession(bare) {
  const first = (path, method) => examplesOf(spec.paths[path][method].requestBody.content)[0][1];
  const made = await send('POST', '/sessions', first('/sessions', 'post'));
  const id = made.json?.id;
  if (id && !bare) await send('POST', `/sessions/${id}/step`, first('/sessions/{id}/step', 'post'));
  return id;
}

const ruleEnum = resolve(spec.components.parameters.Rule).schema.enum;
const ruleOf = (key) =>
  ruleEnum.filter((r) => key === r || key.startsWith(`${r}_`)).sort((a, b) => b.length - a.length)[0];
// KServe v2 examples are named after their model the same way
// (`multihead_seeded` is posted to /v2/models/multihead/infer).
const modelEnum = resolve(spec.components.parameters.Model)?.schema?.enum ?? [];
const modelOf = (key) =>
  modelEnum.filter((m) => key === m || key.startsWith(`${m}_`)).sort((a, b) => b.length - a.length)[0];

for (const [p, item] of Object.entries(spec.paths)) {
  for (const [method, op] of Object.entries(item)) {
    if (method === 'parameters' || !op.requestBody) continue;
    for (const [k, value] of examplesOf(op.requestBody.content)) {
      let url = p;
      if (p.includes('{rule}')) {
        const rule = ruleOf(k);
        if (!check(rule, `example ${k}: named after a rule`, `no rule prefix in '${k}'`)) continue;
        url = p.replace('{rule}', rule);
      }
      if (p.includes('{model}')) {
        const model = modelOf(k);
        if (!check(model, `example ${k}: named after a model`, `no model prefix in '${k}'`)) continue;
        url = p.replace('{model}', model);
      }
      if (p.includes('{name}')) {
        // /models/{name}/translate: examples are named after their model
        // (`transformer_greedy`), posted only when that model is loaded
        const name = k.split('_')[0];
        const list = await send('GET', '/models');
        if (!(list.json?.models ?? []).some((m) => m.name === name)) {
          console.log(`example ${k}: skipped, model ${name} is not loaded (no weights)`);
          continue;
        }
        url = p.replace('{name}', name);
      }
      if (p.includes('{id}')) {
        // a session route: a fresh session from POST /sessions' first
        // example, holding the step route's first example's rows unless
        // this is the step route itself
        url = await freshSession(p.endsWith('/step'));
        if (!check(url, `example ${k}: a session to post it to`, 'POST /sessions failed')) continue;
        url = p.replace('{id}', url);
      }
      const r = await send(method.toUpperCase(), url, value);
      checkResponse(`example ${method.toUpperCase()} ${url} ${k}`, op, r, successOf(op));
      if (r.json && p.includes('{rule}')) check(r.json.rule === ruleOf(k), `example ${k}: rule echoed`, r.json.rule);
    }
  }
}

// ------------------------------------------------------------ 3. every GET route

for (const [p, item] of Object.entries(spec.paths)) {
  if (!item.get || p.includes('{')) continue;
  const r = await send('GET', p);
  checkResponse(`GET ${p}`, item.get, r, 200);
}

// ------------------------------------------------------------ 4. errors as declared

const small = { query: [[1, 0]], key: [[1, 0], [0, 1]], value: [[1], [2]] };
const probes = [
  ['POST', '/attention/dot', '{"query": [', {}, 400, 'invalid_json'],
  ['POST', '/attention/dot', { ...small, query: [[1, 0], [1]] }, {}, 400, 'invalid_tensor'],
  ['POST', '/attention/dot', { key: small.key, value: small.value }, {}, 400, 'missing_field'],
  ['POST', '/attention/dot', { ...small, querry: 1 }, {}, 400, 'unknown_field'],
  ['POST', '/attention/dot', { ...small, causal: 'yes' }, {}, 400, 'invalid_field'],
  ['POST', '/attention/bilinear', small, {}, 404, 'unknown_rule'],
  ['GET', '/attention/dot', undefined, {}, 405, 'method_not_allowed'],
  ['POST', '/healthz', '{}', {}, 405, 'method_not_allowed'],
  ['POST', '/multihead', JSON.stringify(small), { 'Content-Type': 'text/plain' }, 415, 'unsupported_media_type'],
  ['POST', '/attention/dot', { ...small, key: [[1, 0, 0]] }, {}, 422, 'shape_mismatch'],
  ['POST', '/multihead', { query: [[1, 0, 0]], num_heads: 2 }, {}, 422, 'invalid_param'],
  ['GET', '/sessions/0123456789abcdef0123456789abcdef', undefined, {}, 404, 'unknown_session'],
  ['DELETE', '/sessions/0123456789abcdef0123456789abcdef', undefined, {}, 404, 'unknown_session'],
  ['POST', '/sessions/0123456789abcdef0123456789abcdef/step', small, {}, 404, 'unknown_session'],
  ['POST', '/sessions', { num_heads: 2, head_dim: 4 }, {}, 400, 'missing_field'],
  ['POST', '/sessions', { num_heads: 2, head_dim: 4, max_tokens: 8, causal: true }, {}, 400, 'unknown_field'],
  ['POST', '/sessions', { num_heads: 4, num_kv_heads: 3, head_dim: 4, max_tokens: 8 }, {}, 422, 'invalid_param'],
  ['POST', '/sessions', { num_heads: 2, head_dim: 4, max_tokens: 1e12 }, {}, 413, 'session_full'],
  ['GET', '/sessions', undefined, {}, 405, 'method_not_allowed'],
];
for (const [method, url, body, headers, status, code] of probes) {
  const route = url.startsWith('/attention/') ? '/attention/{rule}' : url.replace(/^\/sessions\/[0-9a-f]{32}/, '/sessions/{id}');
  // a method the path does not serve: any of its operations declares the 405
  const ops = Object.entries(spec.paths[route] ?? {}).filter(([m]) => m !== 'parameters');
  const op = spec.paths[route]?.[method.toLowerCase()] ?? ops[0]?.[1];
  const r = await send(method, url, body, headers);
  const name = `error ${method} ${url} -> ${status} ${code}`;
  checkResponse(name, op, r, status);
  check(r.json?.error?.code === code, `${name}: code`, r.text.slice(0, 300));
}
const nf = await send('GET', '/no/such/route');
check(nf.status === 404 && nf.json?.error?.code === 'not_found', 'GET /no/such/route -> 404 not_found', nf.text);
check(!validate({ $ref: '#/components/schemas/Error' }, nf.json), 'GET /no/such/route: body matches Error');

finish();

function finish() {
  if (child) {
    const done = new Promise((res) => child.once('exit', (code, sig) => res([code, sig])));
    child.kill('SIGTERM');
    done.then(([code, sig]) => {
      check(code === 0, 'server exits 0 on SIGTERM', `code ${code} signal ${sig}`);
      report();
    });
  } else {
    report();
  }
}

function report() {
  console.log(`openapi examples checked`);
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
