#!/usr/bin/python3
"""PyTorch's side of tests/runtime/torch_weights_test.cpp: the golden MLP
(tests/runtime/golden_test.cpp's, scripts/golden.py's) with weights read
from or written to a safetensors file by this script's own reader and
writer (json + struct: the format's definition, not pcgx's code), so the
test checks pcgx's files against an independent implementation and
PyTorch's arithmetic.

    torch_weights.py loss WEIGHTS.safetensors DIR   reads DIR/x.npy and DIR/target.npy,
                                                    writes DIR/torch_loss.npy
    torch_weights.py make WEIGHTS.safetensors DIR   writes seeded weights (float32) and
                                                    DIR/x.npy, DIR/target.npy, DIR/torch_loss.npy
"""
import json
import struct
import sys

import numpy as np
import torch

# name: (shape) of the golden MLP: x[8, 16] -> 32 relu -> 32 relu -> 16, MSE.
SHAPES = {"dense0.W": (16, 32), "dense0.b": (32,), "dense1.W": (32, 32), "dense2.W": (32, 16), "dense2.b": (16,)}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        assert e["dtype"] == "F32", e
        begin, end = e["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[begin:end], dtype="<f4").copy().reshape(e["shape"]))
    return out


def write_safetensors(path, tensors):
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        b = tensors[name].detach().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def loss(w, x, target):
    h = torch.relu(x @ w["dense0.W"] + w["dense0.b"])
    h = torch.relu(h @ w["dense1.W"])
    y = h @ w["dense2.W"] + w["dense2.b"]
    return torch.mean((y - target) ** 2)


def main():
    mode, weights, d = sys.argv[1:4]
    if mode == "make":
        g = torch.Generator().manual_seed(11)
        w = {k: (torch.rand(s, generator=g) * 2 - 1) * 0.3 for k, s in SHAPES.items()}
        write_safetensors(weights, w)
        np.save(d + "/x.npy", (torch.rand(8, 16, generator=g) * 2 - 1).numpy())
        np.save(d + "/target.npy", (torch.rand(8, 16, generator=g) * 2 - 1).numpy())
    else:
        w = read_safetensors(weights)
        assert sorted(w) == sorted(SHAPES), sorted(w)
    x = torch.from_numpy(np.load(d + "/x.npy"))
    target = torch.from_numpy(np.load(d + "/target.npy"))
    with torch.no_grad():
        np.save(d + "/torch_loss.npy", np.array(loss(w, x, target).item(), dtype=np.float32))


if __name__ == "__main__":
    main()
