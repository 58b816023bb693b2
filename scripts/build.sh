#!/usr/bin/env bash
# Configures (once) and builds pcgx incrementally into build/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
build_dir=${PCGX_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >&2
fi
cmake --build "$build_dir" -j "$(nproc)" >&2
