#!/usr/bin/env bash
# Builds pcgx and runs the whole test suite (GoogleTest through CTest).
#   scripts/test.sh [CTEST ARGS]             build/, Release
#   scripts/test.sh --sanitize [CTEST ARGS]  build-sanitize/, every target under
#                                            AddressSanitizer + UndefinedBehaviorSanitizer
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  shift
  export PCGX_BUILD_DIR=${PCGX_BUILD_DIR:-build-sanitize}
  export PCGX_CMAKE_ARGS="-DPCGX_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPCGX_BUILD_BENCH=OFF -DPCGX_CUDA=OFF"
  # Leaks are not checked: OpenMPI and Z3 keep allocations until exit by design.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
fi
export PCGX_TEST_DEPS=1  # PyTorch for the weights-file tests (install_deps.sh)
scripts/build.sh
build_dir=${PCGX_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "$@"
