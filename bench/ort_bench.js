// ort_bench.js - times ONNX Runtime (onnxruntime-node, CPU, 2 threads) on the
// models bench/models.py writes; prints one JSON object of median seconds.
// Usage: node bench/ort_bench.js MODELDIR REPEATS
'use strict';
const path = require('path');
const ort = require(path.join(__dirname, 'node_modules', 'onnxruntime-node'));

const E = 512;
const dir = process.argv[2];
const repeats = parseInt(process.argv[3] || '7', 10);
const threads = parseInt(process.env.BENCH_THREADS || '2', 10);

function rand(n) {
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = Math.random() * 2 - 1;
  return a;
}

function t(l) { return new ort.Tensor('float32', rand(l * E), [1, l, E]); }

async function median(sess, feeds, budget) {
  await sess.run(feeds); // warm-up: first run plans and allocates
  const times = [];
  const start = process.hrtime.bigint();
  for (let i = 0; i < repeats; i++) {
    const t0 = process.hrtime.bigint();
    await sess.run(feeds);
    times.push(Number(process.hrtime.bigint() - t0) / 1e9);
    if (Number(process.hrtime.bigint() - start) / 1e9 > budget && times.length >= 3) break;
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)];
}

async function main() {
  const opt = { intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
                executionMode: 'sequential' };
  const core = await ort.InferenceSession.create(path.join(dir, 'core.onnx'), opt);
  const causal = await ort.InferenceSession.create(path.join(dir, 'core_causal.onnx'), opt);
  const mha = await ort.InferenceSession.create(path.join(dir, 'multihead.onnx'), opt);
  const out = {};
  for (const l of [128, 512, 1024, 2048, 4096]) {
    const feeds = { q: t(l), k: t(l), v: t(l) };
    out['core_' + l] = await median(core, feeds, 3);
    try {
      out['causal_' + l] = await median(causal, feeds, 3);
    } catch (e) {
      out['causal_' + l] = null;
    }
    out['mha_' + l] = await median(mha, { x: t(l) }, 3);
  }
  out['decode_4096'] = await median(core, { q: t(1), k: t(4096), v: t(4096) }, 2);
  process.stdout.write(JSON.stringify(out) + '\n');
}

main().catch((e) => { console.error(e); process.exit(1); });
