#!/usr/bin/env bash
# The IDE's responsiveness while it trains: the GUI thread's event-loop latency
# (p50, p99, worst) while the LeNet project trains in process on every core, and the
# replot time of a loss chart holding 1,000,000 steps. See gui_responsiveness.cpp.
# Usage: bench_gui.sh [PROJECT.nlproj] [SECONDS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
exe="$root/build/tests/bench/bench_gui_responsiveness"
if [[ ! -x "$exe" ]]; then
  echo "$exe is missing: run ./scripts/setup.sh build first" >&2
  exit 2
fi
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
exec "$exe" "$@"
