#!/usr/bin/env bash
# Trains projects/fashion-lenet.nlproj and/or projects/fashion-convbn.nlproj with
# netloom-train and the same model with PyTorch (cnn_torch.py), at the same settings, on 1
# thread and on each count up to --threads (default: every core), and prints per model
# throughput, GFLOP/s and its share of the GEMM peak measured in the same run, accuracy
# and loss side by side, then each framework's best. The default is one epoch: a quick
# throughput comparison. accuracy_table.sh does the full-length runs.
# A benchmark, not a test: it exits 0 whatever the numbers, nonzero only if a tool is
# missing or a run crashes.
set -euo pipefail

usage() {
  echo "usage: $0 [--model lenet|convbn|all] [--epochs N] [--threads MAX] [--train-limit N]" \
    "[--profile]" >&2
  echo "  --profile  also print NetLoom's per-op breakdown of the training steps" >&2
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"

model=all
epochs=1
threads="$(nproc)"
limit=0
profile=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) [[ $# -ge 2 ]] || usage; model="$2"; shift 2 ;;
    --epochs) [[ $# -ge 2 ]] || usage; epochs="$2"; shift 2 ;;
    --threads) [[ $# -ge 2 ]] || usage; threads="$2"; shift 2 ;;
    --train-limit) [[ $# -ge 2 ]] || usage; limit="$2"; shift 2 ;;
    --profile) profile=1; shift ;;
    -h|--help) usage ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done
case "$model" in
  lenet|convbn) models=("$model") ;;
  all) models=(lenet convbn) ;;
  *) echo "unknown model '$model'" >&2; usage ;;
esac
bench_whole_numbers "$epochs" "$threads" "$limit"
bench_need_train
bench_need_torch

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

limit_args=()
[[ "$limit" -gt 0 ]] && limit_args=(--train-limit "$limit")
samples=all
[[ "$limit" -gt 0 ]] && samples="first $limit"
mapfile -t counts < <(bench_thread_counts "$threads")
bench_peaks "$tmp" "${counts[@]}"

first=1
for m in "${models[@]}"; do
  # Both train from one snapshot of the project, so an edit during the run cannot give
  # them different models. (Its data paths are absolute.)
  project="$tmp/fashion-$m.nlproj"
  cp "$root/projects/fashion-$m.nlproj" "$project"
  case "$m" in
    lenet) title="LeNet" ;;
    convbn) title="Conv+BN" ;;
  esac
  # The project's own batch size, passed to both so the header names it and both train
  # alike; the rest of the settings cnn_torch.py reads from the project as netloom-train
  # does.
  batch="$(sed -n 's/^[[:space:]]*batch_size:[[:space:]]*\([0-9][0-9]*\).*/\1/p' "$project" \
    | head -n 1)"
  [[ -n "$batch" ]] || { echo "$project: no batch_size found" >&2; exit 2; }
  echo "Fashion-MNIST $title: $epochs epoch(s), batch $batch, threads ${counts[*]}," \
    "training samples: $samples" >&2
  run="$tmp/$m"
  mkdir -p "$run"
  cp "$tmp/peak.jsonl" "$run/"
  bench_sweep "$run" "$project" "$bench_dir/cnn_torch.py" yes \
    --epochs "$epochs" --batch-size "$batch" "${limit_args[@]}"
  [[ "$first" -eq 1 ]] || echo
  first=0
  bench_sweep_table "$run" "$title ($(basename "$project")), batch $batch"
  if [[ "$profile" -eq 1 ]]; then
    # The per-op breakdown, on the most threads, in a run of its own (the profiler's
    # timing would slow the measured runs).
    echo "NetLoom per-op breakdown on ${counts[-1]} thread(s):"
    OMP_NUM_THREADS="${counts[-1]}" "$bench_train" "$project" --epochs "$epochs" \
      --threads "${counts[-1]}" --batch-size "$batch" "${limit_args[@]}" --profile --quiet
  fi
done
