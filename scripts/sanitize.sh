#!/usr/bin/env bash
# Nightly check: the fuzz harnesses' replays (their seeds and the kept regression
# inputs, tests/fuzz) under AddressSanitizer and UndefinedBehaviorSanitizer, in a build
# of their own that compiles only those harnesses and what they link. A whole
# sanitized build does not fit CI's budget; this part of it does, run apart.
#   usage: scripts/sanitize.sh [BUILD_DIR]            (default: build-asan)
#   NETLOOM_SANITIZE_JOBS: compile jobs (default: every core)
#   NETLOOM_BUILD_LOCK: a file to flock around each build step, on a machine where
#     others build too; the compile then takes it a few objects at a time
# Exits non-zero when the build fails or any replay reports a finding (the options in
# tests/sanitize/ make every finding fatal, so it fails its test).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
build=${1:-build-asan}
jobs=${NETLOOM_SANITIZE_JOBS:-$(nproc)}
start=$(date +%s)

step() {
  if [ -n "${NETLOOM_BUILD_LOCK:-}" ]; then
    flock "$NETLOOM_BUILD_LOCK" "$@"
  else
    "$@"
  fi
}

# Configured every time, so that a build folder made otherwise is made sanitized.
step cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DNETLOOM_SANITIZE=ON -DNETLOOM_BUILD_IDE=OFF -DNETLOOM_BUILD_REMOTE=ON -DNETLOOM_CUDA=OFF >/dev/null

if [ -n "${NETLOOM_BUILD_LOCK:-}" ]; then
  # Holding a shared lock through a build of the whole engine would stop every other
  # build for as long: compile the objects in slices, letting the lock go between.
  mapfile -t objects < <(ninja -C "$build" -t inputs fuzz_replays | grep '\.o$')
  for ((i = 0; i < ${#objects[@]}; i += 8)); do
    step ninja -C "$build" -j "$jobs" "${objects[@]:i:8}"
  done
fi
step ninja -C "$build" -j "$jobs" fuzz_replays

status=0
step ctest --test-dir "$build" -L fuzz --output-on-failure || status=$?
echo "netloom: sanitized fuzz replays $([ "$status" -eq 0 ] && echo passed || echo FAILED)" \
  "in $(($(date +%s) - start)) s ($build)"
exit "$status"
