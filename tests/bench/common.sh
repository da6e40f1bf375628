# Shared by the bench scripts; source it after setting $root to the repository root and
# defining usage(). It defines the paths below and these functions:
#   bench_whole_numbers V...          usage error unless every V is a whole number
#   bench_gelu_mlp FILE               writes the MLP with GELU and Dropout to FILE
#   bench_need_train                  exit 2 unless netloom-train is built
#   bench_need_torch                  exit 2 unless $bench_py imports torch and numpy
#   bench_exec_qt NAME ARGS...        runs the Qt benchmark program build/tests/bench/NAME
#                                     offscreen (unless QT_QPA_PLATFORM says otherwise)
#   bench_thread_counts MAX           prints 1, the powers of two below MAX, and MAX
#   bench_peaks DIR COUNTS...         the GEMM peak at each thread count, into DIR/peak.jsonl
#   bench_torch THREADS ARGS...       runs $bench_py ARGS on THREADS threads, at its best
#   bench_exec_driver SCRIPT ARGS...  execs the Python driver SCRIPT (baselines.py,
#                                     precision.py) with netloom-train and $bench_py
#   bench_sweep DIR PROJECT SCRIPT PASS_PROJECT ARGS...
#                                     NetLoom and PyTorch on each of $counts threads, and
#                                     NetLoom's thread ranks on each count above 1; PyTorch
#                                     also gets the array bench_torch_extra
#   bench_sweep_table DIR TITLE       prints a sweep's side-by-side table (sweep_table.py)
# Not meant to be run by itself.

bench_dir="$root/tests/bench"
bench_train="${NETLOOM_TRAIN:-$root/build/engine/netloom-train}"
# Debian's interpreter: python3-torch and python3-numpy are installed for it, and the
# python3 on PATH may be another one.
bench_py="${NETLOOM_BENCH_PY:-/usr/bin/python3}"

# The MLP of projects/fashion-mlp.nlproj with GELU for ReLU and a Dropout (p 0.2) after
# each hidden layer, written to $1 (mlp_torch.py --activation gelu --dropout 0.2).
bench_gelu_mlp() {
  sed -e 's/op: "ReLU"/op: "GELU"/' \
    -e 's/inputs: "relu1"/inputs: "drop1"/; s/inputs: "relu2"/inputs: "drop2"/' \
    -e 's/^\(  nodes { name: "fc2" .*\)$/  nodes { name: "drop1" op: "Dropout" inputs: "relu1" attrs { key: "p" value { f: 0.2 } } }\n\1/' \
    -e 's/^\(  nodes { name: "logits" .*\)$/  nodes { name: "drop2" op: "Dropout" inputs: "relu2" attrs { key: "p" value { f: 0.2 } } }\n\1/' \
    "$root/projects/fashion-mlp.nlproj" >"$1"
}

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

bench_thread_counts() {
  local max="$1" t=2
  echo 1
  while ((t < max)); do
    echo "$t"
    t=$((t * 2))
  done
  ((max > 1)) && echo "$max"
  return 0
}

bench_peaks() {
  local dir="$1" t
  shift
  : > "$dir/peak.jsonl"
  for t in "$@"; do
    OMP_NUM_THREADS="$t" "$bench_train" --peak --threads "$t" >> "$dir/peak.jsonl"
  done
}

# PyTorch at its best: OpenBLAS (Debian's libopenblas0-pthread behind libblas.so.3) for
# its matrix products, with no CPU type or cache size forced on OpenBLAS, on THREADS
# threads of both its own pool and OpenBLAS's.
bench_torch() {
  local threads="$1"
  shift
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OMP_NUM_THREADS="$threads" \
    OPENBLAS_NUM_THREADS="$threads" "$bench_py" "$@"
}

# For each thread count T in the array $counts: netloom-train PROJECT ARGS into
# DIR/netloom.T.json, then the PyTorch SCRIPT ARGS (with --project PROJECT where
# PASS_PROJECT is "yes") into DIR/torch.T.json, both on T threads. Above one thread,
# where ARGS' --batch-size B divides by T, NetLoom also trains as T thread ranks of one
# thread each, B / T samples per rank (the same global batch of B), into
# DIR/ranks.T.json.
bench_sweep() {
  local dir="$1" project="$2" script="$3" pass="$4" t i
  shift 4
  local torch_args=("$@")
  [[ "$pass" == yes ]] && torch_args=(--project "$project" "$@")
  torch_args+=("${bench_torch_extra[@]}")  # the PyTorch side's own (its model's options)
  local args=("$@") batch_at=-1
  for ((i = 0; i + 1 < ${#args[@]}; ++i)); do
    [[ "${args[i]}" == --batch-size ]] && batch_at=$((i + 1))
  done
  for t in "${counts[@]}"; do
    echo "running netloom-train on $t thread(s)..." >&2
    OMP_NUM_THREADS="$t" "$bench_train" "$project" "$@" --threads "$t" \
      --summary-json "$dir/netloom.$t.json" --quiet
    if ((t > 1 && batch_at >= 0 && args[batch_at] % t == 0)); then
      local ranked=("${args[@]}")
      ranked[batch_at]=$((args[batch_at] / t))
      echo "running netloom-train as $t thread ranks of ${ranked[batch_at]} samples each..." >&2
      OMP_NUM_THREADS=1 "$bench_train" "$project" "${ranked[@]}" --thread-ranks "$t" \
        --threads 1 --summary-json "$dir/ranks.$t.json" --quiet
    fi
    echo "running PyTorch on $t thread(s)..." >&2
    bench_torch "$t" "$script" "${torch_args[@]}" --threads "$t" > "$dir/torch.$t.json"
  done
}

bench_torch_extra=()

bench_sweep_table() {
  "$bench_py" "$bench_dir/sweep_table.py" "$1" "$2"
}

# Runs a Python driver of the benchmarks (SCRIPT ARGS), given netloom-train and the
# interpreter with PyTorch: baselines.py, precision.py.
bench_exec_driver() {
  local script="$1"
  shift
  bench_need_train
  bench_need_torch
  exec "$bench_py" "$bench_dir/$script" --train "$bench_train" --python "$bench_py" "$@"
}
