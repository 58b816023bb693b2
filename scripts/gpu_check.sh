#!/usr/bin/env bash
# The CUDA backend's check on a GPU machine, in steps that each fit well
# inside one 10-minute call of the device tool.
#
#   scripts/gpu_check.sh --bundle
#       Here, after scripts/build.sh has built the CUDA backend (nvcc found):
#       packs the four programs the check runs (test_cuda, test_runtime,
#       pcgx, bench_runtime_gpu) and the shared libraries they need beyond
#       the C and C++ runtimes (MPI, TBB, Z3, protobuf, ...) into
#       .gpu_bundle/pcgx-gpu.tar.xz (ignored by git, about 15 MiB), to
#       travel with the working tree; --run there unpacks it instead of
#       building (no GPU time spent compiling).
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
#       and bench_runtime_gpu in TF32 and in BF16 (each against PyTorch). RESULTS (default $OUT/gpu_check.txt) opens
#       with a summary: what passed, what failed (with its error text), the
#       benchmark table; the details follow. Exits non-zero when anything
#       failed.
#   scripts/gpu_check.sh [RESULTS]
#       --build then --run, in one call (a longer session's).
#
# With the device tool, cheapest: `scripts/build.sh` and `--bundle` here,
# then `--run` there in one call with carry [".gpu_bundle"]. Or `--prepare`
# here, then `--build` and `--run` there, in two calls, with carry
# [".gpu_deps"] (build-gpu/ stays on the machine while it is warm).
# PCGX_GPU_JOBS (default 6): how many test processes share the GPU at once
# in --run's correctness part; the benchmark always runs alone.
# PCGX_GPU_PARTS (default all of "tests memcheck seam runs profile
# bench"): the parts --run runs, for a short re-check.
set -euo pipefail
cd "$(dirname "$0")/.."
deps=.gpu_deps
bundle=.gpu_bundle/pcgx-gpu.tar.xz
build=${PCGX_GPU_BUILD:-build-gpu}
programs=(tests/test_cuda tests/test_runtime tools/pcgx/pcgx bench/bench_runtime_gpu)
packages=(libeigen3-dev nlohmann-json3-dev libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libhwloc15
          libgtest-dev libgmock-dev libcli11-dev libz3-dev libz3-4)

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

if [ "${1:-}" = "--bundle" ]; then
  from=${PCGX_BUILD_DIR:-build}
  for p in "${programs[@]}"; do
    if [ ! -x "$from/$p" ]; then
      echo "error: $from/$p is not built: run scripts/build.sh on a machine with nvcc first (the CUDA backend builds when nvcc is found)" >&2
      exit 2
    fi
  done
  stage=$(mktemp -d)
  mkdir -p "$stage/lib" .gpu_bundle
  for p in "${programs[@]}"; do
    mkdir -p "$stage/$(dirname "$p")"
    strip -o "$stage/$p" "$from/$p"
  done
  # Every shared library they load except the C and C++ runtimes (a GPU
  # machine's own are newer, and PyTorch, which the benchmark starts,
  # needs those) and CUDA's (the GPU machine's driver and toolkit).
  for p in "${programs[@]}"; do ldd "$from/$p"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|libz|libdl|libpthread|librt|libcuda|libcudart)\.so' |
    while read -r l; do cp -L "$l" "$stage/lib/"; done
  # The source tree the programs were built in: they read data/, rulesets/
  # and bench/ there (compiled in), so --run makes that path lead to its tree.
  echo "$PWD" > "$stage/SOURCE_DIR"
  git rev-parse HEAD > "$stage/COMMIT" 2>/dev/null || echo unknown > "$stage/COMMIT"
  tar -C "$stage" -cf - . | xz -T0 -6 > "$bundle.tmp"
  mv "$bundle.tmp" "$bundle"
  rm -rf "$stage"
  echo "bundled ${programs[*]} and $(ls "$from" > /dev/null; tar -tJf "$bundle" | grep -c '^./lib/.') libraries into $bundle ($(du -h "$bundle" | cut -f1)), built at $(git rev-parse --short HEAD 2>/dev/null)" >&2
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
export PATH=$PATH:/usr/local/cuda/bin
if [ $mode = run ] && [ -f "$bundle" ] && [ ! -x "$build/tests/test_cuda" ]; then
  # Programs built elsewhere (--bundle): unpacked, not built.
  mkdir -p "$build"
  if command -v xz > /dev/null; then tar -C "$build" -xJf "$bundle"
  else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$bundle" "$build"; fi
  export LD_LIBRARY_PATH=$PWD/$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  src=$(cat "$build/SOURCE_DIR")
  if [ "$src" != "$PWD" ] && [ ! -e "$src" ]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
  if [ "$(readlink -f "$src")" != "$PWD" ]; then
    echo "error: the bundle's programs read their source tree at $src, which is another tree here" >&2
    exit 2
  fi
  echo "unpacked $bundle (built at $(cut -c1-7 "$build/COMMIT")) into $build/" >&2
