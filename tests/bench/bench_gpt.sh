#!/usr/bin/env bash
# Trains projects/fortunes-gpt.nlproj (a character-level GPT) with netloom-train and with
# its PyTorch export (train.py: the same model, windows in the same seeded order, AdamW
# and its schedule, the same steps and seed), each on 1 thread and on --threads, and
# prints training tokens/s and the validation loss each reached, each framework's best,
# then NetLoom's generation speed with the KV cache. PyTorch 1.13 has no
# F.scaled_dot_product_attention: its attention is the written-out math of model.py.
# --device cuda trains both on cuda:0 instead (one host thread; PyTorch's attention is
# F.scaled_dot_product_attention where its version has it), for tests/gpu/device_check.sh.
# A benchmark, not a test: it exits 0 whatever the numbers, nonzero only if a tool is
# missing or a run crashes.
set -euo pipefail

usage() {
  echo "usage: $0 [--steps N] [--threads MAX] [--device cpu|cuda] [--build DIR]" >&2
  echo "  (steps: default the project's whole run)" >&2
  exit 2
}

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=common.sh
source "$root/tests/bench/common.sh"
project="$root/projects/fortunes-gpt.nlproj"

steps=0
threads="$(nproc)"
device=cpu
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) [[ $# -ge 2 ]] || usage; steps="$2"; shift 2 ;;
    --threads) [[ $# -ge 2 ]] || usage; threads="$2"; shift 2 ;;
    --device) [[ $# -ge 2 ]] || usage; device="$2"; shift 2 ;;
    --build) [[ $# -ge 2 ]] || usage; bench_train="$2/engine/netloom-train"; shift 2 ;;
    -h|--help) usage ;;
    *) echo "unknown option '$1'" >&2; usage ;;
  esac
done
bench_whole_numbers "$steps" "$threads"
[[ "$device" == cpu || "$device" == cuda ]] || usage
bench_need_train
bench_need_torch

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bench_train" --export-pytorch "$tmp/pt" "$project" >/dev/null
limit=()
[[ "$steps" -gt 0 ]] && limit=(--max-steps "$steps")
tokens=$(sed -n 's/.*context: \([0-9]*\).*/\1/p' "$project")
batch=$(sed -n 's/^ *batch_size: \([0-9]*\).*/\1/p' "$project")

counts=(1)
[[ "$threads" -gt 1 && "$device" == cpu ]] && counts+=("$threads")
nl_device=()
pt_device=()
if [[ "$device" == cuda ]]; then
  nl_device=(--devices cuda:0)
  pt_device=(--device cuda)
fi
printf '%-10s %7s %12s %10s %10s\n' framework threads "tokens/s" "val loss" "steps"
for t in "${counts[@]}"; do
  OMP_NUM_THREADS="$t" "$bench_train" "$project" --threads "$t" "${limit[@]}" "${nl_device[@]}" --quiet \
    --summary-json "$tmp/nl.$t.json" --save-weights "$tmp/nl.safetensors"
  "$bench_py" - "$tmp/nl.$t.json" "$t" "$batch" "$tokens" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
t, batch, tokens = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rate = s["steps"] * batch * tokens / s["train_seconds"]
print(f"{'NetLoom':<10} {t:>7} {rate:>12.0f} {s['test_loss']:>10.4f} {s['steps']:>10}")
PY
  (cd "$tmp/pt" && bench_torch "$t" train.py "${limit[@]}" "${pt_device[@]}" >"$tmp/pt.$t.log")
  "$bench_py" - "$tmp/pt.$t.log" "$t" "$batch" "$tokens" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
t, batch, tokens = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
steps, seconds = re.search(r"trained (\d+) steps in ([\d.]+) s", text).groups()
val = re.findall(r"\| val loss ([\d.]+)", text)[-1]
rate = int(steps) * batch * tokens / float(seconds)
print(f"{'PyTorch':<10} {t:>7} {rate:>12.0f} {float(val):>10.4f} {int(steps):>10}")
PY
done

[[ "$device" == cpu ]] || exit 0
echo
start=$(date +%s.%N)
"$bench_train" "$project" --generate "A " --from "$tmp/nl.safetensors" --max-tokens 100 \
  --seed 1 --threads 1 >"$tmp/gen.txt"
end=$(date +%s.%N)
"$bench_py" - "$start" "$end" "$tmp/gen.txt" <<'PY'
import sys
start, end, text = float(sys.argv[1]), float(sys.argv[2]), open(sys.argv[3], encoding="utf-8").read()
print(f"generation with the KV cache, 1 thread: 100 tokens in {end - start:.2f} s "
      f"({100 / (end - start):.0f} tokens/s, compile and load included)")
print("sample:", text.strip().replace("\n", " / ")[:120])
PY
