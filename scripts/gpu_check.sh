#!/usr/bin/env bash
# The CUDA backend's check on a GPU machine, in three steps that each fit
# well inside one 10-minute call of the device tool.
#
#   scripts/gpu_check.sh --prepare
#       Here, on Debian 12 with network: fetches the Debian packages pcgx
#       builds against that a GPU machine lacks (headers, TBB, Z3,
#       GoogleTest, CLI11) and unpacks them into .gpu_deps/ (ignored by git,
#       about 39 MiB), to travel with the working tree.
#   scripts/gpu_check.sh --build [RESULTS]
#       On the GPU machine (nvcc, CMake and ninja, no Debian dev packages,
#       no network), with .gpu_deps/ beside it: configures and builds pcgx
#       with CUDA into build-gpu/ (kept between calls while the machine is
#       warm). RESULTS: default $OUT/gpu_build.txt ($OUT when set, else .).
#   scripts/gpu_check.sh --run [RESULTS]
#       There, after --build: every GPU test case in its own process (a
#       fault in one cannot fail the others), a compute-sanitizer memcheck
#       pass over tiny-model tests, the seam's CPU tests, each tiny zoo
#       model trained with `pcgx run --backend cuda` beside `--backend cpu`,
#       two virtual devices on one GPU, a GPU profile fed to the cost model,
#       and bench_runtime_gpu. RESULTS (default $OUT/gpu_check.txt) opens
#       with a summary: what passed, what failed (with its error text), the
#       benchmark table; the details follow. Exits non-zero when anything
#       failed.
#   scripts/gpu_check.sh [RESULTS]
#       --build then --run, in one call (a longer session's).
#
# With the device tool: `--prepare` here, then `--build` and `--run` there,
# in two calls, with carry [".gpu_deps"] (the working tree travels; build-gpu/
# stays on the machine between calls while it is warm).
set -euo pipefail
cd "$(dirname "$0")/.."
deps=.gpu_deps
build=${PCGX_GPU_BUILD:-build-gpu}
packages=(libeigen3-dev nlohmann-json3-dev libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libhwloc15
          libgtest-dev libgmock-dev libcli11-dev libz3-dev libz3-4)

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

