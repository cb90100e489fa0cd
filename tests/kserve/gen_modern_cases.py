#!/usr/bin/env python3
"""gen_modern_cases.py - the modern-attention golden HTTP cases as KServe v2 infer cases.

Usage: tests/kserve/gen_modern_cases.py [tests/golden_modern/http_cases] [tests/kserve]

Reads each tests/golden_modern/http_cases/modern_ok_*.case (a native request
and its PyTorch-computed output and weights) and writes
tests/kserve/modern_ok_<name>.case: the same request as a KServe v2 infer
body (scalar options as parameters, lists and tensors as inputs, as
README.md's "Modern attention options" maps them), with the same expected
tensors, flattened as KServe returns them. Requests that use a field
`return_layout` asks for the `layout` output (BOOL, flattened); a window
[null, null] (no window) is left out.
Standard library only.
"""
import json
import os
import sys

src = sys.argv[1] if len(sys.argv) > 1 else "tests/golden_modern/http_cases"
dst = sys.argv[2] if len(sys.argv) > 2 else "tests/kserve"

BOOL_INPUTS = {"mask", "key_mask", "sparsity_layout"}


def flat(x):
    if isinstance(x, list):
        out = []
        for v in x:
            out.extend(flat(v))
        return out
    return [x]


def shape(x):
    s = []
    while isinstance(x, list):
        s.append(len(x))
        x = x[0]
    return s


def tensor_input(name, value, datatype=None):
    if isinstance(value, dict):  # {shape, data}: the only object form the cases use
        sh, data = value["shape"], value["data"]
    else:
        sh, data = shape(value), flat(value)
    dt = datatype or ("BOOL" if name in BOOL_INPUTS else "FP32")
    if dt == "BOOL":
        data = [bool(v) for v in data]
    return {"name": name, "shape": sh or [1], "datatype": dt, "data": data}


def convert(body, mha):
    """The KServe body, or None when a field has no KServe form."""
    params, inputs = {}, []
    for k, v in body.items():
        if k in ("query", "key", "value", "mask", "key_mask", "bias"):
            inputs.append(tensor_input(k, v))
        elif k == "params":
            for pn, pv in v.items():
                inputs.append(tensor_input(pn, pv))
        elif k == "window":
            if isinstance(v, list):
                if v[0] is not None:
                    params["window_left"] = v[0]
                if v[1] is not None:
                    params["window_right"] = v[1]
                if v[0] is None and v[1] is None:
                    return None  # [null, null]: no window at all; nothing to send
            else:
                params["window"] = v
        elif k in ("alibi", "sinks"):
            if isinstance(v, list):
                inputs.append(tensor_input(k, v))
            else:
                params[k] = v
        elif k == "rope":
            params["rope"] = True
            for m, mv in v.items():
                params["rope_" + m] = mv
        elif k == "hard":
            if v == "argmax":
                params["hard"] = "argmax"
            elif "top_k" in v:
                params["hard"] = v["top_k"]
            else:
                params["hard"] = "sample"
                if "temperature" in v["sample"]:
                    params["temperature"] = v["sample"]["temperature"]
        elif k == "sparsity":
            for m, mv in v.items():
                if m == "pattern":
                    params["sparsity"] = mv
                elif m == "global" and mv:  # an empty list: no input (dimensions are >= 1)
                    inputs.append(tensor_input("sparsity_global", mv, "INT64"))
                elif m == "global":
                    continue
                elif m == "layout":
                    inputs.append(tensor_input("sparsity_layout", mv))
                else:
                    params["sparsity_" + m] = mv
        elif k in ("return_params", "output_format"):
            continue
        else:  # scalars: align, causal, softcap, seed, num_heads, attention, ...
            params[k] = v
    out = {"inputs": inputs}
    if params:
        out["parameters"] = params
    return out


def main():
    n = 0
    for fn in sorted(os.listdir(src)):
        if not (fn.startswith("modern_ok_") and fn.endswith(".case")):
            continue
        text = open(os.path.join(src, fn)).read()
        head, body = text.split("\n--- body\n", 1)
        req = json.loads(body)
        path = [l for l in head.splitlines() if l.startswith("request:")][0].split()[-1]
        mha = path == "/multihead"
        model = "multihead" if mha else "attention-" + path.rsplit("/", 1)[1]
        ks = convert(req, mha)
        if ks is None:
            continue
        expect = {}
        for line in head.splitlines():
            if line.startswith("tensor: "):
                name, val = line[len("tensor: "):].split(" = ", 1)
                expect[name.strip()] = flat(json.loads(val))
        checks = ["tensor: outputs[0].data = " + json.dumps(expect["output"], separators=(",", ":"))]
        if "weights" in expect:
            checks.append("tensor: outputs[1].data = " + json.dumps(expect["weights"], separators=(",", ":")))
        for line in head.splitlines():  # the block layout: a third (or second) output, BOOL
            if line.startswith("json: layout = "):
                lay = flat(json.loads(line[len("json: layout = "):]))
                at = 2 if "weights" in expect else 1
                checks.append("json: outputs[%d].name = \"layout\"" % at)
                checks.append("json: outputs[%d].data = %s" % (at, json.dumps(lay, separators=(",", ":"))))
        comment = [l for l in head.splitlines() if l.startswith("#")]
        with open(os.path.join(dst, fn), "w") as f:
            f.write("\n".join(comment) + "\n# as a KServe v2 infer request (tests/kserve/gen_modern_cases.py)\n")
            f.write("request: POST /v2/models/%s/infer\n" % model)
            f.write("header: Content-Type: application/json\nstatus: 200\n")
            f.write("\n".join(checks) + "\n--- body\n")
            f.write(json.dumps(ks, separators=(",", ":")) + "\n")
        n += 1
    print("%d KServe cases written to %s" % (n, dst))


main()
