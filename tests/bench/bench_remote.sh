#!/usr/bin/env bash
# Remote training over loopback SSH (a private sshd on 127.0.0.1): the time from
# pressing Run to the first remote step, and the delay from an event written on
# the host to it reaching the charts (p50, p99, worst). See remote_latency.cpp.
# With --slurm, through a Slurm cluster of its own on 127.0.0.1 (needs root, and
# Debian's slurm-wlm and munge, which scripts/setup.sh test installs).
# Usage: bench_remote.sh [--slurm] [SECONDS] [THREADS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
usage() { sed -n '2,/^set/p' "$0" | grep '^#' >&2; exit 2; }
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"
slurm=()
if [[ "${1:-}" == --slurm ]]; then slurm=(--slurm); shift; fi
bench_whole_numbers "$@"
bench_exec_qt bench_remote_latency "${slurm[@]}" "$@"
