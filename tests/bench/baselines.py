#!/usr/bin/python3
"""NetLoom against PyTorch on this computer's CPU, like with like, each at its best.

For each model (projects/fashion-MODEL.nlproj) and each pairing (1 thread, 2 threads,
2 ranks), every candidate setting of each framework is run once; the fastest is run
again until it has --runs runs, and the table gives their median with the spread
(lowest to highest). "best" pairs each framework's fastest median over all pairings.

PyTorch's candidates, as its users would tune it:
  - the BLAS behind its matrix products: OpenBLAS built with pthreads (Debian's default,
    libopenblas0-pthread) or with OpenMP (libopenblas0-openmp, chosen for the run alone
    with LD_LIBRARY_PATH), and with pthreads, OpenBLAS's own threads at the count or 1;
  - OMP_WAIT_POLICY unset or PASSIVE;
  - for convolutional models, channels_last or not;
  - for 2 ranks, DistributedDataParallel over Gloo, 2 processes of 1 thread each.
NetLoom's: --threads T; for 2 ranks, --ranks 2 (processes) or --thread-ranks 2.
Every run leaves its first --warmup steps out (steady_samples_per_sec on both sides),
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset for PyTorch, and each run trains the
same data, batch (the global batch, split over ranks), optimizer and schedule.

A benchmark, not a test: prints the table, exits 0 unless a tool is missing or a run
fails. Usage: baselines.py --train BIN [--models mlp,lenet,convbn] [--runs 5] ...
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OPENMP_BLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp"
PAIRINGS = ("1 thread", "2 threads", "2 ranks")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", required=True, help="netloom-train")
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--models", default="mlp,lenet,convbn")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=0,
                   help="the global batch (default: each project's own)")
    p.add_argument("--train-limit", type=int, default=0,
                   help="samples per epoch (default: 20000 for the MLP, 8192 otherwise)")
    p.add_argument("--test-limit", type=int, default=1000)
    args = p.parse_args()
    if args.runs < 1 or args.epochs < 1 or args.warmup < 0:
        p.error("--runs and --epochs must be at least 1, --warmup not negative")
    return args


class Bench:
    def __init__(self, args, folder):
        self.args = args
        self.folder = folder
        self.count = 0

    def run(self, argv, env_changes, drop=()):
        """Runs argv with the environment changed, and returns its last line of output,
        read as JSON (None where it printed nothing)."""
        env = dict(os.environ)
        for k in drop:
            env.pop(k, None)
        env.update(env_changes)
        self.count += 1
        log = os.path.join(self.folder, "run%d.log" % self.count)
        with open(log, "w") as err:
            out = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        if out.returncode != 0:
            sys.exit("baselines.py: %s failed (%d); see %s:\n%s"
                     % (" ".join(argv), out.returncode, log, open(log).read()[-2000:]))
        lines = out.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else None

    # `how`: the run's setting. NetLoom: threads, ranks ("--ranks" or "--thread-ranks"),
    # precision. PyTorch: threads, blas, blas_threads, wait, channels_last, ddp, bf16.
    def netloom(self, project, batch, limit, how):
        summary = os.path.join(self.folder, "summary%d.json" % (self.count + 1))
        a = self.args
        argv = [a.train, project, "--epochs", str(a.epochs), "--train-limit", str(limit),
                "--test-limit", str(a.test_limit), "--warmup-steps", str(a.warmup),
                "--summary-json", summary, "--quiet",
                "--checkpoint-dir", os.path.join(self.folder, "ck")]
        threads = how.get("threads", 1)
        if "ranks" in how:
            argv += [how["ranks"], "2", "--threads", "1", "--batch-size", str(batch // 2)]
        else:
            argv += ["--threads", str(threads), "--batch-size", str(batch)]
        if how.get("precision"):
            argv += ["--precision", how["precision"]]
        self.run(argv, {"OMP_NUM_THREADS": str(threads)})
        with open(summary) as f:
            return json.load(f)

    def torch(self, project, batch, limit, how):
        a = self.args
        common = ["--project", project, "--epochs", str(a.epochs), "--batch-size", str(batch),
                  "--train-limit", str(limit), "--test-limit", str(a.test_limit),
                  "--warmup-steps", str(a.warmup)]
        if how.get("channels_last"):
            common.append("--channels-last")
        if how.get("bf16"):
            common.append("--bf16")
        threads = how["threads"]
        env = {"OMP_NUM_THREADS": str(threads),
               "OPENBLAS_NUM_THREADS": str(how.get("blas_threads", threads))}
        if how.get("wait"):
            env["OMP_WAIT_POLICY"] = how["wait"]
        if how.get("blas") == "openmp":
            env["LD_LIBRARY_PATH"] = OPENMP_BLAS
        if how.get("ddp"):
            argv = [a.python, os.path.join(HERE, "ddp_torch.py"), "--ranks", "2",
                    "--threads", "1"] + common
        else:
            argv = [a.python, os.path.join(HERE, "cnn_torch.py"), "--threads",
                    str(threads)] + common
        return self.run(argv, env, drop=("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"))


def project_batch(path):
    """The project's train.batch_size (its protobuf text), or 32 where it sets none."""
    with open(path, encoding="utf-8") as f:
        m = re.search(r"^\s*batch_size:\s*(\d+)", f.read(), re.M)
    return int(m.group(1)) if m else 32


