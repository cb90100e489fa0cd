// demo.test.mjs - drives the attention demo in headless Debian chromium against a live server and checks it against the API.
//
// Usage: ATTN_URL=http://127.0.0.1:PORT node demo.test.mjs   (make test-browser does this)
// The reference for every weight the page draws is the API itself: the test
// builds the same request in node (with the page's own embedding module, a
// pure function of the text) and posts it with fetch, so a page that sends
// the wrong request, drops an option or draws a cell in the wrong place fails.
// Prints "N passed, N failed" and exits nonzero on any failure. Screenshots
// go to tests/browser/screenshots/ (git-ignored).

import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BASE = (process.env.ATTN_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const SHOTS = path.join(HERE, 'screenshots');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const TOL = 1e-6;

// The page's embedding, loaded from its source as a data: URL so this works
// whatever node decides about the module type of demo/*.js.
const embedSrc = fs.readFileSync(path.join(HERE, '../../demo/embed.js'), 'utf8');
const { tokenize, embed } = await import('data:text/javascript,' + encodeURIComponent(embedSrc));

const DEFAULT_SENTENCE = 'The cat sat on the mat because the cat was tired .';

/* ----------------------------------------------------------- harness */

const results = [];
async function test(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    results.push({ name, ok: true });
    console.log(`ok - ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    results.push({ name, ok: false });
    console.log(`not ok - ${name}\n  ${String(e && e.stack || e).split('\n').slice(0, 4).join('\n  ')}`);
  }
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

// Identity projections for nn.MultiheadAttention, written out independently
// of the page's own helper.
function identityParams(E) {
  const I = [];
  for (let i = 0; i < E; i++) { I.push(new Array(E).fill(0)); I[i][i] = 1; }
  return { in_proj_weight: I.concat(I, I), in_proj_bias: new Array(3 * E).fill(0),
    'out_proj.weight': I, 'out_proj.bias': new Array(E).fill(0) };
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
const shot = name => page.screenshot({ path: path.join(SHOTS, name + '.png'), fullPage: true });
const setRule = async rule => { await page.selectOption('#rule', rule); };
// Each test after the first starts from a freshly loaded page, so one
// failure does not cascade into the next.
const fresh = async () => {
  await page.goto(BASE + '/');
  await page.waitForSelector('#heatmap .cell', { timeout: 5000 });
};
// The mode radios are visually replaced by their labels; press the label.
const setMode = mode => page.click(`label:has(input[name="mode"][value="${mode}"])`);

try {
  await test('default example renders within a second', async () => {
    await page.goto(BASE + '/');
    await page.waitForSelector('#heatmap .cell', { timeout: 5000 });
    const ms = await page.evaluate(() => performance.now());
    const n = tokenize(DEFAULT_SENTENCE).length;
    const cells = await page.$$eval('#heatmap .cell', e => e.length);
    assert(cells === n * n, `expected ${n * n} cells, found ${cells}`);
    assert(ms < 1000, `first heatmap after ${ms.toFixed(0)} ms`);
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
    assert(txt.includes(Number(w[1][8]).toPrecision(6)), `readout "${txt}" lacks ${w[1][8]}`);
    const title = await page.textContent('#heatmap .cell[data-row="1"][data-col="8"] title');
    assert(/cat → cat/.test(title), `cell title is "${title}"`);
  });

  await test('formula of the chosen rule comes from GET /rules', async () => {
    await fresh();
    const rules = await (await fetch(BASE + '/rules')).json();
    const list = Array.isArray(rules) ? rules : rules.rules;
    const r = list.find(x => x.name === 'scaled_dot');
    assert(r && r.formula, 'GET /rules has no scaled_dot formula');
    await page.waitForFunction(f => document.querySelector('#formula').textContent.includes(f), r.formula, { timeout: 3000 });
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
      assert(Math.abs(Number(rows[i][4]) - h) < 0.006, `row ${i}: entropy ${rows[i][4]}, expected ${h.toFixed(3)}`);
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

  await test('options re-render: causal, window, hard argmax, top-k, scale', async () => {
    await fresh();
    await page.check('#causal');
    const causal = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE, { causal: true }));
    await expectHeatmap(page, causal, 'causal');
    causal.forEach((r, i) => r.forEach((x, j) => assert(j <= i || x === 0, `causal weight at ${i},${j} is ${x}`)));
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
    const visible = () => page.$$eval('#lines .attn-line', ls => ls.filter(l => l.style.display !== 'none')
      .map(l => [l.dataset.q, l.dataset.k]));
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
    const want = ['dot', 'scaled_dot', 'general', 'additive', 'concat_tanh', 'concat', 'multihead'];
    await page.waitForFunction(n => document.querySelectorAll('#compare-grid .compare-item svg').length === n, want.length, { timeout: 5000 });
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
      const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 5000 }), page.click(id)]);
      const file = path.join(SHOTS, 'export-' + dl.suggestedFilename());
      await dl.saveAs(file);
      return fs.readFileSync(file);
    };
    // The compare view first: several SVGs composed into one picture.
    await page.click('#tab-compare');
    await page.waitForFunction(() => document.querySelectorAll('#compare-grid .compare-item svg').length === 7, null, { timeout: 5000 });
    const png = await save('#export-png');
    assert(png.length > 2000, `PNG has ${png.length} bytes`);
    assert(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'not a PNG signature');
    const wpx = png.readUInt32BE(16), hpx = png.readUInt32BE(20);
    assert(wpx > 300 && hpx > 300, `PNG is ${wpx}x${hpx}`);
    await page.click('#tab-heatmap');
    const svg = (await save('#export-svg')).toString('utf8');
    assert(svg.startsWith('<svg') && svg.includes('class="cell"') && svg.includes('data-weight'), 'SVG export lacks the cells');
    const json = JSON.parse((await save('#export-json')).toString('utf8'));
    const w = await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE));
    assert(maxDiff(json.weights, w) <= TOL, 'exported JSON weights differ from the API');
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
      await page.waitForFunction(m => document.querySelector('#err-paste').textContent.includes(m), r.body.error.message, { timeout: 3000 })
        .catch(async () => { throw new Error(`${c.what}: page shows "${await page.textContent('#err-paste')}", API says "${r.body.error.message}"`); });
      if (c.what === 'ragged tensor') await shot('09-paste-error');
    }
    // The page is still alive and a good paste renders.
    await page.click('#paste-example');
    await page.click('#paste-run');
    await page.waitForFunction(() => document.querySelector('#err-paste').textContent === '', null, { timeout: 3000 });
    const ex = JSON.parse(await page.inputValue('#paste'));
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', { ...ex, seed: 0 }), 'pasted example');
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
    await page.waitForFunction(() => document.querySelector('#err-load').textContent.length > 0, null, { timeout: 2000 });
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
      document.querySelector('#err-general').textContent.includes(m), r.body.error.message, { timeout: 3000 });
    assert(await page.$('#heatmap .cell'), 'the last good heatmap vanished');
    await page.fill('#window', '');
    await page.dispatchEvent('#window', 'change');
    await page.waitForFunction(() => document.querySelector('#err-window').textContent === '', null, { timeout: 3000 });
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
    assert(txt.includes('(row 1)') && txt.includes('(column 1)') && txt.includes(Number(w[1][1]).toPrecision(6)), `readout "${txt}"`);
    assert(await page.$('#heatmap .cursor-box'), 'no cursor drawn');
  });

  await test('narrow screen: one column, nothing wider than the screen', async () => {
    await fresh();
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(100);
    const [sw, iw] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    assert(sw <= iw + 1, `page is ${sw}px wide on a ${iw}px screen`);
    await shot('10-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  await test('the page also works at /demo/index.html', async () => {
    await page.goto(BASE + '/demo/index.html');
    await page.waitForSelector('#heatmap .cell', { timeout: 5000 });
    await expectHeatmap(page, await weightsOf('/attention/scaled_dot', sentenceBody(DEFAULT_SENTENCE)), '/demo/ path');
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

const passed = results.filter(r => r.ok).length, failed = results.length - passed;
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
