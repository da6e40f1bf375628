#!/usr/bin/env bash
# Trains each convolutional Fashion-MNIST project with its own full settings (all training
# data, the project's epochs, batch size, optimizer, schedule and seed) through
# netloom-train, and prints a table of test accuracy against each project's goal.
# Slow: on a 2-core machine the three runs take about an hour or more in all.
# It exits 0 once every run has finished, goals met or not; nonzero only if netloom-train
# is missing or a run fails (its row then says so; the other projects still run).
set -euo pipefail

usage() {
  cat >&2 <<EOF
usage: $0 [--threads T]
Trains projects/fashion-lenet.nlproj, fashion-convbn.nlproj and fashion-resnet.nlproj
with their full settings (all 60 000 training samples, the project's epochs) and prints
each one's test accuracy after the last epoch against its goal (LeNet 90%, Conv+BN 92%,
ResNet 93%) and the wall time. Slow: on 2 cores LeNet takes minutes, Conv+BN and
ResNet tens of minutes each (about an hour or more in all), so run it on an otherwise
idle machine.
netloom-train's per-epoch lines go to stderr as it runs; the table goes to stdout.
  --threads T  CPU threads for netloom-train (default: nproc)
EOF
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"

threads="$(nproc)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) [[ $# -ge 2 ]] || usage; threads="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done
bench_whole_numbers "$threads"
[[ "$threads" -gt 0 ]] || { echo "--threads must be at least 1" >&2; usage; }
bench_need_train
if [[ ! -x "$bench_py" ]]; then
  echo "$bench_py is missing: it reads the runs' JSON summaries" >&2
  exit 2
fi
export OMP_NUM_THREADS="$threads"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# project file, goal (test accuracy)
runs=(
  "fashion-lenet.nlproj 0.90"
  "fashion-convbn.nlproj 0.92"
  "fashion-resnet.nlproj 0.93"
)

failed=0
rows="$tmp/rows"
: > "$rows"
for r in "${runs[@]}"; do
  read -r name goal <<< "$r"
  echo "training $name with its own settings, $threads thread(s)..." >&2
  json="$tmp/${name%.nlproj}.json"
  rc=0
  start=$SECONDS
  "$bench_train" "$root/projects/$name" --threads "$threads" --summary-json "$json" || rc=$?
  if [[ "$rc" -ne 0 || ! -s "$json" ]]; then
    failed=1
    json=""
  fi
  # name, goal, exit status, shell-timed seconds (for a failed run), summary file or "".
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$goal" "$rc" "$((SECONDS - start))" "$json" >> "$rows"
done

"$bench_py" -c '
import json, sys
print("%-24s %7s %10s %7s %9s %10s" % ("project", "epochs", "test acc", "goal", "result", "wall s"))
for line in open(sys.argv[1]):
    name, goal, rc, secs, path = line.rstrip("\n").split("\t")
    goal = float(goal)
    if not path:
        print("%-24s %7s %10s %6.0f%% %9s %10.0f"
              % (name, "-", "-", 100 * goal, "FAILED(%s)" % rc, float(secs)))
        continue
    s = json.load(open(path))
    a = s.get("test_accuracy")
    if a is None:
        acc, result = "n/a", "n/a"
    else:
        acc, result = "%.2f%%" % (100 * a), ("met" if a >= goal else "not met")
    print("%-24s %7d %10s %6.0f%% %9s %10.1f"
          % (name, s["epochs"], acc, 100 * goal, result, s["wall_seconds"]))
' "$rows"
exit "$failed"
