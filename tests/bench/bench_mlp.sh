#!/usr/bin/env bash
# Trains projects/fashion-mlp.nlproj with netloom-train and the same MLP with PyTorch, at the
# same settings, and prints accuracy, training throughput and wall time side by side.
# A benchmark, not a test: it exits 0 whatever the numbers, nonzero only if a tool is
# missing or a run crashes.
set -euo pipefail

usage() {
  echo "usage: $0 [--epochs N] [--threads T] [--train-limit N]" >&2
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"
project="$root/projects/fashion-mlp.nlproj"

epochs=10
threads="$(nproc)"
limit=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --epochs) [[ $# -ge 2 ]] || usage; epochs="$2"; shift 2 ;;
    --threads) [[ $# -ge 2 ]] || usage; threads="$2"; shift 2 ;;
    --train-limit) [[ $# -ge 2 ]] || usage; limit="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done
bench_whole_numbers "$epochs" "$threads" "$limit"
bench_need_train
bench_need_torch

# Both frameworks' thread pools follow OMP_NUM_THREADS where they read it; each is also
# told the count directly.
export OMP_NUM_THREADS="$threads"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

batch=64
limit_args=()
[[ "$limit" -gt 0 ]] && limit_args=(--train-limit "$limit")

samples=all
[[ "$limit" -gt 0 ]] && samples="first $limit"
echo "Fashion-MNIST MLP: $epochs epoch(s), batch $batch, $threads thread(s)," \
  "training samples: $samples" >&2
echo "running netloom-train..." >&2
"$bench_train" "$project" --epochs "$epochs" --threads "$threads" --batch-size "$batch" \
  "${limit_args[@]}" --summary-json "$tmp/netloom.json" --quiet
echo "running PyTorch..." >&2
"$bench_py" "$bench_dir/mlp_torch.py" --epochs "$epochs" --threads "$threads" \
  --batch-size "$batch" "${limit_args[@]}" > "$tmp/torch.json"

bench_compare "$tmp/netloom.json" "$tmp/torch.json"
