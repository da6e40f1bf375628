#!/usr/bin/env bash
# Trains example projects for the same steps twice, as compiled (fusion, element-wise
# chains) and with --no-fuse (each op its own kernel), and prints training samples/s of
# both, the ratio, the training arena of each, both final training losses (the same
# numbers computed in other loops: they agree to rounding) and what was fused and
# chained, from --explain. `mlp-gelu` is the MLP with GELU and Dropout in place of
# ReLU, written to a temporary project: its Dropout and GELU (forward) and their
# gradients (backward) are chains.
# A benchmark, not a test: it exits 0 whatever the numbers, nonzero only if a tool is
# missing or a run crashes.
set -euo pipefail

usage() {
  echo "usage: $0 [--steps N] [--threads T] [--batch-size B] [--project NAME]..." >&2
  echo "  NAME: mlp-gelu or a project in projects/ (default: mlp-gelu, fashion-convbn, fashion-resnet)" >&2
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"

steps=200
threads="$(nproc)"
batch=""
projects=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) [[ $# -ge 2 ]] || usage; steps="$2"; shift 2 ;;
    --threads) [[ $# -ge 2 ]] || usage; threads="$2"; shift 2 ;;
    --batch-size) [[ $# -ge 2 ]] || usage; batch="$2"; shift 2 ;;
    --project) [[ $# -ge 2 ]] || usage; projects+=("$2"); shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done
[[ ${#projects[@]} -gt 0 ]] || projects=(mlp-gelu fashion-convbn fashion-resnet)
bench_whole_numbers "$steps" "$threads" ${batch:+"$batch"}
bench_need_train
export OMP_NUM_THREADS="$threads"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

bench_gelu_mlp "$tmp/mlp-gelu.nlproj"

field() { "$bench_py" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
# From --explain, the training plan's part: what comes before the evaluation plan.
training() { sed '/^evaluation plan/,$d' "$1"; }
arena() { training "$1" | grep -m1 '^memory: arena' | sed 's/^memory: arena \([^(]*\) (.*/\1/'; }
launches() { training "$1" | grep -m1 '^training plan' | sed 's/.*, \([0-9]*\) kernel launches.*/\1/'; }

echo "training steps: $steps, threads: $threads, seed 1${batch:+, batch $batch}; launches and arena: the training plan's"
printf '%-16s %11s %11s %6s %9s %12s %12s %11s %11s\n' project "fused sps" "unfused sps" ratio \
  launches "fused arena" "unfused" "fused loss" "unfused"
for p in "${projects[@]}"; do
  proj="$root/projects/$p.nlproj"
  [[ "$p" == mlp-gelu ]] && proj="$tmp/mlp-gelu.nlproj"
  [[ -f "$proj" ]] || { echo "no project $proj" >&2; exit 2; }
  for mode in fused unfused; do
    extra=(${batch:+--batch-size "$batch"})
    [[ "$mode" == unfused ]] && extra+=(--no-fuse)
    "$bench_train" "$proj" --max-steps "$steps" --epochs 1000 --threads "$threads" --seed 1 \
      --test-limit 1 --quiet --summary-json "$tmp/$mode.json" "${extra[@]}"
    "$bench_train" "$proj" --explain "${extra[@]}" >"$tmp/$mode.explain"
  done
  f="$(field "$tmp/fused.json" samples_per_sec)"
  u="$(field "$tmp/unfused.json" samples_per_sec)"
  printf '%-16s %11.0f %11.0f %5.2fx %9s %12s %12s %11.5f %11.5f\n' "$p" "$f" "$u" \
    "$("$bench_py" -c "print($f / $u)")" \
    "$(launches "$tmp/fused.explain")/$(launches "$tmp/unfused.explain")" \
    "$(arena "$tmp/fused.explain")" "$(arena "$tmp/unfused.explain")" \
    "$(field "$tmp/fused.json" train_loss)" "$(field "$tmp/unfused.json" train_loss)"
  training "$tmp/fused.explain" | grep -E '^  (fused|chained):' | sed 's/^  /    /'
done
