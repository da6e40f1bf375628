#!/usr/bin/python3
"""Mixed precision on this computer's CPU, side by side in one run: for each model,
NetLoom in fp32 and in bf16 (--precision bf16), and PyTorch in fp32 and under
torch.autocast to bf16, each on --threads threads (default 1), the median of --runs runs after a warm-up.
Prints samples/s, bf16 over fp32 for each framework, NetLoom's activation arena in
each precision and their ratio, test accuracy, and NetLoom's bf16 over PyTorch's.
Goals (issue: real bf16 training): Conv+BN bf16 at 1.6x its fp32 samples/s or more, its
arena at 0.55x or less. A benchmark, not a test: exits 0 whatever the numbers.
Usage: precision.py --train BIN [--models mlp,convbn] [--runs 3] [--threads N] ...
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from baselines import ROOT, Bench, project_batch  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", required=True)
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--models", default="mlp,convbn")
    p.add_argument("--runs", type=int, default=3)
    # One thread by default: PyTorch's 2-thread runs here fight over the cores (its fp32
    # MLP ran 23,009 samples/s on 2 threads against 41,994 on 1), which would flatter
    # both NetLoom and PyTorch's own bf16 ratio.
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--train-limit", type=int, default=8192)
    p.add_argument("--test-limit", type=int, default=10000)
    args = p.parse_args()
    args.batch_size = 0
    return args


def median_of(runner, runs):
    results = [runner() for _ in range(runs)]
    rates = sorted(r["steady_samples_per_sec"] for r in results)
    return statistics.median(rates), rates, results[0]


def main():
    args = parse_args()
    print("Mixed precision on this CPU (%d cores, %d thread(s)): samples/s after %d warm-up "
          "steps, median of %d runs" % (os.cpu_count(), args.threads, args.warmup, args.runs))
    print("%-7s %-5s %18s %18s %7s %12s %9s" % ("model", "prec", "NetLoom", "PyTorch", "NL/PT",
                                                 "NL arena", "NL acc"))
    with tempfile.TemporaryDirectory() as folder:
        bench = Bench(args, folder)
        for model in args.models.split(","):
            project = os.path.join(ROOT, "projects", "fashion-%s.nlproj" % model)
            batch = project_batch(project)
            got = {}
            for precision in ("fp32", "bf16"):
                limit, threads = args.train_limit, args.threads
                nl = median_of(lambda: bench.netloom(
                    project, batch, limit, {"threads": threads, "precision": precision}),
                    args.runs)
                pt = median_of(lambda: bench.torch(
                    project, batch, limit, {"threads": threads, "bf16": precision == "bf16"}),
                    args.runs)
                got[precision] = (nl, pt)
                print("%-7s %-5s %18s %18s %7.2f %12.0f %9.4f" % (
                    model, precision, "%.0f (%.0f-%.0f)" % (nl[0], nl[1][0], nl[1][-1]),
                    "%.0f (%.0f-%.0f)" % (pt[0], pt[1][0], pt[1][-1]), nl[0] / pt[0],
                    nl[2]["arena_bytes"], nl[2].get("test_accuracy") or 0))
            (nl32, pt32), (nl16, pt16) = got["fp32"], got["bf16"]
            print("%-7s bf16/fp32: NetLoom %.2fx samples/s, %.2fx arena bytes; PyTorch %.2fx "
                  "samples/s" % (model, nl16[0] / nl32[0],
                                 nl16[2]["arena_bytes"] / max(1, nl32[2]["arena_bytes"]),
                                 pt16[0] / pt32[0]))


if __name__ == "__main__":
    main()