def netloom_candidates(pairing):
    if pairing == "2 ranks":
        return [{"ranks": "--ranks"}, {"ranks": "--thread-ranks"}]
    return [{"threads": 1 if pairing == "1 thread" else 2}]


def torch_candidates(pairing, convolutional):
    layouts = [False, True] if convolutional else [False]
    waits = [None, "PASSIVE"]
    out = []
    for cl in layouts:
        if pairing == "2 ranks":
            out.append({"ddp": True, "threads": 1, "blas_threads": 1, "channels_last": cl})
            continue
        t = 1 if pairing == "1 thread" else 2
        blases = [("pthread", t)] + ([("pthread", 1)] if t > 1 else [])
        if os.path.isdir(OPENMP_BLAS):
            blases.append(("openmp", t))
        for blas, blas_threads in blases:
            for wait in waits:
                out.append({"threads": t, "blas": blas, "blas_threads": blas_threads,
                            "wait": wait, "channels_last": cl})
    return out


def describe(how):
    if "ranks" in how:
        return how["ranks"] + " 2"
    if how.get("ddp"):
        text = "DDP gloo 2x1"
    elif "blas" in how:
        text = "%s BLAS x%d" % (how["blas"], how["blas_threads"])
        if how.get("wait"):
            text += ", wait " + how["wait"].lower()
    else:
        text = "--threads %d" % how["threads"]
    return text + (", NHWC" if how.get("channels_last") else "")


def measure(bench, runner, candidates, runs):
    """Each candidate once, then the fastest until it has `runs` runs: (rates, how)."""
    tried = []
    for how in candidates:
        s = runner(how)
        tried.append((s["steady_samples_per_sec"], how, s))
    tried.sort(key=lambda t: -t[0])
    best_rate, how, first = tried[0]
    rates = [best_rate]
    accuracy = first.get("test_accuracy")
    while len(rates) < runs:
        rates.append(runner(how)["steady_samples_per_sec"])
    return rates, how, accuracy


def cell(rates, how):
    return "%8.0f (%.0f-%.0f) %s" % (statistics.median(rates), min(rates), max(rates),
                                    describe(how))


def main():
    args = parse_args()
    if not os.access(args.train, os.X_OK):
        sys.exit("baselines.py: %s is not executable" % args.train)
    print("NetLoom against PyTorch on this CPU (%d cores): samples/s after %d warm-up steps, "
          "median of %d runs (lowest-highest), each at its best setting"
          % (os.cpu_count(), args.warmup, args.runs))
    with tempfile.TemporaryDirectory() as folder:
        bench = Bench(args, folder)
        for model in args.models.split(","):
            project = os.path.join(ROOT, "projects", "fashion-%s.nlproj" % model)
            if not os.path.exists(project):
                sys.exit("baselines.py: no project %s" % project)
            batch = args.batch_size or project_batch(project)
            limit = args.train_limit or (20000 if model == "mlp" else 8192)
            conv = model != "mlp"
            print("\n== %s (batch %d, %d samples, %d epoch(s))" % (model, batch, limit,
                                                                   args.epochs))
            print("%-10s %-44s %-44s %6s" % ("pairing", "NetLoom", "PyTorch", "NL/PT"))
            best = {}
            for pairing in PAIRINGS:
                nl = measure(bench, lambda h: bench.netloom(project, batch, limit, h),
                             netloom_candidates(pairing), args.runs)
                pt = measure(bench, lambda h: bench.torch(project, batch, limit, h),
                             torch_candidates(pairing, conv), args.runs)
                ratio = statistics.median(nl[0]) / statistics.median(pt[0])
                print("%-10s %-44s %-44s %6.2f" % (pairing, cell(nl[0], nl[1]),
                                                   cell(pt[0], pt[1]), ratio))
                for name, m in (("nl", nl), ("pt", pt)):
                    if name not in best or statistics.median(m[0]) > statistics.median(
                            best[name][0][0]):
                        best[name] = (m, pairing)
            (nl, nl_at), (pt, pt_at) = best["nl"], best["pt"]
            print("%-10s %-44s %-44s %6.2f" % (
                "best", cell(nl[0], nl[1]), cell(pt[0], pt[1]),
                statistics.median(nl[0]) / statistics.median(pt[0])))
            print("  best: NetLoom at %s, PyTorch at %s; test accuracy of those runs: "
                  "NetLoom %.4f, PyTorch %.4f" % (nl_at, pt_at, nl[2] or 0, pt[2] or 0))


if __name__ == "__main__":
    main()
