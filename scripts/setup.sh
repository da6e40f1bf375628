#!/usr/bin/env bash
# Sets up a Debian 12 machine for NetLoom and runs it.
#   scripts/setup.sh run    install what is missing, build, train the example MLP
#   scripts/setup.sh test   install what is missing, build, run the whole test suite
#   scripts/setup.sh build  install what is missing, build
#   scripts/setup.sh bench  also install PyTorch, build, run the benchmarks
# Installing is skipped when every package is already present.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
mode=${1:-run}
build=${NETLOOM_BUILD_DIR:-build}

# A training host (`node`) needs only the engine: no Qt, no GUI packages.
packages=(
  g++ cmake ninja-build pkg-config zlib1g-dev nlohmann-json3-dev
  protobuf-compiler libprotobuf-dev
  libdnnl-dev ocl-icd-opencl-dev libgloo-dev libstb-dev libcli11-dev
)
cmake_options=()
if [ "$mode" = node ]; then
  build=${NETLOOM_BUILD_DIR:-build-node}
  cmake_options=(-DNETLOOM_BUILD_IDE=OFF -DNETLOOM_BUILD_TESTS=OFF -DNETLOOM_BUILD_REMOTE=OFF)
else
  packages+=(
    qt6-base-dev libgraphviz-dev libqcustomplot-dev qt6-svg-dev fonts-dejavu-core
    libssh-dev libssl-dev openssh-server openssh-client
    dataset-fashion-mnist fortunes libonnx-dev
  )
fi

# OpenBLAS, so that PyTorch's matrix products do not fall back to the reference BLAS:
# the benchmarks compare NetLoom with PyTorch at its best.
[ "$mode" = bench ] && packages+=(python3-torch python3-numpy libopenblas0-pthread libopenblas0-openmp)
# The Slurm tests run a cluster of their own (munged, slurmctld, slurmd on 127.0.0.1).
[ "$mode" = test ] && packages+=(slurm-wlm munge)
# The function-length check (scripts/long_functions.sh) reads the code with ctags.
[ "$mode" = test ] && packages+=(universal-ctags)
# The interchange tests check exports against PyTorch and the ONNX checker.
[ "$mode" = test ] && packages+=(python3-torch python3-onnx python3-numpy python3-pil python3-pyflakes)
# ... and run the ONNX exports through onnxruntime (npm's onnxruntime-node, below). A
# node that brings its own npm (NodeSource's) conflicts with Debian's npm package.
if [ "$mode" = test ]; then
  packages+=(nodejs)
  command -v npm >/dev/null 2>&1 || packages+=(npm)
fi
[ "$mode" = screenshot ] && packages+=(xvfb xauth)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "netloom: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# CUDA's compiler, where the toolkit is installed off PATH: the GPU backend is always
# compiled where it can be (kernels/CMakeLists.txt), and the choice is kept in the cache.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  cmake_options+=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cmake_options[@]}"
fi
cmake --build "$build" --parallel "$(nproc)"

case "$mode" in
  build) ;;
  node)
    echo "netloom: $here/$build/engine/netloom-train is built; give its path as the host's netloom-train"
    "$build/engine/netloom-train" --version
    ;;
  run)
    shift || true
    # With a display, the IDE on the LeNet project; without one, headless training.
    if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ $# -eq 0 ]; then
      exec "$build/gui/netloom" projects/fashion-lenet.nlproj
    fi
    exec "$build/engine/netloom-train" projects/fashion-mlp.nlproj "$@"
    ;;
  screenshot)
    # The README's screenshots: the real IDE under Xvfb, mid-training on a copy of the
    # LeNet project (so its runs/ folder stays out of the repository), at 1600x1000
    # and on a 1366x768 laptop screen; with settings of its own, so a layout saved by
    # this machine's user does not show.
    out=${2:-resources/screenshots/netloom-training.png}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # The laptop screen shows a run finished: one epoch of LeNet.
    cp projects/fashion-lenet.nlproj "$tmp/"
    sed 's/^  epochs: .*/  epochs: 1/' projects/fashion-lenet.nlproj >"$tmp/fashion-lenet-1.nlproj"
    for size in 1600x1000 1366x768; do
      file=$out project=fashion-lenet steps=400
      [ "$size" = 1600x1000 ] || file=${out%.png}-$size.png project=fashion-lenet-1 steps=0
      rm -rf "$tmp/runs" "$tmp/config"
      XDG_CONFIG_HOME="$tmp/config" xvfb-run -a -s "-screen 0 ${size}x24" "$build/gui/netloom" \
        --window-size "$size" --run --screenshot "$here/$file" --screenshot-steps "$steps" \
        "$tmp/$project.nlproj"
      echo "netloom: wrote $file"
    done
    ;;
  test)
    # onnxruntime for the ort_parity suite, into the cache it reads (once). Should npm
    # fail, that suite skips, saying so, and the check of skips below fails the run.
    tests/interop/ort_parity.sh --install || true
    # A skipped suite says why; one skipped for what this script installed fails the run.
    status=0
    ctest --test-dir "$build" --output-on-failure --parallel "$(nproc)" --timeout 900 \
      --output-junit ctest-junit.xml || status=$?
    python3 scripts/skipped_tests.py "$build/ctest-junit.xml" || status=1
    exit "$status"
    ;;
  bench)
    shift || true
    exec tests/bench/bench_mlp.sh "$@"
    ;;
  *)
    echo "usage: scripts/setup.sh [run|test|build|bench|screenshot|node]" >&2
    exit 2
    ;;
esac
