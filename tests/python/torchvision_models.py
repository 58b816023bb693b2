#!/usr/bin/python3
"""Real models for tests/importer/real_models_test.cpp: torchvision's
ResNeXt-50 (32x4d), Inception-v3, VGG-13, MobileNet-v2 (ReLU6: Clip) and
EfficientNet-B0 (SiLU, squeeze-and-excitation: broadcast products) and a
transformer encoder built from torch.nn modules, exported to ONNX in training mode (BatchNorm on
batch statistics, as pcgx trains; dropout off) with one fixed input, that
input and PyTorch's output as .npy, and the parameter count. Dropout is
0: a training export keeps dropout, which pcgx imports as its own Dropout
(other draws than PyTorch's).
Usage: torchvision_models.py DIR NAME"""
import os
import sys

import numpy as np
import torch
import torchvision


def build(name):
    if name == "resnext-50":
        return torchvision.models.resnext50_32x4d(), torch.randn(1, 3, 224, 224), 13
    if name == "inception-v3":
        return torchvision.models.inception_v3(aux_logits=False, init_weights=True, dropout=0.0), torch.randn(2, 3, 299, 299), 13
    if name == "vgg-13":
        return torchvision.models.vgg13(dropout=0.0), torch.randn(1, 3, 224, 224), 13
    if name == "mobilenet-v2":
        return torchvision.models.mobilenet_v2(), torch.randn(1, 3, 224, 224), 13
    if name == "efficientnet-b0":  # stochastic depth off: training mode would drop blocks at random
        return torchvision.models.efficientnet_b0(stochastic_depth_prob=0.0), torch.randn(1, 3, 224, 224), 13
    # dropout 0: attention dropout is no module, so training mode would apply it
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, num_layers=2), torch.randn(2, 8, 64), 17


def main():
    d, name = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model, x, opset = build(name)
    # The export puts every module in training mode: dropout modules are
    # given p = 0 (MobileNet-v2's and EfficientNet-B0's classifiers have 0.2).
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    def dropout_off():
        model.train()
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout) or type(m).__name__ == "StochasticDepth":
                m.eval()
    dropout_off()
    torch.onnx.export(model, x, os.path.join(d, name + ".onnx"), opset_version=opset, input_names=["x"], output_names=["y"],
                      training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
    np.save(os.path.join(d, name + "_x.npy"), x.numpy())
    dropout_off()  # the export leaves every module in training mode
    with torch.no_grad():
        np.save(os.path.join(d, name + "_y.npy"), model(x).numpy())
    with open(os.path.join(d, name + "_params.txt"), "w") as f:
        f.write(str(sum(p.numel() for p in model.parameters())))


if __name__ == "__main__":
    main()
