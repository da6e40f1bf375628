#!/usr/bin/python3
# PyTorch's counterpart of `netloom-train --ranks R`: the project's model trained by R
# processes under DistributedDataParallel over Gloo on this computer's loopback, each
# on --threads threads, each taking its share of every global batch (the same
# permutation on every rank, rank r the r-th slice), with the project's optimizer and
# schedule, the gradients averaged over the ranks after each backward pass. Rank 0
# prints one JSON line with netloom-train's summary keys; samples/s is the job's
# (global batch over step time).
#
# Reads the model from the project as cnn_torch.py does (MLP, LeNet, Conv+BN, ...).
# Run it with Debian's /usr/bin/python3 (python3-torch, python3-numpy).
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cnn_torch  # noqa: E402
from mlp_torch import loaded_blas, rates, train_epochs  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description="Train a project's model with PyTorch DDP (Gloo).")
    p.add_argument("--project", required=True)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="threads of each rank")
    p.add_argument("--epochs", type=int, default=0, help="default: the project's")
    p.add_argument("--batch-size", type=int, default=0,
                   help="the global batch (default: the project's); divides by --ranks")
    p.add_argument("--train-limit", type=int, default=0)
    p.add_argument("--test-limit", type=int, default=0)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--channels-last", action="store_true")
    args = p.parse_args()
    if args.ranks < 1 or args.threads < 1:
        p.error("--ranks and --threads must be at least 1")
    return args


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank, args, port, out):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=args.ranks)
    with open(args.project, encoding="utf-8") as f:
        project = cnn_torch.parse_text_proto(f.read())
    train = cnn_torch.field(project, "train", {})
    epochs = args.epochs or cnn_torch.field(train, "epochs", 0) or 1
    batch = args.batch_size or cnn_torch.field(train, "batch_size", 0) or 32
    if batch % args.ranks:
        sys.exit("ddp_torch.py: the global batch %d does not divide by %d ranks"
                 % (batch, args.ranks))
    seed = cnn_torch.field(train, "seed", 0)
    torch.manual_seed(seed)  # the same initial weights on every rank
    (x_train, y_train), (x_test, y_test), _ = cnn_torch.load_data(
        project, args.train_limit, args.test_limit)
    model, smoothing = cnn_torch.build_model(project)
    shape = (-1,) + cnn_torch.model_input_shape(project)
    x_train, x_test = x_train.reshape(shape), x_test.reshape(shape)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
        if x_train.dim() == 4:
            x_train = x_train.contiguous(memory_format=torch.channels_last)
            x_test = x_test.contiguous(memory_format=torch.channels_last)
    model = DistributedDataParallel(model)
    model.train()
    loss_fn = nn.CrossEntropyLoss(label_smoothing=smoothing)
    opt = cnn_torch.make_optimizer(train, model.parameters())
    n = len(x_train)
    steps_per_epoch = (n + batch - 1) // batch
    sched = cnn_torch.make_schedule(train, opt, steps_per_epoch, epochs * steps_per_epoch)
    gen = torch.Generator().manual_seed(seed)  # the same permutation on every rank

    def share(xb, yb):
        per = (len(xb) + args.ranks - 1) // args.ranks
        return xb[rank * per:(rank + 1) * per], yb[rank * per:(rank + 1) * per]

    t = train_epochs(model, opt, sched, loss_fn, (x_train, y_train), (x_test, y_test), batch,
                     epochs, gen, warmup=args.warmup_steps, step_hook=share)
    if rank == 0:
        out.put({
            "epochs": epochs,
            "steps": t["steps"],
            "train_loss": t["train_loss"],
            "test_loss": t["test_loss"],
            "test_accuracy": t["test_accuracy"],
            **rates(t),
            "ranks": args.ranks,
            "threads": args.threads,
            "backend": "gloo",
            "channels_last": args.channels_last,
            "torch_version": torch.__version__,
            "blas": loaded_blas(),
        })
    dist.destroy_process_group()


def main():
    args = parse_args()
    wall_start = time.perf_counter()
    ctx = mp.get_context("spawn")
    out = ctx.SimpleQueue()
    mp.spawn(rank_main, args=(args, free_port(), out), nprocs=args.ranks, join=True)
    result = out.get()
    result["wall_seconds"] = time.perf_counter() - wall_start
    print(json.dumps(result))


if __name__ == "__main__":
    main()
