"""models.py - writes the ONNX models the ONNX Runtime side of `make bench`
runs: the com.microsoft MultiHeadAttention operator alone (the attention
core, plain and causal) and inside a full nn.MultiheadAttention-like module
(input projections, attention, output projection).

Usage: /usr/bin/python3 bench/models.py OUTDIR   (needs Debian's python3-onnx)
"""
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

E, H = 512, 8
OPSET = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]


def tensor(name, *dims):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(dims))


def save(graph, path):
    model = helper.make_model(graph, opset_imports=OPSET)
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def core(path, causal=False):
    attrs = {"num_heads": H}
    if causal:
        attrs["unidirectional"] = 1
    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["o"],
                            domain="com.microsoft", **attrs)
    g = helper.make_graph([node], "core",
                          [tensor("q", "B", "Lq", E), tensor("k", "B", "Lk", E),
                           tensor("v", "B", "Lk", E)],
                          [tensor("o", "B", "Lq", E)])
    save(g, path)


def multihead(path):
    rng = np.random.default_rng(0)
    bound = 1 / np.sqrt(E)
    inits, nodes = [], []
    for name in ("q", "k", "v", "o"):
        w = rng.uniform(-bound, bound, (E, E)).astype(np.float32)
        b = rng.uniform(-bound, bound, (E,)).astype(np.float32)
        inits.append(numpy_helper.from_array(w.T.copy(), "W%s" % name))
        inits.append(numpy_helper.from_array(b, "b%s" % name))
    for name in ("q", "k", "v"):
        nodes.append(helper.make_node("MatMul", ["x", "W%s" % name], ["%s0" % name]))
        nodes.append(helper.make_node("Add", ["%s0" % name, "b%s" % name], ["%s1" % name]))
    nodes.append(helper.make_node("MultiHeadAttention", ["q1", "k1", "v1"], ["a"],
                                  domain="com.microsoft", num_heads=H))
    nodes.append(helper.make_node("MatMul", ["a", "Wo"], ["o0"]))
    nodes.append(helper.make_node("Add", ["o0", "bo"], ["o"]))
    g = helper.make_graph(nodes, "multihead", [tensor("x", "B", "L", E)],
                          [tensor("o", "B", "L", E)], initializer=inits)
    save(g, path)


if __name__ == "__main__":
    out = sys.argv[1]
    core(out + "/core.onnx")
    core(out + "/core_causal.onnx", causal=True)
    multihead(out + "/multihead.onnx")
