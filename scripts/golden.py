#!/usr/bin/python3
"""Writes PyTorch reference values for pcgx's tests into data/golden/.

For each case (a small MLP and a post-LN transformer encoder block, the
same graphs tests/runtime/golden_test.cpp builds), fixed weights and inputs
from a seeded generator, the MSE loss and the gradient of every weight and
of the input, computed by PyTorch in float64. Files are NumPy .npy,
float32, named by pcgx's node names:

    data/golden/CASE/inputs/NAME.npy    graph inputs (x, target)
    data/golden/CASE/weights/NAME.npy   weights, pcgx layout (Linear W is [in, out])
    data/golden/CASE/loss.npy           the loss, shape ()
    data/golden/CASE/grads/NAME.npy     d loss / d NAME for every weight and x

Re-runnable: the same seed gives the same files. Needs Debian's
python3-torch and python3-numpy:  /usr/bin/python3 scripts/golden.py
"""
import math
import os
import sys

import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "golden")


def save(path, array):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    np.save(path, np.ascontiguousarray(array, dtype=np.float32))


class Case:
    def __init__(self, name, seed):
        self.name = name
        self.gen = torch.Generator().manual_seed(seed)
        self.weights = {}
        self.inputs = {}

    def uniform(self, shape, scale):
        return (torch.rand(shape, generator=self.gen, dtype=torch.float64) * 2 - 1) * scale

    def weight(self, name, shape, scale, offset=0.0):
        w = (self.uniform(shape, scale) + offset).requires_grad_(True)
        self.weights[name] = w
        return w

    def input(self, name, shape, grad=False):
        x = self.uniform(shape, 1.0).requires_grad_(grad)
        self.inputs[name] = x
        return x

    def linear(self, x, n_in, n_out, name, bias=True, activation="none"):
        w = self.weight(name + ".W", (n_in, n_out), 1 / math.sqrt(n_in))
        y = x @ w
        if bias:
            y = y + self.weight(name + ".b", (n_out,), 0.1)
        if activation == "relu":
            y = torch.relu(y)
        elif activation == "gelu":
            y = torch.nn.functional.gelu(y)  # exact (erf), as pcgx
        return y

    def layer_norm(self, x, d, name):
        gamma = self.weight(name + ".gamma", (d,), 0.2, offset=1.0)  # near 1, not exactly
        beta = self.weight(name + ".beta", (d,), 0.1)
        return torch.nn.functional.layer_norm(x, (d,), gamma, beta, eps=1e-5)

    def finish(self, loss):
        loss.backward()
        out = os.path.join(ROOT, self.name)
        for n, x in self.inputs.items():
            save(os.path.join(out, "inputs", n + ".npy"), x.detach().numpy())
        for n, w in self.weights.items():
            save(os.path.join(out, "weights", n + ".npy"), w.detach().numpy())
            save(os.path.join(out, "grads", n + ".npy"), w.grad.numpy())
        save(os.path.join(out, "grads", "x.npy"), self.inputs["x"].grad.numpy())
        save(os.path.join(out, "loss.npy"), loss.detach().numpy())
        print(f"{self.name}: loss {loss.item():.9g}, {len(self.weights)} weights -> {out}")


def mlp():
    c = Case("mlp", 1)
    x = c.input("x", (8, 16), grad=True)
    h = c.linear(x, 16, 32, "dense0", activation="relu")
    h = c.linear(h, 32, 32, "dense1", bias=False, activation="relu")
    y = c.linear(h, 32, 16, "dense2")
    target = c.input("target", (8, 16))
    c.finish(torch.mean((y - target) ** 2))


def transformer_block():
    b, s, h, heads, ffn = 2, 8, 16, 4, 32
    dh = h // heads
    c = Case("transformer_block", 2)
    x = c.input("x", (b, s, h), grad=True)

    def split(t):
        return t.reshape(b, s, heads, dh)

    q = split(c.linear(x, h, h, "attn.query")).permute(0, 2, 1, 3)
    k = split(c.linear(x, h, h, "attn.key")).permute(0, 2, 3, 1)
    v = split(c.linear(x, h, h, "attn.value")).permute(0, 2, 1, 3)
    probs = torch.softmax((q @ k) * (1 / math.sqrt(dh)), dim=-1)
    ctx = (probs @ v).permute(0, 2, 1, 3).reshape(b, s, h)
    a = c.linear(ctx, h, h, "attn.output")
    x1 = c.layer_norm(x + a, h, "attn_ln")
    f = c.linear(c.linear(x1, h, ffn, "ffn.intermediate", activation="gelu"), ffn, h, "ffn.output")
    y = c.layer_norm(x1 + f, h, "ffn_ln")
    target = c.input("target", (b, s, h))
    c.finish(torch.mean((y - target) ** 2))


if __name__ == "__main__":
    torch.set_num_threads(1)
    mlp()
    transformer_block()
    sys.exit(0)
