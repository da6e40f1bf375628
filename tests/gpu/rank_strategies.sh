#!/usr/bin/env bash
# The parallel strategies trained by processes, one rank per device, against one rank
# at the same global batch: the MLP of projects/fashion-mlp.nlproj, 20 steps, as data
# parallelism, tensor parallelism, a pipeline of 8 micro-batches, ZeRO-1 and ZeRO-2.
# Prints each strategy's largest difference in the final weights, relative to the
# tensor's largest weight, and fails past the bar (1e-4: a GPU's sums may go in
# another order than one rank's).
#   tests/gpu/rank_strategies.sh BUILD_DIR DEVICE RANKS [OUT]
# DEVICE: cuda (rank r on GPU r, over NCCL) or cpu (over Gloo, to check the check).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:?build dir}"
device="${2:?cuda or cpu}"
ranks="${3:?ranks}"
out="${4:-$(mktemp -d)}"
mkdir -p "$out"
train="$build/engine/netloom-train"
project="$root/projects/fashion-mlp.nlproj"
common=(--devices "$device" --seed 7 --max-steps 20 --train-limit 2560 --test-limit 256 --quiet)
[[ "$device" == cpu ]] && common+=(--threads 1)

# Largest |a − b| / max |b| over each tensor of two safetensors files, the worst tensor.
compare() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, struct, sys
def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__": continue
        a, b = t["data_offsets"]
        out[name] = struct.unpack("<%df" % ((b - a) // 4), data[a:b])
    return out
got, want = load(sys.argv[1]), load(sys.argv[2])
if set(got) != set(want):
    print("tensors differ: %s" % sorted(set(got) ^ set(want))); sys.exit(1)
worst, at = 0.0, ""
for name in want:
    scale = max(max(abs(x) for x in want[name]), 1e-30)
    d = max(abs(x - y) for x, y in zip(got[name], want[name])) / scale
    if d > worst: worst, at = d, name
print("%.2e (%s)" % (worst, at))
sys.exit(0 if worst <= 1e-4 else 1)
PY
}

run() {  # name, ranks, batch, flags...
  local name="$1" n="$2" batch="$3"
  shift 3
  "$train" "$project" "${common[@]}" --ranks "$n" --batch-size "$batch" \
    --save-weights "$out/$name.safetensors" "$@" > "$out/$name.log" 2>&1
}

status=0
global=64
per=$((global / ranks))
if ! run one 1 "$global"; then
  echo "one rank failed:"; tail -n 20 "$out/one.log"; exit 1
fi
for strategy in "data" "tensor" "pipeline" "zero 1" "zero 2"; do
  case "$strategy" in
    data) flags=(); batch=$per ;;
    tensor) flags=(--tensor-parallel "$ranks"); batch=$per ;;  # the batch split as S(0)
    pipeline) flags=(--pipeline-stages "$ranks" --micro-batches 8); batch=$global ;;
    "zero 1") flags=(--zero 1); batch=$per ;;
    "zero 2") flags=(--zero 2); batch=$per ;;
  esac
  name="${strategy// /}"
  if ! run "$name" "$ranks" "$batch" "${flags[@]}"; then
    echo "$strategy, $ranks ranks on $device: failed"
    grep -E "rank|error|Error" "$out/$name.log" | tail -n 8
    status=1
    continue
  fi
  if ! diff=$(compare "$out/$name.safetensors" "$out/one.safetensors"); then status=1; fi
  echo "$strategy, $ranks ranks on $device: weights against one rank $diff"
done
exit $status
