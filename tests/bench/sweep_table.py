#!/usr/bin/python3
"""Prints one model's side-by-side table from a bench sweep's folder:

    peak.jsonl            netloom-train --peak, one line per thread count
    netloom.T.json        netloom-train --summary-json at T threads
    torch.T.json          the PyTorch script's output (its last line is JSON) at T threads

Each run's GFLOP/s is its samples/s times NetLoom's count of the training step's
FLOPs per sample (both frameworks train the same model); its share of peak is against
the GEMM probe at the same thread count. Usage: sweep_table.py DIR TITLE
"""
import glob
import json
import os
import re
import sys


def last_json(path):
    lines = open(path).read().strip().splitlines()
    return json.loads(lines[-1]) if lines else None


def main():
    folder, title = sys.argv[1], sys.argv[2]
    peaks = {}
    peak_probe = "?"
    if os.path.exists(os.path.join(folder, "peak.jsonl")):
        for line in open(os.path.join(folder, "peak.jsonl")):
            p = json.loads(line)
            peaks[int(p["threads"])] = p["gflops"]
            peak_probe = p["probe"]
    runs = []  # (framework, threads, summary)
    for name in ("netloom", "torch"):
        for path in glob.glob(os.path.join(folder, name + ".*.json")):
            threads = int(re.search(r"\.(\d+)\.json$", path).group(1))
            runs.append(("NetLoom" if name == "netloom" else "PyTorch", threads, last_json(path)))
    runs.sort(key=lambda r: (r[0] != "NetLoom", r[1]))
    nl = [r for r in runs if r[0] == "NetLoom"]
    flops = nl[0][2].get("flops_per_sample", 0) if nl else 0

    print("== " + title)
    if peaks:
        print("peak (%s): %s" % (peak_probe, ", ".join(
            "%d thread%s %.0f GFLOP/s" % (t, "" if t == 1 else "s", g)
            for t, g in sorted(peaks.items()))))
    if flops:
        print("training step: %.2f MFLOP per sample (NetLoom's count)" % (flops / 1e6))
    print("%-9s %7s %11s %9s %8s %9s %11s" % (
        "framework", "threads", "samples/s", "GFLOP/s", "of peak", "test acc", "train loss"))
    for fw, threads, s in runs:
        sps = s["samples_per_sec"]
        g = sps * flops / 1e9 if flops else 0
        share = "%7.0f%%" % (100 * g / peaks[threads]) if g and peaks.get(threads) else "%8s" % "-"
        acc = s.get("test_accuracy")
        print("%-9s %7d %11.0f %9.1f %s %9s %11.4f" % (
            fw, threads, sps, g, share, "n/a" if acc is None else "%.2f%%" % (100 * acc),
            s["train_loss"]))

    def best(fw):
        rows = [r for r in runs if r[0] == fw]
        return max(rows, key=lambda r: r[2]["samples_per_sec"]) if rows else None

    b_nl, b_pt = best("NetLoom"), best("PyTorch")
    if b_nl and b_pt and b_pt[2]["samples_per_sec"] > 0:
        print("best vs best: NetLoom %.0f samples/s (%d thread%s) / PyTorch %.0f (%d thread%s)"
              " = %.2fx" % (b_nl[2]["samples_per_sec"], b_nl[1], "" if b_nl[1] == 1 else "s",
                            b_pt[2]["samples_per_sec"], b_pt[1], "" if b_pt[1] == 1 else "s",
                            b_nl[2]["samples_per_sec"] / b_pt[2]["samples_per_sec"]))
    for fw in ("NetLoom", "PyTorch"):
        rows = {r[1]: r[2]["samples_per_sec"] for r in runs if r[0] == fw}
        if 1 in rows and len(rows) > 1 and rows[1] > 0:
            print("%s scaling over 1 thread: %s" % (fw, ", ".join(
                "%d threads %.2fx" % (t, v / rows[1]) for t, v in sorted(rows.items()) if t > 1)))
    pt = [r for r in runs if r[0] == "PyTorch"]
    if pt:
        s = pt[0][2]
        print("PyTorch %s, BLAS: %s" % (s.get("torch_version", "?"), s.get("blas", "?")))
        if "openblas" not in s.get("blas", "").lower():
            print("WARNING: PyTorch did not run on OpenBLAS (apt install libopenblas0-pthread):"
                  " its figures are not its best")
    if nl:
        s = nl[0][2]
        arena, naive = s["arena_bytes"], s["naive_bytes"]
        print("NetLoom activation memory: arena %d bytes, naive %d bytes (%.0f%% of naive)"
              % (arena, naive, 100.0 * arena / naive if naive else 0))
    counts = {r[2].get("parameters") for r in runs}
    if len(counts) > 1:
        print("WARNING: parameter counts differ, so the models differ: %s" % sorted(counts))


if __name__ == "__main__":
    main()
