#!/usr/bin/env bash
# Image folders against IDX: LeNet on Fashion-MNIST read three ways (the IDX files, a
# folder of PNGs decoded on the loader's threads, and the same folder decoded once
# into memory with `cache`), at the same settings; then how long listing a folder of
# 100,000 files takes. Prints samples/s, wall time and test accuracy per way.
#   tests/bench/bench_images.sh [--epochs N] [--train-limit N] [--threads T]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
usage() {
  echo "usage: tests/bench/bench_images.sh [--epochs N] [--train-limit N] [--threads T]" >&2
  exit 2
}
source "$root/tests/bench/common.sh"
epochs=1 limit=0 threads=$(nproc)
while (($#)); do
  case "$1" in
    --epochs) epochs=${2:-}; shift 2 ;;
    --train-limit) limit=${2:-}; shift 2 ;;
    --threads) threads=${2:-}; shift 2 ;;
    *) usage ;;
  esac
done
bench_whole_numbers "$epochs" "$limit" "$threads"
bench_need_train

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "writing the Fashion-MNIST folder of PNGs..."
"$root/scripts/fashion_folder.py" "$work/fashion-folder" >/dev/null
cp "$root/projects/fashion-lenet.nlproj" "$work/idx.nlproj"
cp "$root/projects/fashion-folder.nlproj" "$work/folder.nlproj"
sed 's|test: "fashion-folder/test"|test: "fashion-folder/test" cache: true|' \
  "$root/projects/fashion-folder.nlproj" >"$work/cached.nlproj"

printf '%-8s %12s %9s %9s\n' source samples/s wall_s test_acc
for way in idx folder cached; do
  "$bench_train" "$work/$way.nlproj" --epochs "$epochs" --threads "$threads" \
    --train-limit "$limit" --quiet --summary-json "$work/$way.json" >/dev/null
  "$bench_py" - "$way" "$work/$way.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[2]))
print("%-8s %12.0f %9.1f %9.4f" % (sys.argv[1], s.get("samples_per_sec", 0),
      s.get("wall_seconds", 0), s.get("test_accuracy", 0)))
PY
done

listing="${NETLOOM_BENCH_DIR:-$root/build/tests/bench}/bench_image_listing"
if [[ -x "$listing" ]]; then
  "$listing" 100000
else
  echo "$listing is missing: the listing time is left out" >&2
fi
