#!/usr/bin/env bash
# Trains projects/fashion-mlp.nlproj with netloom-train and the same MLP with PyTorch, at the
# same settings, on 1 thread and on each count up to --threads (default: every core), and
# prints throughput, GFLOP/s and its share of the GEMM peak measured in the same run,
# accuracy and loss side by side, then each framework's best.
# A benchmark, not a test: it exits 0 whatever the numbers, nonzero only if a tool is
# missing or a run crashes.
set -euo pipefail

usage() {
  echo "usage: $0 [--epochs N] [--threads MAX] [--train-limit N] [--gelu]" >&2
  echo "  --gelu: GELU for ReLU and a Dropout (p 0.2) after each hidden layer, on both sides" >&2
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"
project="$root/projects/fashion-mlp.nlproj"

epochs=3
threads="$(nproc)"
limit=0
gelu=no
while [[ $# -gt 0 ]]; do
  case "$1" in
    --epochs) [[ $# -ge 2 ]] || usage; epochs="$2"; shift 2 ;;
    --threads) [[ $# -ge 2 ]] || usage; threads="$2"; shift 2 ;;
    --train-limit) [[ $# -ge 2 ]] || usage; limit="$2"; shift 2 ;;
    --gelu) gelu=yes; shift ;;
    -h|--help) usage ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done
bench_whole_numbers "$epochs" "$threads" "$limit"
bench_need_train
bench_need_torch

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
model="784-256-128-10"
if [[ "$gelu" == yes ]]; then
  bench_gelu_mlp "$tmp/mlp-gelu.nlproj"
  project="$tmp/mlp-gelu.nlproj"
  model="784-256-128-10, GELU and Dropout 0.2"
  bench_torch_extra=(--activation gelu --dropout 0.2)
fi

batch=64
limit_args=()
[[ "$limit" -gt 0 ]] && limit_args=(--train-limit "$limit")

samples=all
[[ "$limit" -gt 0 ]] && samples="first $limit"
mapfile -t counts < <(bench_thread_counts "$threads")
echo "Fashion-MNIST MLP: $epochs epoch(s), batch $batch, threads ${counts[*]}," \
  "training samples: $samples" >&2
bench_peaks "$tmp" "${counts[@]}"
bench_sweep "$tmp" "$project" "$bench_dir/mlp_torch.py" no \
  --epochs "$epochs" --batch-size "$batch" "${limit_args[@]}"
bench_sweep_table "$tmp" "MLP $model ($(basename "$project")), batch $batch"
