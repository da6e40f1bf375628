#!/usr/bin/env bash
# Mixed precision on this computer's CPU: NetLoom fp32 and bf16 against PyTorch fp32 and
# autocast bf16, side by side in one run (see precision.py). A benchmark, not a test: it
# exits 0 whatever the numbers, nonzero only if a tool is missing or a run fails.
#   tests/bench/bench_precision.sh [--models mlp,convbn] [--runs 3] [--threads N]
#                                  [--train-limit N] [--test-limit N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"
bench_exec_driver precision.py "$@"
