#!/usr/bin/python3
# Trains projects/fashion-mlp.nlproj's model in PyTorch, with the same data, normalisation,
# optimizer and batching, and times it the way netloom-train does, so bench_mlp.sh can set
# the two side by side. Prints one JSON line with netloom-train's summary keys.
#
# Run it with Debian's /usr/bin/python3 (python3-torch, python3-numpy): the python3 on PATH
# may be another interpreter without them.
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_idx  # noqa: E402

# The project's FIXED normalisation: x * scale, then (x - mean) / std.
SCALE, MEAN, STD = 1.0 / 255.0, 0.2860, 0.3530


def parse_args():
    p = argparse.ArgumentParser(description="Train the Fashion-MNIST MLP in PyTorch.")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--train-limit", type=int, default=0, help="use only the first N samples")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup-steps", type=int, default=20,
                   help="steps left out of steady_samples_per_sec")
    p.add_argument("--data-dir", default=fashion_idx.DEFAULT_DIR)
    p.add_argument("--activation", choices=["relu", "gelu"], default="relu")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="a Dropout with this p after each hidden activation (0: none)")
    return p.parse_args()


def to_tensors(images, labels):
    # Whole set as float32 in memory, normalised once: NetLoom normalises per batch on a
    # prefetch thread, which keeps that work off its step time too.
    x = torch.from_numpy(images.astype(np.float32)).unsqueeze(1)  # N x 1 x 28 x 28
    x = (x * SCALE - MEAN) / STD
    return x.contiguous(), torch.from_numpy(labels.astype(np.int64))


def build_model(activation="relu", dropout=0.0):
    def hidden(n_in, n_out):
        act = nn.GELU() if activation == "gelu" else nn.ReLU()
        return [nn.Linear(n_in, n_out), act] + ([nn.Dropout(dropout)] if dropout > 0 else [])
    return nn.Sequential(nn.Flatten(), *hidden(784, 256), *hidden(256, 128), nn.Linear(128, 10))


def evaluate(model, loss_fn, x, y, batch):
    """Returns (mean loss, accuracy) over the whole set, batched as NetLoom evaluates."""
    model.eval()
    total_loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(x), batch):
            logits = model(x[i:i + batch])
            total_loss += loss_fn(logits, y[i:i + batch]).item() * len(logits)
            correct += (logits.argmax(1) == y[i:i + batch]).sum().item()
    model.train()
    return total_loss / len(x), correct / len(x)


def train_epochs(model, opt, sched, loss_fn, train, test, batch, epochs, gen, sync=None,
                 warmup=0, step_hook=None):
    """Trains as netloom-train does and times it the same way: the per-step time covers
    batch indexing, forward, backward and the optimizer step, not the evaluation. The
    last short batch of an epoch is kept. On a GPU `sync` waits for the device before
    each step's time is read, as netloom-train's time waits for its steps. The first
    `warmup` steps are left out of the steady figures, as netloom-train's
    --warmup-steps leaves them out of steady_samples_per_sec. `step_hook(xb, yb)`, where
    given, returns the batch the step trains on (a data-parallel rank's share). Returns
    a dict: steps, train_seconds, train_samples, steady_seconds, steady_samples, and the
    last epoch's train_loss, test_loss and test_accuracy."""
    x_train, y_train = train
    x_test, y_test = test
    n = len(x_train)
    steps, train_seconds, train_samples = 0, 0.0, 0
    steady_seconds, steady_samples = 0.0, 0
    train_loss = test_loss = test_acc = float("nan")
    for _ in range(epochs):
        perm = torch.randperm(n, generator=gen)
        loss_sum = 0.0
        for i in range(0, n, batch):
            t0 = time.perf_counter()
            idx = perm[i:i + batch]
            xb, yb = x_train[idx], y_train[idx]
            if step_hook is not None:
                xb, yb = step_hook(xb, yb)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            sched.step()
            if sync is not None:
                sync()
            dt = time.perf_counter() - t0
            train_seconds += dt
            train_samples += len(idx)
            steps += 1
            if steps > warmup:
                steady_seconds += dt
                steady_samples += len(idx)
            # Reading the loss after the timer mirrors netloom-train, which reads its
            # loss scalar after timing the step.
            loss_sum += loss.item() * len(idx)
        train_loss = loss_sum / n
        # evaluate() runs model.eval() under no_grad, then returns to model.train().
        test_loss, test_acc = evaluate(model, loss_fn, x_test, y_test, batch)
    return {"steps": steps, "train_seconds": train_seconds, "train_samples": train_samples,
            "steady_seconds": steady_seconds, "steady_samples": steady_samples,
            "train_loss": train_loss, "test_loss": test_loss, "test_accuracy": test_acc}


def rates(t):
    """The summary's throughput keys from train_epochs' dict."""
    return {"samples_per_sec": t["train_samples"] / t["train_seconds"]
            if t["train_seconds"] > 0 else 0.0,
            "steady_samples_per_sec": t["steady_samples"] / t["steady_seconds"]
            if t["steady_seconds"] > 0 else 0.0}


def loaded_blas():
    """Names the BLAS libraries this process has mapped. Debian's torch is built against the
    generic libblas.so.3, so its matmul speed is whichever BLAS the alternatives system
    selects (reference netlib, OpenBLAS, BLIS...), which decides most of its step time."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.lower()}
    except OSError:
        return "unknown"
    return ", ".join(sorted(os.path.realpath(p) for p in paths)) or "none"


def main():
    args = parse_args()
    wall_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    train_img, train_lab, test_img, test_lab = fashion_idx.load(args.data_dir)
    if args.train_limit > 0:
        train_img, train_lab = train_img[:args.train_limit], train_lab[:args.train_limit]
    x_train, y_train = to_tensors(train_img, train_lab)
    x_test, y_test = to_tensors(test_img, test_lab)

    model = build_model(args.activation, args.dropout)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                           weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)

    n, batch = len(x_train), args.batch_size
    # The project's cosine schedule, stepped once per optimizer step as NetLoom does.
    total_steps = args.epochs * ((n + batch - 1) // batch)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_steps)
    t = train_epochs(model, opt, sched, loss_fn, (x_train, y_train), (x_test, y_test), batch,
                     args.epochs, gen, warmup=args.warmup_steps)

    print(json.dumps({
        "epochs": args.epochs,
        "steps": t["steps"],
        "train_loss": t["train_loss"],
        "test_loss": t["test_loss"],
        "test_accuracy": t["test_accuracy"],
        **rates(t),
        "wall_seconds": time.perf_counter() - wall_start,
        "parameters": sum(p.numel() for p in model.parameters()),
        "threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "blas": loaded_blas(),
    }))


if __name__ == "__main__":
    main()
