#!/usr/bin/python3
"""Greedy and beam-4 translation of one ~10-word sentence: the C models
(build/bench_models, one thread) against the PyTorch definition
(training/translate.py, torch.set_num_threads(1)); best and median of REPS.

    translate_bench.py BUILD_DIR [--weights DIR] [--reps N]
"""
import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "training"))
import blas_env  # noqa: E402  (before torch: OpenBLAS reads its core type when it loads)
CORETYPE = blas_env.use_cpu_kernels()
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread each: OpenBLAS's own threads too

TEXT = "Open the selected file in a new window and save the changes"


def torch_times(weights, name, reps):
    import torch
    import translate as T
    from tokenizer import BPE
    torch.set_num_threads(1)
    bpe = BPE.load()
    m, cfg = T.load_model(name, weights)
    st = T.Stepper(m, cfg)
    src = T.prepare_src(bpe, cfg, TEXT)
    out = {}
    for beam in (1, 4):
        ts, cs = [], []
        for _ in range(reps):
            t0, c0 = time.perf_counter(), time.thread_time()
            ids = T.greedy(st, src)[0] if beam == 1 else T.beam(st, src, 4)
            ts.append((time.perf_counter() - t0) * 1e3)
            cs.append((time.thread_time() - c0) * 1e3)
        ts.sort()
        cs.sort()
        out[beam] = (ts[0], ts[len(ts) // 2], len(ids), cs[0], cs[len(cs) // 2])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--weights", default=os.path.join(ROOT, "training", "weights"))
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.weights, "transformer.safetensors")):
        print("bench-models: no weights in %s" % a.weights)
        return
    c = subprocess.run([os.path.join(a.build, "bench_models"), a.weights, os.path.join(ROOT, "training", "bpe.json"),
                        TEXT, str(a.reps)], check=True, capture_output=True, text=True).stdout
    print('sentence: "%s"; one thread each; best / median of %d (C), %d (PyTorch), ms;'
          ' CPU = the thread\'s CPU time (fair on a loaded machine); PyTorch\'s OpenBLAS kernels: %s'
          % (TEXT, a.reps, max(3, a.reps // 4), "OPENBLAS_CORETYPE=" + CORETYPE if CORETYPE else "detected"))
    print("| model | decoding | tokens in/out | C wall | C CPU | PyTorch wall | PyTorch CPU | PyTorch / C (CPU) |")
    print("|---|---|---|---|---|---|---|---|")
    for line in c.split("\n"):
        if not line.strip():
            continue
        name, beam, n_src, n_out, best, med, cbest, cmed = line.split()
        beam, best, med, cbest, cmed = int(beam), float(best), float(med), float(cbest), float(cmed)
        pt = torch_times(a.weights, name, max(3, a.reps // 4))[beam]
        print("| %s | %s | %s/%s | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.1fx |" % (
            name, "greedy" if beam == 1 else "beam 4", n_src, n_out, best, med, cbest, cmed, pt[0], pt[1],
            pt[3], pt[4], pt[3] / cbest))


if __name__ == "__main__":
    main()
