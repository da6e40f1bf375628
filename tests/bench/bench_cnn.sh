#!/usr/bin/env bash
# Trains projects/fashion-lenet.nlproj and/or projects/fashion-convbn.nlproj with
# netloom-train and the same model with PyTorch (cnn_torch.py), at the same settings, and
# prints accuracy, training throughput and wall time side by side, per model. The default
# is one epoch: a quick throughput comparison. accuracy_table.sh does the full-length runs.
# A benchmark, not a test: it exits 0 whatever the numbers, nonzero only if a tool is
# missing or a run crashes.
set -euo pipefail

usage() {
  echo "usage: $0 [--model lenet|convbn|all] [--epochs N] [--threads T] [--train-limit N]" \
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

# Both frameworks' thread pools follow OMP_NUM_THREADS where they read it; each is also
# told the count directly.
export OMP_NUM_THREADS="$threads"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

limit_args=()
[[ "$limit" -gt 0 ]] && limit_args=(--train-limit "$limit")
profile_args=()
[[ "$profile" -eq 1 ]] && profile_args=(--profile)
samples=all
[[ "$limit" -gt 0 ]] && samples="first $limit"

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
  echo "Fashion-MNIST $title: $epochs epoch(s), batch $batch, $threads thread(s)," \
    "training samples: $samples" >&2
  echo "running netloom-train..." >&2
  # With --profile netloom-train prints its breakdown on stdout after training; keep it
  # for after the table.
  "$bench_train" "$project" --epochs "$epochs" --threads "$threads" --batch-size "$batch" \
    "${limit_args[@]}" "${profile_args[@]}" --summary-json "$tmp/$m.netloom.json" --quiet \
    > "$tmp/$m.profile"
  echo "running PyTorch..." >&2
  "$bench_py" "$bench_dir/cnn_torch.py" --project "$project" --epochs "$epochs" \
    --threads "$threads" --batch-size "$batch" "${limit_args[@]}" > "$tmp/$m.torch.json"

  [[ "$first" -eq 1 ]] || echo
  first=0
  echo "== $title ($(basename "$project"))"
  bench_compare "$tmp/$m.netloom.json" "$tmp/$m.torch.json"
  # Different counts mean the two did not build the same model.
  "$bench_py" -c '
import json, sys
nl = json.load(open(sys.argv[1]))["parameters"]
pt = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])["parameters"]
if nl != pt:
    print("WARNING: parameter counts differ, so the models differ: NetLoom %d, PyTorch %d"
          % (nl, pt))
' "$tmp/$m.netloom.json" "$tmp/$m.torch.json"
  if [[ "$profile" -eq 1 ]]; then
    echo "NetLoom per-op breakdown (samples/s above include the profiler's overhead):"
    cat "$tmp/$m.profile"
  fi
done
