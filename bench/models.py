"""models.py - writes the ONNX models that bench/ort_capi.c runs in ONNX Runtime for `make bench`.

Attention core (8 heads of 64, E = 512, no projections), in two forms so
ONNX Runtime gets whichever of its kernels is faster (bench/ort_capi.c keeps
the better per length):
  core_mha.onnx, core_mha_causal.onnx   com.microsoft MultiHeadAttention on
      (B, L, E) tensors (causal: unidirectional=1)
  core_sdpa.onnx, core_sdpa_causal.onnx ONNX Attention (opset 23) on
      (B, H, L, 64) tensors, this library's batched layout (causal: is_causal=1)
Multi-head attention with its four projections (nn.MultiheadAttention),
with exactly the parameters attn_mha_seed_params(seed 1) makes (SplitMix64 as
documented in lib/attn.h), so bench/ort_capi.c can check ONNX Runtime's
output against attn_mha_compute's:
  mha_graph.onnx  MatMul + Add per projection, MultiHeadAttention, MatMul + Add
  mha_fused.onnx  com.microsoft Attention (packed q/k/v weights), MatMul + Add

Usage: /usr/bin/python3 bench/models.py OUTDIR   (needs Debian's python3-onnx)
"""
import sys

import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

E, H = 512, 8
D = E // H
SEED = 1
MS = helper.make_opsetid("com.microsoft", 1)


def tensor(name, *dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims))


def save(graph, path, opset=17, check=True):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), MS])
    model.ir_version = 8 if opset <= 17 else 10
    if check:  # this onnx package's checker knows opsets up to 17 only
        onnx.checker.check_model(model)
    onnx.save(model, path)


def splitmix_uniform(state, shape, fan_in):
    """lib/seed.c's seed_uniform for prod(shape) draws from a SplitMix64 state:
    z_k = state + k * gamma, mixed; u = (z >> 40) * 2^-24; (2u - 1) * bound,
    all in float32 as lib/seed.c does. Returns (values, new state)."""
    n = int(np.prod(shape))
    k = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(state) + k * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        new_state = (state + n * 0x9E3779B97F4A7C15) % 2 ** 64
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)
    bound = np.float32(1) / np.sqrt(np.float32(fan_in))
    return ((np.float32(2) * u - np.float32(1)) * bound).reshape(shape), new_state


def seeded_mha_params():
    """in_proj_weight (3E,E), in_proj_bias (3E), out_proj.weight (E,E),
    out_proj.bias (E), drawn in that order from one generator."""
    s = SEED
    w_in, s = splitmix_uniform(s, (3 * E, E), E)
    b_in, s = splitmix_uniform(s, (3 * E,), E)
    w_out, s = splitmix_uniform(s, (E, E), E)
    b_out, s = splitmix_uniform(s, (E,), E)
    return w_in, b_in, w_out, b_out


def core_mha(path, causal):
    attrs = {"num_heads": H}
    if causal:
        attrs["unidirectional"] = 1
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["o"], domain="com.microsoft", **attrs)
    g = helper.make_graph([node], "core_mha",
                          [tensor("q", "B", "Lq", E), tensor("k", "B", "Lk", E), tensor("v", "B", "Lk", E)],
                          [tensor("o", "B", "Lq", E)])
    save(g, path)


def core_sdpa(path, causal):
    node = helper.make_node("Attention", ["q", "k", "v"], ["o"], is_causal=int(causal))
    g = helper.make_graph([node], "core_sdpa",
                          [tensor("q", "B", H, "Lq", D), tensor("k", "B", H, "Lk", D),
                           tensor("v", "B", H, "Lk", D)],
                          [tensor("o", "B", H, "Lq", D)])
    save(g, path, opset=23, check=False)


def out_proj(nodes, inits, src, w_out, b_out):
    inits += [numpy_helper.from_array(w_out.T.copy(), "Wo"), numpy_helper.from_array(b_out, "bo")]
    nodes += [helper.make_node("MatMul", [src, "Wo"], ["o0"]), helper.make_node("Add", ["o0", "bo"], ["o"])]


def mha_graph(path):
    w_in, b_in, w_out, b_out = seeded_mha_params()
    inits, nodes = [], []
    for i, name in enumerate("qkv"):
        inits.append(numpy_helper.from_array(w_in[i * E:(i + 1) * E].T.copy(), "W" + name))
        inits.append(numpy_helper.from_array(b_in[i * E:(i + 1) * E].copy(), "b" + name))
        nodes.append(helper.make_node("MatMul", ["x", "W" + name], [name + "0"]))
        nodes.append(helper.make_node("Add", [name + "0", "b" + name], [name + "1"]))
    nodes.append(helper.make_node("MultiHeadAttention", ["q1", "k1", "v1"], ["a"],
                                  domain="com.microsoft", num_heads=H))
    out_proj(nodes, inits, "a", w_out, b_out)
    g = helper.make_graph(nodes, "mha_graph", [tensor("x", "B", "L", E)], [tensor("o", "B", "L", E)],
                          initializer=inits)
    save(g, path)


def mha_fused(path):
    w_in, b_in, w_out, b_out = seeded_mha_params()
    inits = [numpy_helper.from_array(w_in.T.copy(), "Wqkv"), numpy_helper.from_array(b_in, "bqkv")]
    nodes = [helper.make_node("Attention", ["x", "Wqkv", "bqkv"], ["a"], domain="com.microsoft", num_heads=H)]
    out_proj(nodes, inits, "a", w_out, b_out)
    g = helper.make_graph(nodes, "mha_fused", [tensor("x", "B", "L", E)], [tensor("o", "B", "L", E)],
                          initializer=inits)
    save(g, path)


if __name__ == "__main__":
    out = sys.argv[1]
    for causal in (False, True):
        suffix = "_causal" if causal else ""
        core_mha("%s/core_mha%s.onnx" % (out, suffix), causal)
        core_sdpa("%s/core_sdpa%s.onnx" % (out, suffix), causal)
    mha_graph(out + "/mha_graph.onnx")
    mha_fused(out + "/mha_fused.onnx")
