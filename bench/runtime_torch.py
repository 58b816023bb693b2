#!/usr/bin/python3
"""PyTorch's side of bench_runtime and bench_runtime_gpu: training steps per
second of the same models (bench/runtime.cpp and runtime_gpu.cpp build them
for pcgx), float32, SGD, eager. On the CPU (the default) one thread unless
--threads (PyTorch's own threads) and --blas-threads (its BLAS's, default
the same); --device cuda on a GPU, with TF32 products unless --strict-fp32.
Prints one line per model: NAME STEPS_PER_SECOND."""
import argparse
import math
import os
import sys
import time


def arg(name, default):
    for i, a in enumerate(sys.argv):
        if a == name and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
    return default


# torch.set_num_threads does not reach OpenBLAS's own thread pool (Debian's
# PyTorch calls OpenBLAS for its products, which by default runs on every
# core): its thread count is read from the environment when the library
# loads, so it is set before torch is imported.
os.environ["OMP_NUM_THREADS"] = arg("--threads", "1")
for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = arg("--blas-threads", arg("--threads", "1"))

import torch  # noqa: E402


DEVICE = "cpu"


def tensor(*shape):
    return torch.randn(*shape, device=DEVICE)


def mlp(batch, hidden, layers):
    ws = [torch.nn.Parameter(tensor(hidden, hidden) / math.sqrt(hidden)) for _ in range(layers)]
    x, target = tensor(batch, hidden), tensor(batch, hidden)

    def loss():
        h = x
        for i, w in enumerate(ws):
            h = h @ w
            if i + 1 < layers:
                h = torch.relu(h)
        return torch.mean((h - target) ** 2)

    return ws, loss


def block(b, s, h, heads, ffn, layers=1):
    dh = h // heads
    params = []

    def lin(n_in, n_out):
        w = torch.nn.Parameter(tensor(n_in, n_out) / math.sqrt(n_in))
        bias = torch.nn.Parameter(torch.zeros(n_out, device=DEVICE))
        params.extend([w, bias])
        return lambda t: t @ w + bias

    def ln(d):
        g, beta = torch.nn.Parameter(torch.ones(d, device=DEVICE)), torch.nn.Parameter(torch.zeros(d, device=DEVICE))
        params.extend([g, beta])
        return lambda t: torch.nn.functional.layer_norm(t, (d,), g, beta, eps=1e-5)

    def one_block():
        q, k, v, o = lin(h, h), lin(h, h), lin(h, h), lin(h, h)
        f1, f2 = lin(h, ffn), lin(ffn, h)
        ln1, ln2 = ln(h), ln(h)

        def run(x):
            def split(t):
                return t.reshape(b, s, heads, dh)
            qq = split(q(x)).permute(0, 2, 1, 3)
            kk = split(k(x)).permute(0, 2, 3, 1)
            vv = split(v(x)).permute(0, 2, 1, 3)
            p = torch.softmax((qq @ kk) * (1 / math.sqrt(dh)), dim=-1)
            ctx = (p @ vv).permute(0, 2, 1, 3).reshape(b, s, h)
            x1 = ln1(x + o(ctx))
            return ln2(x1 + f2(torch.nn.functional.gelu(f1(x1))))
        return run

    blocks = [one_block() for _ in range(layers)]
    x, target = tensor(b, s, h), tensor(b, s, h)

    def loss():
        y = x
        for run in blocks:
            y = run(y)
        return torch.mean((y - target) ** 2)

    return params, loss


def resnext(batch):
    """torchvision's ResNeXt-50 (32x4d), 1000 classes, 224 x 224 images,
    cross-entropy on random labels (the zoo's resnext-50)."""
    import torchvision  # noqa: E402 (only this model needs it)
    model = torchvision.models.resnext50_32x4d().to(DEVICE)
    x = tensor(batch, 3, 224, 224)
    labels = torch.randint(0, 1000, (batch,), device=DEVICE)
    return list(model.parameters()), lambda: torch.nn.functional.cross_entropy(model(x), labels)


# Autocast's dtype for --precision bf16/fp16 (FP32 weights, low-precision
# products), None for fp32/tf32.
AUTOCAST = None


def step_loss(loss):
    if AUTOCAST is None:
        return loss()
    with torch.autocast(device_type=DEVICE, dtype=AUTOCAST):
        return loss()


def steps_per_second(params, loss, steps):
    opt = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    for _ in range(3):  # warm-up
        opt.zero_grad()
        step_loss(loss).backward()
        opt.step()
    if DEVICE == "cuda":
        torch.cuda.synchronize()  # the warm-up's kernels done before the clock starts
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        step_loss(loss).backward()
        opt.step()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return steps / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--blas-threads", type=int)
    ap.add_argument("--mlp", type=int, nargs=3, default=[64, 256, 4], metavar=("BATCH", "HIDDEN", "LAYERS"))
    ap.add_argument("--block", type=int, nargs=5, default=[8, 64, 128, 4, 512], metavar=("B", "S", "H", "HEADS", "FFN"))
    ap.add_argument("--layers", type=int, default=1, help="encoder blocks stacked")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--strict-fp32", action="store_true", help="cuda: no TF32 in products")
    ap.add_argument("--precision", default="tf32", choices=["fp32", "tf32", "bf16", "fp16"],
                    help="bf16/fp16: autocast (FP32 weights); fp32 is --strict-fp32")
    ap.add_argument("--resnext", type=int, metavar="BATCH", help="also torchvision's ResNeXt-50 at this batch")
    ap.add_argument("--only", choices=["mlp", "block", "resnext"], help="one model only")
    a = ap.parse_args()
    global DEVICE, AUTOCAST
    DEVICE = a.device
    strict = a.strict_fp32 or a.precision == "fp32"
    AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    if DEVICE == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = not strict
        torch.backends.cudnn.allow_tf32 = not strict
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    if a.only in (None, "mlp"):
        print("mlp", steps_per_second(*mlp(*a.mlp), a.steps), flush=True)
    if a.only in (None, "block"):
        print("block", steps_per_second(*block(*a.block, a.layers), a.steps), flush=True)
    if a.resnext or a.only == "resnext":
        print("resnext", steps_per_second(*resnext(a.resnext or 64), a.steps), flush=True)
    if DEVICE == "cuda":
        print("blas", "cuBLAS on " + torch.cuda.get_device_name(), flush=True)
        return
    # Which BLAS PyTorch's matmuls went to (Debian's default is the slow
    # reference one unless an optimized libblas.so.3 such as OpenBLAS is installed).
    with open("/proc/self/maps") as maps:
        libs = sorted({line.split()[-1] for line in maps if "blas" in line.split()[-1]})
    print("blas", libs[0] if libs else "unknown", flush=True)


if __name__ == "__main__":
    main()
