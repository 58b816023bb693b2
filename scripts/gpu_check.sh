#!/usr/bin/env bash
# The CUDA backend's check on a GPU machine, in two halves.
#
#   scripts/gpu_check.sh --prepare
#       Here, on Debian 12 with network: fetches the Debian packages pcgx
#       builds against that a GPU machine lacks (headers, TBB, Z3,
#       GoogleTest, CLI11) and unpacks them into .gpu_deps/ (ignored by git,
#       about 39 MiB), to travel with the working tree.
#   scripts/gpu_check.sh [RESULTS]
#       On the GPU machine (nvcc, CMake and ninja, no Debian dev packages,
#       no network), with .gpu_deps/ beside it: builds pcgx with CUDA into
#       build-gpu/, runs the GPU tests (tests/cuda, which skip nowhere here),
#       trains the tiny zoo models with `pcgx run --backend cuda` and writes
#       everything to RESULTS (default: $OUT/gpu_check.txt when $OUT is set,
#       else gpu_check.txt). Exits non-zero when a test fails.
#
# With the device tool: run `scripts/gpu_check.sh --prepare` here, then
# `scripts/gpu_check.sh` there with carry [".gpu_deps"].
set -euo pipefail
cd "$(dirname "$0")/.."
deps=.gpu_deps
packages=(libeigen3-dev nlohmann-json3-dev libtbb-dev libtbb12 libtbbmalloc2 libtbbbind-2-5 libhwloc15
          libgtest-dev libgmock-dev libcli11-dev libz3-dev libz3-4)

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

if [ "${1:-}" = "--prepare" ]; then
  rm -rf "$deps"
  mkdir -p "$deps/debs"
  (cd "$deps/debs" && apt-get download "${packages[@]}" >&2)
  for f in "$deps"/debs/*.deb; do dpkg -x "$f" "$deps/root"; done
  rm -rf "$deps/debs" "$deps/root/usr/share/doc" "$deps/root/usr/share/man" "$deps/root/usr/share/lintian"
  echo "prepared $deps ($(du -sh "$deps" | cut -f1)): run scripts/gpu_check.sh on the GPU machine with $deps carried" >&2
  exit 0
fi

results=${1:-${OUT:-.}/gpu_check.txt}
if [ ! -d "$deps/root" ]; then
  echo "error: $deps/ is missing: run scripts/gpu_check.sh --prepare on a Debian 12 machine first" >&2
  exit 2
fi
if ! command -v nvcc > /dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "error: no nvcc on this machine: the GPU check builds the CUDA backend" >&2
  exit 2
fi
exec > >(tee "$results") 2>&1
prefix=$PWD/$deps/root/usr
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
export LD_LIBRARY_PATH=$prefix/lib/$arch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "== pcgx gpu_check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
nvcc --version | tail -2 || /usr/local/cuda/bin/nvcc --version | tail -2

echo "== build (build-gpu/)"
start=$(date +%s)
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPCGX_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_LIBRARY_ARCHITECTURE="$arch" > build-gpu.log 2>&1 || { tail -30 build-gpu.log; exit 1; }
cmake --build build-gpu -j "$(nproc)" --target test_cuda test_runtime pcgx >> build-gpu.log 2>&1 || { tail -40 build-gpu.log; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

status=0
echo "== GPU tests (tests/cuda)"
build-gpu/tests/test_cuda --gtest_brief=1 || status=1
echo "== the seam on the CPU (tests/runtime: BackendSeam, Runtime)"
build-gpu/tests/test_runtime --gtest_brief=1 --gtest_filter='BackendSeam.*:Runtime.*' || status=1

echo "== pcgx run --backend cuda, each tiny zoo model, 20 steps, against --backend cpu"
for m in mlp-tiny dlrm-tiny xdl-tiny candle-uno-tiny bert-large-tiny gpt-tiny vgg-13-tiny resnext-50-tiny inception-v3-tiny; do
  for b in cpu cuda; do
    line=$(build-gpu/tools/pcgx/pcgx run "$m" --backend "$b" --steps 20 --batches 1 --no-report --no-plot 2>&1 |
           grep -E "^(loss|time per step)|note:" | tr -s ' ' | paste -sd ';' -) || { status=1; line="FAILED"; }
    echo "$m $b: $line"
  done
done

echo "== data parallel on 2 virtual devices sharing the GPU"
build-gpu/tools/pcgx/pcgx run mlp-tiny --backend cuda --optimize --search data-parallel --devices 2 --steps 20 --batches 1 \
  --no-report --no-plot 2>&1 | grep -E "^(devices|loss|time per step)" || status=1

echo "== a measured GPU profile feeds the cost model"
build-gpu/tools/pcgx/pcgx run bert-large-tiny --backend cuda --steps 12 --no-report --no-plot --profile-out "${OUT:-.}/gpu_profile.json" \
  2>&1 | tail -2 || status=1
build-gpu/tools/pcgx/pcgx run bert-large-tiny --backend cuda --steps 12 --no-report --no-plot --optimize --machine dgx-h100 \
  --profile "${OUT:-.}/gpu_profile.json" 2>&1 | grep -E "ms (measured|predicted)" || status=1

if [ -x build-gpu/bench/bench_runtime_gpu ] || cmake --build build-gpu --target bench_runtime_gpu >> build-gpu.log 2>&1; then
  echo "== bench_runtime_gpu"
  build-gpu/bench/bench_runtime_gpu || status=1
fi
echo "== gpu_check: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
