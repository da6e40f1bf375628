#!/usr/bin/env bash
# Everything to check on a machine with an NVIDIA GPU, in one run: builds only the
# engine, the CUDA backend and the GPU tests (no IDE, no remote, no Qt Widgets) for this
# GPU's architecture, runs the `gpu`-labelled tests and, with two GPUs or more, the
# parallel strategies with a rank on each (tests/gpu/rank_strategies.sh), then
# benchmarks the MLP, LeNet, Conv+BN and ResNet at batch 128, and the fortunes GPT's training,
# against PyTorch on the same GPU (where PyTorch has CUDA).
# Writes its report and logs to $OUT when that is set.
#   tests/gpu/device_check.sh [BUILD_DIR]
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build-gpu}"
out="${OUT:-$build/device-check}"
mkdir -p "$out"
report="$out/device_check.txt"
: > "$report"
say() { echo "$*" | tee -a "$report"; }
started=$(date +%s)
elapsed() { echo "$(( $(date +%s) - started )) s"; }

say "== device check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader \
    | tee -a "$report"
else
  say "nvidia-smi: not found"
fi

# This GPU's architecture only: the build is minutes shorter than the default set.
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')"
[[ "$arch" =~ ^[0-9]+$ ]] || arch="80-real;90"
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
tests=ON
# Fashion-MNIST: Debian's copy, or NETLOOM_FASHION_DIR (carried along where the machine
# has no such package).
export NETLOOM_FASHION_DIR="${NETLOOM_FASHION_DIR:-/usr/share/datasets/fashion-mnist}"
if [[ -f "$NETLOOM_FASHION_DIR/train-images-idx3-ubyte.gz" ]]; then
  say "Fashion-MNIST: $NETLOOM_FASHION_DIR"
else
  say "Fashion-MNIST: not in $NETLOOM_FASHION_DIR (LeNet's test skips; benchmarks fail)"
fi
cmake_args=(-S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release
  -DNETLOOM_BUILD_IDE=OFF -DNETLOOM_BUILD_REMOTE=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch"
  -DNETLOOM_FASHION_DIR="$NETLOOM_FASHION_DIR")
if ! cmake "${cmake_args[@]}" -DNETLOOM_BUILD_TESTS=ON > "$out/configure.log" 2>&1; then
  # Qt Test is what the test suites need; without it the benchmarks still run.
  tests=OFF
  rm -f "$build/CMakeCache.txt"
  if ! cmake "${cmake_args[@]}" -DNETLOOM_BUILD_TESTS=OFF > "$out/configure.log" 2>&1; then
    say "configure failed (see configure.log):"
    tail -n 20 "$out/configure.log" | tee -a "$report"
    exit 1
  fi
  say "Qt 6 Test is not installed: tests not built, benchmarks only"
fi
grep -E "CUDA backend" "$out/configure.log" | tee -a "$report"
targets=(netloom-train)
[[ "$tests" == ON ]] && targets+=(tst_gpu tst_gpu_parallel tst_devices)
if ! cmake --build "$build" --parallel "$(nproc)" --target "${targets[@]}" > "$out/build.log" 2>&1; then
  say "build failed (see build.log):"
  grep -E "error|FAILED" "$out/build.log" | head -n 30 | tee -a "$report"
  exit 1
fi
say "built in $(elapsed)"
say "-- netloom-train --list-devices"
"$build/engine/netloom-train" --list-devices 2>&1 | tee -a "$report"

status=0
if [[ "$tests" == ON ]]; then
  say "-- gpu tests"
  ctest --test-dir "$build" -L gpu --output-on-failure --timeout 900 \
    > "$out/tests.log" 2>&1 || status=1
  grep -E "tests passed|Passed|Failed|SKIP|FAIL!" "$out/tests.log" | tee -a "$report"
  "$build/tests/gpu/tst_gpu" -o "$out/tst_gpu.txt,txt" > /dev/null 2>&1 || true
  grep -E "^(PASS|FAIL|SKIP|QINFO)" "$out/tst_gpu.txt" | head -n 200 >> "$report"
  "$build/tests/gpu/tst_gpu_parallel" > "$out/tst_gpu_parallel.txt" 2>&1 || status=1
  grep -E "^(FAIL|SKIP)|Totals" "$out/tst_gpu_parallel.txt" | tee -a "$report"
  "$build/tests/engine/tst_devices" > "$out/tst_devices.txt" 2>&1 || status=1
  grep -E "^(PASS|FAIL|SKIP)|Totals" "$out/tst_devices.txt" | tee -a "$report"
fi

# One NCCL rank per GPU under each parallel strategy, against one rank.
gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')"
if [[ "${gpus:-0}" -ge 2 ]]; then
  say "-- parallel strategies, one rank on each of $gpus GPUs (NCCL)"
  "$root/tests/gpu/rank_strategies.sh" "$build" cuda "$gpus" "$out/strategies" 2>&1 \
    | tee -a "$report" || status=1
else
  say "-- parallel strategies over NCCL: ${gpus:-0} GPU here, they need two (skipped)"
fi

say "-- benchmarks (batch 128, one epoch of Fashion-MNIST)"
"$root/tests/bench/bench_gpu.sh" --build "$build" 2>&1 | tee -a "$report"
say "-- fortunes GPT, 100 steps on cuda:0 against PyTorch (F.scaled_dot_product_attention)"
"$root/tests/bench/bench_gpt.sh" --build "$build" --device cuda --steps 100 2>&1 | tee -a "$report"

# One table to read at the end: the tests' verdicts, then every benchmark row.
say "== summary"
{
  grep -hE "tests passed|Totals" "$out/tests.log" "$out/tst_gpu_parallel.txt" \
    "$out/tst_devices.txt" 2>/dev/null | sed 's/^/tests: /'
  sed -n '/^-- benchmarks/,$p' "$report" | grep -E "^(model|mlp|lenet|convbn|resnet) " \
    | sed 's/^/gpu:   /'
  sed -n '/^-- fortunes GPT/,$p' "$report" | grep -E "tokens/s|NetLoom|PyTorch" | head -n 8 \
    | sed 's/^/gpt:   /'
} | tee -a "$report"
say "== done in $(elapsed)"
exit $status
