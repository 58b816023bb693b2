#!/usr/bin/env bash
# Fuzzes every loader with libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer (clang), SECONDS each (default 600), two at a
# time. Seeds are fuzz/corpus/LOADER; what the fuzzers learn stays in
# build-fuzz/corpus/LOADER. An input that makes a loader crash, trip a
# sanitizer or raise anything but pcgx::Error is saved as
# build-fuzz/findings/LOADER/crash-*; copy it into fuzz/corpus/LOADER once
# fixed, and the test suite (FuzzCorpus) runs it from then on.
#   scripts/fuzz.sh [SECONDS] [LOADER...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
loaders=("$@")
[ ${#loaders[@]} -eq 0 ] && loaders=(graph machine strategy ruleset profile efficiency npy)
scripts/install_deps.sh
dpkg-query -W -f='${Status}' clang 2>/dev/null | grep -q "install ok installed" || {
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang >&2
}
build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPCGX_FUZZ=ON \
    -DPCGX_BUILD_TESTS=OFF -DPCGX_BUILD_BENCH=OFF -DPCGX_CUDA=OFF >&2
fi
cmake --build "$build" -j "$(nproc)" --target "${loaders[@]/#/fuzz_}" >&2
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
failed=0
run_one() {
  local name=$1
  mkdir -p "$build/corpus/$name" "$build/findings/$name"
  if "$build/fuzz/fuzz_$name" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
      -artifact_prefix="$build/findings/$name/" -print_final_stats=1 \
      "$build/corpus/$name" "fuzz/corpus/$name" > "$build/findings/$name.log" 2>&1; then
    echo "fuzz_$name: no finding in ${seconds} s ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$build/findings/$name.log" | grep -o '[0-9]*$') runs)"
  else
    echo "fuzz_$name: FINDING, see $build/findings/$name.log and $build/findings/$name/"
    return 1
  fi
}
jobs=$(nproc)
pids=()
for name in "${loaders[@]}"; do
  run_one "$name" & pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}" || failed=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
