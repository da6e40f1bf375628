#!/usr/bin/env bash
# The IDE's responsiveness while it trains: the GUI thread's event-loop latency
# (p50, p99, worst) while the LeNet project trains in process on every core, and the
# replot time of a loss chart holding 1,000,000 steps. See gui_responsiveness.cpp.
# Usage: bench_gui.sh [PROJECT.nlproj] [SECONDS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
usage() { sed -n '2,/^set/p' "$0" | grep '^#' >&2; exit 2; }
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"
bench_exec_qt bench_gui_responsiveness "$@"
