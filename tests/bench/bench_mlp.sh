#!/usr/bin/env bash
# Trains projects/fashion-mlp.nlproj with netloom-train and the same MLP with PyTorch, at the
# same settings, and prints accuracy, training throughput and wall time side by side.
# A benchmark, not a test: it exits 0 whatever the numbers, nonzero only if a tool is
# missing or a run crashes.
set -euo pipefail

usage() {
  echo "usage: $0 [--epochs N] [--threads T] [--train-limit N]" >&2
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
here="$root/tests/bench"
train="$root/build/engine/netloom-train"
project="$root/projects/fashion-mlp.nlproj"
# Debian's interpreter: python3-torch and python3-numpy are installed for it, and the
# python3 on PATH may be another one.
py=/usr/bin/python3

epochs=10
threads="$(nproc)"
limit=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --epochs) [[ $# -ge 2 ]] || usage; epochs="$2"; shift 2 ;;
    --threads) [[ $# -ge 2 ]] || usage; threads="$2"; shift 2 ;;
    --train-limit) [[ $# -ge 2 ]] || usage; limit="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done
for v in "$epochs" "$threads" "$limit"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "'$v' is not a whole number" >&2; usage; }
done

if [[ ! -x "$train" ]]; then
  echo "$train is missing: run ./scripts/setup.sh first" >&2
  exit 2
fi
if [[ ! -x "$py" ]] || ! "$py" -c 'import torch, numpy' 2>/dev/null; then
  echo "$py cannot import torch and numpy: install Debian's python3-torch and python3-numpy" >&2
  exit 2
fi

# Both frameworks' thread pools follow OMP_NUM_THREADS where they read it; each is also
# told the count directly.
export OMP_NUM_THREADS="$threads"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

batch=64
limit_args=()
[[ "$limit" -gt 0 ]] && limit_args=(--train-limit "$limit")

samples=all
[[ "$limit" -gt 0 ]] && samples="first $limit"
echo "Fashion-MNIST MLP: $epochs epoch(s), batch $batch, $threads thread(s)," \
  "training samples: $samples" >&2
echo "running netloom-train..." >&2
"$train" "$project" --epochs "$epochs" --threads "$threads" --batch-size "$batch" \
  "${limit_args[@]}" --summary-json "$tmp/netloom.json" --quiet
echo "running PyTorch..." >&2
"$py" "$here/mlp_torch.py" --epochs "$epochs" --threads "$threads" --batch-size "$batch" \
  "${limit_args[@]}" > "$tmp/torch.json"

"$py" -c '
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
' "$tmp/netloom.json" "$tmp/torch.json"
