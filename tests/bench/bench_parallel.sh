#!/usr/bin/env bash
# Memory and step time per rank under each parallel strategy: the GPT of
# projects/fortunes-gpt.nlproj and the ResNet of projects/fashion-resnet.nlproj, each
# trained a few steps at one global batch on 1, 2 and 4 ranks (threads of one
# process) as data parallelism, ZeRO-1, ZeRO-2 and tensor parallelism. For rank 0 it
# prints the weights, the optimizer state and the arena it holds (measured from its
# store and its memory plan) and its step time, with the weights and state against
# data parallelism's at the same ranks. Goals: ZeRO-1 at 4 ranks ≤ 0.3× the state,
# tensor parallelism at 2 ranks ≤ 0.55× the weights. With 2 cores, 4 ranks share
# them: the step times there say what the ranks cost, not what 4 cores would give.
# A benchmark, not a test: exits 0 whatever the numbers, nonzero only if a tool is
# missing or a run fails.
set -euo pipefail

usage() {
  echo "usage: $0 [--model gpt|resnet|all] [--steps N]" >&2
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
