#!/usr/bin/python3
"""PyTorch's side of tests/importer/onnx_import_test.cpp: small models of
the kinds the importer maps (an MLP, a CNN with grouped convolution and
pooling, an attention block with LayerNorm, a BatchNorm and Split
exported in training mode, Gelu and LayerNorm in the pieces opset 13
writes them in), exported to ONNX by
torch.onnx.export with one fixed input, that input and PyTorch's output as
.npy, and the parameter count; and a model with operators pcgx does not
import. Usage: onnx_models.py DIR"""
import math
import os
import sys

import numpy as np
import torch


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.fc = torch.nn.Linear(8 * 4 * 4 + 8, 5)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.relu(self.c2(x))
        pooled = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(torch.cat([torch.flatten(x, 1), pooled], 1))


class Attention(torch.nn.Module):
    def __init__(self, h=16, heads=4):
        super().__init__()
        self.h, self.heads = h, heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(h, h) for _ in range(4))
        self.ln = torch.nn.LayerNorm(h)
        self.emb = torch.nn.Embedding(50, h)

    def forward(self, ids):
        x = self.emb(ids)
        b, s, h = x.shape
        dh = h // self.heads

        def split(t):
            return t.reshape(b, s, self.heads, dh).permute(0, 2, 1, 3)
        p = torch.softmax(split(self.q(x)) @ split(self.k(x)).transpose(-1, -2) * (1 / math.sqrt(dh)), dim=-1)
        ctx = (p @ split(self.v(x))).permute(0, 2, 1, 3).reshape(b, s, h)
        return self.ln(x + self.o(ctx))


class Normalized(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 4, 3, bias=False)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 6 * 6, 6)

    def forward(self, x):
        a, b = torch.split(torch.relu(self.bn(self.c(x))), [1, 3], dim=1)
        return self.fc(torch.flatten(torch.cat([b, a], 1), 1))


class Decomposed(torch.nn.Module):
    # Opset 13 writes Gelu as its erf formula and LayerNorm as
    # ReduceMean/Sub/Pow/Sqrt/Div pieces.
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, x):
        return self.ln(torch.nn.functional.gelu(self.fc(x)))


class Unsupported(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.abs(torch.nn.functional.leaky_relu(torch.nn.functional.leaky_relu(self.c(x))))


def export(d, name, model, x, opset, training=False):
    # Training mode keeps BatchNorm as pcgx trains it (batch statistics),
    # not folded into the convolution as an inference export does.
    model.train(training)
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, x, os.path.join(d, name + ".onnx"), opset_version=opset, input_names=["x"], output_names=["y"],
                      training=mode, do_constant_folding=not training)
    np.save(os.path.join(d, name + "_x.npy"), x.numpy())
    with torch.no_grad():
        np.save(os.path.join(d, name + "_y.npy"), model(x).numpy())
    with open(os.path.join(d, name + "_params.txt"), "w") as f:
        f.write(str(sum(p.numel() for p in model.parameters())))


def main():
    d = sys.argv[1]
    torch.manual_seed(0)
    export(d, "mlp", torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                                         torch.nn.Linear(32, 10), torch.nn.Sigmoid()), torch.randn(8, 16), 13)
    export(d, "cnn", CNN(), torch.randn(2, 3, 16, 16), 13)
    export(d, "attention", Attention(), torch.randint(0, 50, (2, 6)), 17)
    export(d, "normalized", Normalized(), torch.randn(4, 3, 8, 8), 13, training=True)
    export(d, "decomposed", Decomposed(), torch.randn(4, 8), 13)
    # MobileNet's ReLU6 and a hardtanh: Clip with both bounds.
    export(d, "clipped", torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU6(), torch.nn.Linear(32, 8),
                                             torch.nn.Hardtanh(-0.5, 0.5)), torch.randn(4, 16) * 4, 13)
    export(d, "unsupported", Unsupported(), torch.randn(1, 3, 8, 8), 13)


if __name__ == "__main__":
    main()
