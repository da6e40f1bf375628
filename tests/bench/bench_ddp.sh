#!/usr/bin/env bash
# Data parallelism on this computer's cores: for the MLP, LeNet and Conv+BN projects,
# the same steps at the same global batch trained
#   1x1  one rank, one thread            (the baseline)
#   1x2  one rank, two threads
#   2x1  two ranks of one thread each    (--ranks 2, half the batch per rank)
#   2x1s the same with small gradient buckets, so their sums overlap the backward pass
#   2x1t two ranks that are threads of one process, summing in shared memory
#        (--thread-ranks 2, half the batch per rank)
# and prints samples/s, the scaling efficiency against 1x1 (samples/s over twice 1x1's),
# the seconds the gradient sums took on the communication thread and the share of them
# the backward pass hid. Then, on paper, ResNet-50's scaling to 8 and 32 GPUs from its
# compiled step's measured compute (ddp_projection.cpp; --no-projection skips it;
# --projection-only runs only it, with the arguments after -- passed on). A benchmark, not a test: it exits 0 whatever the numbers,
# nonzero only if a tool is missing or a run fails.
set -euo pipefail

usage() {
  echo "usage: $0 [--model mlp|lenet|convbn|all] [--steps N] [--train-limit N] [--small-mb M]" >&2
  echo "       [--no-projection | --projection-only [-- PROJECTION ARGS]]" >&2
  echo "  --small-mb  the bucket size of the 2x1s rows, in MiB (default 0.05)" >&2
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"

model=all
steps=300
limit=20000
small=0.05
projection=yes
projection_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-projection) projection=no; shift ;;
    --projection-only) projection=only; shift ;;
    --) shift; projection_args=("$@"); break ;;
    --model) [[ $# -ge 2 ]] || usage; model="$2"; shift 2 ;;
    --steps) [[ $# -ge 2 ]] || usage; steps="$2"; shift 2 ;;
    --train-limit) [[ $# -ge 2 ]] || usage; limit="$2"; shift 2 ;;
    --small-mb) [[ $# -ge 2 ]] || usage; small="$2"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done
case "$model" in
  mlp|lenet|convbn) models=("$model") ;;
  all) models=(mlp lenet convbn) ;;
  *) echo "unknown model '$model'" >&2; usage ;;
esac
bench_whole_numbers "$steps" "$limit"
[[ "$small" =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "'$small' is not a size in MiB" >&2; usage; }
projector="${NETLOOM_BENCH_BIN:-$root/build/tests/bench}/bench_ddp_projection"
if [[ "$projection" != no && ! -x "$projector" ]]; then
  echo "$projector is missing: run ./scripts/setup.sh build first" >&2
  exit 2
fi
if [[ "$projection" == only ]]; then
  exec "$projector" "${projection_args[@]}"
fi
bench_need_train
if [[ "$(nproc)" -lt 2 ]]; then
  echo "this computer has $(nproc) core: two ranks need two" >&2
  exit 2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

printf '%-7s %-5s %6s %12s %11s %10s %8s\n' model run batch samples/s efficiency comm_s hidden
for m in "${models[@]}"; do
  project="$root/projects/fashion-$m.nlproj"
  batch="$(sed -n 's/^ *batch_size: *\([0-9]*\).*/\1/p' "$project" | head -1)"
  half=$((batch / 2))
  # The same project with small buckets for the 2x1s rows.
  smallp="$tmp/$m-small.nlproj"
  sed "s/^train {/train {\n  distributed { first_bucket_mb: $small bucket_mb: $small }/" \
    "$project" >"$smallp"
  base=0
  for run in 1x1 1x2 2x1 2x1s 2x1t; do
    args=(--max-steps "$steps" --train-limit "$limit" --test-limit 1 --quiet
          --checkpoint-dir "$tmp/ck" --summary-json "$tmp/$m-$run.json")
    p="$project"
    case "$run" in
      1x1) args+=(--threads 1 --batch-size "$batch"); per="$batch" ;;
      1x2) args+=(--threads 2 --batch-size "$batch"); per="$batch" ;;
      2x1) args+=(--ranks 2 --threads 1 --batch-size "$half" --rank-logs "$tmp/logs"); per="$half" ;;
      2x1s) p="$smallp"
            args+=(--ranks 2 --threads 1 --batch-size "$half" --rank-logs "$tmp/logs"); per="$half" ;;
      2x1t) args+=(--thread-ranks 2 --threads 1 --batch-size "$half"); per="$half" ;;
    esac
    "$bench_train" "$p" "${args[@]}"
    "$bench_py" - "$tmp/$m-$run.json" "$m" "$run" "$per" "$base" >"$tmp/row" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
model, run, per, base = sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
sps = s["samples_per_sec"]
ranks = s.get("ranks", 1)
threads = 2 if run != "1x1" else 1
eff = f"{sps / (threads * base):.0%}" if base > 0 else "-"
comm = s.get("comm_seconds")
waited = s.get("comm_waited_seconds", 0)
hidden = f"{max(0.0, comm - waited) / comm:.0%}" if comm else "-"
comm_text = f"{comm:.3f}" if comm is not None else "-"
print(f"{model:<7} {run:<5} {per:>6} {sps:>12.0f} {eff:>11} {comm_text:>10} {hidden:>8}")
print(sps)
EOF
    head -1 "$tmp/row"
    [[ "$run" == 1x1 ]] && base="$(tail -1 "$tmp/row")"
  done
done
echo "batch: per rank (the global batch is the same in every row); efficiency: samples/s over"
echo "the 1x1 row's times the cores used; comm_s: gradient sums on rank 0's communication"
echo "thread (2x1t: on rank 0's own thread, in shared memory); hidden: the share of them the"
echo "backward pass overlapped"
if [[ "$projection" == yes ]]; then
  echo
  "$projector" "${projection_args[@]}"
fi
