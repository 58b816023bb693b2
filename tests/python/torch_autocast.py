#!/usr/bin/python3
"""PyTorch's side of tests/runtime/mixed_precision_test.cpp: the golden MLP
(tests/golden_mlp.h) trained with SGD under CPU autocast in BF16, PyTorch's
mixed precision: FP32 master weights, matrix products in BF16 (FP32
accumulation), activations in BF16, the MSE loss in FP32.

    torch_autocast.py DIR STEPS LR MOMENTUM PRECISION

reads DIR/w.safetensors (initial weights, float32) and DIR/x_K.npy,
DIR/target_K.npy for K = 0, 1, ... (batches, cycled by step); PRECISION is
bf16 or fp32 (autocast off); writes DIR/torch_losses.npy (per step, before
its update).
"""
import glob
import sys

import numpy as np
import torch
import torch.nn.functional as F

from torch_weights import read_safetensors  # this directory's independent reader


def loss(w, x, target):
    # The weights as nn.Linear holds them, [out, in] and contiguous (the
    # leaves trained; main() transposes pcgx's [in, out]): PyTorch's CPU
    # BF16 products take a different path for a transposed view.
    h = torch.relu(F.linear(x, w["dense0.W"], w["dense0.b"]))
    h = torch.relu(F.linear(h, w["dense1.W"]))
    y = F.linear(h, w["dense2.W"], w["dense2.b"])
    return F.mse_loss(y, target)


def main():
    d, steps, lr, momentum, precision = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    w = {k: (t.t().contiguous() if t.dim() == 2 else t) for k, t in read_safetensors(d + "/w.safetensors").items()}
    params = [w[k].requires_grad_() for k in sorted(w)]
    batches = len(glob.glob(d + "/x_*.npy"))
    data = [(torch.from_numpy(np.load("%s/x_%d.npy" % (d, k))), torch.from_numpy(np.load("%s/target_%d.npy" % (d, k))))
            for k in range(batches)]
    opt = torch.optim.SGD(params, lr=lr, momentum=momentum)
    losses = []
    for step in range(steps):
        x, target = data[step % batches]
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            l = loss(w, x, target)
        assert l.dtype == torch.float32
        l.backward()
        opt.step()
        losses.append(l.item())
    np.save(d + "/torch_losses.npy", np.array(losses, dtype=np.float64))


if __name__ == "__main__":
    main()
