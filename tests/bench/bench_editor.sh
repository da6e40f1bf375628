#!/usr/bin/env bash
# Times the editor on generated residual stacks of 1,000 and 10,000 nodes (or the sizes
# given): load, scene, validation, Graphviz layout, framing, drawing a frame, and
# revalidation after one attribute edit. See editor_scale.cpp.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
usage() { sed -n '2,/^set/p' "$0" | grep '^#' >&2; exit 2; }
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"
bench_exec_qt bench_editor_scale "$@"
