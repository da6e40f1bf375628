#!/usr/bin/env bash
# Trains each convolutional example project for the same steps twice, with the layout
# pass (activations of convolution regions in oneDNN's nChw16c) and with
# --plain-layouts (every activation NCHW), and prints training samples/s of both, the
# ratio, and the final training loss of each: the two must agree closely, since the
# layout changes where numbers lie in memory, not what is computed.
# A benchmark, not a test: it exits 0 whatever the numbers, nonzero only if a tool is
# missing or a run crashes.
set -euo pipefail

usage() {
  echo "usage: $0 [--steps N] [--threads T] [--project NAME]..." >&2
  echo "  NAME: fashion-lenet, fashion-convbn, fashion-resnet, autoencoder (default: all)" >&2
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"

steps=100
threads="$(nproc)"
projects=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) [[ $# -ge 2 ]] || usage; steps="$2"; shift 2 ;;
    --threads) [[ $# -ge 2 ]] || usage; threads="$2"; shift 2 ;;
    --project) [[ $# -ge 2 ]] || usage; projects+=("$2"); shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done
[[ ${#projects[@]} -gt 0 ]] || projects=(fashion-lenet fashion-convbn fashion-resnet autoencoder)
bench_whole_numbers "$steps" "$threads"
bench_need_train
export OMP_NUM_THREADS="$threads"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

field() { "$bench_py" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

echo "training steps: $steps, threads: $threads, seed 1"
printf '%-16s %14s %14s %7s %12s %12s %s\n' project "blocked sps" "plain sps" ratio \
  "blocked loss" "plain loss" "layout pass"
for p in "${projects[@]}"; do
  proj="$root/projects/$p.nlproj"
  [[ -f "$proj" ]] || { echo "no project $proj" >&2; exit 2; }
  for mode in blocked plain; do
    extra=()
    [[ "$mode" == plain ]] && extra=(--plain-layouts)
    "$bench_train" "$proj" --max-steps "$steps" --epochs 1000 --threads "$threads" --seed 1 \
      --test-limit 1 --quiet --summary-json "$tmp/$mode.json" "${extra[@]}"
  done
  pass="$("$bench_train" "$proj" --explain | grep -m1 'layouts:' | sed 's/^ *layouts: //' || true)"
  b="$(field "$tmp/blocked.json" samples_per_sec)"
  q="$(field "$tmp/plain.json" samples_per_sec)"
  printf '%-16s %14.0f %14.0f %6.2fx %12.5f %12.5f %s\n' "$p" "$b" "$q" \
    "$("$bench_py" -c "print($b / $q)")" "$(field "$tmp/blocked.json" train_loss)" \
    "$(field "$tmp/plain.json" train_loss)" "${pass:-none}"
done
