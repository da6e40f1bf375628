#!/usr/bin/env bash
# Times the editor on generated residual stacks of 1,000 and 10,000 nodes (or the sizes
# given): load, scene, validation, Graphviz layout, framing, drawing a frame, and
# revalidation after one attribute edit. See editor_scale.cpp.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
exe="$root/build/tests/bench/bench_editor_scale"
if [[ ! -x "$exe" ]]; then
  echo "$exe is missing: run ./scripts/setup.sh build first" >&2
  exit 2
fi
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
exec "$exe" "$@"
