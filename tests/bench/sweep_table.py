#!/usr/bin/python3
"""Prints one model's side-by-side table from a bench sweep's folder:

    peak.jsonl            netloom-train --peak, one line per thread count
    netloom.T.json        netloom-train --summary-json at T threads
    ranks.T.json          the same as T thread ranks of one thread each (--thread-ranks T),
                          each with its share of the batch
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
    names = {"netloom": "NetLoom", "ranks": "NL ranks", "torch": "PyTorch"}
    runs = []  # (framework, threads, summary)
    for name, label in names.items():
        for path in glob.glob(os.path.join(folder, name + ".*.json")):
            threads = int(re.search(r"\.(\d+)\.json$", path).group(1))
            runs.append((label, threads, last_json(path)))
    order = list(names.values())
    runs.sort(key=lambda r: (order.index(r[0]), r[1]))
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

    def plural(n):
        return "" if n == 1 else "s"

    b_pt = best("PyTorch")
    for fw, how in (("NetLoom", "thread"), ("NL ranks", "thread rank")):
        b = best(fw)
        if b and b_pt and b_pt[2]["samples_per_sec"] > 0:
            print("best vs best: %s %.0f samples/s (%d %s%s) / PyTorch %.0f (%d thread%s)"
                  " = %.2fx" % (fw, b[2]["samples_per_sec"], b[1], how, plural(b[1]),
                                b_pt[2]["samples_per_sec"], b_pt[1], plural(b_pt[1]),
                                b[2]["samples_per_sec"] / b_pt[2]["samples_per_sec"]))
    one = {fw: {r[1]: r[2]["samples_per_sec"] for r in runs if r[0] == fw}
           for fw in ("NetLoom", "PyTorch")}
    for fw in ("NetLoom", "NL ranks", "PyTorch"):
        rows = {r[1]: r[2]["samples_per_sec"] for r in runs if r[0] == fw}
        base = one["PyTorch" if fw == "PyTorch" else "NetLoom"].get(1, 0)
        if base > 0 and any(t > 1 for t in rows):
            print("%s scaling over %s on 1 thread: %s" % (
                fw, "itself" if fw != "NL ranks" else "NetLoom", ", ".join(
                    "%d threads %.2fx" % (t, v / base) for t, v in sorted(rows.items()) if t > 1)))
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
