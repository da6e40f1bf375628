#!/usr/bin/env bash
# GPU throughput at batch 128: the MLP, LeNet, Conv+BN and ResNet on Fashion-MNIST, trained by
# netloom-train on cuda:0 with the step replayed as a CUDA Graph and with every kernel
# launched, and by PyTorch on the same GPU where it can use one. Prints samples/s side
# by side, NetLoom/PyTorch ratios and NetLoom's host overhead per step (the time the
# host spends feeding and issuing a step, as a share of the step).
# NetLoom checks every step for non-finite values by default (on a GPU, a reduction
# over the gradients on the device); PyTorch checks nothing. So the NetLoom runs set
# train.check_finite_every -1, as PyTorch runs, and the default is shown beside them.
# Both sides leave their first 20 steps out (netloom-train --warmup-steps 20; PyTorch
# also runs every batch shape once before timing, so cuDNN's autotuning is not timed).
# PyTorch keeps its data and permutation on the GPU, uses Adam(fused=True), and times its
# steps with CUDA events and one synchronisation (cnn_torch.py train_gpu); NetLoom's
# window waits for the device every 16 steps, which costs it, not PyTorch. TF32 is off
# on both sides. Samples/s are after the warm-up.
# A benchmark, not a test: exits 0 whatever the numbers; 2 when there is no GPU or no
# netloom-train.
#   tests/bench/bench_gpu.sh [--build DIR] [--epochs N] [--train-limit N] [--models "mlp lenet convbn resnet"]
set -euo pipefail

usage() {
  echo "usage: $0 [--build DIR] [--epochs N] [--train-limit N] [--models LIST]" >&2
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"

build="$root/build"
epochs=1
limit=0
models="mlp lenet convbn resnet"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) [[ $# -ge 2 ]] || usage; build="$2"; shift 2 ;;
    --epochs) [[ $# -ge 2 ]] || usage; epochs="$2"; shift 2 ;;
    --train-limit) [[ $# -ge 2 ]] || usage; limit="$2"; shift 2 ;;
    --models) [[ $# -ge 2 ]] || usage; models="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done
bench_whole_numbers "$epochs" "$limit"
bench_train="$build/engine/netloom-train"
bench_need_train
if ! "$bench_train" --list-devices | grep -q '^cuda:0: '; then
  echo "no GPU for netloom-train:" >&2
  "$bench_train" --list-devices >&2
  exit 2
fi
echo "command: tests/bench/bench_gpu.sh $*"
"$bench_train" --list-devices

torch_gpu=0
if "$bench_py" -c 'import torch, numpy, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    2>/dev/null; then
  torch_gpu=1
else
  echo "PyTorch with CUDA is not available to $bench_py: NetLoom's figures only" >&2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
limit_args=()
[[ "$limit" -gt 0 ]] && limit_args=(--train-limit "$limit")
batch=128

printf '%-8s %10s %12s %11s %10s %10s %11s %10s %7s %7s %9s %9s %8s %8s %10s\n' model \
  "graph s/s" "launches s/s" "checked s/s" "NL bf16" "PT eager" "PT compiled" "PT bf16" "NL/PT" \
  "NL/PTc" "bf16 NL/PT" "host/step" "NL ms" "PT ms" "bf16 arena"
for m in $models; do
  checked="$tmp/fashion-$m-checked.nlproj"
  # NETLOOM_FASHION_DIR points the runs at a copy of Fashion-MNIST elsewhere than
  # Debian's /usr/share/datasets/fashion-mnist.
  sed "s|/usr/share/datasets/fashion-mnist|${NETLOOM_FASHION_DIR:-/usr/share/datasets/fashion-mnist}|" \
    "$root/projects/fashion-$m.nlproj" > "$checked"
  project="$tmp/fashion-$m.nlproj"
  sed 's/^train {$/train {\n  check_finite_every: -1/' "$checked" > "$project"
  grep -q 'check_finite_every: -1' "$project" || { echo "$m: no train block to edit" >&2; exit 2; }
  run_nl() {  # $1: project, $2: summary file, then extra flags
    local file="$1" out="$2"
    shift 2
    "$bench_train" "$file" --devices cuda:0 --epochs "$epochs" --batch-size "$batch" \
      "${limit_args[@]}" --warmup-steps 20 --quiet --checkpoint-dir "$tmp/ck" \
      --summary-json "$out" "$@" > "$tmp/$m.log" 2>&1 \
      || { echo "$m: netloom-train failed:" >&2; cat "$tmp/$m.log" >&2; }
  }
  run_nl "$project" "$tmp/$m.graph.json"
  run_nl "$project" "$tmp/$m.launch.json" --no-cuda-graphs
  run_nl "$checked" "$tmp/$m.checked.json"
  run_nl "$project" "$tmp/$m.bf16.json" --precision bf16
  if [[ "$torch_gpu" -eq 1 ]]; then
    for variant in eager compiled bf16; do
      flags=()
      [[ "$variant" == compiled ]] && flags=(--compile)
      [[ "$variant" == bf16 ]] && flags=(--bf16)
      "$bench_py" "$bench_dir/cnn_torch.py" --project "$project" --epochs "$epochs" \
        --batch-size "$batch" --device cuda --warmup-steps 20 "${limit_args[@]}" \
        "${flags[@]}" > "$tmp/$m.torch-$variant.json" 2> "$tmp/$m.torch-$variant.err" \
        || { echo "$m: PyTorch $variant failed:" >&2; tail -n 5 "$tmp/$m.torch-$variant.err" >&2; }
    done
  fi
  "$bench_py" - "$m" "$tmp/$m" "$torch_gpu" "$batch" <<'PY'
import json, os, sys
model, stem, torch_gpu, batch = sys.argv[1], sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
def load(name):
    try:
        path = stem + "." + name + ".json"
        if os.path.getsize(path) > 0:
            return json.loads(open(path).read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return None
g, l, c, b = load("graph"), load("launch"), load("checked"), load("bf16")
t, tc, tb = (load("torch-" + v) if torch_gpu else None for v in ("eager", "compiled", "bf16"))
def steady(s):
    return s.get("steady_samples_per_sec") or s["samples_per_sec"]
def rate(s, ours=True):
    if not ours and not torch_gpu:
        return "no torch"
    return "%.0f" % steady(s) if s else "failed"
def ratio(a, b):
    return "%.2f" % (steady(a) / steady(b)) if a and b and steady(b) else "-"
host = "-"
if g and g.get("train_seconds"):
    host = "%.1f%%" % (100.0 * g["issue_seconds"] / g["train_seconds"])
def step_ms(s):  # a step of the full batch, after the warm-up
    return "%.2f" % (1000.0 * batch / steady(s)) if s and steady(s) else "-"
def arena(a, b):  # NetLoom's training arena in bf16 over fp32's
    return "%.2fx" % (a["arena_bytes"] / b["arena_bytes"]) if a and b and b.get("arena_bytes") else "-"
print("%-8s %10s %12s %11s %10s %10s %11s %10s %7s %7s %9s %9s %8s %8s %10s" % (
    model, rate(g), rate(l), rate(c), rate(b), rate(t, False), rate(tc, False), rate(tb, False),
    ratio(g, t), ratio(g, tc), ratio(b, tb), host, step_ms(g), step_ms(t), arena(b, g)))
PY
done
