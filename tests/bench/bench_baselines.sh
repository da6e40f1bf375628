#!/usr/bin/env bash
# NetLoom against PyTorch on this computer's CPU, like with like (1 thread, 2 threads,
# 2 ranks) and best against best, each framework at the best of the settings its users
# would try: median of N runs with the spread, warm-up steps left out on both sides.
# See baselines.py for the candidates. A benchmark, not a test: it exits 0 whatever the
# numbers, nonzero only if a tool is missing or a run fails.
#   tests/bench/bench_baselines.sh [--models mlp,lenet,convbn] [--runs 5] [--epochs 1]
#                                  [--warmup 20] [--train-limit N] [--test-limit N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"
bench_exec_driver baselines.py "$@"
