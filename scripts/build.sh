#!/usr/bin/env bash
# Configures (once) and builds pcgx incrementally into build/ (or
# $PCGX_BUILD_DIR, configured with the extra CMake arguments in
# $PCGX_CMAKE_ARGS).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
build_dir=${PCGX_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${PCGX_CMAKE_ARGS:-} >&2
fi
cmake --build "$build_dir" -j "$(nproc)" >&2
