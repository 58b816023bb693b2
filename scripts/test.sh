#!/usr/bin/env bash
# Builds pcgx and runs the whole test suite (GoogleTest through CTest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
build_dir=${PCGX_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "$@"