if [ "${1:-}" = "--prepare" ]; then
  rm -rf "$deps"
  mkdir -p "$deps/debs"
  (cd "$deps/debs" && apt-get download "${packages[@]}" >&2)
  for f in "$deps"/debs/*.deb; do dpkg -x "$f" "$deps/root"; done
  rm -rf "$deps/debs" "$deps/root/usr/share/doc" "$deps/root/usr/share/man" "$deps/root/usr/share/lintian"
  echo "prepared $deps ($(du -sh "$deps" | cut -f1)): run scripts/gpu_check.sh --build, then --run, on the GPU machine with $deps carried" >&2
  exit 0
fi

mode=all
case "${1:-}" in
  --build) mode=build; shift ;;
  --run) mode=run; shift ;;
  -*) echo "error: unknown option '$1' (--prepare, --build, --run, --help)" >&2; exit 2 ;;
esac
if [ ! -d "$deps/root" ]; then
  echo "error: $deps/ is missing: run scripts/gpu_check.sh --prepare on a Debian 12 machine first" >&2
  exit 2
fi
prefix=$PWD/$deps/root/usr
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
export LD_LIBRARY_PATH=$prefix/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$PATH:/usr/local/cuda/bin

header() {
  echo "== pcgx gpu_check $1, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "(nvidia-smi: none)"
  nvcc --version 2>/dev/null | tail -2 || true
}

do_build() {
  if ! command -v nvcc > /dev/null; then
    echo "error: no nvcc on this machine: the GPU check builds the CUDA backend"
    return 2
  fi
  header build
  local start
  start=$(date +%s)
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPCGX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_LIBRARY_ARCHITECTURE="$arch" > "$build.log" 2>&1 || { tail -30 "$build.log"; return 1; }
  cmake --build "$build" -j "$(nproc)" --target test_cuda test_runtime pcgx bench_runtime_gpu >> "$build.log" 2>&1 ||
    { tail -40 "$build.log"; return 1; }
  echo "built in $(( $(date +%s) - start )) s into $build/"
}

# Runs RESULTS' checks, writing details to $detail and one line per
# outcome to $summary ("PASS name", "FAIL name", "SKIP name: why").
do_run() {
  if [ ! -x "$build/tests/test_cuda" ] || [ ! -x "$build/tools/pcgx/pcgx" ]; then
    echo "error: $build/ is not built: run scripts/gpu_check.sh --build first (the machine may have gone cold since)" >&2
    return 2
  fi
  header run
  local logs
  logs=$(mktemp -d)
  pass() { echo "PASS $1" >> "$summary"; }
  fail() {  # name, log file: the error text goes to the summary (else the log's last lines)
    echo "FAIL $1" >> "$summary"
    local why
    why=$(grep -E "Failure|error|Error|what\(\)|Expected|Which is|Value of|Actual|timed out|ERROR SUMMARY" "$2" | head -12 || true)
    [ -n "$why" ] || why=$(tail -5 "$2")
    echo "$why" | sed 's/^/    /' >> "$summary"
  }
  skip() { echo "SKIP $1: $2" >> "$summary"; }

  echo "== GPU tests ($build/tests/test_cuda), one process each"
  local cases t log rc
  cases=$("$build/tests/test_cuda" --gtest_list_tests | awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}')
  for t in $cases; do
    log=$logs/$(echo "$t" | tr '/' '_').log
    rc=0
    timeout 180 "$build/tests/test_cuda" --gtest_filter="$t" > "$log" 2>&1 || rc=$?
    if [ $rc -eq 124 ]; then echo "(timed out after 180 s)" >> "$log"; fi
    if [ $rc -ne 0 ]; then fail "$t" "$log"
    elif grep -q "\[  SKIPPED \]" "$log"; then skip "$t" "$(grep -m1 -A1 ": Skipped" "$log" | tail -1 | cut -c1-160)"
    else pass "$t"; fi
    echo "$t: exit $rc"
  done

  echo "== compute-sanitizer memcheck over tiny-model tests"
  if command -v compute-sanitizer > /dev/null; then
    for t in Tiny/CudaZoo.OneStepMatchesTheCpuNodeByNode/mlp_tiny Tiny/CudaZoo.OneStepMatchesTheCpuNodeByNode/gpt_tiny \
             Tiny/CudaZoo.OneStepMatchesTheCpuNodeByNode/dlrm_tiny Cuda.TwoVirtualDevicesShareOneGpu; do
      log=$logs/memcheck_$(echo "$t" | tr '/' '_').log
      rc=0
      timeout 240 compute-sanitizer --tool memcheck --error-exitcode 99 "$build/tests/test_cuda" --gtest_filter="$t" > "$log" 2>&1 || rc=$?
      if [ $rc -eq 0 ]; then pass "memcheck $t"; else fail "memcheck $t" "$log"; fi
      echo "memcheck $t: exit $rc"; grep -E "ERROR SUMMARY" "$log" || true
    done
  else
    skip "memcheck" "no compute-sanitizer on this machine"
  fi

  echo "== the seam on the CPU ($build/tests/test_runtime: BackendSeam, Runtime, Tiny/Runtime)"
  log=$logs/seam.log
  if "$build/tests/test_runtime" --gtest_brief=1 --gtest_filter='BackendSeam.*:Runtime.*:Tiny/Runtime.*' > "$log" 2>&1; then
    pass "seam tests"; else fail "seam tests" "$log"; fi
  tail -3 "$log"

  echo "== pcgx run --backend cuda, each tiny zoo model, 20 steps, against --backend cpu"
  local m b out
  for m in mlp-tiny dlrm-tiny xdl-tiny candle-uno-tiny bert-large-tiny gpt-tiny vgg-13-tiny resnext-50-tiny inception-v3-tiny; do
    for b in cpu cuda; do
      log=$logs/run_${m}_$b.log
      if timeout 300 "$build/tools/pcgx/pcgx" run "$m" --backend "$b" --steps 20 --batches 1 --no-report --no-plot > "$log" 2>&1; then
        out=$(grep -E "^(loss|time per step)|note:" "$log" | tr -s ' ' | paste -sd ';' -)
        [ "$b" = cuda ] && pass "pcgx run $m --backend cuda"
      else
        out="FAILED: $(tail -2 "$log" | paste -sd ' ' -)"
        fail "pcgx run $m --backend $b" "$log"
      fi
      echo "$m $b: $out"
    done
  done

  echo "== data parallel on 2 virtual devices sharing the GPU"
  log=$logs/dp2.log
  if "$build/tools/pcgx/pcgx" run mlp-tiny --backend cuda --optimize --search data-parallel --devices 2 --steps 20 --batches 1 \
       --no-report --no-plot > "$log" 2>&1; then pass "2 virtual devices on one GPU"; else fail "2 virtual devices on one GPU" "$log"; fi
  grep -E "^(devices|loss|time per step)" "$log" || tail -3 "$log"

  echo "== a measured GPU profile feeds the cost model"
  log=$logs/profile.log
  if "$build/tools/pcgx/pcgx" run bert-large-tiny --backend cuda --steps 12 --no-report --no-plot \
       --profile-out "${OUT:-.}/gpu_profile.json" > "$log" 2>&1 &&
     "$build/tools/pcgx/pcgx" run bert-large-tiny --backend cuda --steps 12 --no-report --no-plot --optimize --machine dgx-h100 \
       --profile "${OUT:-.}/gpu_profile.json" >> "$log" 2>&1; then
    pass "GPU profile"; else fail "GPU profile" "$log"; fi
  grep -E "ms (measured|predicted)" "$log" || tail -3 "$log"

  echo "== bench_runtime_gpu"
  log=$logs/bench.log
  if timeout 360 "$build/bench/bench_runtime_gpu" > "$log" 2>&1; then pass "bench_runtime_gpu"; else fail "bench_runtime_gpu" "$log"; fi
  cat "$log"
  cp "$log" "$bench"
  rm -rf "$logs"
}

results=${1:-${OUT:-.}/gpu_$([ $mode = build ] && echo build || echo check).txt}
status=0
if [ $mode = build ] || [ $mode = all ]; then
  if [ $mode = build ]; then do_build > >(tee "$results") 2>&1 || status=$?; else do_build || status=$?; fi
  [ $mode = build ] && exit $status
  [ $status -ne 0 ] && exit $status
fi
summary=$(mktemp) detail=$(mktemp) bench=$(mktemp)
do_run > "$detail" 2>&1 || status=$?
if [ $status -eq 2 ]; then cat "$detail" >&2; exit 2; fi
(
  passed=$(grep -c "^PASS" "$summary" || true) failed=$(grep -c "^FAIL" "$summary" || true) skipped=$(grep -c "^SKIP" "$summary" || true)
  echo "== gpu_check: $([ "$failed" -eq 0 ] && echo passed || echo FAILED): $passed passed, $failed failed, $skipped skipped"
  if [ "$failed" -gt 0 ]; then echo "-- failures"; awk '/^FAIL/ {p = 1} /^(PASS|SKIP)/ {p = 0} p' "$summary"; fi
  if [ "$skipped" -gt 0 ]; then echo "-- skipped"; grep "^SKIP" "$summary"; fi
  echo "-- benchmark"; cat "$bench"
  echo "-- passed"; grep "^PASS" "$summary" | cut -c6- | paste -sd ',' - | fold -s -w 110
  echo; echo "== details"; cat "$detail"
  [ "$failed" -eq 0 ] || exit 1
) > "$results" || status=1
head -40 "$results"
echo "(all of it: $results)"
rm -f "$summary" "$detail" "$bench"
exit $status
