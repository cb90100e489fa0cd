"""Minimal safetensors writer/reader (no PyPI): 8-byte little-endian header
length N, then N bytes of JSON {name: {"dtype": "F32", "shape": [...],
"data_offsets": [begin, end]}, "__metadata__": {str: str}} padded with
spaces to a multiple of 8, then the raw little-endian tensors, in the
header's (sorted-name) order, offsets relative to the end of the header."""
import json
import struct

import numpy as np


def save(path, tensors, metadata=None):
    names = sorted(tensors)
    header = {}
    blobs = []
    off = 0
    for n in names:
        a = np.ascontiguousarray(tensors[n], dtype="<f4")
        b = a.tobytes()
        header[n] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for k, v in header.items():
        assert v["dtype"] == "F32"
        b, e = v["data_offsets"]
        out[k] = np.frombuffer(data[8 + n + b:8 + n + e], dtype="<f4").reshape(v["shape"]).copy()
    return out, meta
