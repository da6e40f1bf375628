#!/usr/bin/env bash
# Runs NetLoom's ONNX exports (every example project and a model of every exported
# op, BatchNorm folded and not) with onnxruntime, through npm's onnxruntime-node, and
# compares its outputs with NetLoom's on the same samples. CTest runs it (ort_parity);
# it installs nothing itself: `--install` puts onnxruntime-node in the cache once, as
# scripts/setup.sh test does. Where node, npm or the package is missing it skips,
# saying why, with exit status 77 (CTest's SKIP_RETURN_CODE).
#   usage: tests/interop/ort_parity.sh [BUILD_DIR]      (default: build-dev)
#          tests/interop/ort_parity.sh --install
#   NETLOOM_ORT_CACHE: where onnxruntime-node is installed (default ~/.cache/netloom/ort-node)
#   NETLOOM_ORT_TOLERANCE: the largest max abs difference accepted (default 1e-4)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=1.30.0
cache=${NETLOOM_ORT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/netloom/ort-node}
skip() {
  echo "ort_parity: SKIP: $*"
  exit 77
}
installed() {
  [ -f "$cache/node_modules/onnxruntime-node/package.json" ] &&
    [ "$(cd "$cache" && node -p "require('onnxruntime-node/package.json').version")" = "$version" ]
}
command -v node >/dev/null || skip "node is missing (Debian's nodejs)"
command -v npm >/dev/null || skip "npm is missing (Debian's npm)"

if [ "${1:-}" = --install ]; then
  installed && exit 0
  mkdir -p "$cache" || exit 1
  # The package's post-install fetches CUDA libraries unless told to skip; the CPU
  # runtime ships in the package itself.
  [ -f "$cache/package.json" ] || echo '{"private": true}' >"$cache/package.json"
  echo "ort_parity: installing onnxruntime-node@$version in $cache"
  if ! (cd "$cache" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund \
    "onnxruntime-node@$version") >"$cache/install.log" 2>&1; then
    echo "ort_parity: npm install onnxruntime-node@$version failed (see $cache/install.log)" >&2
    exit 1
  fi
  exit 0
fi

build=${1:-$root/build-dev}
tst=$build/tests/interop/tst_onnx
installed || skip "onnxruntime-node@$version is not installed in $cache" \
  "(tests/interop/ort_parity.sh --install, or scripts/setup.sh test)"
[ -x "$tst" ] || { echo "ort_parity: $tst is not built" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! NETLOOM_ONNX_PARITY_DIR=$work/cases QT_QPA_PLATFORM=offscreen "$tst" writeParityCases \
  >"$work/log" 2>&1; then
  cat "$work/log" >&2
  exit 1
fi

cat >"$work/parity.js" <<'JS'
const ort = require('onnxruntime-node');
const fs = require('fs');
const path = require('path');

function floats(file) {
  const b = fs.readFileSync(file);
  const a = new Float32Array(b.length / 4);
  for (let i = 0; i < a.length; ++i) a[i] = b.readFloatLE(4 * i);
  return a;
}

(async () => {
  const dir = process.argv[2];
  const tolerance = Number(process.argv[3]);
  let worst = 0, failed = 0;
  const models = fs.readdirSync(dir).filter((f) => f.endsWith('.onnx')).sort();
  for (const f of models) {
    const base = path.join(dir, f.slice(0, -5));
    const shape = fs.readFileSync(base + '.shape', 'utf8').trim().split(/\s+/).map(Number);
    const session = await ort.InferenceSession.create(path.join(dir, f));
    const ints = fs.existsSync(base + '.dtype') && fs.readFileSync(base + '.dtype', 'utf8').trim() === 'int32';
    const x = floats(base + '.input.bin');
    const input = ints ? new ort.Tensor('int32', Int32Array.from(x), shape) : new ort.Tensor('float32', x, shape);
    const feeds = {[session.inputNames[0]]: input};
    const got = (await session.run(feeds))[session.outputNames[0]].data;
    const want = floats(base + '.netloom.bin');
    let diff = got.length === want.length ? 0 : Infinity;
    for (let i = 0; i < want.length && diff !== Infinity; ++i)
      diff = Math.max(diff, Math.abs(got[i] - want[i]));
    worst = Math.max(worst, diff);
    const ok = diff <= tolerance;
    failed += ok ? 0 : 1;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${f}: max abs diff ${diff.toExponential(2)} over ${shape[0]} samples`);
  }
  console.log(`onnxruntime-node ${require('onnxruntime-node/package.json').version}: ` +
              `${models.length} models, ${failed} over ${tolerance}, worst ${worst.toExponential(2)}`);
  process.exit(failed ? 1 : 0);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
JS
NODE_PATH=$cache/node_modules node "$work/parity.js" "$work/cases" "${NETLOOM_ORT_TOLERANCE:-1e-4}"
