#!/usr/bin/env bash
# Live event streams into the IDE's charts at a sweep's rate: 8 streams, 20,000
# events/s in all, followed and drawn by the Experiments dock's trial chart; prints
# the event-to-chart latency (p50, p99, worst) and how late the GUI event loop runs.
# Goals: event-to-chart p99 < 100 ms, GUI loop p99 < 16 ms. See stream_latency.cpp.
# Usage: bench_streams.sh [SECONDS] [STREAMS] [EVENTS_PER_SECOND]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"
bench_whole_numbers "$@"
bench_exec_qt bench_stream_latency "${1:-10}" "${2:-8}" "${3:-20000}"
