#!/usr/bin/env bash
# Memory and step time per rank under each parallel strategy: the GPT of
# projects/fortunes-gpt.nlproj and the ResNet of projects/fashion-resnet.nlproj, each
# trained a few steps at one global batch on 1, 2 and 4 ranks (threads of one
# process) as data parallelism, ZeRO-1, ZeRO-2 and tensor parallelism. For rank 0 it
# prints the weights, the optimizer state and the arena it holds (measured from its
# store and its memory plan) and its step time, with the weights and state against
# data parallelism's at the same ranks. Goals: ZeRO-1 at 4 ranks ≤ 0.3× the state,
# tensor parallelism at 2 ranks ≤ 0.55× the weights. Then the conv+BN net's samples/s
# with 2 ranks that are processes over Gloo's TCP, per strategy (--model none: only
# that). With 2 cores, 4 ranks share
# them: the step times there say what the ranks cost, not what 4 cores would give.
# A benchmark, not a test: exits 0 whatever the numbers, nonzero only if a tool is
# missing or a run fails.
set -euo pipefail

usage() {
  echo "usage: $0 [--model gpt|resnet|all|none] [--steps N]" >&2
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"

model=all
steps=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) [[ $# -ge 2 ]] || usage; model="$2"; shift 2 ;;
    --steps) [[ $# -ge 2 ]] || usage; steps="$2"; shift 2 ;;
    *) usage ;;
  esac
done
bench_whole_numbers "$steps"
exe="$root/build/tests/bench/bench_parallel_memory"
if [[ ! -x "$exe" ]]; then
  echo "bench_parallel: build it first: cmake --build build --target bench_parallel_memory" >&2
  exit 2
fi
if [[ "$model" == gpt || "$model" == all ]]; then
  "$exe" "$root/projects/fortunes-gpt.nlproj" 32 "$steps" "fortunes GPT"
fi
if [[ "$model" == resnet || "$model" == all ]]; then
  "$exe" "$root/projects/fashion-resnet.nlproj" 64 "$steps" "Fashion-MNIST ResNet"
fi

# The same strategies with ranks that are processes, over Gloo's TCP (what a job on
# several hosts uses): samples/s of conv+BN at one global batch, 2 ranks.
bench_need_train
runs="$(mktemp -d)"
trap 'rm -rf "$runs"' EXIT
echo
echo "conv+BN, 2 process ranks over Gloo TCP, global batch 64, $((steps * 4)) steps"
printf '%-10s %12s\n' strategy samples/s
for strategy in data tensor zero pipeline; do
  case "$strategy" in
    data) extra=(--batch-size 32) ;;
    tensor) extra=(--batch-size 32 --tensor-parallel 2) ;;
    zero) extra=(--batch-size 32 --zero 1) ;;
    pipeline) extra=(--batch-size 64 --pipeline-stages 2) ;;
  esac
  "$bench_train" "$root/projects/fashion-convbn.nlproj" --ranks 2 "${extra[@]}" --quiet \
    --max-steps $((steps * 4)) --train-limit 4096 --test-limit 64 \
    --summary-json "$runs/$strategy.json" >/dev/null
  printf '%-10s %12.0f\n' "$strategy" \
    "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_sec"])' "$runs/$strategy.json")"
done
