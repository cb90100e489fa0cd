// demo.test.mjs - drives the attention demo in headless Debian chromium against a live server and checks it against the API.
//
// Usage: ATTN_URL=http://127.0.0.1:PORT node demo.test.mjs   (make test-browser does this)
// The reference for every weight the page draws is the API itself: the test
// builds the same request in node (with the page's own embedding module, a
// pure function of the text) and posts it with fetch, so a page that sends
// the wrong request, drops an option or draws a cell in the wrong place fails.
// Prints "N passed, N failed" and exits nonzero on any failure. Screenshots
// go to tests/browser/screenshots/ (git-ignored); those of the trained models' views
// and the neuron view to build/screenshots/. Checks that cannot run (no models
// served) are printed as "skip" and counted apart.

import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BASE = (process.env.ATTN_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const SHOTS = path.join(HERE, 'screenshots');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const TOL = 1e-6;

// The page's embedding, loaded from its source as a data: URL so this works
// whatever node decides about the module type of demo/*.js.
const embedSrc = fs.readFileSync(path.join(HERE, '../../demo/embed.js'), 'utf8');
const { tokenize, embed, MAX_TOKENS } = await import('data:text/javascript,' + encodeURIComponent(embedSrc));
// The page's colour scale, number format, row statistics and head colours, the same way (render.js has no imports).
const renderSrc = fs.readFileSync(path.join(HERE, '../../demo/render.js'), 'utf8');
const { colour, colourRGB, fmt, rowStats, HEAD_COLOURS } = await import('data:text/javascript,' + encodeURIComponent(renderSrc));
// axe-core, the accessibility checker (pinned in package-lock.json), injected into the page.
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

const DEFAULT_SENTENCE = 'The cat sat on the mat because the cat was tired .';

/* ----------------------------------------------------------- harness */

const results = [];
// Thrown by a test whose check cannot run here: reported as skipped.
class Skipped extends Error {}
const ONLY = process.env.ONLY ? new RegExp(process.env.ONLY) : null; // a subset while developing
async function test(name, fn) {
  if (ONLY && !ONLY.test(name)) return;
  const t0 = Date.now();
  try {
    await fn();
    results.push({ name, ok: true });
    console.log(`ok - ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    if (e instanceof Skipped) { results.push({ name, skipped: true }); console.log(`skip - ${name}: ${e.message}`); return; }
    results.push({ name, ok: false });
    console.log(`not ok - ${name}\n  ${String(e && e.stack || e).split('\n').slice(0, 4).join('\n  ')}`);
  }
}
// A check that cannot run here is reported as skipped, never counted as passed.
function skip(name, why) {
  if (ONLY && !ONLY.test(name)) return;
  results.push({ name, skipped: true });
  console.log(`skip - ${name}: ${why}`);
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }

async function api(route, body) {
  const res = await fetch(BASE + route, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}
async function weightsOf(route, body) {
  const r = await api(route, body);
  assert(r.status === 200, `${route} answered ${r.status}: ${JSON.stringify(r.body).slice(0, 300)}`);
  return r.body.weights;
}

// Reads the detail heatmap's cells as a nested matrix (null where a cell is missing).
async function pageMatrix(page, sel = '#heatmap') {
  const cells = await page.$$eval(`${sel} .cell`, els => els.map(e => [+e.dataset.row, +e.dataset.col, e.dataset.weight]));
  const m = [];
  for (const [i, j, w] of cells) { (m[i] ||= [])[j] = Number(w); }
  return m;
}
function maxDiff(a, b) {
  if (!Array.isArray(a) || a.length !== b.length) return Infinity;
  let d = 0;
  for (let i = 0; i < b.length; i++) {
    if (!a[i] || a[i].length !== b[i].length) return Infinity;
    for (let j = 0; j < b[i].length; j++) d = Math.max(d, Math.abs(a[i][j] - b[i][j]));
  }
  return d;
}
// Polls until the heatmap shows `expected` (the page re-renders after a debounce).
async function expectHeatmap(page, expected, what, sel = '#heatmap') {
  const until = Date.now() + 4000;
  let d = Infinity;
  while (Date.now() < until) {
    d = maxDiff(await pageMatrix(page, sel), expected);
    if (d <= TOL) return;
    await page.waitForTimeout(50);
  }
  throw new Error(`${what}: heatmap differs from the API's weights (max |diff| ${d})`);
}

// axe-core's violations on p's page as it is now: [{id, impact, nodes: [selector, ...]}].
async function axeViolations(p) {
  if (!(await p.evaluate(() => 'axe' in window))) await p.addScriptTag({ path: AXE }); // once per document
  return p.evaluate(async () => (await window.axe.run(document, { resultTypes: ['violations'] })).violations
    .map(v => ({ id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' ')) })));
}
// Fails when axe finds anything on p's page, naming each rule, its impact and its first elements.
async function expectAxeClean(p, state) {
  const v = await axeViolations(p);
  assert(v.length === 0, `${state}: ` + v.map(x => `[${x.impact}] ${x.id} at ${x.nodes.slice(0, 3).join(', ')}`).join('; '));
}

// WCAG contrast ratio of two colours given as '#rrggbb' or 'rgb(r, g, b)'.
function contrast(a, b) {
  const rgb = c => (c.startsWith('#') ? [1, 3, 5].map(k => parseInt(c.slice(k, k + 2), 16)) : c.match(/[\d.]+/g).slice(0, 3).map(Number));
  const lin = v => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const lum = c => { const [r, g, bl] = rgb(c).map(lin); return 0.2126 * r + 0.7152 * g + 0.0722 * bl; };
  const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}

// Identity projections for nn.MultiheadAttention, written out independently
// of the page's own helper.
function identityParams(E) {
  const I = [];
  for (let i = 0; i < E; i++) { I.push(new Array(E).fill(0)); I[i][i] = 1; }
  return { in_proj_weight: I.concat(I, I), in_proj_bias: new Array(3 * E).fill(0),
    'out_proj.weight': I, 'out_proj.bias': new Array(E).fill(0) };
}

// A sentence of n words (one 16-word line, repeated).
function wordsOf(n) {
  const words = 'the quick brown fox jumps over a lazy dog and then it rests in the warm sun'.split(' ');
  return Array.from({ length: n }, (_, i) => words[i % words.length]).join(' ');
}

function sentenceBody(text, extra = {}) {
  const v = embed(tokenize(text));
  return { query: v, key: v, value: v, seed: 0, ...extra };
}

/* -------------------------------------------------------------- tests */

fs.mkdirSync(SHOTS, { recursive: true });
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--no-first-run', '--disable-quic'],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
const page = await context.newPage();
const pageErrors = [];
page.on('pageerror', e => pageErrors.push(e.message));
// Every request the page makes, to prove it fetches nothing from elsewhere.
const requested = [];
page.on('request', r => requested.push(r.url()));
const shot = (name, full = true) => page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: full });
const setRule = async rule => { await page.selectOption('#rule', rule); };
// Clicks id on p and saves the download as dir/prefix + its name; returns the path.
async function saveDownload(p, id, dir, prefix) {
  const [dl] = await Promise.all([p.waitForEvent('download', { timeout: 30000 }), p.click(id)]);
  const file = path.join(dir, prefix + dl.suggestedFilename());
  await dl.saveAs(file);
  return file;
}
// Opens the demo on p in load mode and gives it the export file.
async function loadExport(p, file) {
  await p.goto(BASE + '/');
  await p.waitForSelector('#heatmap .cell');
  await p.click('label:has(input[name="mode"][value="load"])');
  await p.setInputFiles('#load-file', file);
}
// Milliseconds of 60 hovers on p over the cells of sel (every stride-th,
// wrapping), each with the reflow of the readout (and, with box, of the hover
// box): their median, max and the number of cells.
function hoverTimes(p, sel, stride, readout, box) {
  return p.evaluate(([sel, stride, readout, box]) => {
    const cells = document.querySelectorAll(sel);
    const times = [];
    for (let k = 0; k < 60; k++) {
      const c = cells[(k * stride) % cells.length];
      const t0 = performance.now();
      c.dispatchEvent(new MouseEvent('mouseover', { bubbles: true }));
      void document.querySelector(readout).getBoundingClientRect();
      if (box) void c.ownerSVGElement.querySelector('.hover-box').getBoundingClientRect();
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    return { median: times[30], max: times[59], n: cells.length };
  }, [sel, stride, readout, box]);
}
// How many bytes of RGBA pixels differ between two PNG files (buffers), or
// the two sizes when they differ; decoded in page p.
function pngDiff(p, png1, png2) {
  return p.evaluate(async ([a, b]) => {
    const img = async b64 => createImageBitmap(await (await fetch('data:image/png;base64,' + b64)).blob());
    const [x, y] = [await img(a), await img(b)];
    if (x.width !== y.width || x.height !== y.height) return `size ${x.width}x${x.height} vs ${y.width}x${y.height}`;
    const px = i => { const c = new OffscreenCanvas(i.width, i.height); const g = c.getContext('2d'); g.drawImage(i, 0, 0); return g.getImageData(0, 0, i.width, i.height).data; };
    const [p, q] = [px(x), px(y)];
    let n = 0;
    for (let k = 0; k < p.length; k++) if (p[k] !== q[k]) n++;
    return n;
  }, [png1.toString('base64'), png2.toString('base64')]);
}
// Each test after the first starts from a freshly loaded page, so one
// failure does not cascade into the next.
const fresh = async () => {
  await page.goto(BASE + '/');
  await page.waitForSelector('#heatmap .cell', { timeout: 30000 });
};
// The mode radios are visually replaced by their labels; press the label.
const setMode = mode => page.click(`label:has(input[name="mode"][value="${mode}"])`);

try {
  await test('default example renders on load', async () => {
    await page.goto(BASE + '/');
    await page.waitForSelector('#heatmap .cell', { timeout: 30000 });
    const ms = await page.evaluate(() => performance.now());
    const n = tokenize(DEFAULT_SENTENCE).length;
    const cells = await page.$$eval('#heatmap .cell', e => e.length);
    assert(cells === n * n, `expected ${n * n} cells, found ${cells}`);
    // Printed, not asserted: speed is for `make bench`, and on a shared
    // 2-core machine a cold browser's first page varies by seconds (about
    // 0.2 s when it is idle). That it appears at all is the waitFor above.
    console.log(`  first heatmap ${ms.toFixed(0)} ms after navigation`);
    const labels = await page.$$eval('#heatmap .row-label', e => e.map(x => x.textContent));
    assert(labels.join(' ') === tokenize(DEFAULT_SENTENCE).join(' '), `row labels are ${labels.join(' ')}`);
    await shot('01-heatmap');
  });

  await test('heatmap cells equal the weights the API returns for the same request', async () => {
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE));
    await expectHeatmap(page, w, 'scaled_dot');
    // The hover readout tells the value of the cell under the pointer.
    await page.hover('#heatmap .cell[data-row="1"][data-col="8"]');
    const txt = await page.textContent('#readout');
    assert(txt.includes('weight ' + fmt(w[1][8])), `readout "${txt}" lacks ${fmt(w[1][8])}`);
    // The status parts the network's time from the drawing's.
    const st = await page.textContent('#status');
    assert(/round trip \d+ ms, drawn in \d+ ms/.test(st), `status "${st}"`);
    // The hovered cell is outlined (not only the keyboard's).
    const box = await page.$eval('#heatmap .hover-box', b => [b.getAttribute('visibility'), b.getAttribute('x'), b.getAttribute('y')]);
    const cellXY = await page.$eval('#heatmap .cell[data-row="1"][data-col="8"]', c => [c.getAttribute('x'), c.getAttribute('y')]);
    assert(box[0] === 'visible' && box[1] === cellXY[0] && box[2] === cellXY[1], `hover outline ${box} vs cell ${cellXY}`);
    const title = await page.textContent('#heatmap .cell[data-row="1"][data-col="8"] title');
    assert(/cat → cat/.test(title), `cell title is "${title}"`);
  });

  await test('formula of the chosen rule comes from GET /rules', async () => {
    await fresh();
    const rules = await (await fetch(BASE + '/rules')).json();
    const list = Array.isArray(rules) ? rules : rules.rules;
    const r = list.find(x => x.name === 'scaled_dot');
    assert(r && r.formula, 'GET /rules has no scaled_dot formula');
    await page.waitForFunction(f => document.querySelector('#formula').textContent.includes(f), r.formula, { timeout: 30000 });
  });

  await test('per-row entropy and argmax match the weights', async () => {
    await fresh();
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE));
    const rows = await page.$$eval('#stats tbody tr', trs => trs.map(tr => [...tr.children].map(td => td.textContent)));
    const toks = tokenize(DEFAULT_SENTENCE);
    assert(rows.length === w.length, `${rows.length} stats rows for ${w.length} queries`);
    w.forEach((row, i) => {
      let arg = 0, h = 0;
      row.forEach((x, j) => { if (x > row[arg]) arg = j; if (x > 0) h -= x * Math.log2(x); });
      assert(rows[i][2] === toks[arg], `row ${i}: argmax ${rows[i][2]}, expected ${toks[arg]}`);
      assert(rows[i][4].endsWith(fmt(h)), `row ${i}: entropy ${rows[i][4]}, expected ${fmt(h)}`);
      assert(rows[i][3] === fmt(row[arg]), `row ${i}: weight ${rows[i][3]}, expected ${fmt(row[arg])}`);
    });
  });

  await test('switching the rule re-renders with that rule\'s weights', async () => {
    await fresh();
    await setRule('dot');
    await expectHeatmap(page, await weightsOf('/attention/dot', sentenceBody(DEFAULT_SENTENCE)), 'dot');
    await setRule('general');
    await expectHeatmap(page, await weightsOf('/attention/general', sentenceBody(DEFAULT_SENTENCE)), 'general');
    await page.fill('#seed', '7');
    await page.dispatchEvent('#seed', 'change');
    await expectHeatmap(page, await weightsOf('/attention/general', sentenceBody(DEFAULT_SENTENCE, { seed: 7 })), 'general seed 7');
    await page.fill('#seed', '0');
    await page.dispatchEvent('#seed', 'change');
    await setRule('scaled_dot');
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE)), 'scaled_dot again');
  });

  await test('a request that never reaches the service says so, not that it was refused', async () => {
    await fresh();
    await page.route('**/attention/**', r => r.abort());
    try {
      await page.check('#causal');
      await page.waitForFunction(() => /Cannot reach/.test(document.querySelector('#status').textContent), null, { timeout: 30000 });
      const st = await page.textContent('#status');
      assert(!/refused/.test(st), `status "${st}"`);
    } finally {
      await page.unroute('**/attention/**');
      await page.uncheck('#causal');
    }
  });

  await test('options re-render: causal, window, hard argmax, top-k, scale', async () => {
    await fresh();
    await page.check('#causal');
    const causal = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { causal: true }));
    await expectHeatmap(page, causal, 'causal');
    causal.forEach((r, i) => r.forEach((x, j) => assert(j <= i || x === 0, `causal weight at ${i},${j} is ${x}`)));
    // Uniform over the keys a row may see: row 1 sees two.
    await page.hover('#heatmap .cell[data-row="1"][data-col="0"]');
    const ro = await page.textContent('#readout');
    assert(ro.includes('uniform would be ' + fmt(0.5)), `causal row 1 readout "${ro}"`);
    await page.uncheck('#causal');

    await page.fill('#window', '1');
    await page.dispatchEvent('#window', 'change');
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { window: 1 })), 'window 1');
    await page.fill('#window', '');
    await page.dispatchEvent('#window', 'change');

    await page.selectOption('#hard', 'argmax');
    const hard = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { hard: 'argmax' }));
    await expectHeatmap(page, hard, 'hard argmax');
    hard.forEach((r, i) => assert(r.filter(x => x === 1).length === 1, `argmax row ${i} is not one-hot`));
    await shot('03-hard-argmax');
    await page.selectOption('#hard', 'top_k');
    await page.fill('#topk', '3');
    await page.dispatchEvent('#topk', 'change');
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { hard: { top_k: 3 } })), 'top_k 3');
    await page.selectOption('#hard', '');

    await page.fill('#scale', '0.05');
    await page.dispatchEvent('#scale', 'change');
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { scale: 0.05 })), 'scale 0.05');
    await page.fill('#scale', '');
    await page.dispatchEvent('#scale', 'change');
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE)), 'options cleared');
  });

  await test('key padding is sent as key_mask and a fully masked row is flagged', async () => {
    await fresh();
    const n = tokenize(DEFAULT_SENTENCE).length;
    await page.click('#source-tokens .token[data-index="0"]');
    const km = Array.from({ length: n }, (_, j) => j !== 0);
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { key_mask: km })), 'key_mask');
    // Causal + padding of key 0 leaves query 0 nothing to attend.
    await page.check('#causal');
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { key_mask: km, causal: true }));
    assert(w[0].every(x => x === 0), 'API did not give an all-zero row 0');
    await expectHeatmap(page, w, 'key_mask + causal');
    const flagged = await page.$$eval('#heatmap .masked-row', e => e.map(x => x.dataset.row));
    assert(flagged.length === 1 && flagged[0] === '0', `masked rows flagged: ${flagged}`);
    const status = await page.textContent('#stats tbody tr:first-child');
    assert(status.includes('fully masked'), `stats row 0 is "${status}"`);
    await shot('04-masked-row');
    await page.uncheck('#causal');
    await page.click('#source-tokens .token[data-index="0"]');
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE)), 'padding cleared');
  });

  await test('hovering a token filters the line view', async () => {
    await fresh();
    await page.click('#tab-lines');
    await page.waitForSelector('#lines .attn-line', { state: 'attached' });
    const visible = () => page.$$eval('#lines .attn-line', ls => ls.map(l => [l.dataset.q, l.dataset.k]));
    const all = await visible();
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE));
    const nonzero = w.flat().filter(x => x > 0).length;
    assert(all.length === nonzero, `${all.length} lines for ${nonzero} nonzero weights`);
    await page.hover('#lines .tok[data-side="q"][data-index="1"]');
    const only = await visible();
    assert(only.length > 0 && only.length === w[1].filter(x => x > 0).length, `${only.length} lines after hover`);
    assert(only.every(([q]) => q === '1'), 'a line of another query stayed visible');
    const opac = await page.$eval('#lines .attn-line[data-q="1"][data-k="8"]', l => Number(l.getAttribute('stroke-opacity')));
    assert(Math.abs(opac - w[1][8]) < 1e-3, `line opacity ${opac} vs weight ${w[1][8]}`);
    // One head: the numbers are written beside the keys, in the page's one format.
    const notes = await page.$$eval('#lines .weight-note', e => e.map(x => x.textContent));
    assert(notes.length === w[1].length && notes.every((t, j) => t === fmt(w[1][j])), `weight notes ${notes.slice(0, 4)}`);
    await shot('05-lines-hover');
    await page.hover('#lines .tok[data-side="k"][data-index="4"]');
    const keys = await visible();
    assert(keys.length > 0 && keys.every(([, k]) => k === '4'), 'hovering a key does not keep only its lines');
    await page.mouse.move(2, 2);
    assert((await visible()).length === all.length, 'lines not restored after leaving the token');
    // Keyboard: focusing a token filters too.
    await page.focus('#lines .tok[data-side="q"][data-index="2"]');
    assert((await visible()).every(([q]) => q === '2'), 'keyboard focus does not filter');
    await page.click('#tab-heatmap');
  });

  await test('multi-head: grid of every head, detail view, head toggles in the line view', async () => {
    await fresh();
    await setRule('multihead');
    await page.selectOption('#heads', '4');
    const w = await weightsOf('/multihead', sentenceBody(DEFAULT_SENTENCE, { num_heads: 4, params: identityParams(32) }));
    assert(w.length === 4, `API gave ${w.length} heads`);
    await expectHeatmap(page, w[0], 'head 0');
    const thumbs = await page.$$eval('#heads-grid .head-thumb', e => e.length);
    assert(thumbs === 5, `${thumbs} thumbnails (4 heads + mean)`);
    await page.click('#heads-grid .head-thumb[data-head="2"]');
    await expectHeatmap(page, w[2], 'head 2');
    await expectHeatmap(page, w[3], 'thumbnail head 3', '#heads-grid .head-thumb[data-head="3"]');
    await shot('06-multihead');
    await page.click('#tab-lines');
    await page.click('#head-toggles .head-toggle[data-head="1"]');
    await page.click('#head-toggles .head-toggle[data-head="3"]');
    const heads = await page.$$eval('#lines .attn-line', ls => [...new Set(ls.map(l => l.dataset.head))].sort());
    assert(heads.join() === '0,2', `heads drawn after toggling 1 and 3 off: ${heads}`);
    await shot('07-multihead-lines');
    await page.click('#tab-heatmap');
    // Seeded random projections instead: the server's own initialisation.
    await page.selectOption('#proj', 'seeded');
    const seeded = await weightsOf('/multihead', sentenceBody(DEFAULT_SENTENCE, { num_heads: 4 }));
    await expectHeatmap(page, seeded[2], 'seeded head 2');
    await setRule('scaled_dot');
  });

  await test('compare view shows every rule on the same inputs', async () => {
    await fresh();
    await page.click('#tab-compare');
    const want = ['dot', 'scaled_dot', 'general', 'additive', 'concat_tanh', 'concat', 'linear', 'multihead'];
    await page.waitForFunction(n => document.querySelectorAll('#compare-grid .compare-item svg').length === n, want.length, { timeout: 30000 });
    const got = await page.$$eval('#compare-grid .compare-item', e => e.map(x => x.dataset.rule));
    assert(got.join() === want.join(), `compare shows ${got}`);
    const dot = await weightsOf('/attention/dot', sentenceBody(DEFAULT_SENTENCE));
    await expectHeatmap(page, dot, 'compare dot', '#compare-grid .compare-item[data-rule="dot"]');
    const v = embed(tokenize(DEFAULT_SENTENCE));
    const concat = await weightsOf('/attention/concat', { query: v, key: v, value: v, seed: 0 });
    await expectHeatmap(page, concat, 'compare concat', '#compare-grid .compare-item[data-rule="concat"]');
    await shot('08-compare');
  });

  await test('PNG, SVG and JSON export', async () => {
    await fresh();
    const save = async (id) => {
      const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click(id)]);
      const file = path.join(SHOTS, 'export-' + dl.suggestedFilename());
      await dl.saveAs(file);
      return fs.readFileSync(file);
    };
    // The compare view first: several SVGs composed into one picture.
    await page.click('#tab-compare');
    await page.waitForFunction(() => document.querySelectorAll('#compare-grid .compare-item svg').length === 8, null, { timeout: 30000 });
    const png = await save('#export-png');
    assert(png.length > 2000, `PNG has ${png.length} bytes`);
    assert(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'not a PNG signature');
    const wpx = png.readUInt32BE(16), hpx = png.readUInt32BE(20);
    assert(wpx > 300 && hpx > 300, `PNG is ${wpx}x${hpx}`);
    await page.click('#tab-heatmap');
    const svg = (await save('#export-svg')).toString('utf8');
    assert(svg.startsWith('<svg') && svg.includes('class="cell"') && svg.includes('data-weight'), 'SVG export lacks the cells');
    assert(svg.includes('absolute 0–1') && svg.includes('hashed vectors'), 'SVG export lacks its caption');
    const json = JSON.parse((await save('#export-json')).toString('utf8'));
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE));
    assert(maxDiff(json.response.weights, w) <= TOL, 'exported JSON weights differ from the API');
    assert(json.rows.join(' ') === tokenize(DEFAULT_SENTENCE).join(' '), 'exported JSON lacks the tokens');
    assert(maxDiff(json.request.query, embed(tokenize(DEFAULT_SENTENCE))) <= TOL, 'exported JSON lacks the request');
    const msg = await page.textContent('#export-msg');
    assert(/Saved attention-scaled_dot-heatmap\.json/.test(msg), `no confirmation after export: "${msg}"`);
    const pngHeat = await save('#export-png');
    assert(pngHeat.length > 2000, 'heatmap PNG is empty');
  });

  await test('an invalid paste shows the API\'s own error message next to the field', async () => {
    await fresh();
    await setMode('paste');
    const cases = [
      { text: '{"query": [[1, 2], [3]], "key": [[1, 2]], "value": [[1]]}', what: 'ragged tensor' },
      { text: '{"query": [[1, 2]], "key": [[1, 2, 3]], "value": [[1]]}', what: 'shape mismatch' },
      { text: '{"query": [[1, 2]], "key": [[1, 2]], "value": [[1]], "querry": 1}', what: 'unknown field' },
      { text: '{"query": [[1, 2]', what: 'not JSON' },
    ];
    for (const c of cases) {
      await page.fill('#paste', c.text);
      await page.click('#paste-run');
      let body;
      try { body = { ...JSON.parse(c.text), seed: 0 }; } catch { body = c.text; }
      const r = await api('/attention/scaled_dot', body);
      assert(r.status >= 400 && r.body.error && r.body.error.message, `${c.what}: API answered ${r.status}`);
      await page.waitForFunction(m => document.querySelector('#err-paste').textContent.includes(m), r.body.error.message, { timeout: 30000 })
        .catch(async () => { throw new Error(`${c.what}: page shows "${await page.textContent('#err-paste')}", API says "${r.body.error.message}"`); });
      if (c.what === 'ragged tensor') await shot('09-paste-error');
    }
    // The page is still alive and a good paste renders.
    await page.click('#paste-example');
    await page.click('#paste-run');
    await page.waitForFunction(() => document.querySelector('#err-paste').textContent === '', null, { timeout: 30000 });
    const ex = JSON.parse(await page.inputValue('#paste'));
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', { ...ex, seed: 0 }), 'pasted example');
  });

  await test('a pasted request with heads, (B, H, L, D) as torch SDPA takes (and (B, L, H, D) with qkv_layout bshd, and packed sequences): each head drawn as multi-head\'s are', async () => {
    await fresh();
    await setMode('paste');
    // 3 query heads over one key/value head (multi-query), a batch of two
    const q = [[[[1, 0], [0, 1], [1, 1]], [[0, 1], [1, 0], [2, 0]], [[0.5, 0.5], [1, -1], [0, 0]]],
               [[[0, 0], [1, 1], [2, 1]], [[1, 2], [0, 1], [1, 0]], [[-1, 0], [0, -1], [1, 1]]]];
    const k = [[[[1, 0], [0, 1], [1, 1], [0, 2]]], [[[2, 0], [0, 1], [1, -1], [1, 1]]]];
    const body = { query: q, key: k, value: k };
    await page.fill('#paste', JSON.stringify(body));
    await page.click('#paste-run');
    await page.waitForFunction(() => document.querySelector('#err-paste').textContent === '' &&
      document.querySelectorAll('#heads-grid .head-thumb').length > 0, null, { timeout: 30000 });
    const w = await weightsOf('/attention/scaled_dot', { ...body, seed: 0 });
    assert(w.length === 2 && w[0].length === 3, `API weights not (2, 3, Lq, Lk): ${JSON.stringify(w).slice(0, 80)}`);
    const thumbs = await page.$$eval('#heads-grid .head-thumb', e => e.length);
    assert(thumbs === 4, `${thumbs} thumbnails (3 heads + mean)`);
    await expectHeatmap(page, w[0][0], 'batch 0, head 0');
    await page.click('#heads-grid .head-thumb[data-head="2"]');
    await expectHeatmap(page, w[0][2], 'batch 0, head 2');
    await page.fill('#batch', '1');
    await page.dispatchEvent('#batch', 'input');
    await expectHeatmap(page, w[1][2], 'batch 1, head 2');
    // The same tensors as FlashAttention holds them, (B, L, H, D), with
    // qkv_layout "bshd": the same weights, (B, H, Lq, Lk).
    const bshd = t => t.map(b => b[0].map((_, l) => b.map(h => h[l])));
    const fa = { query: bshd(q), key: bshd(k), value: bshd(k), qkv_layout: 'bshd' };
    await page.fill('#paste', JSON.stringify(fa));
    await page.click('#paste-run');
    await page.waitForFunction(() => document.querySelector('#err-paste').textContent === '', null, { timeout: 30000 });
    const wf = await weightsOf('/attention/scaled_dot', { ...fa, seed: 0 });
    assert(JSON.stringify(wf) === JSON.stringify(w), 'bshd weights differ from the (B, H, L, D) request\'s');
    await page.click('#heads-grid .head-thumb[data-head="1"]');
    await expectHeatmap(page, w[1][1], 'bshd: batch 1, head 1');
    // Packed sequences (cu_seqlens_q, as flash_attn_varlen_func takes them):
    // 2 and 3 queries over 3 and 2 keys, 2 heads over one key/value head;
    // the weights are (2, 2, 3, 3), zero past each sequence's lengths.
    const vl = { query: [[[1, 0], [0, 1]], [[1, 1], [0, 1]], [[0, 1], [1, 0]], [[2, 0], [0, 2]], [[1, -1], [1, 1]]],
                 key: [[[1, 0]], [[0, 1]], [[1, 1]], [[2, 0]], [[0, 2]]],
                 value: [[[1, 0]], [[0, 1]], [[1, 1]], [[2, 0]], [[0, 2]]],
                 cu_seqlens_q: [0, 2, 5], cu_seqlens_k: [0, 3, 5] };
    await page.fill('#paste', JSON.stringify(vl));
    await page.click('#paste-run');
    await page.waitForFunction(() => document.querySelector('#err-paste').textContent === '', null, { timeout: 30000 });
    const wv = await weightsOf('/attention/scaled_dot', { ...vl, seed: 0 });
    assert(wv.length === 2 && wv[0].length === 2 && wv[0][0].length === 3 && wv[0][0][0].length === 3,
      `packed weights not (2, 2, 3, 3): ${JSON.stringify(wv).slice(0, 80)}`);
    await page.fill('#batch', '1');
    await page.dispatchEvent('#batch', 'input');
    await page.click('#heads-grid .head-thumb[data-head="1"]');
    await expectHeatmap(page, wv[1][1], 'packed: sequence 1, head 1');
    // Sequence 1 has 3 queries over 2 keys: its third key column is the
    // padding up to the longest sequence, drawn as padding, not as zeros.
    const cells = await page.$$eval('#heatmap .cell', e => e.map(c => [+c.dataset.row, +c.dataset.col, c.dataset.mask || '']));
    assert(cells.length === 9, `${cells.length} cells, expected 3 x 3`);
    for (const [i, j, kind] of cells)
      assert(kind === (j === 2 ? 'pad' : ''), `packed cell ${i},${j}: drawn as "${kind}"`);
    await page.fill('#batch', '0'); // sequence 0: 2 queries over 3 keys, its third row padding
    await page.dispatchEvent('#batch', 'input');
    await expectHeatmap(page, wv[0][1], 'packed: sequence 0, head 1');
    const cells0 = await page.$$eval('#heatmap .cell', e => e.map(c => [+c.dataset.row, +c.dataset.col, c.dataset.mask || '']));
    for (const [i, j, kind] of cells0)
      assert(kind === (i === 2 ? 'pad' : ''), `packed sequence 0 cell ${i},${j}: drawn as "${kind}"`);
  });

  await test('a saved API response loads and renders', async () => {
    await fresh();
    const saved = await api('/multihead', sentenceBody('a cat sat', { num_heads: 2 }));
    await setMode('load');
    await page.fill('#load-text', JSON.stringify(saved.body));
    await page.click('#load-run');
    await expectHeatmap(page, saved.body.weights[0], 'loaded head 0');
    // The same response as a file, through the file picker.
    const file = path.join(SHOTS, 'saved-response.json');
    const single = await api('/attention/dot', sentenceBody('a cat sat'));
    fs.writeFileSync(file, JSON.stringify(single.body));
    await page.setInputFiles('#load-file', file);
    await expectHeatmap(page, single.body.weights, 'loaded file');
    await page.fill('#load-text', '{"weights": [[0.5, 0.5], [1]]}');
    await page.click('#load-run');
    await page.waitForFunction(() => document.querySelector('#err-load').textContent.length > 0, null, { timeout: 30000 });
    await setMode('sentences');
  });

  await test('shape mismatch in sentence mode shows the API message by the rule field', async () => {
    await fresh();
    // A window below zero is refused by the API; the message lands next to the window field.
    await page.fill('#window', '-1');
    await page.dispatchEvent('#window', 'change');
    const r = await api('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { window: -1 }));
    assert(r.status === 422 || r.status === 400, `API accepted window -1 (${r.status})`);
    await page.waitForFunction(m => document.querySelector('#err-window').textContent.includes(m) ||
      document.querySelector('#err-general').textContent.includes(m), r.body.error.message, { timeout: 30000 });
    assert(await page.$('#heatmap .cell'), 'the last good heatmap vanished');
    await page.fill('#window', '');
    await page.dispatchEvent('#window', 'change');
    await page.waitForFunction(() => document.querySelector('#err-window').textContent === '', null, { timeout: 30000 });
  });

  await test('cross-attention with two sentences, and the concat rule pairing', async () => {
    await fresh();
    await page.selectOption('#example', '1');
    const src = 'the cats were sitting on the mats', tgt = 'a cat sat on a mat';
    const K = embed(tokenize(src)), Q = embed(tokenize(tgt));
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', { query: Q, key: K, value: K, seed: 0 }), 'cross scaled_dot');
    await shot('02-cross-attention');
    await setRule('concat');
    assert(await page.isDisabled('#causal'), 'causal stays enabled for concat');
    await expectHeatmap(page, await weightsOf('/attention/concat', { query: Q, key: Q, value: K, seed: 0 }), 'cross concat');
    await setRule('scaled_dot');
  });

  await test('keyboard: tabs move with the arrow keys', async () => {
    await fresh();
    await page.focus('#tab-heatmap');
    await page.keyboard.press('ArrowRight');
    assert(await page.isVisible('#view-lines'), 'ArrowRight did not open the line view');
    assert(await page.evaluate(() => document.activeElement.id) === 'tab-lines', 'focus did not follow');
    await page.keyboard.press('ArrowLeft');
    assert(await page.isVisible('#view-heatmap'), 'ArrowLeft did not go back');
  });

  await test('keyboard: arrow keys walk the heatmap cells and read them out', async () => {
    await fresh();
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE));
    await page.focus('#heatmap svg');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowDown');
    const txt = await page.textContent('#readout');
    assert(txt.includes('(row 1)') && txt.includes('(column 1)') && txt.includes('weight ' + fmt(w[1][1])), `readout "${txt}"`);
    assert(await page.$eval('#heatmap .hover-box', b => b.getAttribute('visibility')) === 'visible', 'no cursor drawn');
    // Enter pins the query under the cursor.
    await page.keyboard.press('Enter');
    assert(await page.$eval('#heatmap svg', s => s.dataset.pin) === 'q1', 'Enter did not pin query 1');
  });

  await test('layout 1280x800: readout beside the heatmap, all in the first screen', async () => {
    await fresh();
    await page.hover('#heatmap .cell[data-row="2"][data-col="3"]');
    const r = await page.evaluate(() => {
      const box = e => { const b = document.querySelector(e).getBoundingClientRect(); return { l: b.left, r: b.right, t: b.top, b: b.bottom }; };
      return { svg: box('#heatmap svg'), readout: box('#readout'), fig: box('#heatmap'), h: innerHeight };
    });
    assert(r.readout.l >= r.fig.r - 1, `readout (left ${r.readout.l}) is not beside the heatmap (right ${r.fig.r})`);
    assert(r.readout.b <= r.h && r.readout.t >= 0, `readout at ${r.readout.t}-${r.readout.b}, screen ${r.h}`);
    assert(r.svg.b <= r.h, `heatmap ends at ${r.svg.b}, below the ${r.h}px screen`);
    await shot('11-desktop-1280x800', false);
  });

  await test('layout 390x844: results first, controls folded, labels at least 11 px', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    try {
      await phone.goto(BASE + '/');
      await phone.waitForSelector('#heatmap .cell', { timeout: 30000 });
      const r = await phone.evaluate(() => {
        const svg = document.querySelector('#heatmap svg');
        const k = svg.getBoundingClientRect().width / Number(svg.getAttribute('width'));
        const sizes = [...svg.querySelectorAll('.row-label, .col-label')].map(t => Number(t.closest('g').getAttribute('font-size')) * k);
        return { sw: document.documentElement.scrollWidth, iw: innerWidth, fold: document.querySelector('#controls-fold').open,
          heatTop: svg.getBoundingClientRect().top, views: document.querySelector('.views').getBoundingClientRect().top,
          controls: document.querySelector('.controls').getBoundingClientRect().top, minFont: Math.min(...sizes) };
      });
      assert(r.sw <= r.iw + 1, `page is ${r.sw}px wide on a ${r.iw}px screen`);
      assert(r.views < r.controls, 'the controls come before the results');
      assert(!r.fold, 'the controls are not folded on a phone');
      assert(r.heatTop < 844 - 200, `the heatmap starts at ${r.heatTop}px, not in the first screen`);
      assert(r.minFont >= 11, `labels drawn at ${r.minFont.toFixed(1)} px`);
      // The heatmap fills its box, and keeps its size as the view is
      // drawn again (it once measured its own last picture, shrinking at
      // every change).
      const widths = [];
      for (let k = 0; k < 4; k++) {
        const w = await phone.evaluate(() => ({ svg: document.querySelector('#heatmap svg').getBoundingClientRect().width,
          box: document.querySelector('#heatmap').parentElement.getBoundingClientRect().width }));
        widths.push(w);
        await phone.evaluate(() => { document.querySelector('#controls-fold').open = true; });
        await phone.click('#causal');
        await phone.waitForTimeout(600);
        await phone.waitForSelector('#heatmap .cell', { timeout: 30000 });
      }
      for (const w of widths) {
        assert(w.svg <= w.box + 1, `the heatmap is ${w.svg.toFixed(0)}px wide in a ${w.box.toFixed(0)}px box`);
        assert(w.svg >= 0.9 * widths[0].box, `the heatmap shrank to ${w.svg.toFixed(0)}px in a ${w.box.toFixed(0)}px box`);
      }
      // The line view fits the screen: the keys' labels on the right are not cut off.
      await phone.evaluate(() => { document.querySelector('#controls-fold').open = false; });
      await phone.click('#tab-lines');
      await phone.waitForSelector('#lines svg .tok', { timeout: 30000 });
      const lw = await phone.evaluate(() => ({ svg: document.querySelector('#lines svg').getBoundingClientRect().right,
        box: document.querySelector('#lines').getBoundingClientRect().right,
        key: Math.max(...[...document.querySelectorAll('#lines .tok[data-side="k"] text')].map(t => t.getBoundingClientRect().right)) }));
      assert(lw.svg <= lw.box + 1 && lw.key <= lw.box + 1, `the line view ends at ${lw.svg.toFixed(0)}px (its keys' labels at ${lw.key.toFixed(0)}px) in a box ending at ${lw.box.toFixed(0)}px`);
      // So does the neuron view: its API column and its texts are on the screen.
      await phone.click('#tab-neuron');
      await phone.waitForSelector('#neuron svg .n-api', { timeout: 30000 });
      const nv = await phone.evaluate(() => {
        const svg = document.querySelector('#neuron svg'), right = e => e.getBoundingClientRect().right;
        return { svg: right(svg), box: right(document.querySelector('#neuron')), bottom: svg.getBoundingClientRect().bottom,
          text: Math.max(...[...svg.querySelectorAll('text')].map(right)),
          textBottom: Math.max(...[...svg.querySelectorAll('text')].map(t => t.getBoundingClientRect().bottom)) };
      });
      assert(nv.svg <= nv.box + 1 && nv.text <= nv.svg + 1, `the neuron view ends at ${nv.svg.toFixed(0)}px (its texts at ${nv.text.toFixed(0)}px) in a box ending at ${nv.box.toFixed(0)}px`);
      assert(nv.textBottom <= nv.bottom + 1, `the neuron view's texts reach ${nv.textBottom.toFixed(0)}px, below its bottom at ${nv.bottom.toFixed(0)}px`);
      await phone.click('#tab-heatmap');
      await phone.waitForSelector('#heatmap .cell', { timeout: 30000 });
      await phone.screenshot({ path: path.join(SHOTS, '10-phone-390x844.png') });
      await phone.screenshot({ path: path.join(SHOTS, '10-phone-390x844-full.png'), fullPage: true });
      // The fold opens on a tap.
      await phone.click('#controls-fold > summary');
      assert(await phone.isVisible('#source'), 'the folded controls do not open');
    } finally {
      await phone.close();
    }
  });

  await test('absolute colour scale by default: cells are colour(weight), a uniform matrix is pale', async () => {
    await fresh();
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE));
    const fills = await page.$$eval('#heatmap .cell', e => e.map(c => [+c.dataset.row, +c.dataset.col, c.getAttribute('fill')]));
    for (const [i, j, f] of fills) assert(f === colour(w[i][j]), `cell ${i},${j}: ${f}, expected ${colour(w[i][j])}`);
    const legend = await page.textContent('#scale-legend');
    assert(/absolute scale 0–1/.test(legend), `legend says "${legend}"`);
    // Uniform attention: every query gets the same score for every key.
    await setMode('paste');
    const zeros = Array.from({ length: 10 }, () => [0, 0, 0, 0]);
    await page.fill('#paste', JSON.stringify({ query: zeros, key: zeros, value: zeros }));
    await page.click('#paste-run');
    const uni = await weightsOf('/attention/scaled_dot', { query: zeros, key: zeros, value: zeros, seed: 0 });
    assert(uni.flat().every(x => Math.abs(x - 0.1) < 1e-6), 'the API did not give uniform weights');
    await expectHeatmap(page, uni, 'uniform');
    const ufill = await page.$eval('#heatmap .cell', c => c.getAttribute('fill'));
    const rgb = ufill.match(/\d+/g).map(Number);
    assert(rgb.every(c => c >= 200), `a uniform 0.1 is drawn ${ufill}, not pale`);
    // Per-row scale: the same matrix now saturates, and the legend says so.
    await page.selectOption('#colour-scale', 'row');
    await page.waitForFunction(() => document.querySelector('#heatmap svg').dataset.scale === 'row');
    assert(await page.$eval('#heatmap .cell', c => c.getAttribute('fill')) === colour(1), 'per-row scale does not saturate a flat row');
    assert(/row/.test(await page.textContent('#scale-legend')), 'legend does not state the per-row scale');
    await page.selectOption('#colour-scale', 'log');
    assert(/log/.test(await page.textContent('#scale-legend')), 'legend does not state the log scale');
    assert(await page.$eval('#heatmap .cell', c => c.getAttribute('fill')) === colour(0.75), 'log scale: 0.1 should sit at 3/4');
    await page.selectOption('#colour-scale', 'abs');
  });

  await test('thumbnails and Compare share the absolute scale', async () => {
    await fresh();
    await setRule('multihead');
    await page.selectOption('#heads', '4');
    const w = await weightsOf('/multihead', sentenceBody(DEFAULT_SENTENCE, { num_heads: 4, params: identityParams(32) }));
    await expectHeatmap(page, w[1], 'thumb 1', '#heads-grid .head-thumb[data-head="1"]');
    const tf = await page.$$eval('#heads-grid .head-thumb[data-head="1"] .cell', e => e.map(c => [+c.dataset.row, +c.dataset.col, c.getAttribute('fill')]));
    for (const [i, j, f] of tf) assert(f === colour(w[1][i][j]), `thumb cell ${i},${j}: ${f} vs ${colour(w[1][i][j])}`);
    const caps = await page.$$eval('#heads-grid svg .caption', e => e.map(x => x.textContent));
    assert(caps.join() === 'head 0,head 1,head 2,head 3,mean of heads', `thumbnail captions inside the SVGs: ${caps}`);
    await setRule('scaled_dot');
    await page.click('#tab-compare');
    await page.waitForFunction(() => document.querySelectorAll('#compare-grid .compare-item svg').length === 8, null, { timeout: 30000 });
    const sd = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE));
    const cf = await page.$$eval('#compare-grid .compare-item[data-rule="scaled_dot"] .cell', e => e.map(c => [+c.dataset.row, +c.dataset.col, c.getAttribute('fill')]));
    for (const [i, j, f] of cf) assert(f === colour(sd[i][j]), `compare cell ${i},${j}: ${f} vs ${colour(sd[i][j])}`);
    // The detail heatmap of the same matrix has the same colours (not a pale copy).
    await page.click('#tab-heatmap');
    const hf = await page.$$eval('#heatmap .cell', e => e.map(c => c.getAttribute('fill')));
    assert(hf.join() === cf.map(x => x[2]).join(), 'compare and heatmap colour the same weights differently');
  });

  await test('padding and masked cells are drawn apart from computed zeros', async () => {
    await fresh();
    await page.click('#source-tokens .token[data-index="2"]');
    await page.check('#causal');
    const n = tokenize(DEFAULT_SENTENCE).length;
    const km = Array.from({ length: n }, (_, j) => j !== 2);
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { key_mask: km, causal: true }));
    await expectHeatmap(page, w, 'pad + causal');
    const cells = await page.$$eval('#heatmap .cell', e => e.map(c => [+c.dataset.row, +c.dataset.col, c.dataset.mask || '', c.getAttribute('fill')]));
    for (const [i, j, kind, fill] of cells) {
      const want = j === 2 ? 'pad' : j > i ? 'mask' : '';
      if (w[i][j] === 0) assert(kind === want, `cell ${i},${j}: drawn as "${kind}", expected "${want}"`);
      else assert(kind === '' && fill === colour(w[i][j]), `cell ${i},${j} (weight ${w[i][j]}) drawn as "${kind}" ${fill}`);
      if (kind) assert(/^url\(#hm\d+-(pad|mask)\)$/.test(fill) && fill.includes(kind), `cell ${i},${j}: fill ${fill}`);
    }
    await page.uncheck('#causal');
    await page.click('#source-tokens .token[data-index="2"]');
    // Hard argmax: its zeros were computed, so they stay plain white.
    await page.selectOption('#hard', 'argmax');
    const hard = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { hard: 'argmax' }));
    await expectHeatmap(page, hard, 'argmax');
    const marked = await page.$$eval('#heatmap .cell[data-mask]', e => e.length);
    assert(marked === 0, `${marked} computed zeros drawn as masked`);
    assert(await page.$eval('#heatmap .cell[data-weight="0"]', c => c.getAttribute('fill')) === colour(0), 'a computed zero is not white');
  });

  await test('pinning a token shows it in every view; clicking again releases it', async () => {
    await fresh();
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE));
    await page.click('#heatmap .row-label[data-row="1"]');
    assert(await page.$eval('#heatmap svg', s => s.dataset.pin) === 'q1', 'heatmap row 1 not pinned');
    // Attention on the text: every key token coloured by its weight from "cat".
    const toks = await page.$$eval('#token-text .ctok', e => e.map(t => [t.textContent, Number(t.dataset.weight), t.style.background]));
    assert(toks.length === w[1].length, `${toks.length} coloured tokens`);
    toks.forEach(([t, x, bg], j) => {
      assert(t === tokenize(DEFAULT_SENTENCE)[j], `token ${j} is ${t}`);
      assert(Math.abs(x - w[1][j]) <= TOL, `token ${j} weight ${x} vs ${w[1][j]}`);
      assert(bg.replace(/\s/g, '') === colour(w[1][j]), `token ${j} background ${bg} vs ${colour(w[1][j])}`);
    });
    assert(await page.$eval('#token-text .ctok.pinned', t => t.dataset.index) === '1', 'the pinned token is not marked in the text');
    await shot('12-pinned');
    await page.click('#tab-lines');
    assert(await page.$eval('#lines svg', s => s.dataset.pin) === 'q1', 'line view did not take the pin');
    const ls = await page.$$eval('#lines .attn-line', e => e.map(l => l.dataset.q));
    assert(ls.length > 0 && ls.every(q => q === '1'), 'line view shows lines of other tokens while pinned');
    await page.click('#tab-compare');
    await page.waitForFunction(() => document.querySelectorAll('#compare-grid .compare-item svg').length === 8, null, { timeout: 30000 });
    const pins = await page.$$eval('#compare-grid svg.heatmap', e => e.map(s => s.dataset.pin));
    assert(pins.length === 8 && pins.every(p => p === 'q1'), `compare pins: ${pins}`);
    // Release from the line view; every view lets go.
    await page.click('#tab-lines');
    await page.click('#lines .tok[data-side="q"][data-index="1"]');
    await page.mouse.move(2, 2);
    assert(await page.$eval('#lines svg', s => s.dataset.pin) === '', 'the second click did not release the pin');
    await page.click('#tab-heatmap');
    assert(await page.$eval('#heatmap svg', s => s.dataset.pin) === '', 'heatmap kept the released pin');
    assert(!(await page.$('#token-text .ctok.pinned')), 'text kept the released pin');
    // A key pin from a column label colours the queries by that column.
    await page.click('#heatmap .col-label[data-col="8"]');
    const colW = await page.$$eval('#token-text .ctok', e => e.map(t => Number(t.dataset.weight)));
    assert(colW.every((x, i) => Math.abs(x - w[i][8]) <= TOL), 'key pin does not colour by the column');
  });

  await test('the URL holds the whole view: a new page opens the same picture', async () => {
    await fresh();
    await setRule('multihead');
    await page.selectOption('#heads', '4');
    await page.click('#source-tokens .token[data-index="5"]');
    await page.waitForFunction(() => document.querySelector('#heatmap .row-label') && location.hash.includes('pad=5'), null, { timeout: 30000 });
    await page.click('#heads-grid .head-thumb[data-head="2"]');
    await page.selectOption('#colour-scale', 'log');
    await page.click('#heatmap .row-label[data-row="3"]');
    await page.click('#tab-lines');
    await page.click('#head-toggles .head-toggle[data-head="1"]');
    await page.mouse.move(2, 2);
    const url = page.url();
    assert(/pin=q3/.test(url) && /cs=log/.test(url) && /v=lines/.test(url) && /hide=1/.test(url) && /head=2/.test(url), `URL is ${url}`);
    const snap = async p => p.evaluate(() => ({
      lines: [...document.querySelectorAll('#lines .attn-line')].map(l => [l.dataset.q, l.dataset.k, l.dataset.head, l.dataset.weight].join()).join(';'),
      pin: document.querySelector('#lines svg').dataset.pin, scale: document.querySelector('#colour-scale').value,
      view: document.querySelector('#tab-lines').getAttribute('aria-selected'),
      text: [...document.querySelectorAll('#token-text .ctok')].map(t => t.dataset.weight + t.style.background).join(),
    }));
    const a = await snap(page);
    await page.click('#tab-heatmap');
    const ma = await pageMatrix(page);
    const fa = await page.$$eval('#heatmap .cell', e => e.map(c => c.getAttribute('fill').replace(/hm\d+/, '')).join());
    const other = await context.newPage();
    try {
      await other.goto(url);
      await other.waitForSelector('#lines .attn-line', { state: 'attached', timeout: 30000 });
      await other.waitForTimeout(200);
      const b = await snap(other);
      for (const k of Object.keys(a)) assert(a[k] === b[k], `${k} differs after reopening the URL: ${String(a[k]).slice(0, 120)} vs ${String(b[k]).slice(0, 120)}`);
      await other.click('#tab-heatmap');
      const mb = await pageMatrix(other);
      assert(maxDiff(mb, ma) === 0, 'heatmap differs after reopening the URL');
      const fb = await other.$$eval('#heatmap .cell', e => e.map(c => c.getAttribute('fill').replace(/hm\d+/, '')).join());
      assert(fa === fb, 'heatmap colours differ after reopening the URL');
      const title = await other.textContent('#heatmap svg .title');
      assert(title.startsWith('multihead: head 2'), `reopened title "${title}"`);
      const w = await weightsOf('/multihead', sentenceBody(DEFAULT_SENTENCE, { num_heads: 4, params: identityParams(32),
        key_mask: tokenize(DEFAULT_SENTENCE).map((_, j) => j !== 5) }));
      assert(maxDiff(mb, w[2]) <= TOL, 'reopened heatmap is not the API\'s head 2');
    } finally {
      await other.close();
    }
  });

  await test('a pasted request is kept in the URL too', async () => {
    await fresh();
    await setMode('paste');
    await page.click('#paste-example');
    await setRule('dot');
    await page.click('#paste-run');
    const ex = JSON.parse(await page.inputValue('#paste'));
    const w = await weightsOf('/attention/dot', { ...ex, seed: 0 });
    await expectHeatmap(page, w, 'pasted dot');
    await page.click('#heatmap .cell[data-row="2"][data-col="0"]');
    const other = await context.newPage();
    try {
      await other.goto(page.url());
      await other.waitForSelector('#heatmap .cell', { timeout: 30000 });
      await expectHeatmap(other, w, 'reopened paste');
      assert(await other.isChecked('input[name="mode"][value="paste"]'), 'the reopened page is not in paste mode');
      assert(await other.$eval('#heatmap svg', s => s.dataset.pin) === 'q2', 'the pin of a pasted view is lost');
    } finally {
      await other.close();
    }
  });

  await test('a batched multihead paste with average_weights: one matrix a batch element, not one a "head"', async () => {
    await fresh();
    await setMode('paste');
    await setRule('multihead');
    const req = { query: [[[1, 0], [0, 1]], [[1, 1], [0, 1]]], key: [[[1, 0], [0, 1], [1, 1]], [[2, 0], [0, 3], [1, -1]]],
      value: [[[1, 0], [2, 1], [3, 0]], [[4, 1], [5, 0], [6, 2]]], num_heads: 2, average_weights: true };
    await page.fill('#paste', JSON.stringify(req));
    await page.click('#paste-run');
    const w = await weightsOf('/multihead', { ...req, seed: 0 });
    assert(w.length === 2 && w[0].length === 2 && maxDiff(w[0], w[1]) > 0.01, 'the two batch elements should differ');
    await expectHeatmap(page, w[0], 'averaged batch element 0');
    assert(await page.textContent('#batch-of') === 'of 2', `batch control says "${await page.textContent('#batch-of')}"`);
    await page.focus('#batch');
    await page.keyboard.press('ArrowUp');
    await expectHeatmap(page, w[1], 'averaged batch element 1');
  });

  await test('a batched paste switches batch elements from the response, and the URL keeps the element', async () => {
    await fresh();
    await setMode('paste');
    await setRule('dot');
    const req = { query: [[[1, 0], [0, 1]], [[1, 1], [0, 1]]], key: [[[1, 0], [0, 1], [1, 1]], [[2, 0], [0, 3], [1, -1]]],
      value: [[[1], [2], [3]], [[4], [5], [6]]] };
    await page.fill('#paste', JSON.stringify(req));
    await page.click('#paste-run');
    const w = await weightsOf('/attention/dot', { ...req, seed: 0 });
    assert(w.length === 2 && maxDiff(w[0], w[1]) > 0.01, 'the two batch elements should differ');
    await expectHeatmap(page, w[0], 'batch element 0');
    assert(await page.isVisible('#batch-pick'), 'no batch element control');
    assert(await page.textContent('#batch-of') === 'of 2', `batch control says "${await page.textContent('#batch-of')}"`);
    // The keyboard switches to element 1, drawn from the response already received.
    const posts = requested.filter(u => u.includes('/attention/')).length;
    await page.focus('#batch');
    await page.keyboard.press('ArrowUp');
    await expectHeatmap(page, w[1], 'batch element 1');
    assert(requested.filter(u => u.includes('/attention/')).length === posts, 'switching the batch element sent a new request');
    const rows = await page.$$eval('#stats tbody tr', trs => trs.map(tr => [...tr.children].map(td => td.textContent)));
    w[1].forEach((row, i) => {
      const arg = row.indexOf(Math.max(...row));
      assert(rows[i][2] === 'k' + arg && rows[i][3] === fmt(row[arg]), `stats row ${i} is ${rows[i]}, expected k${arg} ${fmt(row[arg])}`);
    });
    assert((await page.textContent('#status')).includes('showing batch element 1 of 2'), `status "${await page.textContent('#status')}"`);
    // Past the last element nothing changes.
    await page.keyboard.press('ArrowUp');
    await expectHeatmap(page, w[1], 'batch element 1 after ArrowUp at the end');
    const other = await context.newPage();
    try {
      await other.goto(page.url());
      await other.waitForSelector('#heatmap .cell', { timeout: 30000 });
      await expectHeatmap(other, w[1], 'reopened batch element 1');
      assert(await other.inputValue('#batch') === '1', 'the reopened page does not show element 1 in its control');
    } finally {
      await other.close();
    }
  });

  await test('exports reload to the same picture (JSON in, PNG pixels compared)', async () => {
    await fresh();
    const save = (p, id) => saveDownload(p, id, SHOTS, 'roundtrip-');
    await page.click('#heatmap .row-label[data-row="1"]');
    await page.mouse.move(2, 2);
    const jsonFile = await save(page, '#export-json');
    const png1 = fs.readFileSync(await save(page, '#export-png'));
    const other = await context.newPage();
    try {
      await loadExport(other, jsonFile);
      await other.waitForFunction(() => /with its words/.test(document.querySelector('#status').textContent), null, { timeout: 30000 });
      const labels = await other.$$eval('#heatmap .row-label', e => e.map(x => x.textContent));
      assert(labels.join(' ') === tokenize(DEFAULT_SENTENCE).join(' '), `reloaded labels: ${labels.join(' ')}`);
      assert(await other.$eval('#heatmap svg', s => s.dataset.pin) === 'q1', 'the pin did not survive the export');
      await expectHeatmap(other, await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE)), 'reloaded');
      await other.mouse.move(2, 2);
      const png2 = fs.readFileSync(await save(other, '#export-png'));
      const diff = await pngDiff(other, png1, png2);
      assert(diff === 0, `re-rendered PNG differs: ${diff}`);
    } finally {
      await other.close();
    }
  });

  await test('Compare says under a panel which set options its rule was drawn without (as GET /rules says)', async () => {
    await fresh();
    await page.click('#tab-compare');
    await page.waitForFunction(() => document.querySelectorAll('#compare-grid .compare-item svg').length === 8, null, { timeout: 30000 });
    const unset = await page.$$eval('#compare-grid .compare-dropped', e => e.map(x => x.textContent));
    assert(unset.length === 0, `with no option set, panels say: ${unset.join(' | ')}`);
    await page.click('#tab-heatmap');
    await page.check('#causal');
    await page.click('#tab-compare');
    await page.waitForFunction(() => document.querySelectorAll('#compare-grid .compare-item svg').length === 8 &&
      document.querySelectorAll('#compare-grid .compare-dropped').length > 0, null, { timeout: 30000 });
    const rules = (await (await fetch(BASE + '/rules')).json()).rules;
    const notes = await page.$$eval('#compare-grid .compare-item', e => Object.fromEntries(e.map(f => [f.dataset.rule, f.querySelector('.compare-dropped')?.textContent ?? ''])));
    const without = rules.filter(r => (r.not_applicable || []).includes('causal')).map(r => r.name);
    assert(without.length > 0 && without.length < rules.length, `GET /rules: causal not applicable to ${without}`);
    for (const r of rules) {
      const says = /\bcausal\b/.test(notes[r.name] ?? '');
      assert(says === without.includes(r.name), `${r.name}: panel note "${notes[r.name]}" but GET /rules says causal ${without.includes(r.name) ? 'does not apply' : 'applies'}`);
    }
    await page.uncheck('#causal');
    await page.click('#tab-heatmap');
  });

  await test('titles, captions, feet and the axis titles fit inside their figures (heatmap and every Compare panel)', async () => {
    // Each text's own box, as the browser lays it out, against its SVG's width.
    const overflow = sel => page.$$eval(sel, svgs => svgs.flatMap(svg => [...svg.querySelectorAll('text.title, text.caption, text.foot')]
      .map(t => ({ text: t.textContent, over: t.getBBox().x + t.getBBox().width - svg.width.baseVal.value }))
      .filter(x => x.over > 0.5)));
    await fresh();
    await page.fill('#source', 'The cat sat on the mat'); // a narrow grid: the title sets the width
    await setRule('multihead');
    await page.waitForFunction(() => /multihead: head 0/.test(document.querySelector('#heatmap svg .title')?.textContent ?? '') &&
      document.querySelectorAll('#heatmap .col-label').length === 6, null, { timeout: 30000 });
    const a = await overflow('#heatmap svg.heatmap');
    assert(a.length === 0, `cut off in the heatmap: ${JSON.stringify(a)}`);
    // The axis titles: both there, inside the figure, over no label, title or caption.
    const ax = await page.$eval('#heatmap svg.heatmap', svg => {
      const box = e => e.getBoundingClientRect(), s = box(svg);
      const hit = (p, q) => p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom;
      const axes = [...svg.querySelectorAll('text.axis')];
      const others = [...svg.querySelectorAll('.row-label, .col-label, text.title, text.caption')];
      return { names: axes.map(t => t.textContent), out: axes.filter(t => box(t).left < s.left || box(t).top < s.top).length,
        over: axes.flatMap(t => others.filter(o => hit(box(t), box(o))).map(o => `${t.textContent} over ${o.textContent}`)) };
    });
    assert(ax.names.join('|') === 'keys →|queries ↓', `axis titles: ${ax.names}`);
    assert(ax.out === 0 && ax.over.length === 0, `axis titles cut off (${ax.out}) or over other text: ${ax.over}`);
    await page.click('#tab-compare');
    await page.waitForFunction(() => document.querySelectorAll('#compare-grid .compare-item svg').length === 8, null, { timeout: 30000 });
    const b = await overflow('#compare-grid svg.heatmap');
    assert(b.length === 0, `cut off in Compare: ${JSON.stringify(b)}`);
    await page.click('#tab-heatmap');
  });

  await test('printed weights are drawn over the causal diagonal, not struck through by it', async () => {
    await fresh();
    await page.fill('#source', 'The cat sat on the mat');
    await page.check('#causal');
    await page.waitForFunction(() => document.querySelector('#heatmap svg .structure') &&
      document.querySelectorAll('#heatmap .col-label').length === 6, null, { timeout: 30000 });
    const r = await page.$eval('#heatmap svg', svg => {
      const st = svg.querySelector('.structure');
      const vals = [...svg.querySelectorAll('text')].filter(t => /^(1\.00|\.\d+)$/.test(t.textContent));
      return { n: vals.length, under: vals.filter(t => !(st.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING)).length };
    });
    assert(r.n >= 6, `only ${r.n} printed weights on a 6-token causal heatmap`);
    assert(r.under === 0, `${r.under} of ${r.n} printed weights are drawn under the structure lines`);
    await page.uncheck('#causal');
  });

  await test('Compare exports every rule, and the export loads back as a comparison', async () => {
    await fresh();
    await page.click('#tab-compare');
    await page.waitForFunction(() => document.querySelectorAll('#compare-grid .compare-item svg').length === 8, null, { timeout: 30000 });
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click('#export-json')]);
    const file = path.join(SHOTS, 'export-compare.json');
    await dl.saveAs(file);
    const json = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert(json.kind === 'compare' && json.results.map(r => r.rule).join() === 'dot,scaled_dot,general,additive,concat_tanh,concat,linear,multihead',
      `compare export holds ${json.results && json.results.map(r => r.rule)}`);
    const dot = await weightsOf('/attention/dot', sentenceBody(DEFAULT_SENTENCE));
    const jd = json.results.find(r => r.rule === 'dot');
    assert(maxDiff(jd.response.weights, dot) <= TOL && jd.request.query.length === dot.length, 'compare export: dot differs');
    await fresh();
    await setMode('load');
    await page.setInputFiles('#load-file', file);
    await page.waitForFunction(() => document.querySelectorAll('#compare-grid .compare-item svg').length === 8, null, { timeout: 30000 });
    await expectHeatmap(page, dot, 'reloaded compare dot', '#compare-grid .compare-item[data-rule="dot"]');
    const lab = await page.$$eval('#compare-grid .compare-item[data-rule="dot"] .row-label', e => e.map(x => x.textContent).join(' '));
    assert(lab === tokenize(DEFAULT_SENTENCE).join(' '), `reloaded compare labels: ${lab}`);
    // The multi-head PNG/SVG keeps its head captions.
    await setMode('sentences');
    await setRule('multihead');
    await page.click('#tab-heatmap');
    await page.waitForSelector('#heads-grid .head-thumb');
    const [ds] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click('#export-svg')]);
    const sf = path.join(SHOTS, 'export-multihead.svg');
    await ds.saveAs(sf);
    const svg = fs.readFileSync(sf, 'utf8');
    for (const c of ['head 0', 'head 1', 'mean of heads']) assert(svg.includes(`>${c}<`), `multi-head SVG lost the caption "${c}"`);
  });

  await test('long input: 128 tokens, a visible notice when text is cut, hover timing', async () => {
    await fresh();
    const long = wordsOf(150);
    assert(MAX_TOKENS === 128, `MAX_TOKENS is ${MAX_TOKENS}`);
    await page.fill('#source', long);
    await page.waitForFunction(() => document.querySelectorAll('#heatmap .row-label').length === 128, null, { timeout: 30000 });
    const notice = await page.textContent('#token-notice');
    assert(await page.isVisible('#token-notice') && /150 tokens/.test(notice) && /128/.test(notice), `notice: "${notice}"`);
    assert(/cut/.test(await page.textContent('#status')), 'status does not say the text was cut');
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(long));
    assert(w.length === 128, `API got ${w.length} rows`);
    await expectHeatmap(page, w, '128 tokens');
    // Readable: labels keep their size and the figure scrolls with its labels in view.
    const fs0 = await page.$eval('#heatmap .row-labels', g => Number(g.getAttribute('font-size')));
    assert(fs0 >= 11, `labels at ${fs0}px`);
    await page.$eval('#heatmap', f => { f.scrollTop = 600; f.scrollLeft = 400; f.dispatchEvent(new Event('scroll')); });
    const tr = await page.$eval('#heatmap .col-band', g => g.getAttribute('transform'));
    assert(tr && tr.includes('600'), `column labels do not follow the scroll (${tr})`);
    // ...and are drawn on top: the element at a row label's place is the label, not a cell.
    const onTop = await page.evaluate(() => {
      const l = document.querySelector('#heatmap .row-label[data-row="60"]').getBoundingClientRect();
      const e = document.elementFromPoint(l.left + l.width / 2, l.top + l.height / 2);
      return e && (e.classList.contains('row-label') ? 'label' : e.getAttribute('class'));
    });
    assert(onTop === 'label', `a scrolled row label is hidden under "${onTop}"`);
    await shot('13-long-128', false);
    const t = await hoverTimes(page, '#heatmap .cell', 2731, '#readout', true);
    console.log(`  hover timing, heatmap 128x128: median ${t.median.toFixed(2)} ms, max ${t.max.toFixed(2)} ms`);
    // Lines: 8 heads x 128 x 128 would be 131,072 lines; only the focused token's are drawn.
    await page.$eval('#heatmap', f => { f.scrollTop = 0; f.scrollLeft = 0; });
    await setRule('multihead');
    await page.selectOption('#heads', '8');
    await page.click('#tab-lines');
    await page.waitForFunction(() => document.querySelectorAll('#lines .tok[data-side="q"]').length === 128 &&
      document.querySelectorAll('#head-toggles .head-toggle').length === 8, null, { timeout: 30000 });
    assert(await page.$eval('#lines svg', s => s.dataset.focusOnly) === '1', 'line view is not in focus-only mode');
    assert(await page.$$eval('#lines .attn-line, #lines .attn-path', e => e.length) === 0, 'lines drawn with nothing focused');
    const lt = await page.evaluate(() => {
      const toks = document.querySelectorAll('#lines .tok[data-side="q"]');
      const times = [];
      for (let k = 0; k < 30; k++) {
        const tk = toks[(k * 37) % toks.length];
        const t0 = performance.now();
        tk.dispatchEvent(new MouseEvent('mouseenter'));
        void document.querySelector('#line-readout').getBoundingClientRect();
        times.push(performance.now() - t0);
        tk.dispatchEvent(new MouseEvent('mouseleave'));
      }
      times.sort((a, b) => a - b);
      return { median: times[15], max: times[29] };
    });
    console.log(`  hover timing, lines 128 tokens x 8 heads: median ${lt.median.toFixed(2)} ms, max ${lt.max.toFixed(2)} ms`);
    await page.hover('#lines .tok[data-side="q"][data-index="3"]');
    const drawn = await page.$$eval('#lines .attn-path', e => e.map(p => [p.dataset.head, p.dataset.q, (p.getAttribute('d').match(/M/g) || []).length]));
    const heads8 = new Set(drawn.map(d => d[0]));
    assert(heads8.size === 8 && drawn.every(d => d[1] === '3'), `paths drawn for the hovered token: ${drawn.length}, heads ${[...heads8]}`);
    const segs = drawn.reduce((a, d) => a + d[2], 0);
    const w8 = await weightsOf('/multihead', sentenceBody(long, { num_heads: 8, params: identityParams(32) }));
    const want = w8.reduce((a, h) => a + h[3].filter(x => x > 0).length, 0);
    assert(segs === want, `${segs} line segments for ${want} nonzero weights of query 3`);
    await shot('14-lines-128x8-hover', false);
    // Hover numbers: one column per head.
    const heads = await page.$$eval('#line-readout tbody tr:first-child td[data-head]', e => e.length);
    assert(heads === 8, `line readout has ${heads} head columns`);
  });

  await test('typing into a 128-token sentence redraws after the pause, not after every key', async () => {
    await fresh();
    await page.fill('#source', wordsOf(128));
    await page.waitForFunction(() => document.querySelectorAll('#heatmap .row-label').length === 128 &&
      /drawn in \d+ ms/.test(document.querySelector('#status').textContent), null, { timeout: 30000 });
    const M = Number(/drawn in (\d+) ms/.exec(await page.textContent('#status'))[1]);
    if (M < 175) throw new Skipped(`the view draws in ${M} ms here, so keys 0.7 x that apart come within the page's fixed 120 ms pause`);
    // Count the finished views (one status line each) while six keys come 0.7 x a drawing apart.
    await page.evaluate(() => {
      window.__views = 0;
      new MutationObserver(() => { if (/drawn in/.test(document.querySelector('#status').textContent)) window.__views++; })
        .observe(document.querySelector('#status'), { childList: true, characterData: true, subtree: true });
    });
    await page.focus('#source');
    await page.keyboard.press('Control+Home');
    await page.keyboard.type('abcdef', { delay: Math.round(0.7 * M) });
    await page.waitForFunction(() => window.__views > 0 && /^abcdefthe/.test(document.querySelector('#heatmap .row-label').textContent), null, { timeout: 30000 });
    await page.waitForTimeout(Math.min(3000, 2 * M));
    const n = await page.evaluate(() => window.__views);
    assert(n <= 2, `${n} views drawn for 6 keys ${Math.round(0.7 * M)} ms apart (a drawing takes ${M} ms)`);
  });

  await test('multi-head lines: per-head colours, toggles and hover numbers equal the API', async () => {
    await fresh();
    await setRule('multihead');
    await page.selectOption('#heads', '4');
    const w = await weightsOf('/multihead', sentenceBody(DEFAULT_SENTENCE, { num_heads: 4, params: identityParams(32) }));
    await page.click('#tab-lines');
    await page.waitForFunction(() => document.querySelectorAll('#head-toggles .head-toggle').length === 4);
    const strokes = await page.$$eval('#lines .attn-line', e => [...new Set(e.map(l => l.dataset.head + l.getAttribute('stroke')))]);
    assert(strokes.length === 4, `colours per head: ${strokes}`);
    await page.click('#head-toggles .head-toggle[data-head="0"]');
    await page.hover('#lines .tok[data-side="q"][data-index="2"]');
    const cells = await page.$$eval('#line-readout td[data-head]', e => e.map(c => [+c.dataset.head, c.textContent, Number(c.dataset.weight)]));
    assert(cells.length === 3 * w[0][2].length, `${cells.length} numbers for 3 heads`);
    const heads = [...new Set(cells.map(c => c[0]))].join();
    assert(heads === '1,2,3', `numbers for heads ${heads}`);
    cells.forEach(([h, txt, x], n) => {
      const j = Math.floor(n / 3);
      assert(Math.abs(x - w[h][2][j]) <= TOL && txt === fmt(w[h][2][j]), `head ${h} key ${j}: ${txt} vs ${fmt(w[h][2][j])}`);
    });
    await shot('07b-multihead-lines-hover', false);
  });

  await test('smaller fixes: dimmed stale view, example menu, number format, short labels, honest headline', async () => {
    await fresh();
    await page.uncheck('#self');
    await page.waitForFunction(() => document.querySelector('.views').classList.contains('stale'), null, { timeout: 30000 });
    assert(/Type at least one word/.test(await page.textContent('#err-target')), 'no message for the empty target');
    await page.check('#self');
    await page.waitForFunction(() => !document.querySelector('.views').classList.contains('stale'), null, { timeout: 30000 });
    await page.fill('#source', 'The cat sat on the mat .');
    assert(await page.inputValue('#example') === 'custom', 'the Example menu keeps the old name after an edit');
    assert(await page.evaluate(() => window.attnDemo.fmt(0.004)) === '0.00400' && await page.evaluate(() => window.attnDemo.fmt(0.0006)) === '6.00e-4',
      'number format is not 3 significant digits everywhere');
    await page.fill('#source', 'a b c i');
    await page.waitForFunction(() => document.querySelectorAll('#heatmap .col-label').length === 4, null, { timeout: 30000 });
    const clipped = await page.$eval('#heatmap svg', s => {
      const r = s.getBoundingClientRect();
      return [...s.querySelectorAll('.col-label')].filter(t => { const b = t.getBoundingClientRect(); return b.top < r.top || b.height < 4; }).length;
    });
    assert(clipped === 0, `${clipped} one-letter column labels clipped`);
    const lead = await page.textContent('.lead');
    assert(!/which words each word looks at/.test(lead), 'the headline still promises meaning');
    assert(await page.isVisible('#caveat') && /hashed/.test(await page.textContent('#caveat')) && /trained/i.test(await page.textContent('#caveat')),
      'no plain caveat near the heatmap');
    // the Model tab shows exactly when the service lists trained models (GET /models)
    const listed = ((await (await fetch(BASE + '/models')).json()).models ?? []).length > 0;
    assert((await page.isHidden('#tab-model')) === !listed,
      listed ? 'the Model tab is hidden although GET /models lists models' : 'the Model tab shows without a model service');
  });

  await test('a window of 1.5 goes to the API as typed and its refusal shows by the field (not sent as 1)', async () => {
    await fresh();
    const want = await api('/attention/scaled_dot', { ...sentenceBody(DEFAULT_SENTENCE), window: 1.5 });
    assert(want.status >= 400 && want.status < 500 && want.body.error, `the API answered ${want.status} to window 1.5`);
    await page.fill('#window', '1.5');
    await page.waitForFunction(() => document.querySelector('#err-window').textContent !== '', null, { timeout: 10000 });
    const err = await page.textContent('#err-window');
    assert(err.includes(want.body.error.message), `"${err}" is not the API's message "${want.body.error.message}"`);
    assert(await page.evaluate(() => document.querySelector('.views').classList.contains('stale')), 'the old picture is not dimmed');
    await page.fill('#window', '');
    await page.waitForFunction(() => document.querySelector('#err-window').textContent === '', null, { timeout: 10000 });
  });

  await test('the page also works at /demo/index.html', async () => {
    await page.goto(BASE + '/demo/index.html');
    await page.waitForSelector('#heatmap .cell', { timeout: 30000 });
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE)), '/demo/ path');
  });

  /* ------------------------------------------- the trained models' views */

  // The reference for every model figure is POST /models/{name}/translate,
  // called here with fetch; means over heads and the rollout are recomputed
  // below, written independently of demo/models.js.
  const modelList = await (async () => {
    try { const b = await (await fetch(BASE + '/models')).json(); return Array.isArray(b.models) ? b.models : []; } catch { return []; }
  })();
  const MODEL_TEXT = 'Print the initial values of the variables.';
  async function translateAPI(name, text, beam = 1) {
    const r = await api(`/models/${name}/translate`, { text, beam });
    assert(r.status === 200, `/models/${name}/translate answered ${r.status}: ${JSON.stringify(r.body).slice(0, 200)}`);
    return r.body;
  }
  // (layers, H, T, T') nested arrays -> the mean over heads of one layer, by explicit sums.
  function headMean(t4, layer) {
    const heads = t4[layer], H = heads.length, R = heads[0].length, C = heads[0][0].length;
    const out = [];
    for (let i = 0; i < R; i++) {
      out.push([]);
      for (let j = 0; j < C; j++) { let s = 0; for (let h = 0; h < H; h++) s += heads[h][i][j]; out[i].push(s / H); }
    }
    return out;
  }
  // Abnar & Zuidema's rollout: A' = 0.5 mean_h A + 0.5 I, rows to 1, R = A'_L ... A'_1.
  function rolloutRef(enc) {
    let R = null;
    for (let l = 0; l < enc.length; l++) {
      const A = headMean(enc, l);
      const n = A.length;
      const B = A.map((row, i) => { const r = row.map((a, j) => 0.5 * a + (i === j ? 0.5 : 0)); const s = r.reduce((x, y) => x + y, 0); return r.map(x => x / s); });
      if (!R) { R = B; continue; }
      const P = [];
      for (let i = 0; i < n; i++) { P.push([]); for (let j = 0; j < n; j++) { let s = 0; for (let k = 0; k < n; k++) s += B[i][k] * R[k][j]; P[i].push(s); } }
      R = P;
    }
    return R;
  }
  function matmulRef(A, B) {
    return A.map(row => B[0].map((_, j) => { let s = 0; for (let k = 0; k < B.length; k++) s += row[k] * B[k][j]; return s; }));
  }
  const MODEL_SHOTS = path.join(HERE, '../../build/screenshots');
  fs.mkdirSync(MODEL_SHOTS, { recursive: true });
  const modelShot = (p, name, full = false) => p.screenshot({ path: path.join(MODEL_SHOTS, name + '.png'), fullPage: full });
  const openModels = async (p, hash = '') => {
    await p.goto('about:blank'); // a new document: a hash-only change would keep the old state
    await p.goto(BASE + '/#v=model' + (hash ? '&' + hash : ''));
    await p.waitForFunction(n => document.querySelectorAll('#m-translate .m-panel').length === n ||
      document.querySelectorAll('#m-grid svg.heatmap, #m-heads svg.lineview, #m-rollout svg.heatmap').length > 0, modelList.length, { timeout: 30000 });
    await p.waitForFunction(() => /round trip|Loaded/.test(document.querySelector('#m-status').textContent), null, { timeout: 30000 });
  };
  const TFM = modelList.find(m => m.kind === 'transformer');
  const modelTest = (name, fn) => (modelList.length ? test(name, fn) : skip(name, 'GET /models lists no models (no weights shipped to this server)'));
  const tfmTest = (name, fn) => (TFM ? test(name, fn) : skip(name, 'GET /models lists no Transformer'));

  await modelTest('models: Translate shows every model’s French and cross-attention, cells equal the API', async () => {
    await openModels(page);
    assert(await page.isVisible('#tab-model') && await page.isHidden('#controls'), 'the models view does not replace the tensors controls');
    const note = await page.textContent('#m-translate .m-honest');
    for (const m of modelList.filter(x => x.kind === 'seq2seq')) {
      assert(note.includes(m.bleu.greedy.toFixed(2)) || /–/.test(note), `the honest note does not give the GRU BLEU (${note})`);
    }
    const gruB = modelList.filter(x => x.kind === 'seq2seq').map(x => x.bleu.greedy ?? x.bleu.beam4);
    const floor = 7.39; // test BLEU of answering with the English unchanged (training/results.json)
    if (gruB.length && gruB.every(b => b < floor)) assert(/weak/.test(note), `no plain word about the GRU models: ${note}`);
    else assert(!/weak/.test(note), `GRU models above the floor called weak: ${note}`);
    // Each model's copy-token alignment from GET /models, and the Transformer's best head named.
    for (const m of modelList.filter(x => x.alignment)) {
      assert(note.includes(`${m.name} ${Math.round(100 * m.alignment.accuracy)}%`), `${m.name}'s alignment not in the note: ${note}`);
    }
    if (TFM && TFM.alignment && TFM.alignment.best_head) {
      const b = TFM.alignment.best_head;
      const opt = await page.$eval(`#m-tfm-pick option[value="${b.layer}:${b.head}"]`, o => o.textContent);
      assert(opt.includes('aligns best') && opt.includes(`${Math.round(100 * b.accuracy)}%`), `the best-aligning head is not named in the picker: ${opt}`);
      assert(note.includes(`layer ${b.layer} head ${b.head}`), `the note does not name the best head: ${note}`);
    }
    for (const m of modelList) {
      const want = await translateAPI(m.name, MODEL_TEXT);
      const sel = `#m-translate .m-panel[data-model="${m.name}"]`;
      const cross = m.kind === 'transformer' ? headMean(want.attention.cross, want.attention.cross.length - 1) : want.attention.cross;
      await expectHeatmap(page, cross, `${m.name} cross-attention`, sel);
      const rows = await page.$$eval(`${sel} .row-label`, e => e.map(x => x.textContent));
      const cols = await page.$$eval(`${sel} .col-label`, e => e.map(x => x.textContent));
      assert(rows.join('|') === want.target_tokens.join('|'), `${m.name} rows: ${rows.join(' ')} vs ${want.target_tokens.join(' ')}`);
      assert(cols.join('|') === want.source_tokens.join('|'), `${m.name} columns: ${cols.join(' ')}`);
      const capt = await page.$$eval(`${sel} svg .caption, ${sel} svg .title`, e => e.map(x => x.textContent).join(' '));
      assert(capt.replace(/\s+/g, ' ').includes(want.translation.split(' ')[0]) && capt.includes(m.name), `${m.name}: the figure does not carry its French: ${capt}`);
      const b = typeof m.bleu.greedy === 'number' ? m.bleu.greedy : m.bleu.beam4;
      assert(capt.includes(`BLEU ${b.toFixed(2)}`), `${m.name}: BLEU ${b} not in "${capt}"`);
    }
    // Hover a French token: the English it reads lights up under its figure.
    const t = await translateAPI('transformer', MODEL_TEXT);
    const C = headMean(t.attention.cross, t.attention.cross.length - 1);
    await page.hover('#m-translate .m-panel[data-model="transformer"] .row-label[data-row="2"]');
    const strip = await page.$$eval('#m-translate .m-panel[data-model="transformer"] .m-strip .ctok', e => e.map(x => Number(x.dataset.weight)));
    assert(strip.length === C[2].length && strip.every((w, j) => Math.abs(w - C[2][j]) <= TOL), `hover strip ${strip} vs ${C[2]}`);
    const ro = await page.textContent('#m-readout');
    assert(ro.includes(t.target_tokens[2]), `readout "${ro}"`);
    await modelShot(page, 'models-translate-1280x800');
    await shot('20-models-translate', false);
  });

  await modelTest('models: layout 1280x800, readout beside the figures; 390x844 results first', async () => {
    await openModels(page);
    const r = await page.evaluate(() => {
      const b = s => document.querySelector(s).getBoundingClientRect();
      const panels = [...document.querySelectorAll('#m-translate .m-panel svg')].map(s => s.getBoundingClientRect());
      return { side: b('.m-side').left, readout: b('#m-readout'), right: Math.max(...panels.map(p => p.right)), bottom: Math.max(...panels.map(p => p.bottom)), top: Math.min(...panels.map(p => p.top)), h: innerHeight };
    });
    assert(r.side >= r.right - 1, `readout (left ${r.side}) is not beside the figures (right ${r.right})`);
    assert(r.readout.bottom <= r.h, 'the readout is below the first screen');
    assert(r.bottom <= r.h, `the figures end at ${r.bottom}, below the ${r.h}px screen`);
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    try {
      await openModels(phone);
      const q = await phone.evaluate(() => ({ sw: document.documentElement.scrollWidth, iw: innerWidth,
        first: document.querySelector('#m-translate .m-panel svg').getBoundingClientRect().top,
        side: document.querySelector('.m-side').getBoundingClientRect().top }));
      assert(q.sw <= q.iw + 1, `page is ${q.sw}px wide on a ${q.iw}px screen`);
      assert(q.first < 844 - 150, `the first model figure starts at ${q.first}px`);
      // every tab is on the screen (not scrolled out of the bar), the text box has its label,
      // and the Transformer's head menu stays inside its panel
      const seen = await phone.evaluate(() => {
        const out = s => { const e = document.querySelector(s); if (!e) return 'missing'; const r = e.getBoundingClientRect();
          return r.width > 0 && r.left >= 0 && r.right <= innerWidth + 1 ? '' : `${Math.round(r.left)}..${Math.round(r.right)}`; };
        const pick = document.querySelector('#m-tfm-pick'), panel = pick && pick.closest('.m-panel');
        return { tabs: [...document.querySelectorAll('.tabs [role=tab]:not([hidden]), .m-subtabs [role=tab]')].map(t => [t.textContent, out('#' + t.id)]).filter(x => x[1]),
          label: out('.m-label'), pick: pick ? pick.getBoundingClientRect().right - panel.getBoundingClientRect().right : 0 };
      });
      assert(seen.tabs.length === 0, `tabs off the 390 px screen: ${JSON.stringify(seen.tabs)}`);
      assert(seen.label === '', `the "English" label of the text box is not on the screen (${seen.label})`);
      assert(seen.pick <= 1, `the Transformer's head menu runs ${seen.pick.toFixed(0)} px past its panel`);
      await modelShot(phone, 'models-translate-390x844');
      await openModels(phone, 'ms=grid');
      await modelShot(phone, 'models-grid-390x844');
      // the head view's lines fit the screen, the English on the right included
      await openModels(phone, 'ms=heads');
      const hv = await phone.evaluate(() => ({ svg: document.querySelector('#m-lines svg').getBoundingClientRect().right,
        box: document.querySelector('#m-lines').getBoundingClientRect().right }));
      assert(hv.svg <= hv.box + 1, `the head view ends at ${hv.svg.toFixed(0)}px in a box ending at ${hv.box.toFixed(0)}px`);
    } finally {
      await phone.close();
    }
  });

  await modelTest('models: emptying the English box dims the previous figures and says so', async () => {
    await openModels(page);
    await page.fill('#m-text', '');
    await page.waitForFunction(() => /Type an English sentence/.test(document.querySelector('#m-status').textContent), null, { timeout: 10000 });
    const dim = await page.$eval('#m-translate', e => Number(getComputedStyle(e).opacity));
    assert(dim < 0.5, `the old figures are drawn at opacity ${dim} under an empty box`);
    assert(/previous/.test(await page.textContent('#m-status')), 'the status does not say the figures are the previous translation');
    await page.fill('#m-text', MODEL_TEXT);
    await page.waitForFunction(() => /round trip/.test(document.querySelector('#m-status').textContent), null, { timeout: 30000 });
    const back = await page.$eval('#m-translate', e => Number(getComputedStyle(e).opacity));
    assert(back === 1, `a new translation is still dimmed (opacity ${back})`);
  });

  await tfmTest('models: keyboard: the arrow keys walk a model heatmap\'s cells, Enter pins the French token', async () => {
    await openModels(page);
    const t = await translateAPI('transformer', MODEL_TEXT);
    const C = headMean(t.attention.cross, t.attention.cross.length - 1);
    await page.focus('#m-translate .m-panel[data-model="transformer"] svg.heatmap');
    for (const k of ['ArrowRight', 'ArrowRight', 'ArrowDown']) await page.keyboard.press(k);
    const txt = await page.textContent('#m-readout');
    assert(txt.includes('(row 1)') && txt.includes('(column 1)') && txt.includes('weight ' + fmt(C[1][1])), `readout "${txt}"`);
    await page.keyboard.press('Enter');
    await page.waitForFunction(() => /mpin=fr1/.test(location.hash), null, { timeout: 5000 }).catch(() => {});
    assert(/mpin=fr1/.test(page.url()), `Enter did not pin French token 1: ${page.url()}`);
  });

  await tfmTest('models: layers x heads grid of the Transformer; a click opens the cell with the API’s weights', async () => {
    await openModels(page, 'ms=grid');
    const t = await translateAPI('transformer', MODEL_TEXT);
    const L = { encoder: t.attention.encoder.length, decoder: t.attention.decoder.length, cross: t.attention.cross.length };
    const H = t.attention.cross[0].length;
    const n = await page.$$eval('#m-grid .m-thumb', e => e.length);
    assert(n === (L.encoder + L.decoder + L.cross) * (H + 1), `${n} thumbnails for ${JSON.stringify(L)} x ${H} heads (+ mean)`);
    for (const [attn, l, hh] of [['encoder', 0, 2], ['decoder', L.decoder - 1, 1], ['cross', 0, H - 1]]) {
      await page.click(`#m-grid .m-thumb[data-attn="${attn}"][data-layer="${l}"][data-head="${hh}"]`);
      await expectHeatmap(page, t.attention[attn][l][hh], `${attn} layer ${l} head ${hh}`, '#m-grid .m-detail');
      const title = await page.textContent('#m-detail-svg .title');
      assert(title.includes(`layer ${l}`) && title.includes(`head ${hh}`), `detail title "${title}"`);
      // a thumbnail opens its cell and pins no token (its small cells once did)
      assert(!/mpin/.test(page.url()), `the thumbnail pinned a token: ${page.url()}`);
    }
    // Decoder self-attention is causal: later tokens are drawn as masked, not as zeros.
    const masks = await page.$$eval('#m-detail-svg .cell', e => e.filter(c => +c.dataset.col > +c.dataset.row).map(c => c.dataset.mask));
    await page.click(`#m-grid .m-thumb[data-attn="decoder"][data-layer="0"][data-head="-1"]`);
    const dm = await page.$$eval('#m-detail-svg .cell', e => e.filter(c => +c.dataset.col > +c.dataset.row).map(c => c.dataset.mask));
    assert(dm.length > 0 && dm.every(k => k === 'mask'), `decoder future cells: ${dm.slice(0, 5)}`);
    assert(masks.every(k => k === undefined), 'cross-attention cells drawn as masked');
    await expectHeatmap(page, headMean(t.attention.decoder, 0), 'decoder layer 0 mean of heads', '#m-grid .m-detail');
    // uniform over the keys a decoder row may see: row 1 sees two
    await page.hover('#m-detail-svg .cell[data-row="1"][data-col="0"]');
    const ro = await page.textContent('#m-readout');
    assert(ro.includes('uniform would be ' + fmt(0.5)), `decoder row 1 readout "${ro}"`);
    await modelShot(page, 'models-grid-1280x800');
  });

  await tfmTest('models: head view: per-head colours, toggles and hover numbers equal the API', async () => {
    await openModels(page, 'ms=heads');
    const t = await translateAPI('transformer', MODEL_TEXT);
    const cross = t.attention.cross, l = cross.length - 1;
    const H = cross[l].length;
    const strokes = await page.$$eval('#m-lines .attn-line', e => [...new Set(e.map(x => x.dataset.head + x.getAttribute('stroke')))]);
    assert(strokes.length === H, `colours per head: ${strokes}`);
    const lines = await page.$$eval('#m-lines .attn-line', e => e.map(x => [+x.dataset.head, +x.dataset.q, +x.dataset.k, Number(x.dataset.weight)]));
    assert(lines.length > 0 && lines.every(([hh, i, j, w]) => Math.abs(w - cross[l][hh][i][j]) <= TOL), 'a line weight differs from the API');
    await page.click('#m-head-toggles .head-toggle[data-head="0"]');
    await page.hover('#m-lines .tok[data-side="q"][data-index="3"]');
    const cells = await page.$$eval('#m-line-readout td[data-head]', e => e.map(c => [+c.dataset.head, Number(c.dataset.weight), c.textContent]));
    assert(cells.length === (H - 1) * t.source_tokens.length, `${cells.length} numbers for ${H - 1} heads`);
    assert(!cells.some(c => c[0] === 0), 'the hidden head is still in the table');
    cells.forEach(([hh, w, txt], k) => {
      const j = Math.floor(k / (H - 1));
      assert(Math.abs(w - cross[l][hh][3][j]) <= TOL && txt === fmt(cross[l][hh][3][j]), `head ${hh} key ${j}: ${txt}`);
    });
    // Encoder self-attention of layer 0 from the menu.
    await page.selectOption('#m-heads-pick', 'encoder:0');
    await page.waitForFunction(() => document.querySelector('#m-lines .tok[data-side="k"]'), null, { timeout: 30000 });
    const enc = await page.$$eval('#m-lines .attn-line', e => e.map(x => [+x.dataset.head, +x.dataset.q, +x.dataset.k, Number(x.dataset.weight)]));
    assert(enc.length > 0 && enc.every(([hh, i, j, w]) => Math.abs(w - t.attention.encoder[0][hh][i][j]) <= TOL), 'encoder lines differ from the API');
    await modelShot(page, 'models-heads-1280x800');
  });

  await tfmTest('models: rollout equals an independent computation, beside the raw weights, formula on screen', async () => {
    await openModels(page, 'ms=rollout');
    const t = await translateAPI('transformer', MODEL_TEXT);
    const a = t.attention;
    const R = rolloutRef(a.encoder);
    const C = headMean(a.cross, a.cross.length - 1);
    const want = { 'enc-raw': headMean(a.encoder, a.encoder.length - 1), 'enc-rollout': R, 'cross-raw': C, 'cross-rollout': matmulRef(C, R) };
    for (const [k, m] of Object.entries(want)) await expectHeatmap(page, m, `rollout ${k}`, `#m-rollout .m-roll[data-matrix="${k}"]`);
    const sums = (await pageMatrix(page, '#m-rollout .m-roll[data-matrix="cross-rollout"]')).map(r => r.reduce((x, y) => x + y, 0));
    assert(sums.every(s => Math.abs(s - 1) < 1e-5), `cross rollout rows sum to ${sums}`);
    const f = await page.textContent('#m-rollout .m-formula');
    assert(/Abnar/.test(f) && /0\.5/.test(f) && /encoder only/.test(f) && /C · R/.test(f), `formula text: ${f}`);
    await modelShot(page, 'models-rollout-1280x800');
  });

  await tfmTest('models: a pinned token shows in every view at once; clicking again releases it', async () => {
    await openModels(page, 'ms=grid');
    const t = await translateAPI('transformer', MODEL_TEXT);
    const C = headMean(t.attention.cross, t.attention.cross.length - 1);
    await page.click('#m-detail-svg .row-label[data-row="2"]');
    const pins = await page.$$eval('#m-grid svg.heatmap', e => e.map(s => [s.closest('.m-thumb') ? s.closest('.m-thumb').dataset.attn : 'detail', s.dataset.pin]));
    for (const [attn, p] of pins) assert(p === (attn === 'encoder' ? '' : 'q2'), `${attn} pin ${p}`);
    const fr = await page.$eval('#m-text-view .ctok.pinned', e => [e.dataset.side, e.dataset.index]);
    assert(fr.join() === 'fr,2', `pinned text token ${fr}`);
    const en = await page.$$eval('#m-text-view .ctok[data-side="en"]', e => e.map(x => Number(x.dataset.weight)));
    assert(en.length === C[2].length && en.every((w, j) => Math.abs(w - C[2][j]) <= TOL), 'the English is not coloured by the pinned row');
    assert(/mpin=fr2/.test(page.url()), `URL ${page.url()}`);
    await page.click('#msub-heads');
    assert(await page.$eval('#m-lines svg', s => s.dataset.pin) === 'q2', 'head view did not take the pin');
    await page.click('#msub-rollout');
    const rp = await page.$$eval('#m-rollout svg.heatmap', e => e.map(s => s.dataset.pin));
    assert(rp.join() === ',,q2,q2', `rollout pins ${rp}`);
    await page.click('#msub-translate');
    assert(await page.$eval('#m-translate .m-panel[data-model="transformer"] svg', s => s.dataset.pin) === 'q2', 'Translate view did not take the pin');
    // An English token pins the column: every cross figure marks it.
    await page.click('#m-text-view .ctok[data-side="en"][data-index="1"]');
    const cp = await page.$$eval('#m-translate svg.heatmap', e => e.map(s => s.dataset.pin));
    assert(cp.every(p => p === 'k1'), `English pin in the Translate view: ${cp}`);
    await page.click('#m-text-view .ctok[data-side="en"][data-index="1"]');
    const none = await page.$$eval('#m-translate svg.heatmap', e => e.map(s => s.dataset.pin));
    assert(none.every(p => p === ''), `released: ${none}`);
    assert(!/mpin/.test(page.url()), 'the released pin stays in the URL');
  });

  await tfmTest('models: the URL reopens the same picture (text, search, view, layer, head, hidden heads, pin)', async () => {
    await openModels(page);
    await page.fill('#m-text', 'The file could not be opened.');
    await page.selectOption('#m-beam', '4');
    await page.waitForFunction(() => /The\+file/.test(location.hash) && /mb=4/.test(location.hash), null, { timeout: 30000 });
    await page.click('#msub-heads');
    await page.selectOption('#m-heads-pick', 'cross:0');
    await page.click('#m-head-toggles .head-toggle[data-head="2"]');
    await page.click('#m-lines .tok[data-side="q"][data-index="1"]');
    await page.mouse.move(2, 2);
    const url = page.url();
    assert(/ms=heads/.test(url) && /ml=0/.test(url) && /mhide=2/.test(url) && /mpin=fr1/.test(url), `URL ${url}`);
    const snap = p => p.evaluate(() => ({
      lines: [...document.querySelectorAll('#m-lines .attn-line')].map(l => [l.dataset.q, l.dataset.k, l.dataset.head, l.dataset.weight].join()).join(';'),
      pin: document.querySelector('#m-lines svg').dataset.pin, text: document.querySelector('#m-text').value, beam: document.querySelector('#m-beam').value,
      colours: [...document.querySelectorAll('#m-text-view .ctok')].map(x => x.dataset.weight + x.style.background).join(),
    }));
    const a = await snap(page);
    const t = await translateAPI('transformer', 'The file could not be opened.', 4);
    const lines = a.lines.split(';').map(s => s.split(',').map(Number));
    assert(lines.length > 0 && lines.every(([i, j, hh, w]) => hh !== 2 && i === 1 && Math.abs(w - t.attention.cross[0][hh][i][j]) <= TOL), 'beam-4 lines differ from the API');
    const other = await context.newPage();
    try {
      await other.goto(url);
      await other.waitForSelector('#m-lines .attn-line', { state: 'attached', timeout: 30000 });
      const b = await snap(other);
      for (const k of Object.keys(a)) assert(a[k] === b[k], `${k} differs after reopening: ${String(a[k]).slice(0, 100)} vs ${String(b[k]).slice(0, 100)}`);
    } finally {
      await other.close();
    }
  });

  await tfmTest('models: exports: JSON reloads with its words, PNG re-renders pixel for pixel, SVG keeps captions', async () => {
    await openModels(page, 'ms=rollout&mpin=fr3');
    const save = (p, id) => saveDownload(p, id, MODEL_SHOTS, 'export-');
    const jf = await save(page, '#export-json');
    const j = JSON.parse(fs.readFileSync(jf, 'utf8'));
    assert(j.kind === 'models' && j.text === MODEL_TEXT && j.results.length === modelList.length, `export holds ${j.kind}, ${j.results && j.results.length} results`);
    const tr = j.results.find(r => r.model === 'transformer');
    assert(tr.request.text === MODEL_TEXT && tr.response.source_tokens.length > 0 && tr.response.attention.encoder, 'the export lacks the request, tokens or tensors');
    const svgText = fs.readFileSync(await save(page, '#export-svg'), 'utf8');
    for (const c of ['Trained EN→FR models', 'Encoder rollout', 'Cross · encoder rollout', 'C · R']) assert(svgText.includes(c), `SVG lost "${c}"`);
    const png1 = fs.readFileSync(await save(page, '#export-png'));
    const before = await pageMatrix(page, '#m-rollout .m-roll[data-matrix="cross-rollout"]');
    const other = await context.newPage();
    try {
      await loadExport(other, jf);
      await other.waitForFunction(() => /Loaded a saved export/.test(document.querySelector('#m-status').textContent), null, { timeout: 30000 });
      assert(await other.isVisible('#m-rollout'), 'the reloaded export does not open its view');
      await expectHeatmap(other, before, 'reloaded rollout', '#m-rollout .m-roll[data-matrix="cross-rollout"]');
      const labels = await other.$$eval('#m-rollout .m-roll[data-matrix="cross-rollout"] .row-label', e => e.map(x => x.textContent));
      assert(labels.join('|') === tr.response.target_tokens.join('|'), `reloaded labels ${labels}`);
      assert(await other.$eval('#m-rollout .m-roll[data-matrix="cross-rollout"] svg', s => s.dataset.pin) === 'q3', 'the pin did not survive');
      await other.mouse.move(2, 2);
      const png2 = fs.readFileSync(await save(other, '#export-png'));
      const diff = await pngDiff(other, png1, png2);
      assert(diff === 0, `re-rendered PNG differs: ${diff}`);
      // The file input of the models' view loads the same export.
      await other.goto(BASE + '/#v=model');
      await other.waitForSelector('#m-load', { state: 'attached', timeout: 30000 });
      await other.setInputFiles('#m-load', jf);
      await other.waitForFunction(() => /Loaded a saved export/.test(document.querySelector('#m-status').textContent), null, { timeout: 30000 });
    } finally {
      await other.close();
    }
  });

  await modelTest('models: text over the models’ limit is refused with the service’s words; the limit is shown; hover timing', async () => {
    await openModels(page);
    const limit = Math.min(...modelList.map(m => m.sizes.max_src_tokens));
    assert((await page.textContent('#m-notice')).includes(String(limit - 1)), 'the notice does not give the models’ limit');
    const long = Array.from({ length: 60 }, (_, i) => ['open', 'the', 'file', 'now'][i % 4]).join(' ');
    const r = await api('/models/transformer/translate', { text: long });
    assert(r.status === 422, `the API accepted ${long.length} characters (${r.status})`);
    await page.fill('#m-text', long);
    await page.waitForFunction(() => document.querySelectorAll('#m-translate .m-panel .field-error').length > 0, null, { timeout: 30000 });
    const msg = await page.textContent('#m-translate .m-panel[data-model="transformer"] .field-error');
    assert(msg === r.body.error.message, `panel says "${msg}", the API "${r.body.error.message}"`);
    // Hover timing at the longest text the models take.
    let words = 40, ok = null, text = '';
    while (words > 4) {
      text = Array.from({ length: words }, (_, i) => ['open', 'the', 'file', 'now'][i % 4]).join(' ');
      const x = await api('/models/transformer/translate', { text });
      if (x.status === 200) { ok = x.body; break; }
      words -= 2;
    }
    assert(ok, 'no long text was accepted');
    await page.fill('#m-text', text);
    await page.click('#msub-grid');
    await page.waitForFunction(n => document.querySelectorAll('#m-detail-svg .col-label').length === n, ok.source_tokens.length, { timeout: 30000 });
    const tm = await hoverTimes(page, '#m-detail-svg .cell', 131, '#m-readout', false);
    console.log(`  hover timing, models' grid detail ${ok.target_tokens.length}x${ok.source_tokens.length} (${tm.n} cells, the models' longest input is ${limit} tokens, not 128): median ${tm.median.toFixed(2)} ms, max ${tm.max.toFixed(2)} ms`);
  });

  /* -------------------------------------------------------- neuron view */

  // q, k, q ⊙ k, sums and softmax recomputed here from the page's own
  // embedding (a pure function of the text) and checked against the API.
  async function neuronCheck(rule, extra, head, what) {
    const toks = tokenize(DEFAULT_SENTENCE);
    const body = sentenceBody(DEFAULT_SENTENCE, extra);
    const wr = await api(rule === 'multihead' ? '/multihead' : `/attention/${rule}`, { ...body, return_params: rule === 'general' });
    assert(wr.status === 200, `${rule}: ${wr.status}`);
    const W = rule === 'multihead' ? wr.body.weights[head] : wr.body.weights;
    const i = 1;
    const D = body.query[0].length, dh = rule === 'multihead' ? D / extra.num_heads : D;
    const off = rule === 'multihead' ? head * dh : 0;
    let keys = body.key.map(k => k.slice(off, off + dh));
    if (rule === 'general') {
      const A = wr.body.params['attn.weight'], b = wr.body.params['attn.bias'];
      keys = body.key.map(k => A.map((row, d) => row.reduce((s, w, e) => s + w * k[e], 0) + b[d]));
    }
    const q = body.query[i].slice(off, off + dh);
    const scale = rule === 'scaled_dot' || rule === 'multihead' ? 1 / Math.sqrt(dh) : 1;
    const dots = keys.map(k => k.reduce((s, x, d) => s + x * q[d], 0));
    const mx = Math.max(...dots.map(x => x * scale));
    const ex = dots.map(x => Math.exp(x * scale - mx)), z = ex.reduce((a, b) => a + b, 0);
    const soft = ex.map(x => x / z);
    soft.forEach((w, j) => assert(Math.abs(w - W[i][j]) < 1e-5, `${what}: the test's own softmax differs from the API (${w} vs ${W[i][j]})`));
    await page.waitForFunction(([n, r, h]) => document.querySelectorAll('#neuron .nkey').length === n &&
      (document.querySelector('#neuron svg .title') || {}).textContent.startsWith(r === 'multihead' ? `multihead, head ${h}` : r + ':'), [toks.length, rule, head], { timeout: 30000 });
    const got = await page.$$eval('#neuron .nkey', gs => gs.map(g => ({
      terms: [...g.querySelectorAll('.term')].map(t => Number(t.dataset.value)),
      k: [...g.querySelectorAll('.kv')].map(t => Number(t.dataset.value)),
      sum: Number(g.querySelector('.n-sum').dataset.value), w: Number(g.querySelector('.n-weight').dataset.value), api: Number(g.querySelector('.n-api').dataset.value) })));
    const qv = await page.$$eval('#neuron .qv', e => e.map(x => Number(x.dataset.value)));
    assert(qv.length === dh && qv.every((x, d) => Math.abs(x - q[d]) <= 1e-9), `${what}: q vector`);
    got.forEach((g, j) => {
      assert(g.terms.length === dh && g.terms.every((x, d) => Math.abs(x - q[d] * keys[j][d]) <= 1e-9), `${what}: products of key ${j}`);
      assert(g.k.every((x, d) => Math.abs(x - keys[j][d]) <= 1e-6), `${what}: key ${j} vector`);
      assert(Math.abs(g.sum - dots[j]) <= 1e-6, `${what}: sum of key ${j}: ${g.sum} vs ${dots[j]}`);
      assert(Math.abs(g.w - W[i][j]) <= 1e-5 && Math.abs(g.api - W[i][j]) <= TOL, `${what}: weight of key ${j}: ${g.w} / ${g.api} vs API ${W[i][j]}`);
    });
    // The readout writes the chosen key's score out term by term.
    await page.hover('#neuron .nkey[data-key="4"]');
    const rows = await page.$$eval('#neuron-readout tbody tr', e => e.length);
    const total = Number(await page.$eval('#neuron-readout .n-total', e => e.textContent));
    assert(rows === dh && Math.abs(total - Number(fmt(dots[4]))) <= 1e-9, `${what}: readout has ${rows} terms, total ${total} vs ${fmt(dots[4])}`);
    // ... and its result comes first, in sight without scrolling past the terms.
    const res = await page.$eval('#neuron-readout', box => {
      const p = box.querySelector('.n-result');
      return p ? { text: p.textContent, below: p.getBoundingClientRect().bottom - box.getBoundingClientRect().bottom } : null;
    });
    assert(res && res.text.includes(`= ${fmt(soft[4])}`) && res.below <= 0, `${what}: the readout's result ${JSON.stringify(res)} (weight ${fmt(soft[4])})`);
  }

  await test('neuron view: q, k, their products and sums match an independent computation and the API’s weights', async () => {
    await fresh();
    await page.click('#heatmap .row-label[data-row="1"]');
    await page.click('#tab-neuron');
    await neuronCheck('scaled_dot', {}, 0, 'scaled_dot');
    assert(/nk=|v=neuron/.test(page.url()), `URL ${page.url()}`);
    await shot('21-neuron-scaled-dot', false);
    await modelShot(page, 'neuron-1280x800');
    await setRule('general');
    await neuronCheck('general', {}, 0, 'general');
    await setRule('multihead');
    await page.selectOption('#heads', '4');
    await page.waitForFunction(() => document.querySelectorAll('#neuron-head option').length === 4, null, { timeout: 30000 });
    await page.selectOption('#neuron-head', '2');
    await page.waitForFunction(() => document.querySelectorAll('#neuron .qv').length === 8, null, { timeout: 30000 });
    await neuronCheck('multihead', { num_heads: 4, params: identityParams(32) }, 2, 'multihead head 2');
    await setRule('additive');
    await page.waitForFunction(() => /Not available/.test(document.querySelector('#neuron-note').textContent), null, { timeout: 30000 });
    assert(/hidden layer/.test(await page.textContent('#neuron-note')), 'additive: the note does not name the hidden layer');
    // linear attention is a product, of feature maps: the note says so
    await setRule('linear');
    await page.waitForFunction(() => !/additive/.test(document.querySelector('#neuron-note').textContent), null, { timeout: 30000 });
    const ln = await page.textContent('#neuron-note');
    assert(/φ\(q\)·φ\(k\)/.test(ln) && !/hidden layer/.test(ln), `linear note "${ln}"`);
    await setRule('scaled_dot');
  });

  await test('neuron view: the URL and a JSON export reopen the same query, key and numbers', async () => {
    await fresh();
    await page.click('#heatmap .row-label[data-row="2"]');
    await page.click('#tab-neuron');
    await page.waitForSelector('#neuron .nkey');
    await page.click('#neuron .nkey[data-key="5"]');
    await page.waitForFunction(() => document.querySelector('#neuron-readout').dataset.key === '5', null, { timeout: 30000 });
    const snap = p => p.evaluate(() => ({
      sums: [...document.querySelectorAll('#neuron .n-sum')].map(x => x.dataset.value).join(),
      q: document.querySelector('#neuron svg').dataset.query, key: document.querySelector('#neuron-readout').dataset.key,
      terms: document.querySelector('#neuron-readout tbody').textContent }));
    const a = await snap(page);
    assert(a.q === '2' && /nk=5/.test(page.url()) && /v=neuron/.test(page.url()), `query ${a.q}, URL ${page.url()}`);
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click('#export-json')]);
    const file = path.join(SHOTS, 'export-neuron.json');
    await dl.saveAs(file);
    const other = await context.newPage();
    try {
      await other.goto(page.url());
      await other.waitForSelector('#neuron .nkey', { timeout: 30000 });
      await other.waitForFunction(() => document.querySelector('#neuron-readout').dataset.key === '5', null, { timeout: 30000 });
      const b = await snap(other);
      for (const k of Object.keys(a)) assert(a[k] === b[k], `${k} differs after reopening the URL`);
      await other.goto('about:blank');
      await loadExport(other, file);
      await other.waitForSelector('#view-neuron:not([hidden]) #neuron .nkey', { timeout: 30000 });
      await other.waitForFunction(() => document.querySelector('#neuron-readout').dataset.key === '5', null, { timeout: 30000 });
      const c = await snap(other);
      for (const k of Object.keys(a)) assert(a[k] === c[k], `${k} differs after loading the export`);
    } finally {
      await other.close();
    }
  });

  /* ------------------------------------------- the modern options */

  const openModern = (p = page) => p.evaluate(() => { document.getElementById('modern-fold').open = true; });
  const setField = async (sel, v, p = page) => { await p.fill(sel, v); await p.dispatchEvent(sel, 'change'); };
  // Each cell's row, column and how it is drawn when not a weight ('' | pad | mask | sparse).
  const cellKinds = (p, sel = '#heatmap') => p.$$eval(`${sel} .cell`, els => els.map(e => [+e.dataset.row, +e.dataset.col, e.dataset.mask || '']));
  const v0 = embed(tokenize(DEFAULT_SENTENCE));
  const L0 = v0.length;
  // The view from the top of the page (controls scroll it while a test sets them).
  const topShot = async (p, name) => { await p.evaluate(() => window.scrollTo(0, 0)); await p.mouse.move(2, 2); await modelShot(p, name); };
  const selfBody = extra => ({ query: v0, key: v0, value: v0, seed: 0, ...extra });

  await test('modern: bottom_right causal with Lq != Lk: cells, masked cells and the diagonal equal the API', async () => {
    await fresh();
    await page.uncheck('#self');
    await page.fill('#target', 'a cat sat');
    await page.check('#causal');
    await openModern();
    await page.selectOption('#align', 'bottom_right');
    const Q = embed(tokenize('a cat sat')), K = v0;
    const w = await weightsOf('/attention/scaled_dot', { query: Q, key: K, value: K, seed: 0, causal: true, align: 'bottom_right' });
    await expectHeatmap(page, w, 'bottom_right causal');
    const off = K.length - Q.length;
    // Independently of the page: bottom-right, query i sees keys j <= i + Lk - Lq.
    w.forEach((r, i) => r.forEach((x, j) => assert(j <= i + off || x === 0, `API weight at ${i},${j} is ${x}`)));
    for (const [i, j, k] of await cellKinds(page)) {
      assert(k === (j > i + off ? 'mask' : ''), `cell ${i},${j} drawn as "${k}"`);
    }
    const d = await page.$eval('#heatmap .diag', l => ({ off: +l.dataset.offset, x: l.getAttribute('x1'), y: l.getAttribute('y1') }));
    const c0 = await page.$eval(`#heatmap .cell[data-row="0"][data-col="${off}"]`, c => ({ x: c.getAttribute('x'), y: c.getAttribute('y') }));
    assert(d.off === off && Number(d.x) === Number(c0.x) && Number(d.y) === Number(c0.y), `diagonal at ${JSON.stringify(d)}, cell (0, ${off}) at ${JSON.stringify(c0)}`);
    assert(await page.$('#heatmap .band-edge[data-side="hi"]'), 'the causal edge is not drawn');
    assert(/align=bottom_right|al=bottom_right/.test(page.url()), `URL ${page.url()}`);
    await topShot(page, 'modern-bottom-right-1280x800');
  });

  await test('modern: a [left, right] window with an unbounded side', async () => {
    await fresh();
    await openModern();
    await setField('#win-left', '2');
    const w = await weightsOf('/attention/scaled_dot', selfBody({ window: [2, null] }));
    await expectHeatmap(page, w, 'window [2, null]');
    assert(await page.$eval('#window', e => e.disabled), 'the symmetric w stays enabled beside a pair');
    for (const [i, j, k] of await cellKinds(page)) assert(k === (j < i - 2 ? 'mask' : ''), `cell ${i},${j} drawn as "${k}"`);
    assert(await page.$('#heatmap .band-edge[data-side="lo"]') && !(await page.$('#heatmap .band-edge[data-side="hi"]')), 'window edges');
    await setField('#win-right', '1');
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', selfBody({ window: [2, 1] })), 'window [2, 1]');
  });

  await test('modern: softcap + ALiBi + sinks, on /attention and per head on /multihead', async () => {
    await fresh();
    await openModern();
    await setField('#softcap', '2');
    await page.check('#alibi');
    await setField('#sinks', '1');
    const w = await weightsOf('/attention/scaled_dot', selfBody({ softcap: 2, alibi: true, sinks: 1 }));
    await expectHeatmap(page, w, 'softcap alibi sinks');
    assert(w.every(r => r.reduce((a, b) => a + b, 0) < 0.999), 'with a sink the rows should sum to less than 1');
    await setRule('multihead');
    await setField('#alibi-slopes', '0.5, 0.25');
    const mh = await weightsOf('/multihead', selfBody({ num_heads: 2, params: identityParams(32), softcap: 2, alibi: [0.5, 0.25], sinks: [1, 1] }));
    await page.click('#heads-grid .head-thumb[data-head="1"]');
    await expectHeatmap(page, mh[1], 'multihead head 1 with per-head slopes');
  });

  await test('modern: sparsity draws the API\'s layout and marks cells outside it as pattern-masked', async () => {
    await fresh();
    await openModern();
    await page.selectOption('#sparsity', 'bigbird');
    const sp = { pattern: 'bigbird', block: 2, window_blocks: 3, global_blocks: 1, random_blocks: 1 };
    const r = await api('/attention/scaled_dot', selfBody({ sparsity: sp, return_layout: true }));
    assert(r.status === 200 && Array.isArray(r.body.layout), `API answered ${r.status}`);
    const lay = r.body.layout;
    assert(lay.length === Math.ceil(L0 / 2) && lay[0].length === Math.ceil(L0 / 2), `layout shape ${lay.length}`);
    await expectHeatmap(page, r.body.weights, 'bigbird');
    const blocks = await page.$$eval('#heatmap .layout-block', e => e.map(b => b.dataset.qb + ',' + b.dataset.kb).sort().join(';'));
    const want = lay.flatMap((row, qb) => row.map((on, kb) => (on ? qb + ',' + kb : null))).filter(Boolean).sort().join(';');
    assert(blocks === want, `outlined blocks ${blocks} vs the API's ${want}`);
    let outside = 0;
    for (const [i, j, k] of await cellKinds(page)) {
      const on = lay[Math.floor(i / 2)][Math.floor(j / 2)];
      if (!on) outside++;
      assert(k === (on ? '' : 'sparse'), `cell ${i},${j} drawn as "${k}" (layout ${on})`);
      if (!on) assert(r.body.weights[i][j] === 0, `API weight outside the layout at ${i},${j}`);
    }
    assert(outside > 0, 'the layout allows every block: nothing to check');
    assert(await page.$('#scale-legend .legend-key[data-key="sparse"]'), 'the legend has no key for pattern-masked cells');
    await topShot(page, 'modern-sparsity-1280x800');
    // blocks: the page's default layout (diagonal blocks and the first column) as sent.
    await page.selectOption('#sparsity', 'blocks');
    await setField('#sp-block', '3');
    const nb = Math.ceil(L0 / 3);
    const layout = Array.from({ length: nb }, (_, q) => Array.from({ length: nb }, (_, k) => k === 0 || k === q));
    const rb = await api('/attention/scaled_dot', selfBody({ sparsity: { pattern: 'blocks', block: 3, layout }, return_layout: true }));
    await expectHeatmap(page, rb.body.weights, 'blocks');
    const n = await page.$$eval('#heatmap .layout-block', e => e.length);
    assert(n === rb.body.layout.flat().filter(Boolean).length, `${n} outlined blocks`);
    // local_global: the pattern cell by cell (window 1, global token 0), written out here from its definition.
    await page.selectOption('#sparsity', 'local_global');
    await setField('#sp-window', '1');
    await setField('#sp-global', '0');
    const rl = await api('/attention/scaled_dot', selfBody({ sparsity: { pattern: 'local_global', window: 1, global: [0] }, return_layout: true }));
    await expectHeatmap(page, rl.body.weights, 'local_global');
    for (const [i, j, k] of await cellKinds(page)) {
      const on = Math.abs(i - j) <= 1 || i === 0 || j === 0;
      assert(k === (on ? '' : 'sparse'), `local_global cell ${i},${j} drawn as "${k}"`);
      if (!on) assert(rl.body.weights[i][j] === 0, `API weight outside local_global at ${i},${j}`);
    }
    const lg = await page.$$eval('#heatmap .layout-block', e => e.length);
    assert(lg === rl.body.layout.flat().filter(Boolean).length && rl.body.layout.length === 1, `local_global: ${lg} outlined blocks, layout ${JSON.stringify(rl.body.layout)}`);
  });

  await test('modern: linear attention beside softmax of the same inputs, both equal their API answers', async () => {
    await fresh();
    await setRule('linear');
    await page.waitForSelector('#companion:not([hidden]) svg.heatmap', { timeout: 30000 });
    const plain = { query: v0, key: v0, value: v0 };
    await expectHeatmap(page, await weightsOf('/attention/linear', { ...plain, feature_map: 'elu' }), 'linear elu');
    const soft = await weightsOf('/attention/scaled_dot', plain), lin0 = await weightsOf('/attention/linear', { ...plain, feature_map: 'elu' });
    await expectHeatmap(page, soft, 'softmax beside linear', '#companion');
    await page.hover('#companion .cell[data-row="2"][data-col="5"]');
    const ro = await page.textContent('#readout');
    assert(ro.includes(`softmax ${fmt(soft[2][5])}, linear ${fmt(lin0[2][5])}`), `companion readout "${ro}"`);
    // An SVG export holds both panels.
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click('#export-svg')]);
    const svgFile = path.join(SHOTS, 'export-linear.svg');
    await dl.saveAs(svgFile);
    const svgText = fs.readFileSync(svgFile, 'utf8');
    assert((svgText.match(/class="heatmap/g) || []).length === 2 && svgText.includes('φ(q_i)·φ(k_j)') && svgText.includes('exp(q_i·k_j'),
      'the SVG export lacks a panel or a formula');
    const caps = await page.$$eval('#view-heatmap svg.heatmap .caption', e => e.map(x => x.textContent).join(' '));
    assert(/φ\(q_i\)·φ\(k_j\)/.test(caps) && /exp\(q_i·k_j/.test(caps), `formulas missing: ${caps}`);
    // A linear rule's control state: no window, softcap or sparsity; a feature map.
    for (const id of ['#window', '#softcap', '#sparsity', '#hard', '#rope']) assert(await page.$eval(id, e => e.disabled), `${id} is enabled for linear`);
    assert(!(await page.$eval('#feature-map', e => e.disabled)), 'feature map disabled for linear');
    await openModern();
    await page.selectOption('#feature-map', 'relu');
    await page.check('#causal');
    await expectHeatmap(page, await weightsOf('/attention/linear', { ...plain, feature_map: 'relu', causal: true }), 'linear relu causal');
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', { ...plain, causal: true }), 'softmax causal beside', '#companion');
    await topShot(page, 'modern-linear-1280x800');
    await page.uncheck('#causal');
    // Multi-head: "attention": "linear" beside the same heads' softmax.
    await setRule('multihead');
    await page.selectOption('#mh-attention', 'linear');
    const mh = { ...plain, seed: 0, num_heads: 2, params: identityParams(32) };
    const lin = await weightsOf('/multihead', { ...mh, attention: 'linear', feature_map: 'relu' });
    await expectHeatmap(page, lin[0], 'multihead linear head 0');
    await expectHeatmap(page, (await weightsOf('/multihead', mh))[0], 'multihead softmax head 0', '#companion');
  });

  await test('modern: a sample is one-hot at the API\'s key beside the soft weights; same seed same draw; re-draw', async () => {
    await fresh();
    await page.selectOption('#hard', 'sample');
    await setField('#seed', '3');
    const body = selfBody({ seed: 3, hard: { sample: { temperature: 1 } } });
    const w = await weightsOf('/attention/scaled_dot', body);
    const again = await weightsOf('/attention/scaled_dot', body);
    assert(maxDiff(w, again) === 0, 'the API drew differently for the same seed');
    await expectHeatmap(page, w, 'sample seed 3');
    const keys = w.map(r => r.indexOf(1));
    w.forEach((r, i) => assert(keys[i] >= 0 && r.filter(x => x !== 0).length === 1, `row ${i} is not one-hot`));
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', selfBody({ seed: 3 })), 'soft weights', '#companion');
    const dr = await page.$eval('#companion .draws', e => ({ seed: e.dataset.seed, draws: e.dataset.draws }));
    assert(dr.seed === '3' && dr.draws === keys.join(','), `draws ${JSON.stringify(dr)} vs the API's ${keys}`);
    const rings = await page.$$eval('#companion .drawn', e => e.map(r => r.dataset.row + ':' + r.dataset.col).join());
    assert(rings === keys.map((j, i) => i + ':' + j).join(), `rings on the soft weights ${rings}`);
    // The same URL draws the same keys.
    const other = await context.newPage();
    try {
      await other.goto(page.url());
      await other.waitForSelector('#companion .draws', { timeout: 30000 });
      await expectHeatmap(other, w, 'sample reopened');
    } finally {
      await other.close();
    }
    await topShot(page, 'modern-sample-1280x800');
    await page.click('#redraw-view');
    await page.waitForFunction(() => /seed=4/.test(location.hash), null, { timeout: 30000 });
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', { ...body, seed: 4 }), 'sample seed 4');
    assert(await page.inputValue('#seed') === '4', 'the seed control did not move on');
  });

  await test('modern: the URL keeps every new option and reopens the same picture', async () => {
    await fresh();
    await openModern();
    await page.selectOption('#align', 'bottom_right');
    await setField('#win-left', '3');
    await setField('#softcap', '3');
    await page.check('#alibi');
    await setField('#sinks', '0.5');
    await page.check('#rope');
    await page.selectOption('#rope-style', 'interleaved');
    await setField('#rope-dims', '8');
    await setField('#rope-offset', '2');
    await page.selectOption('#sparsity', 'local_global');
    await setField('#sp-global', '0, 5');
    await page.selectOption('#hard', 'sample');
    await setField('#temperature', '0.7');
    await setField('#seed', '2');
    const body = selfBody({ seed: 2, align: 'bottom_right', window: [3, null], softcap: 3, alibi: true, sinks: 0.5,
      rope: { base: 10000, style: 'interleaved', dims: 8, offset: 2 }, sparsity: { pattern: 'local_global', window: 2, global: [0, 5] },
      return_layout: true, hard: { sample: { temperature: 0.7 } } });
    const w = await weightsOf('/attention/scaled_dot', body);
    await expectHeatmap(page, w, 'every option at once');
    const ids = ['align', 'win-left', 'win-right', 'softcap', 'alibi', 'alibi-slopes', 'sinks', 'rope', 'rope-base', 'rope-style', 'rope-dims',
      'rope-offset', 'sparsity', 'sp-window', 'sp-global', 'hard', 'temperature', 'seed'];
    const snap = p => p.evaluate(ids => ({
      controls: ids.map(id => { const e = document.getElementById(id); return e.type === 'checkbox' ? String(e.checked) : e.value; }).join('|'),
      kinds: [...document.querySelectorAll('#heatmap .cell')].map(c => c.dataset.mask || '-').join(''),
      structure: document.querySelector('#heatmap .structure').innerHTML,
      soft: [...document.querySelectorAll('#companion .cell')].map(c => c.dataset.weight).join(),
    }), ids);
    const a = await snap(page);
    const other = await context.newPage();
    try {
      await other.goto(page.url());
      await other.waitForSelector('#companion .cell', { timeout: 30000 });
      await expectHeatmap(other, w, 'reopened every option');
      const b = await snap(other);
      for (const k of Object.keys(a)) assert(a[k] === b[k], `${k} differs after reopening: ${a[k].slice(0, 100)} vs ${b[k].slice(0, 100)}`);
      assert(await other.$eval('#modern-fold', d => d.open), 'the fold is closed on a link that sets its options');
    } finally {
      await other.close();
    }
    // A JSON export carries both panels back.
    const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click('#export-json')]);
    const file = path.join(SHOTS, 'export-modern.json');
    await dl.saveAs(file);
    const saved = JSON.parse(fs.readFileSync(file, 'utf8'));
    assert(saved.request.rope && saved.request.sparsity && saved.companion && saved.companion.role === 'soft', 'the export lacks the options or the soft panel');
    await fresh();
    await setMode('load');
    await page.setInputFiles('#load-file', file);
    await page.waitForSelector('#companion .cell', { timeout: 30000 });
    await expectHeatmap(page, w, 'loaded export');
    assert((await snap(page)).kinds === a.kinds, 'masked cells differ after loading the export');
  });

  await test('modern: a rule that does not take an option disables it (as GET /rules says); refusals show the API\'s message', async () => {
    await fresh();
    const rules = (await (await fetch(BASE + '/rules')).json()).rules;
    const CONTROL = { causal: 'causal', window: 'window', align: 'align', softcap: 'softcap', alibi: 'alibi', sinks: 'sinks',
      rope: 'rope', sparsity: 'sparsity', hard: 'hard', 'feature-map': 'feature_map', scale: 'scale' };
    let checked = 0;
    for (const r of rules) {
      await setRule(r.name);
      const na = new Set(r.not_applicable || []);
      for (const [id, field] of Object.entries(CONTROL)) {
        const dis = await page.$eval('#' + id, e => e.disabled);
        assert(dis === na.has(field), `${r.name}: ${id} is ${dis ? 'disabled' : 'enabled'}, GET /rules says ${na.has(field) ? 'not ' : ''}applicable`);
        checked++;
      }
    }
    assert(rules.some(r => r.name === 'linear') && checked >= 7 * 11, `checked ${checked}`);
    // Multi-head: each form of its attention as GET /rules says.
    const byAttention = (await (await fetch(BASE + '/rules')).json()).multihead.not_applicable_by_attention;
    await setRule('multihead');
    for (const att of ['linear', 'softmax']) {
      await page.selectOption('#mh-attention', att);
      const na = new Set(byAttention[att]);
      for (const [id, field] of Object.entries(CONTROL)) {
        if (field === 'scale') continue; // not a /multihead field
        const dis = await page.$eval('#' + id, e => e.disabled);
        assert(dis === na.has(field), `multihead ${att}: ${id} is ${dis ? 'disabled' : 'enabled'}, GET /rules says ${na.has(field) ? 'not ' : ''}applicable`);
      }
    }
    assert(byAttention.linear.includes('rope') && byAttention.softmax.includes('feature_map'), 'GET /rules: multi-head forms');
    await setRule('scaled_dot');
    // A value the API refuses: its own message beside the field.
    await openModern();
    await page.check('#rope');
    await setField('#rope-dims', '3');
    const bad = await api('/attention/scaled_dot', selfBody({ rope: { base: 10000, style: 'half', dims: 3 } }));
    assert(bad.status === 422 && bad.body.error.field.startsWith('rope'), `API answered ${bad.status}`);
    await page.waitForFunction(m => document.querySelector('#err-rope').textContent.includes(m), bad.body.error.message, { timeout: 30000 });
    await page.$eval('#rope', e => e.scrollIntoView({ block: 'center' }));
    await modelShot(page, 'modern-refused-1280x800');
    await page.uncheck('#rope');
    // A pasted request with an option its rule does not take.
    await setMode('paste');
    await page.fill('#paste', JSON.stringify({ query: [[1, 0]], key: [[1, 0], [0, 1]], value: [[1], [2]], rope: {} }));
    await setRule('additive');
    await page.click('#paste-run');
    const pr = await api('/attention/additive', { query: [[1, 0]], key: [[1, 0], [0, 1]], value: [[1], [2]], rope: {}, seed: 0 });
    assert(pr.status === 422, `API answered ${pr.status}`);
    await page.waitForFunction(m => document.querySelector('#err-paste').textContent.includes(m), pr.body.error.message, { timeout: 30000 });
  });

  await test('modern: phone layout 390x844 (panels stack, controls in the fold)', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    try {
      const S2 = encodeURIComponent(DEFAULT_SENTENCE);
      await phone.goto(`${BASE}/#s=${S2}&r=linear`);
      await phone.waitForSelector('#companion .cell', { timeout: 30000 });
      const [a, b] = await Promise.all(['#heatmap', '#companion'].map(sel => phone.$eval(sel, e => e.getBoundingClientRect().toJSON())));
      assert(b.top >= a.bottom - 1, `the panels do not stack: ${JSON.stringify([a, b])}`);
      await modelShot(phone, 'modern-linear-390x844');
      await phone.goto('about:blank');
      await phone.goto(`${BASE}/#s=${S2}&r=scaled_dot&sp=bigbird`);
      await phone.waitForSelector('#heatmap .layout-block', { timeout: 30000 });
      await modelShot(phone, 'modern-sparsity-390x844');
      await phone.evaluate(() => { document.getElementById('controls-fold').open = true; document.getElementById('modern-fold').open = true; document.getElementById('modern-fold').scrollIntoView(); });
      await modelShot(phone, 'modern-controls-390x844');
    } finally {
      await phone.close();
    }
  });

  /* ------------------------------------------------ review fixes (round 3) */

  const S1 = `#s=${encodeURIComponent(DEFAULT_SENTENCE)}`;
  // Opens hash on p as a new document and waits for the heatmap.
  const openHash = async (p, hash, sel = '#heatmap .cell') => {
    await p.goto('about:blank');
    await p.goto(BASE + '/' + hash);
    await p.waitForSelector(sel, { state: 'attached', timeout: 30000 });
    await p.waitForFunction(() => /round trip|Loaded/.test(document.querySelector('#status').textContent), null, { timeout: 30000 });
  };
  // An exported SVG laid out in a page of its own: fn(root svg) runs there.
  async function inExport(svgText, fn) {
    const p = await context.newPage();
    try {
      await p.setContent(`<!doctype html><body style="margin:0">${svgText}</body>`);
      return await p.evaluate(fn);
    } finally {
      await p.close();
    }
  }
  const hit = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;

  await test('long heatmap titles wrap inside their box, on screen and in the PNG/SVG, clear of the legend', async () => {
    const cases = [
      ['many options', `${S1}&r=scaled_dot&causal=1&win=3&cap=2&alibi=1&sinks=1&rope=1&rd=8&ro=3&scale=0.3&al=bottom_right`, 1],
      ['a draw beside its soft weights', `${S1}&r=scaled_dot&hard=sample&causal=1`, 2],
      ['linear heads beside softmax', `${S1}&r=multihead&att=linear`, 2],
    ];
    for (const [what, hash, panels] of cases) {
      await openHash(page, hash, panels === 2 ? '#companion .cell' : '#heatmap .cell');
      const r = await page.evaluate(() => [...document.querySelectorAll('#heatmap svg.heatmap, #companion svg.heatmap')].map(svg => {
        const t = svg.querySelector('text.title'), box = svg.closest('.heat-figure').getBoundingClientRect();
        return { text: t.textContent, label: svg.getAttribute('aria-label'), lines: t.querySelectorAll('tspan').length, right: t.getBoundingClientRect().right, box: box.right,
          svg: svg.getBoundingClientRect().right };
      }));
      assert(r.length === panels, `${what}: ${r.length} panels`);
      for (const x of r) {
        assert(x.right <= x.box + 0.5 && x.svg <= x.box + 0.5, `${what}: the title "${x.text}" ends at ${x.right.toFixed(0)}px (its figure at ${x.svg.toFixed(0)}px), its box at ${x.box.toFixed(0)}px`);
        assert(x.label.startsWith(x.text + ': '), `${what}: the wrapped title reads "${x.text}", its figure is "${x.label}"`);
      }
      if (panels === 1) assert(r[0].lines >= 2, `${what}: a long title on ${r[0].lines} line(s)`);
    }
    // The export of the first case: the whole title inside its figure, over nothing of the legend.
    await openHash(page, cases[0][1]);
    const svgText = fs.readFileSync(await saveDownload(page, '#export-svg', SHOTS, 'export-title-'), 'utf8');
    const ex = await inExport(svgText, () => {
      const map = document.querySelector('svg.heatmap'), t = map.querySelector('text.title'), legend = document.querySelector('svg.legend-bar');
      const b = e => e.getBoundingClientRect().toJSON();
      return { title: b(t), map: b(map), legend: b(legend), text: t.textContent };
    });
    assert(ex.title.right <= ex.map.right + 0.5, `exported title "${ex.text}" runs to ${ex.title.right}, past its figure (${ex.map.right})`);
    assert(!hit(ex.title, ex.legend) && !hit(ex.map, ex.legend), `the exported legend lies over the heatmap: ${JSON.stringify(ex)}`);
    const png = fs.readFileSync(await saveDownload(page, '#export-png', SHOTS, 'export-title-'));
    assert(png.readUInt32BE(16) > 300, 'the PNG of the long title is empty');
  });

  await test('phone 390 px: the per-query table stays in its card, the page never scrolls sideways', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    try {
      for (const hash of [`${S1}&r=linear`, `${S1}&r=multihead&h=4&causal=1`]) {
        await openHash(phone, hash);
        const r = await phone.evaluate(() => ({ sw: document.documentElement.scrollWidth, iw: innerWidth,
          table: document.querySelector('#stats table').getBoundingClientRect().right, card: document.querySelector('.views').getBoundingClientRect().right,
          box: document.querySelector('#stats').getBoundingClientRect().right }));
        assert(r.sw <= r.iw, `${hash}: the page is ${r.sw}px wide on a ${r.iw}px screen`);
        assert(r.box <= r.card, `${hash}: the table's box ends at ${r.box}px, past its card (${r.card}px)`);
      }
    } finally {
      await phone.close();
    }
  });

  await test('phone 390 px: after editing the options, a button at their end scrolls back to the figure', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    try {
      await openHash(phone, S1);
      await phone.click('#to-controls');
      await phone.selectOption('#rule', 'dot');
      await phone.locator('#to-figure').scrollIntoViewIfNeeded();
      const away = await phone.evaluate(() => document.querySelector('#heatmap').getBoundingClientRect().bottom);
      assert(away < 0, `the heatmap is still on screen after scrolling to the button (bottom ${away}px)`);
      await phone.click('#to-figure');
      await phone.waitForFunction(() => {
        const r = document.querySelector('#heatmap').getBoundingClientRect();
        return r.top >= -1 && r.top < innerHeight;
      }, null, { timeout: 5000 });
      assert(await phone.evaluate(() => document.activeElement?.id) === 'to-controls', 'focus did not return to the edit button');
    } finally {
      await phone.close();
    }
  });

  await test('concat names its columns values (source as values): axis, table, text view, readout, status', async () => {
    await openHash(page, '#s=the+cats+were+sitting+on+the+mats&t=a+cat+sat+on+a+mat&r=concat');
    const r = await page.evaluate(() => ({
      axes: [...document.querySelectorAll('#heatmap text.axis')].map(t => t.textContent),
      foot: document.querySelector('#heatmap text.foot')?.textContent ?? '',
      th: [...document.querySelectorAll('#stats th')].map(t => t.textContent),
      labels: [...document.querySelectorAll('#token-text .ctok-label')].map(t => t.textContent),
      status: document.querySelector('#status').textContent,
    }));
    assert(r.axes.join('|') === 'values →|queries ↓', `concat axis titles: ${r.axes}`);
    assert(/source as values/.test(r.foot), `concat heatmap foot: "${r.foot}"`);
    assert(r.th.includes('argmax value') && !r.th.includes('argmax key'), `concat table heads: ${r.th}`);
    assert(r.labels.join('|') === 'queries|values', `concat text view labels: ${r.labels}`);
    assert(/6 queries × 7 values/.test(r.status), `status "${r.status}"`);
    await page.hover('#heatmap .cell[data-row="1"][data-col="2"]');
    assert(/→ value “were”/.test(await page.textContent('#readout')), `readout "${await page.textContent('#readout')}"`);
    // Any other rule keeps keys.
    await setRule('scaled_dot');
    await page.waitForFunction(() => /keys/.test(document.querySelector('#status').textContent), null, { timeout: 30000 });
    assert((await page.$$eval('#heatmap text.axis', e => e.map(t => t.textContent))).join('|') === 'keys →|queries ↓', 'scaled_dot lost "keys"');
  });

  await test('text view: the "queries" and "keys" labels sit apart from their first token', async () => {
    await openHash(page, '#s=the+cats+were+sitting+on+the+mats+because+they+were+tired&t=a+cat+sat');
    const gaps = await page.$$eval('#token-text .ctok-line', ls => ls.map(l => {
      const lab = l.querySelector('.ctok-label'), first = l.querySelector('.ctok');
      return [lab.textContent, first.getBoundingClientRect().left - lab.getBoundingClientRect().right, lab.scrollWidth - lab.clientWidth];
    }));
    assert(gaps.length === 2, `${gaps.length} lines`);
    for (const [lab, gap, over] of gaps) assert(gap >= 4 && over <= 0, `"${lab}" is ${gap.toFixed(1)}px from its first token (its text overflows by ${over}px)`);
  });

  await test('entropy: a one-hot row reads 0, not float32 noise', async () => {
    await openHash(page, `${S1}&r=linear&causal=1&fm=relu`);
    const row0 = await page.$$eval('#stats tbody tr:first-child td', e => e.map(x => x.textContent));
    assert(row0[3] === '1.00' && row0[4] === '0', `row 0: weight ${row0[3]}, entropy "${row0[4]}"`);
    // The threshold is noise only: a row with 0.999 on one key still shows its spread.
    const [a, b] = rowStats([[0.99999994, 0, 5.96e-8], [0.999, 0.001, 0]]);
    assert(a.entropy === 0 && b.entropy > 0.01, `entropies ${a.entropy}, ${b.entropy}`);
  });

  await test('neuron view unavailable: no empty readout box', async () => {
    await openHash(page, `${S1}&r=scaled_dot&sinks=1&v=neuron`);
    await page.waitForFunction(() => /Not available/.test(document.querySelector('#neuron-note').textContent), null, { timeout: 30000 });
    assert(await page.isHidden('#neuron-readout'), 'an empty readout box is shown beside "Not available"');
    await openHash(page, `${S1}&r=scaled_dot&v=neuron`);
    await page.waitForSelector('#neuron svg .n-api', { timeout: 30000 });
    assert(await page.isVisible('#neuron-readout'), 'the readout is hidden where the view is available');
  });

  await test('the URL drops settings of options that are off; old links that carry them still load', async () => {
    const old = `${S1}&r=scaled_dot&temp=0.5&rs=interleaved&rb=500&rd=8&ro=2&spl=101&spw=4&slopes=0.5&fm=relu&att=linear`;
    await openHash(page, old);
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', selfBody({})), 'an old link with dead settings');
    const h = new URLSearchParams(new URL(page.url()).hash.slice(1));
    const dead = ['temp', 'rs', 'rb', 'rd', 'ro', 'spl', 'spw', 'slopes', 'fm', 'att'].filter(k => h.has(k));
    assert(dead.length === 0, `dead settings kept in the URL: ${dead.join(', ')} (${page.url()})`);
    // Switched on, they are written again.
    await openHash(page, `${S1}&r=scaled_dot&rope=1&rd=8&hard=sample&temp=0.5&sp=local_global&spw=4`, '#companion .cell');
    const on = new URLSearchParams(new URL(page.url()).hash.slice(1));
    for (const [k, v] of [['rd', '8'], ['temp', '0.5'], ['spw', '4']]) assert(on.get(k) === v, `${k} lost while its option is on: ${page.url()}`);
  });

  await test('keyboard: Home and End go to the first and last tab; one query is "1 query"', async () => {
    await fresh();
    await page.focus('#tab-lines');
    await page.keyboard.press('End');
    const last = await page.evaluate(() => [...document.querySelectorAll('.tabs [role=tab]')].filter(t => !t.hidden).pop().id);
    assert(await page.evaluate(() => document.activeElement.id) === last, `End went to ${await page.evaluate(() => document.activeElement.id)}, not ${last}`);
    await page.keyboard.press('Home');
    assert(await page.evaluate(() => document.activeElement.id) === 'tab-heatmap' && await page.isVisible('#view-heatmap'), 'Home did not open the first tab');
    await openHash(page, '#s=a');
    assert(/: 1 query × 1 key /.test(await page.textContent('#status')), `status "${await page.textContent('#status')}"`);
  });

  await tfmTest('models: Home and End in the views bar; the grid export keeps its headings and labels', async () => {
    await openModels(page, 'ms=heads');
    await page.focus('#msub-heads');
    await page.keyboard.press('End');
    assert(await page.evaluate(() => document.activeElement.id) === 'msub-rollout' && await page.isVisible('#m-rollout'), 'End did not open Rollout');
    await page.keyboard.press('Home');
    assert(await page.evaluate(() => document.activeElement.id) === 'msub-translate' && await page.isVisible('#m-translate'), 'Home did not open Translate');
    await openModels(page, 'ms=grid');
    const t = await translateAPI('transformer', MODEL_TEXT);
    const H = t.attention.cross[0].length, L = Math.max(t.attention.encoder.length, t.attention.decoder.length, t.attention.cross.length);
    const svgText = fs.readFileSync(await saveDownload(page, '#export-svg', MODEL_SHOTS, 'export-'), 'utf8');
    const labels = await inExport(svgText, () => [...document.querySelectorAll('text.export-label')].map(e => e.textContent));
    for (const want of ['Encoder self-attention (English → English)', 'Decoder self-attention (French → earlier French (causal))',
      'Cross-attention (French → English)', 'mean', ...Array.from({ length: L }, (_, l) => `layer ${l}`), ...Array.from({ length: H }, (_, h) => `head ${h}`)]) {
      assert(labels.includes(want), `the grid SVG lost "${want}" (has ${labels.slice(0, 12).join(' | ')})`);
    }
    // Each thumbnail row is beside its layer label, not over it.
    const over = await inExport(svgText, () => {
      const labs = [...document.querySelectorAll('text.export-label')].map(e => e.getBoundingClientRect());
      const thumbs = [...document.querySelectorAll('svg.heatmap')].slice(0, -1).map(e => e.getBoundingClientRect());
      return labs.flatMap(l => thumbs.filter(s => l.left < s.right && s.left < l.right && l.top < s.bottom && s.top < l.bottom)).length;
    });
    assert(over === 0, `${over} labels lie over thumbnails in the export`);
    const png = fs.readFileSync(await saveDownload(page, '#export-png', MODEL_SHOTS, 'export-'));
    assert(png.readUInt32BE(16) > 300, 'the grid PNG is empty');
  });

  await tfmTest('models: the head view export names the attention, the layer and every head’s colour, the hidden ones as hidden', async () => {
    await openModels(page, 'ms=heads&ma=cross&ml=0&mhide=2');
    const svgText = fs.readFileSync(await saveDownload(page, '#export-svg', MODEL_SHOTS, 'export-'), 'utf8');
    const k = await inExport(svgText, () => ({
      caption: document.querySelector('.export-caption').textContent,
      title: document.querySelector('.line-key .key-title')?.textContent ?? '',
      heads: [...document.querySelectorAll('.line-key .key-head')].map(g => [g.dataset.head, g.dataset.shown, g.querySelector('rect').getAttribute('fill'), g.textContent]),
    }));
    assert(/Cross-attention, layer 0/.test(k.title), `key title "${k.title}"`);
    assert(/cross-attention, layer 0, head 2 hidden/.test(k.caption), `caption "${k.caption}"`);
    assert(k.heads.length === TFM.sizes.heads, `${k.heads.length} heads in the key`);
    for (const [h, shown, fill, text] of k.heads) {
      assert(fill === HEAD_COLOURS[h] && shown === (h === '2' ? '0' : '1') && text === `head ${h}${h === '2' ? ' (hidden)' : ''}`, `key entry ${h}: ${fill} ${shown} "${text}"`);
    }
  });

  await test('the Lines export of a multi-head view carries its head colour key; the Compare export is attention-compare.png', async () => {
    await openHash(page, `${S1}&r=multihead&h=4&v=lines&hide=1`, '#lines .tok');
    const svgText = fs.readFileSync(await saveDownload(page, '#export-svg', SHOTS, 'export-'), 'utf8');
    const heads = await inExport(svgText, () => [...document.querySelectorAll('.line-key .key-head')].map(g => [g.dataset.head, g.dataset.shown, g.querySelector('rect').getAttribute('fill')]));
    assert(heads.map(x => x.join()).join(';') === [0, 1, 2, 3].map(h => [h, h === 1 ? 0 : 1, HEAD_COLOURS[h]].join()).join(';'), `head key: ${JSON.stringify(heads)}`);
    // The line colours are the key's.
    const lines = await page.$$eval('#lines .attn-line', e => [...new Set(e.map(l => l.dataset.head + l.getAttribute('stroke')))]);
    for (const l of lines) assert(HEAD_COLOURS.some((c, h) => l === h + c), `a line in ${l}`);
    await page.click('#tab-compare');
    await page.waitForFunction(() => document.querySelectorAll('#compare-grid .compare-item svg').length === 8, null, { timeout: 30000 });
    const f = await saveDownload(page, '#export-png', SHOTS, 'export-');
    assert(path.basename(f) === 'export-attention-compare.png', `the Compare PNG is named ${path.basename(f)}`);
  });

  await tfmTest('models: at 390 px the grid detail’s title and caption wrap inside its box', async () => {
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    try {
      await openModels(phone, 'ms=grid');
      const r = await phone.evaluate(() => {
        const svg = document.querySelector('#m-detail-svg'), box = svg.parentElement.getBoundingClientRect();
        return { box: box.right, texts: [...svg.querySelectorAll('text.title, text.caption')].map(t => [t.textContent, t.getBoundingClientRect().right]),
          sw: document.documentElement.scrollWidth, iw: innerWidth };
      });
      for (const [text, right] of r.texts) assert(right <= r.box + 0.5, `"${text}" runs to ${right.toFixed(0)}px, its box ends at ${r.box.toFixed(0)}px`);
      assert(r.texts.map(x => x[0]).join(' ').includes(`“${MODEL_TEXT}”`), `the caption lost the sentence: ${r.texts.map(x => x[0]).join(' / ')}`);
      assert(r.sw <= r.iw, `page is ${r.sw}px wide`);
    } finally {
      await phone.close();
    }
  });

  await tfmTest('models: rollout figures two a row, cells large enough that the slanted labels do not overlap', async () => {
    await openModels(page, 'ms=rollout');
    const r = await page.$$eval('#m-rollout .m-roll svg.heatmap', svgs => svgs.map(s => {
      const b = s.getBoundingClientRect();
      const labs = [...s.querySelectorAll('.col-label')].map(t => t.getBoundingClientRect());
      return { top: Math.round(b.top), cell: Number(s.dataset.cell), fs: Number(s.querySelector('.col-labels').getAttribute('font-size')), n: labs.length };
    }));
    assert(r.length === 4 && r[0].top === r[1].top && r[2].top === r[3].top && r[2].top > r[0].top, `figure rows: ${r.map(x => x.top)}`);
    // Rotated 45°, neighbouring labels are cell · sin 45° apart across their lines: at least the font's size.
    for (const x of r) assert(x.cell * Math.SQRT1_2 >= x.fs, `cells of ${x.cell}px under ${x.fs}px labels overlap`);
  });

  /* ------------------------------------------------ history and paste mode */

  await test('Back and Forward step through the questions asked; view details do not add entries', async () => {
    // A page of its own: Chromium's history.length stops at 50, which the tests before reach.
    const page = await context.newPage();
    page.on('pageerror', e => pageErrors.push(e.message));
    try {
      await openHash(page, `${S1}&r=scaled_dot`);
      const param = k => page.evaluate(k => new URLSearchParams(location.hash.slice(1)).get(k), k);
      const scaled = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE));
      const dot = await weightsOf('/attention/dot', sentenceBody(DEFAULT_SENTENCE));
      const dotCausal = await weightsOf('/attention/dot', sentenceBody(DEFAULT_SENTENCE, { causal: true }));
      const len0 = await page.evaluate(() => history.length);
      await page.selectOption('#rule', 'dot');
      await page.waitForFunction(() => /(^|&)r=dot(&|$)/.test(location.hash.slice(1)), null, { timeout: 30000 });
      await expectHeatmap(page, dot, 'dot');
      await page.waitForTimeout(1100); // edits within a second of an entry change it in place
      await page.check('#causal');
      await page.waitForFunction(() => /causal=1/.test(location.hash), null, { timeout: 30000 });
      await expectHeatmap(page, dotCausal, 'dot causal');
      // A colour scale is a view detail: no new entry.
      const len2 = await page.evaluate(() => history.length);
      assert(len2 === len0 + 2, `two questions made ${len2 - len0} entries`);
      await page.selectOption('#colour-scale', 'row');
      await page.waitForFunction(() => /cs=row/.test(location.hash), null, { timeout: 30000 });
      assert(await page.evaluate(() => history.length) === len2, 'the colour scale added a history entry');

      await page.goBack();
      await page.waitForFunction(() => !/causal=1/.test(location.hash) && /r=dot/.test(location.hash), null, { timeout: 30000 });
      assert(!(await page.isChecked('#causal')), 'Back left causal ticked');
      await expectHeatmap(page, dot, 'Back to dot');
      await page.goBack();
      await page.waitForFunction(() => /r=scaled_dot/.test(location.hash), null, { timeout: 30000 });
      assert(await page.inputValue('#rule') === 'scaled_dot', `Back shows rule ${await page.inputValue('#rule')}`);
      await expectHeatmap(page, scaled, 'Back to scaled_dot');
      await page.goForward();
      await page.waitForFunction(() => /r=dot/.test(location.hash), null, { timeout: 30000 });
      await expectHeatmap(page, dot, 'Forward to dot');
      assert(await param('r') === 'dot', 'Forward: wrong rule in the URL');
    } finally {
      await page.close();
    }
  });

  await test('a reload in paste mode keeps the pasted request and the sentences typed before it', async () => {
    await fresh();
    const mine = 'A small dog ran home .';
    await page.fill('#source', mine);
    await page.dispatchEvent('#source', 'input');
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(mine)), 'typed sentence');
    await setMode('paste');
    const req = { query: [[1, 0], [0, 1], [1, 1]], key: [[1, 0], [0, 2]], value: [[1, 2], [3, 4]] };
    await page.fill('#paste', JSON.stringify(req));
    await page.click('#paste-run');
    const pasted = await weightsOf('/attention/scaled_dot', { ...req, seed: 0 });
    await expectHeatmap(page, pasted, 'pasted request');
    await page.waitForFunction(() => /(^|&)m=paste(&|$)/.test(location.hash.slice(1)), null, { timeout: 30000 });
    await page.reload();
    await page.waitForSelector('#heatmap .cell', { state: 'attached', timeout: 30000 });
    assert(await page.isChecked('input[name="mode"][value="paste"]'), 'reload left paste mode');
    assert(JSON.stringify(JSON.parse(await page.inputValue('#paste'))) === JSON.stringify(req), 'reload lost the pasted request');
    await expectHeatmap(page, pasted, 'pasted request after reload');
    await setMode('sentences');
    assert(await page.inputValue('#source') === mine, `the Sentence box reads "${await page.inputValue('#source')}"`);
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(mine)), 'sentence after reload');
  });

  /* ------------------------------------------------------ accessibility */

  const S_DEFAULT = '#s=' + encodeURIComponent(DEFAULT_SENTENCE);
  const waitStatus = (p, re) => p.waitForFunction(src => new RegExp(src).test(document.querySelector('#status').textContent), re.source, { timeout: 30000 });

  await test('axe finds no accessibility violation in the main states: loading, heatmap, lines, compare, neuron, multi-head, paste, an error, load', async () => {
    await page.goto('about:blank');
    await page.goto(BASE + '/');
    await expectAxeClean(page, 'the page as it loads');
    await page.waitForSelector('#heatmap .cell', { timeout: 30000 });
    await waitStatus(page, /round trip/);
    await expectAxeClean(page, 'a computed heatmap');
    for (const [view, ready] of [['lines', '#lines svg.lineview'], ['compare', '#compare-grid .compare-item:nth-of-type(8) svg'],
      ['neuron', '#neuron-readout[data-key]']]) {
      await page.click('#tab-' + view);
      await page.waitForSelector(ready, { state: 'attached', timeout: 30000 });
      await expectAxeClean(page, `the ${view} view`);
    }
    await openHash(page, S_DEFAULT + '&r=multihead&h=4', '#heads-grid .head-thumb');
    await expectAxeClean(page, 'multi-head with 4 heads');
    await setMode('paste');
    await page.click('#paste-example');
    await page.click('#paste-run');
    await waitStatus(page, /: 3 queries × 3 keys/);
    await expectAxeClean(page, 'a pasted request');
    await page.fill('#paste', JSON.stringify({ query: [[1, 2]], key: [[1, 2, 3]], value: [[1]] }));
    await page.click('#paste-run');
    await waitStatus(page, /refused/);
    await expectAxeClean(page, 'an error shown (the old picture dimmed)');
    await setMode('load');
    await expectAxeClean(page, 'load mode');
  });

  await modelTest('axe finds no accessibility violation in the trained models\' Translate view', async () => {
    await openModels(page);
    await expectAxeClean(page, 'Translate');
  });

  await test('200% zoom (a 640 px wide window): nothing scrolls sideways and axe stays clean', async () => {
    const p = await context.newPage();
    await p.setViewportSize({ width: 640, height: 800 });
    const wide = async state => {
      const [sw, iw] = await p.evaluate(() => [document.documentElement.scrollWidth, innerWidth]);
      assert(sw <= iw + 1, `${state}: the page is ${sw}px wide in a ${iw}px window`);
      await expectAxeClean(p, state + ' at 640 px');
    };
    try {
      await openHash(p, S_DEFAULT);
      await wide('a computed heatmap');
      await openHash(p, S_DEFAULT + '&r=multihead&h=4', '#heads-grid .head-thumb');
      await wide('multi-head with 4 heads');
      await p.click('#tab-compare');
      await p.waitForSelector('#compare-grid .compare-item:nth-of-type(8) svg', { state: 'attached', timeout: 30000 });
      await wide('the compare view');
      await p.goto('about:blank');
      await p.goto(BASE + '/#m=paste&paste=' + encodeURIComponent('{"query": [[1, 2]], "key": [[1, 2, 3]], "value": [[1]]}'));
      await waitStatus(p, /refused/);
      await wide('an error shown');
    } finally {
      await p.close();
    }
  });

  // Presses key on page until the focused element matches sel (at most n
  // times). Every element focused on the way must show a ring of at least
  // 3:1 against white (WCAG 1.4.11); a hidden mode radio shows it on its label.
  async function tabTo(sel, n, key = 'Tab') {
    for (let k = 0; k < n; k++) {
      await page.keyboard.press(key);
      const f = await page.evaluate(s => {
        const e = document.activeElement;
        const cs = getComputedStyle(e.matches('.segmented input') ? e.closest('label') : e);
        return { at: e.matches(s), what: e.id || e.className.baseVal || e.className || e.tagName, style: cs.outlineStyle, width: parseFloat(cs.outlineWidth), color: cs.outlineColor };
      }, sel);
      assert(f.style !== 'none' && f.width >= 2 && contrast(f.color, '#ffffff') >= 3,
        `focus on ${f.what} shows a ring of ${f.style} ${f.width}px ${f.color} (contrast ${contrast(f.color, '#ffffff').toFixed(2)} on white)`);
      if (f.at) return;
    }
    throw new Error(`${n} presses of ${key} never reached ${sel}`);
  }

  await test('keyboard only: Tab to the sentence, type it, pick a rule, Tab to the heatmap and read a cell; every focus ring shows', async () => {
    await page.goto('about:blank');
    await page.goto(BASE + '/');
    await page.waitForSelector('#heatmap .cell', { timeout: 30000 });
    await tabTo('#source', 15);
    const mine = 'a cat sat on a mat';
    await page.keyboard.press('Control+A');
    await page.keyboard.type(mine);
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(mine)), 'the typed sentence');
    await tabTo('#rule', 20);
    await page.keyboard.press('ArrowUp'); // scaled_dot -> dot
    const w = await weightsOf('/attention/dot', sentenceBody(mine));
    await expectHeatmap(page, w, 'dot, chosen with the arrow keys');
    await tabTo('#heatmap svg', 40);
    // A screen reader hands an application its arrow keys; the readout says they work.
    const svg = await page.$eval('#heatmap svg', s => [s.getAttribute('role'), s.getAttribute('aria-describedby')]);
    assert(svg[0] === 'application' && svg[1] === 'readout', `the heatmap is role ${svg[0]}, described by ${svg[1]}`);
    assert(/arrow keys/.test(await page.textContent('#readout')), `the readout does not say how to use the keys: "${await page.textContent('#readout')}"`);
    for (const k of ['ArrowRight', 'ArrowRight', 'ArrowDown']) await page.keyboard.press(k);
    const txt = await page.textContent('#readout');
    assert(txt.includes('query “cat” (row 1)') && txt.includes('(column 1)') && txt.includes('weight ' + fmt(w[1][1])), `readout "${txt}"`);
    // The cursor shows on the palest and the darkest cells (3:1 against either).
    const boxes = await page.$$eval('#heatmap .hover-box', bs => bs.map(b => [b.getAttribute('visibility'), b.getAttribute('stroke')]));
    assert(boxes.every(b => b[0] === 'visible'), 'no cursor drawn');
    assert(boxes.some(b => contrast(b[1], colour(0)) >= 3) && boxes.some(b => contrast(b[1], colour(1)) >= 3),
      `the cursor's strokes ${boxes.map(b => b[1]).join(', ')} do not show on both ends of the scale`);
    await page.keyboard.press('Enter');
    assert(await page.$eval('#heatmap svg', s => s.dataset.pin) === 'q1', 'Enter did not pin query 1');
    // No trap: Tab leaves the heatmap for the coloured text, Shift+Tab comes back.
    await tabTo('.ctok', 1);
    await tabTo('#heatmap svg', 1, 'Shift+Tab');
  });

  await test('keyboard only: the neuron view explains the key chosen in its Key token menu', async () => {
    await fresh();
    await page.focus('#tab-heatmap');
    for (let k = 0; k < 3; k++) await page.keyboard.press('ArrowRight');
    assert(await page.isVisible('#view-neuron'), 'the arrow keys did not open the neuron view');
    await page.waitForSelector('#neuron-readout[data-key]', { timeout: 30000 });
    await tabTo('#neuron-key', 12);
    const k0 = Number(await page.inputValue('#neuron-key'));
    assert(String(k0) === await page.getAttribute('#neuron-readout', 'data-key'), 'the menu does not name the key explained');
    const k1 = k0 > 0 ? k0 - 1 : k0 + 1;
    await page.keyboard.press(k0 > 0 ? 'ArrowUp' : 'ArrowDown');
    await page.waitForFunction(k => document.querySelector('#neuron-readout').dataset.key === String(k), k1, { timeout: 5000 });
    assert(new URLSearchParams(new URL(page.url()).hash.slice(1)).get('nk') === String(k1), `the URL does not keep key ${k1}: ${page.url()}`);
    assert(await page.evaluate(() => document.activeElement.id) === 'neuron-key', 'focus left the menu');
  });

  // Compare's panels, read by keyboard: every weight expected comes from the
  // API, asked here with the requests the panels' rules take.
  const COMPARE_RULES = ['dot', 'scaled_dot', 'general', 'additive', 'concat_tanh', 'concat', 'linear', 'multihead'];
  const comparePanel = rule => `#compare-grid .compare-item[data-rule="${rule}"] svg.heatmap`;
  const waitCompare = p => p.waitForFunction(n => document.querySelectorAll('#compare-grid .compare-item svg').length === n,
    COMPARE_RULES.length, { timeout: 30000 });
  // The hover box's place in the panel of rule on p, as [row, column] (null when hidden).
  const cursorAt = (p, rule) => p.$eval(comparePanel(rule), svg => {
    const b = svg.querySelector('.hover-box');
    if (b.getAttribute('visibility') !== 'visible') return null;
    const cell = [...svg.querySelectorAll('.cell')].find(c => c.getAttribute('x') === b.getAttribute('x') && c.getAttribute('y') === b.getAttribute('y'));
    return cell ? [Number(cell.dataset.row), Number(cell.dataset.col)] : 'off the cells';
  });

  await test('keyboard: Tab reaches every Compare panel in turn; its arrow keys walk its cells and the readout says the rule, tokens and the API\'s weight', async () => {
    await fresh();
    // The pointer off the panels: a cell scrolled under it would be read out too.
    await page.mouse.move(1, 1);
    const toks = tokenize(DEFAULT_SENTENCE);
    const general = await weightsOf('/attention/general', sentenceBody(DEFAULT_SENTENCE));
    const mh = await weightsOf('/multihead', sentenceBody(DEFAULT_SENTENCE, { num_heads: 2, params: identityParams(32), average_weights: true }));
    const additive = await weightsOf('/attention/additive', sentenceBody(DEFAULT_SENTENCE));
    await page.click('#tab-compare');
    await waitCompare(page);
    // The readout says how to use the keys before a cell is read; every panel hands its arrow keys over.
    assert(/arrow keys/.test(await page.textContent('#compare-readout')), `the readout does not say how to use the keys: "${await page.textContent('#compare-readout')}"`);
    assert(await page.getAttribute('#compare-readout', 'aria-live') === 'polite', 'the compare readout is no live region');
    const roles = await page.$$eval('#compare-grid svg.heatmap', e => e.map(s => [s.getAttribute('role'), s.getAttribute('tabindex'), s.getAttribute('aria-describedby')].join()));
    assert(roles.length === 8 && roles.every(r => r === 'application,0,compare-readout'), `panels' role, tabindex, described by: ${roles.join(' | ')}`);
    // From the tab, Tab reaches the first panel; each further Tab the next one (every focus ring shows on the way).
    await page.focus('#tab-compare');
    await tabTo(comparePanel('dot'), 15);
    for (const rule of COMPARE_RULES.slice(1)) {
      await tabTo(comparePanel(rule), 1);
      // Only the panel being walked shows a cursor.
      if (rule === 'additive') assert(await cursorAt(page, 'general') === null, 'the general panel keeps showing its cursor after Tab left it');
      if (rule === 'general') {
        // Right 4: the cursor starts at (0, 0) and moves to column 3; Down 2: row 2.
        for (const k of ['ArrowRight', 'ArrowRight', 'ArrowRight', 'ArrowRight', 'ArrowDown', 'ArrowDown']) await page.keyboard.press(k);
        const txt = await page.textContent('#compare-readout');
        assert(txt.startsWith('general: ') && txt.includes(`query “${toks[2]}” (row 2)`) && txt.includes(`key “${toks[3]}” (column 3)`) &&
          txt.includes('weight ' + fmt(general[2][3])), `general readout "${txt}" (the API's weight ${fmt(general[2][3])})`);
        const at = await cursorAt(page, 'general');
        assert(at && at.join() === '2,3', `the general panel's cursor is at ${at}`);
        const boxes = await page.$$eval(comparePanel('general') + ' .hover-box', bs => bs.map(b => b.getAttribute('stroke')));
        assert(boxes.some(b => contrast(b, colour(0)) >= 3) && boxes.some(b => contrast(b, colour(1)) >= 3), `the cursor's strokes ${boxes} do not show on both ends of the scale`);
        assert(await cursorAt(page, 'dot') === null, 'a panel not walked shows a cursor');
        // Enter pins the query under the cursor, in every panel.
        await page.keyboard.press('Enter');
        const pins = await page.$$eval('#compare-grid svg.heatmap', e => e.map(x => x.dataset.pin));
        assert(pins.every(p => p === 'q2'), `Enter pinned ${pins}`);
      }
    }
    // The last panel: the mean of the heads. Left: (0, 0); Down 3: row 3.
    for (const k of ['ArrowLeft', 'ArrowDown', 'ArrowDown', 'ArrowDown']) await page.keyboard.press(k);
    let txt = await page.textContent('#compare-readout');
    assert(txt.startsWith('multihead (mean of 2 heads): ') && txt.includes(`query “${toks[3]}” (row 3)`) && txt.includes(`key “${toks[0]}” (column 0)`) &&
      txt.includes('weight ' + fmt(mh[3][0])), `multihead readout "${txt}" (the API's weight ${fmt(mh[3][0])})`);
    assert(fmt(mh[3][0]) !== fmt(general[3][0]), 'the check cannot tell the rules apart');
    // The arrows stop at the edges.
    for (let k = 0; k < 14; k++) await page.keyboard.press('ArrowDown');
    txt = await page.textContent('#compare-readout');
    assert(txt.includes(`(row ${toks.length - 1})`) && txt.includes('weight ' + fmt(mh[toks.length - 1][0])), `after the last row: "${txt}"`);
    await shot('08b-compare-keyboard', false);
    // Back in a panel walked before, its cell is read again where it was left.
    await page.focus(comparePanel('general'));
    txt = await page.textContent('#compare-readout');
    assert(txt.startsWith('general: ') && txt.includes('(row 2)') && txt.includes('(column 3)'), `back in the general panel the readout says "${txt}"`);
    assert((await cursorAt(page, 'general'))?.join() === '2,3' && await cursorAt(page, 'multihead') === null, 'the cursors do not follow the focus');
    // The mouse reads into the same readout, as on the heatmap.
    await page.hover(comparePanel('additive') + ' .cell[data-row="4"][data-col="6"]');
    txt = await page.textContent('#compare-readout');
    assert(txt.startsWith('additive: ') && txt.includes(`query “${toks[4]}” (row 4)`) && txt.includes('weight ' + fmt(additive[4][6])), `hover readout "${txt}"`);
    // No trap: Tab leaves the last panel.
    await page.focus(comparePanel('multihead'));
    await page.keyboard.press('Tab');
    assert(await page.evaluate(() => !document.activeElement.closest('#compare-grid')), 'Tab does not leave the last panel');
  });

  await test('keyboard: a Compare cell a rule did not compute reads "masked"; a rule that does not take the option reads the API\'s weight there', async () => {
    await openHash(page, S1 + '&causal=1&v=compare', '#compare-grid .compare-item:nth-of-type(8) svg');
    await waitCompare(page);
    await page.mouse.move(1, 1);
    const toks = tokenize(DEFAULT_SENTENCE);
    const sd = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { causal: true }));
    const v = embed(tokenize(DEFAULT_SENTENCE));
    const concat = await weightsOf('/attention/concat', { query: v, key: v, value: v, seed: 0 }); // concat takes no causal
    assert(sd[0][1] === 0 && concat[0][1] > 0, `the API's weights at (0, 1): scaled_dot ${sd[0][1]}, concat ${concat[0][1]}`);
    await page.focus(comparePanel('scaled_dot'));
    for (const k of ['ArrowRight', 'ArrowRight']) await page.keyboard.press(k);
    let txt = await page.textContent('#compare-readout');
    assert(txt.startsWith('scaled_dot: ') && txt.includes(`query “${toks[0]}” (row 0)`) && txt.includes(`key “${toks[1]}” (column 1)`) &&
      /weight 0 \(masked[^)]*not computed\)/.test(txt), `masked cell readout "${txt}"`);
    // A computed cell of the same panel says no such thing.
    await page.keyboard.press('ArrowDown');
    txt = await page.textContent('#compare-readout');
    assert(txt.includes('weight ' + fmt(sd[1][1])) && !/masked|not computed/.test(txt), `computed cell readout "${txt}"`);
    await page.focus(comparePanel('concat'));
    for (const k of ['ArrowRight', 'ArrowRight']) await page.keyboard.press(k);
    txt = await page.textContent('#compare-readout');
    assert(txt.startsWith('concat: ') && txt.includes(`value “${toks[1]}” (column 1)`) && txt.includes('weight ' + fmt(concat[0][1])) && !/masked/.test(txt),
      `concat readout "${txt}"`);
  });

  await test('axe finds no accessibility violation in the Compare view with a panel focused and a cell read out, at 1280 and 640 px', async () => {
    for (const width of [1280, 640]) {
      const p = await context.newPage();
      try {
        await p.setViewportSize({ width, height: 800 });
        // Causal and a padding key: masked and padding cells in the panels.
        await openHash(p, S1 + '&causal=1&pad=3&v=compare', '#compare-grid .compare-item:nth-of-type(8) svg');
        await waitCompare(p);
        await expectAxeClean(p, `the compare view at ${width} px`);
        await p.focus(comparePanel('linear'));
        assert(await p.evaluate(() => document.activeElement.matches('#compare-grid .compare-item[data-rule="linear"] svg')), `at ${width} px the linear panel does not take focus`);
        for (const k of ['ArrowRight', 'ArrowDown', 'ArrowRight']) await p.keyboard.press(k);
        assert(/^linear: query .* \(row 1\)/.test(await p.textContent('#compare-readout')), `at ${width} px the readout says "${await p.textContent('#compare-readout')}"`);
        await expectAxeClean(p, `the compare view at ${width} px, a panel focused and its cell read`);
        const [sw, iw] = await p.evaluate(() => [document.documentElement.scrollWidth, innerWidth]);
        assert(sw <= iw + 1, `at ${width} px the page is ${sw}px wide`);
        // The readout stays in sight while the last panel is walked.
        await p.focus(comparePanel('multihead'));
        await p.keyboard.press('ArrowRight');
        const r = await p.evaluate(() => {
          const b = document.querySelector('#compare-readout').getBoundingClientRect(), s = document.activeElement.getBoundingClientRect();
          return { rt: b.top, rb: b.bottom, st: s.top, h: innerHeight };
        });
        assert(r.rt >= 0 && r.rb <= r.h && r.st >= r.rb - 1, `at ${width} px the readout (${r.rt}-${r.rb}) is out of sight or over the panel (top ${r.st})`);
        await p.screenshot({ path: path.join(SHOTS, `08c-compare-keyboard-${width}.png`) });
      } finally {
        await p.close();
      }
    }
  });

  await test('colour: numbers and words on coloured cells keep AA contrast (4.5:1); the scale darkens at every step for colour-blind eyes', async () => {
    // Weights of 0.56, 0.6 and 0.65 on the first key: the middle blues, where
    // neither white nor the page's dark grey reaches 4.5:1.
    const mid = { query: [[0.2412], [0.4055], [0.6190]], key: [[1], [0]], value: [[1], [0]] };
    await openHash(page, '#m=paste&pin=q0&paste=' + encodeURIComponent(JSON.stringify(mid)));
    await page.click('#tab-lines');
    await page.focus('#lines .tok[data-side="q"][data-index="0"]');
    const pairs = await page.evaluate(() => {
      const css = e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor];
      return [
        ...[...document.querySelectorAll('#heatmap .values text')].map(t => ['heatmap value ' + t.textContent, t.getAttribute('fill'), t.getAttribute('stroke')]),
        ...[...document.querySelectorAll('#token-text .ctok[data-weight]')].map(b => ['token ' + b.textContent, ...css(b)]),
        ...[...document.querySelectorAll('#line-readout td[data-weight]')].map(td => ['line table ' + td.textContent, ...css(td)])];
    });
    assert(pairs.length === 10, `${pairs.length} coloured texts found, not 6 in the heatmap, 2 tokens and 2 in the line table`);
    const low = pairs.filter(([, fg, bg]) => contrast(fg, bg) < 4.5);
    assert(low.length === 0, low.slice(0, 4).map(([what, fg, bg]) => `${what}: ${fg} on ${bg} is ${contrast(fg, bg).toFixed(2)}:1`).join('; '));
    // CIE L* of the scale at t = 0, 0.1, …, 1 as seen with each colour-vision
    // deficiency (Machado et al. 2009, severity 1, on linear RGB): larger
    // weights must stay darker by a visible step, whatever hues are lost.
    const M = { normal: [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
      protan: [[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]],
      deutan: [[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]],
      tritan: [[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]] };
    const lin = v => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    for (const [name, m] of Object.entries(M)) {
      const L = Array.from({ length: 11 }, (_, k) => {
        const c = colourRGB(k / 10).map(lin);
        const Y = m.reduce((y, row, r) => y + [0.2126, 0.7152, 0.0722][r] * Math.min(1, Math.max(0, row[0] * c[0] + row[1] * c[1] + row[2] * c[2])), 0);
        return Y > 0.008856 ? 116 * Math.cbrt(Y) - 16 : 903.3 * Y;
      });
      const step = Math.min(...L.slice(1).map((x, k) => L[k] - x));
      assert(step >= 3, `${name}: the scale's lightness steps by as little as ${step.toFixed(1)} L* (${L.map(x => x.toFixed(0)).join(' ')})`);
    }
  });

  await test('no uncaught errors in the page, and nothing fetched from another origin', async () => {
    assert(pageErrors.length === 0, pageErrors.join('; '));
    const foreign = requested.filter(u => !u.startsWith(BASE + '/') && !u.startsWith('data:') && !u.startsWith('blob:'));
    assert(foreign.length === 0, `requests to other origins: ${foreign.slice(0, 5).join(', ')}`);
    assert(requested.length > 0, 'no requests recorded');
  });
} finally {
  await browser.close();
}

const passed = results.filter(r => r.ok).length, skipped = results.filter(r => r.skipped).length;
const failed = results.length - passed - skipped;
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed ? 1 : 0);
