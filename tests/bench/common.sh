# Shared by the bench scripts; source it after setting $root to the repository root and
# defining usage(). It defines the paths below and these functions:
#   bench_whole_numbers V...          usage error unless every V is a whole number
#   bench_need_train                  exit 2 unless netloom-train is built
#   bench_need_torch                  exit 2 unless $bench_py imports torch and numpy
#   bench_compare NETLOOM.json TORCH.out
#                                     prints the NetLoom/PyTorch comparison table
#   bench_exec_qt NAME ARGS...        runs the Qt benchmark program build/tests/bench/NAME
#                                     offscreen (unless QT_QPA_PLATFORM says otherwise)
# Not meant to be run by itself.

bench_dir="$root/tests/bench"
bench_train="${NETLOOM_TRAIN:-$root/build/engine/netloom-train}"
# Debian's interpreter: python3-torch and python3-numpy are installed for it, and the
# python3 on PATH may be another one.
bench_py=/usr/bin/python3

bench_whole_numbers() {
  local v
  for v in "$@"; do
    [[ "$v" =~ ^[0-9]+$ ]] || { echo "'$v' is not a whole number" >&2; usage; }
  done
}

bench_exec_qt() {
  local exe="$root/build/tests/bench/$1"
  shift
  if [[ ! -x "$exe" ]]; then
    echo "$exe is missing: run ./scripts/setup.sh build first" >&2
    exit 2
  fi
  export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
  exec "$exe" "$@"
}

bench_need_train() {
  if [[ ! -x "$bench_train" ]]; then
    echo "$bench_train is missing: run ./scripts/setup.sh first" >&2
    exit 2
  fi
}

bench_need_torch() {
  if [[ ! -x "$bench_py" ]] || ! "$bench_py" -c 'import torch, numpy' 2>/dev/null; then
    echo "$bench_py cannot import torch and numpy: install Debian's python3-torch and python3-numpy" >&2
    exit 2
  fi
}

# $1: netloom-train --summary-json's file; $2: the PyTorch script's stdout, whose last line
# is its JSON summary.
bench_compare() {
  "$bench_py" -c '
import json, sys
nl = json.load(open(sys.argv[1]))
# The last line: anything PyTorch itself printed before the summary is not JSON.
pt = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])

def acc(s):
    a = s.get("test_accuracy")
    return "n/a" if a is None else "%.2f%%" % (100 * a)

print("%-10s %13s %12s %10s %8s" % ("framework", "test acc", "samples/s", "wall s", "steps"))
for name, s in (("NetLoom", nl), ("PyTorch", pt)):
    print("%-10s %13s %12.0f %10.2f %8d"
          % (name, acc(s), s["samples_per_sec"], s["wall_seconds"], s["steps"]))
if pt["samples_per_sec"] > 0:
    print("samples/s ratio NetLoom/PyTorch: %.2fx" % (nl["samples_per_sec"] / pt["samples_per_sec"]))
print("PyTorch %s, %d thread(s), BLAS: %s"
      % (pt.get("torch_version", "?"), pt.get("threads", 0), pt.get("blas", "?")))
print("train loss: NetLoom %.4f, PyTorch %.4f" % (nl["train_loss"], pt["train_loss"]))
print("NetLoom compile: %.1f ms, parameters: %d (PyTorch %d)"
      % (nl["compile_ms"], nl["parameters"], pt["parameters"]))
arena, naive = nl["arena_bytes"], nl["naive_bytes"]
saved = "" if naive <= 0 else " (%.1f%% of naive)" % (100.0 * arena / naive)
print("NetLoom activation memory: arena %d bytes vs naive %d bytes%s" % (arena, naive, saved))
' "$1" "$2"
}
