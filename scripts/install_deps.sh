#!/usr/bin/env bash
# Installs the Debian packages pcgx builds against, skipping those already present.
set -euo pipefail
packages=(cmake ninja-build g++ pkg-config libeigen3-dev libtbb-dev libz3-dev
          nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev ccache
          openmpi-bin libopenmpi-dev libonnx-dev libprotobuf-dev protobuf-compiler)
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"

# The packages of "$@" not installed yet, one per line.
missing() {
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

# Installs "$@" (quietly, without recommends).
install() {
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2
}

mapfile -t need < <(missing "${packages[@]}")
if [ ${#need[@]} -gt 0 ]; then
  echo "pcgx: installing ${need[*]}" >&2
  install "${need[@]}"
fi
# The tests' own needs (scripts/test.sh sets PCGX_TEST_DEPS=1): PyTorch and
# torchvision, for the tests that check weights files and imported ONNX
# models against them, ONNX's test data for bench_onnx_testdata, and
# OpenBLAS, so that PyTorch's products in bench_runtime run on an optimized
# BLAS (Debian's python3-torch otherwise uses the reference libblas.so.3,
# 10-15x slower, and the bench refuses to print a ratio against it). Best
# effort: where they cannot be installed those tests skip, saying why.
if [ "${PCGX_TEST_DEPS:-}" = 1 ]; then
  mapfile -t need < <(missing python3-numpy python3-torch python3-torchvision libonnx-testdata libopenblas0-pthread)
  if [ ${#need[@]} -gt 0 ]; then
    echo "pcgx: installing ${need[*]} for the tests" >&2
    install "${need[@]}" || echo "pcgx: could not install ${need[*]}: the tests that need PyTorch will skip" >&2
  fi
fi
