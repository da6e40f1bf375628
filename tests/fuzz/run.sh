#!/bin/sh
# Builds the libFuzzer harnesses with ASan and UBSan (clang) in build-fuzz, then
# runs each for SECONDS seconds from its seeds and prints, per harness, the
# executions, the corpus reached and the findings (crash/leak/timeout/oom files).
#   tests/fuzz/run.sh SECONDS [HARNESS...]
# Not part of CTest. Findings stay in build-fuzz/findings/<harness>/; a fixed one's
# input belongs in tests/fuzz/regressions/<harness>/, which CTest replays.
set -eu
seconds=${1:?usage: tests/fuzz/run.sh SECONDS [HARNESS...]}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${NETLOOM_FUZZ_BUILD:-$root/build-fuzz}
harnesses=${*:-project idx csv safetensors events hosts image}
jobs=${NETLOOM_FUZZ_BUILD_JOBS:-2}

launcher=""
command -v ccache >/dev/null 2>&1 && launcher="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DNETLOOM_FUZZ=ON -DNETLOOM_BUILD_TESTS=OFF -DNETLOOM_BUILD_IDE=OFF -DNETLOOM_CUDA=OFF $launcher >/dev/null
targets="fuzz_seeds"
for h in $harnesses; do targets="$targets fuzz_$h"; done
# shellcheck disable=SC2086
cmake --build "$build" --parallel "$jobs" --target $targets
"$build/tests/fuzz/fuzz_seeds" "$root" "${NETLOOM_FASHION_DIR:-/usr/share/datasets/fashion-mnist}" \
  "$build/seeds" >/dev/null

# The project harness meets text format: its dictionary holds the schema's field
# names, the ops' names and numbers at the edges of the integer types.
dict="$build/project.dict"
{
  sed -n 's/^ *\(repeated \|optional \|map<[^>]*> \)\{0,1\}[A-Za-z0-9_.]* \([a-z_0-9]*\) = [0-9]*;.*/"\2"/p' \
    "$root/engine/proto/project.proto"
  grep -oh 'op: "[A-Za-z0-9]*"' "$root"/projects/*.nlproj | sed 's/^op: //'
  printf '"%s"\n' 2147483647 2147483648 4294967295 4294967296 9223372036854775807 \
    99999999999999999999 -1 -2147483648 1e308 nan inf -inf ":" "{" "}" "[" "]" 'attrs {' 'value {'
} | sort -u >"$dict"

export ASAN_OPTIONS="include=$root/tests/sanitize/asan.options"
export UBSAN_OPTIONS="include=$root/tests/sanitize/ubsan.options"
status=0
printf '%-12s %12s %8s %8s  %s\n' harness executions corpus findings files
for h in $harnesses; do
  corpus="$build/corpus/$h" findings="$build/findings/$h" log="$build/logs/$h.log"
  mkdir -p "$corpus" "$findings" "$build/logs"
  # -rss_limit_mb: an input that makes a reader take more than 2 GiB is a finding.
  extra=""
  [ "$h" = project ] && extra="-dict=$dict"
  # libFuzzer stops at the first finding. NETLOOM_FUZZ_KEEP_GOING=1 runs it forked
  # past findings instead, so a known one does not hide the others; at the cost of
  # several times fewer executions.
  [ -n "${NETLOOM_FUZZ_KEEP_GOING:-}" ] &&
    extra="$extra -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1"
  # shellcheck disable=SC2086
  "$build/tests/fuzz/fuzz_$h" $extra -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "$build/seeds/$h" \
    >"$log" 2>&1 || true
  # The final stats, or in forked runs the last progress line's count.
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p; s/^#\([0-9]*\):.*/\1/p' "$log" |
    tail -n 1)
  files=$(find "$findings" -type f | wc -l)
  [ "$files" -eq 0 ] || status=1
  printf '%-12s %12s %8s %8s  %s\n' "$h" "${execs:-?}" "$(find "$corpus" -type f | wc -l)" \
    "$files" "$(find "$findings" -type f -printf '%f ' | cut -c1-60)"
done
exit $status
