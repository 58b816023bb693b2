#!/usr/bin/env bash
# The main job, end to end, on bundled models: optimize with the shipped,
# proved ruleset and train the result with the runner (4 virtual devices on
# this machine's CPU), then show what the search predicts at scale.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
pcgx=${PCGX_BUILD_DIR:-build}/tools/pcgx/pcgx
out=${PCGX_DEMO_DIR:-build/demo}
mkdir -p "$out"
set -x
"$pcgx" models
# Search a strategy for the tiny MLP and DLRM on 4 CPU devices and train each.
"$pcgx" run mlp-tiny --optimize --devices 4 --steps 50 --report "$out/mlp-tiny.json" --plot "$out/mlp-tiny.svg"
"$pcgx" run dlrm-tiny --optimize --devices 4 --steps 50 --optimizer adam --lr 0.003 \
  --report "$out/dlrm-tiny.json" --plot "$out/dlrm-tiny.svg"
# The same MLP on 4 MPI processes (one device each). As root OpenMPI needs
# --allow-run-as-root, with fewer cores than ranks --oversubscribe, and in
# containers shared memory without single-copy (the --mca setting).
mpirun --allow-run-as-root --oversubscribe --mca btl_vader_single_copy_mechanism none -np 4 "$pcgx" run mlp-tiny --optimize --steps 50 \
  --report "$out/mlp-tiny-mpi.json" --plot "$out/mlp-tiny-mpi.svg"
# The same search on the full models for a DGX-H100 cluster (predicted only).
"$pcgx" optimize dlrm --machine dgx-h100 --devices 64 -q -o "$out/dlrm-64.json"
"$pcgx" optimize bert-large --machine dgx-h100 --devices 64 -q -o "$out/bert-large-64.json"
# Pipeline parallelism for the 8192-wide MLP on 8 GPUs (1F1B over micro-batches).
"$pcgx" optimize mlp --machine dgx-h100 --devices 8 --pipeline -q -o "$out/mlp-8-pipeline.json"
# An ONNX model (data/onnx/small-cnn.onnx, exported by PyTorch): import it,
# optimize it for 2 devices (its export fixed the batch at 2), train it from
# its own initializers with checkpoints, save the trained weights and
# evaluate them.
"$pcgx" import data/onnx/small-cnn.onnx -o "$out/small-cnn.json" --weights-out "$out/small-cnn-initial.safetensors"
"$pcgx" run data/onnx/small-cnn.onnx --optimize --devices 2 --steps 30 --batches 1 \
  --report "$out/small-cnn-run.json" --plot "$out/small-cnn.svg" --save-weights "$out/small-cnn-trained.safetensors" \
  --checkpoint "$out/small-cnn-checkpoint" --checkpoint-every 10
"$pcgx" eval data/onnx/small-cnn.onnx --weights "$out/small-cnn-trained.safetensors" --batches 1