elif [ $mode = run ] && [ -d "$build/lib" ]; then
  export LD_LIBRARY_PATH=$PWD/$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
elif [ $mode = run ] && [ ! -d "$deps/root" ]; then
  :  # programs built on this machine against its own libraries
else
  if [ ! -d "$deps/root" ]; then
    echo "error: $deps/ is missing: run scripts/gpu_check.sh --prepare on a Debian 12 machine first (or --bundle after a build with nvcc)" >&2
    exit 2
  fi
  prefix=$PWD/$deps/root/usr
  arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  export LD_LIBRARY_PATH=$prefix/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

header() {
  # The programs' commit: the bundle's where they came in one.
  local commit
  commit=$(cut -c1-7 "$build/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
  echo "== pcgx gpu_check $1, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $commit"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "(nvidia-smi: none)"
  nvcc --version 2>/dev/null | tail -2 || true
  # Where this machine keeps the libraries the backend loads at run time.
  echo "libraries: $( (ldconfig -p 2>/dev/null | grep -Eo '/[^ ]*lib(cublas|cudnn|nccl)\.so[.0-9]*$';
    ls /usr/local/cuda/lib64/lib{cublas,cudnn,nccl}.so.* 2>/dev/null;
    python3 -c 'import nvidia, os; print(*[os.path.join(p, d, "lib") for p in nvidia.__path__ for d in sorted(os.listdir(p))])' 2>/dev/null) |
    tr '\n' ' ' | cut -c1-600)"
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
# outcome to $summary ("PASS name", "FAIL name", "SKIP name: why"). The
# correctness checks run PCGX_GPU_JOBS at a time, each in its own process
# with its own log; the benchmark runs after them, alone on the GPU.
do_run() {
  if [ ! -x "$build/tests/test_cuda" ] || [ ! -x "$build/tools/pcgx/pcgx" ]; then
    echo "error: $build/ is not built: run scripts/gpu_check.sh --build first (the machine may have gone cold since), or carry a --bundle" >&2
    return 2
  fi
  header run
  local logs jobs t0
  logs=$(mktemp -d)
  jobs=${PCGX_GPU_JOBS:-6}
  # The CPU sides of the checks share the cores.
  export OMP_NUM_THREADS=$(( $(nproc) / jobs > 0 ? $(nproc) / jobs : 1 ))
  t0=$(date +%s)
  local names=() n=0 parts=" ${PCGX_GPU_PARTS:-tests memcheck seam runs profile bench} "
  part() { [[ $parts == *" $1 "* ]]; }
  # check NAME TIMEOUT COMMAND...: started in the background, at most
  # $jobs at once; its output goes to $logs/N.log, its exit code to N.rc.
  check() {
    local name=$1 limit=$2
    shift 2
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
    names+=("$name")
    local log=$logs/$n
    n=$((n + 1))
    ( rc=0; timeout "$limit" "$@" > "$log.log" 2>&1 || rc=$?
      [ $rc -eq 124 ] && echo "(timed out after $limit s)" >> "$log.log"
      echo $rc > "$log.rc" ) &
  }
  local t m b cases
  cases=$("$build/tests/test_cuda" --gtest_list_tests | awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}')
  if part tests; then for t in $cases; do check "$t" 180 "$build/tests/test_cuda" --gtest_filter="$t"; done; fi
  if ! part memcheck; then
    :
  elif command -v compute-sanitizer > /dev/null; then
    for t in Tiny/CudaZoo.OneStepMatchesTheCpuNodeByNode/mlp_tiny Tiny/CudaZoo.OneStepMatchesTheCpuNodeByNode/gpt_tiny \
             Tiny/CudaZoo.OneStepMatchesTheCpuNodeByNode/dlrm_tiny Tiny/CudaZoo.EveryOperatorMatchesTheCpuOnTheSameInputs/resnext_50_tiny \
             Cuda.TwoVirtualDevicesShareOneGpu; do
      check "memcheck $t" 150 compute-sanitizer --tool memcheck --error-exitcode 99 "$build/tests/test_cuda" --gtest_filter="$t"
    done
  else
    echo "SKIP memcheck: no compute-sanitizer on this machine" >> "$summary"
  fi
  part seam && check "seam tests (test_runtime: BackendSeam, Runtime, Tiny/Runtime)" 240 \
    "$build/tests/test_runtime" --gtest_brief=1 --gtest_filter='BackendSeam.*:Runtime.*:Tiny/Runtime.*'
  part runs && for m in mlp-tiny dlrm-tiny xdl-tiny candle-uno-tiny bert-large-tiny gpt-tiny vgg-13-tiny resnext-50-tiny inception-v3-tiny; do
    for b in cpu cuda; do
      check "pcgx run $m --backend $b" 300 "$build/tools/pcgx/pcgx" run "$m" --backend "$b" --steps 20 --batches 1 --no-report --no-plot
    done
  done
  part runs && for b in cpu cuda; do
    check "pcgx run gpt-tiny --precision bf16 --backend $b" 300 "$build/tools/pcgx/pcgx" run gpt-tiny --precision bf16 --backend "$b" --steps 20 --batches 1 --no-report --no-plot
  done
  part runs && check "2 virtual devices on one GPU (pcgx run mlp-tiny --devices 2, data parallel)" 180 \
    "$build/tools/pcgx/pcgx" run mlp-tiny --backend cuda --optimize --search data-parallel --devices 2 --steps 20 --batches 1 --no-report --no-plot
  # The profile alone on the GPU: kernel times measured beside five other
  # processes predicted 42 ms for a 2.1 ms step (H200, 2026-11-28).
  wait
  local shared=$jobs machine=dgx-h100
  jobs=1
  # The machine file of the GPU it runs on (as bench_runtime_gpu picks it).
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
    *H200*) machine=dgx-h200 ;;
    *A100*) machine=dgx-a100 ;;
  esac
  part profile && check "GPU profile (pcgx run --profile-out, then --optimize --profile; alone on the GPU)" 240 bash -c \
    "'$build/tools/pcgx/pcgx' run bert-large-tiny --backend cuda --steps 12 --no-report --no-plot --profile-out '${OUT:-.}/gpu_profile.json' &&
     '$build/tools/pcgx/pcgx' run bert-large-tiny --backend cuda --steps 12 --no-report --no-plot --optimize --machine $machine --profile '${OUT:-.}/gpu_profile.json'"
  wait
  jobs=$shared
  echo "== correctness: ${#names[@]} checks, $jobs at a time, in $(( $(date +%s) - t0 )) s"
  local i log rc why
  for i in "${!names[@]}"; do
    log=$logs/$i.log
    rc=$(cat "$logs/$i.rc" 2>/dev/null || echo 1)
    echo "-- ${names[$i]}: exit $rc"
    case ${names[$i]} in
      memcheck*) grep -E "ERROR SUMMARY" "$log" || true ;;
      "pcgx run"*|2\ virtual*|GPU\ profile*) grep -E "^(devices|loss|time per step)|ms (measured|predicted)|note:" "$log" | tr -s ' ' || true ;;
      seam*) tail -3 "$log" ;;
      *) grep -E "operator types on the host fallback|losses \(cpu / cuda\)" "$log" | cut -c1-400 || true ;;
    esac
    if [ "$rc" -ne 0 ]; then
      echo "FAIL ${names[$i]}" >> "$summary"
      why=$(grep -E "Failure|error|Error|what\(\)|Expected|Which is|Value of|Actual|timed out|ERROR SUMMARY|Invalid|out of bounds" "$log" | head -12 || true)
      [ -n "$why" ] || why=$(tail -5 "$log")
      echo "$why" | sed 's/^/    /' >> "$summary"
      sed 's/^/    | /' "$log" | head -50  # the first failures, where a cascade starts
    elif grep -q "\[  SKIPPED \]" "$log"; then
      echo "SKIP ${names[$i]}: $(grep -m1 -A1 ": Skipped" "$log" | tail -1 | cut -c1-160)" >> "$summary"
    else
      echo "PASS ${names[$i]}" >> "$summary"
    fi
  done

  if part bench; then
  # TF32 (its kernel profiles into $OUT), then BF16 (mixed precision:
  # BF16 products; PyTorch with BF16 autocast beside it; into $OUT/bf16).
  local p
  unset OMP_NUM_THREADS
  for p in tf32 bf16; do
    echo "== bench_runtime_gpu --precision $p (alone on the GPU)"
    log=$logs/bench-$p.log
    t0=$(date +%s)
    local dir=${OUT:-.}
    [ $p = tf32 ] || { dir=$dir/$p; mkdir -p "$dir"; }
    if timeout 300 "$build/bench/bench_runtime_gpu" --precision $p --profile-out "$dir" 2>&1 | tee "$log"; then
      echo "PASS bench_runtime_gpu --precision $p" >> "$summary"
    else echo "FAIL bench_runtime_gpu --precision $p" >> "$summary"; tail -5 "$log" | sed 's/^/    /' >> "$summary"; fi
    echo "(bench in $(( $(date +%s) - t0 )) s)"
    cat "$log" >> "$bench"
  done
  fi
  rm -rf "$logs"
}

results=${1:-${OUT:-.}/gpu_$([ $mode = build ] && echo build || echo check).txt}
status=0
if [ $mode = build ] || [ $mode = all ]; then
  if [ $mode = build ]; then do_build > >(tee "$results") 2>&1 || status=$?; else do_build || status=$?; fi
  [ $mode = build ] && exit $status
  [ $status -ne 0 ] && exit $status
fi
# The details are written beside RESULTS as they come, so a call cut off
# by its time limit still brings back what ran.
summary=$(mktemp) detail=$results.partial bench=$(mktemp)
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
