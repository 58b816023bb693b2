#!/usr/bin/env bash
# Builds pcgx and runs every benchmark in bench/ (figures with same-run baselines).
set -euo pipefail
cd "$(dirname "$0")/.."
export PCGX_TEST_DEPS=1  # PyTorch and ONNX's test data (install_deps.sh)
scripts/build.sh
build_dir=${PCGX_BUILD_DIR:-build}
status=0
for b in "$build_dir"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" || status=1
done
exit $status
