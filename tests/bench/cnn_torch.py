#!/usr/bin/python3
# Trains the model of projects/fashion-lenet.nlproj or projects/fashion-convbn.nlproj in
# PyTorch, layer for layer, with the same data, normalisation, optimizer, schedule,
# batching and seed, and times it the way netloom-train does, so bench_cnn.sh can set the
# two side by side. Prints one JSON line with netloom-train's summary keys, as mlp_torch.py.
#
# The model and settings are read from the project file itself (its protobuf text), so the
# bench follows edits to the projects: each node becomes the matching PyTorch layer (Conv2d
# with the same kernel, stride, padding and bias; MaxPool2d; BatchNorm2d, or BatchNorm1d
# after a Linear; Dropout; Flatten; Linear; ReLU; Add; global average pooling), and an op
# or setting it does not know stops it with an error rather than training something else.
# The project's augmentation (random crop after padding, horizontal flip) is done on the
# batch's device inside the step (augmenter()). On a GPU the steps are timed as a PyTorch
# expert would time them (train_gpu()).
#
# Run it with Debian's /usr/bin/python3 (python3-torch, python3-numpy): the python3 on PATH
# may be another interpreter without them.
import argparse
import ast
import json
import math
import os
import re
import sys
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_idx  # noqa: E402
# The timed training loop, its evaluation (model.eval(), no_grad) and the BLAS probe are
# the MLP bench's.
from mlp_torch import evaluate, loaded_blas, rates, train_epochs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ("lenet", "convbn", "resnet")


class ProjectError(Exception):
    pass


# --- protobuf text format, as far as .nlproj files use it --------------------------------

_TOKEN = re.compile(r"""\s+|\#[^\n]*|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[{}\[\]:,;<>]|[^\s{}\[\]:,;<>"'\#]+)""")


def _tokens(text):
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ProjectError("cannot read the project text at offset %d" % pos)
        if m.group(1) is not None:
            out.append(m.group(1))
        pos = m.end()
    return out


def _scalar(tok):
    if tok[0] in "\"'":
        return ast.literal_eval(tok)
    if tok in ("true", "True"):
        return True
    if tok in ("false", "False"):
        return False
    try:
        return int(tok, 0)
    except ValueError:
        pass
    try:
        return float(tok)
    except ValueError:
        return tok  # an enum name


def parse_text_proto(text):
    """Returns the message as {field: [values]}; submessages are such dicts too."""
    toks, i = _tokens(text), 0

    def message(end):
        nonlocal i
        msg = {}
        while i < len(toks) and toks[i] != end:
            name = toks[i]
            i += 1
            if i < len(toks) and toks[i] == ":":
                i += 1
            if i >= len(toks):
                raise ProjectError("field '%s' has no value" % name)
            values = []
            if toks[i] == "[":
                i += 1
                while toks[i] != "]":
                    values.append(value())
                    if toks[i] == ",":
                        i += 1
                i += 1
            else:
                values.append(value())
            msg.setdefault(name, []).extend(values)
            if i < len(toks) and toks[i] in ",;":
                i += 1
        if end is not None:
            if i >= len(toks):
                raise ProjectError("unbalanced braces in the project text")
            i += 1
        return msg

    def value():
        nonlocal i
        tok = toks[i]
        if tok in ("{", "<"):
            i += 1
            return message("}" if tok == "{" else ">")
        i += 1
        return _scalar(tok)

    return message(None)


def field(msg, name, default=None):
    values = msg.get(name) if msg else None
    return values[0] if values else default


def attrs_of(node):
    """A node's attrs map as {key: python value}."""
    out = {}
    for entry in node.get("attrs", []):
        v = field(entry, "value", {})
        if "ints" in v:
            val = [int(x) for x in field(v, "ints", {}).get("values", [])]
        elif "floats" in v:
            val = [float(x) for x in field(v, "floats", {}).get("values", [])]
        elif "i" in v:
            val = int(field(v, "i"))
        elif "f" in v:
            val = float(field(v, "f"))
        elif "b" in v:
            val = bool(field(v, "b"))
        elif "s" in v:
            val = str(field(v, "s"))
        else:
            raise ProjectError("attr '%s' has a value kind this bench does not read"
                               % field(entry, "key"))
        out[field(entry, "key")] = val
    return out


# --- the model ----------------------------------------------------------------------------

def _pair(v, name):
    v = [v] if isinstance(v, int) else list(v)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) == 2:
        return tuple(v)
    raise ProjectError("%s must be one or two numbers" % name)


class Graph(nn.Module):
    """Runs the project's nodes in file order: one module per layer node, Add as a sum."""

    def __init__(self, image, steps, layers, output):
        super().__init__()
        self.image, self.steps, self.output = image, steps, output
        self.layers = nn.ModuleDict(layers)

    def forward(self, x):
        values = {self.image: x}
        for name, key, op, inputs in self.steps:
            if op == "Add":
                values[name] = values[inputs[0]] + values[inputs[1]]
            else:
                values[name] = self.layers[key](values[inputs[0]])
        return values[self.output]


def _layer(op, a, shape, node):
    """The PyTorch module for one node, given its input's per-sample shape."""
    if op == "Conv2d":
        if len(shape) != 3:
            raise ProjectError("%s: Conv2d needs a C×H×W input, got %s" % (node, shape))
        k = _pair(a.get("kernel_size", [3]), "kernel_size")
        if a.get("same_padding", False):
            raise ProjectError("%s: same_padding is not supported here" % node)
        return nn.Conv2d(shape[0], a.get("out_channels", 1), k,
                         stride=_pair(a.get("stride", [1]), "stride"),
                         padding=_pair(a.get("padding", [0]), "padding"),
                         dilation=_pair(a.get("dilation", [1]), "dilation"),
                         groups=a.get("groups", 1), bias=a.get("bias", True))
    if op in ("MaxPool2d", "AvgPool2d"):
        k = _pair(a.get("kernel_size", [2]), "kernel_size")
        stride = _pair(a["stride"], "stride") if a.get("stride") else k
        padding = _pair(a.get("padding", [0]), "padding")
        if op == "MaxPool2d":
            return nn.MaxPool2d(k, stride, padding, ceil_mode=a.get("ceil_mode", False))
        return nn.AvgPool2d(k, stride, padding, ceil_mode=a.get("ceil_mode", False),
                            count_include_pad=a.get("count_include_pad", True))
    if op == "BatchNorm":
        # NetLoom's BatchNorm normalises the channels of N×C×H×W and the features of N×F:
        # BatchNorm2d and BatchNorm1d.
        cls = {3: nn.BatchNorm2d, 1: nn.BatchNorm1d}.get(len(shape))
        if cls is None:
            raise ProjectError("%s: BatchNorm of a %s input is not supported" % (node, shape))
        return cls(shape[0], eps=a.get("eps", 1e-5), momentum=a.get("momentum", 0.1),
                   affine=a.get("affine", True))
    if op == "ReLU":
        return nn.ReLU()
    if op == "Dropout":
        return nn.Dropout(a.get("p", 0.5))
    if op == "Flatten":
        return nn.Flatten(a.get("start_dim", 1))
    if op == "GlobalAvgPool2d":
        if a.get("keepdim", False):
            return nn.AdaptiveAvgPool2d(1)
        return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
    if op == "Linear":
        if len(shape) != 1:
            raise ProjectError("%s: Linear of a %s input is not supported" % (node, shape))
        lin = nn.Linear(shape[0], a.get("out_features", 1), bias=a.get("bias", True))
        if a.get("activation", "none") == "relu":
            return nn.Sequential(lin, nn.ReLU())
        return lin
    raise ProjectError("%s: op %s is not supported by this bench" % (node, op))


def build_model(project):
    """Returns (model, label smoothing) for the project's graph, trained on its loss node."""
    model_def = field(project, "model", {})
    train = field(project, "train", {})
    nodes = model_def.get("nodes", [])
    by_name = {field(n, "name"): n for n in nodes}
    loss_name = field(train, "loss")
    loss = by_name.get(loss_name)
    if loss is None or field(loss, "op") != "SoftmaxCrossEntropy":
        raise ProjectError("the loss node '%s' is not a SoftmaxCrossEntropy" % loss_name)
    logits_name = loss["inputs"][0]

    image, shapes, steps, layers = None, {}, [], {}
    for n in nodes:
        name, op, a = field(n, "name"), field(n, "op"), attrs_of(n)
        inputs = n.get("inputs", [])
        if op == "Input":
            if a.get("field", "x") == "label":
                continue
            if image is not None:
                raise ProjectError("more than one image input")
            image, shapes[name] = name, tuple(a["shape"])
            continue
        if op in ("SoftmaxCrossEntropy", "Accuracy", "TopKAccuracy"):
            continue  # the loss is CrossEntropyLoss below; metrics are not trained
        if any(i not in shapes for i in inputs):
            raise ProjectError("%s: an input is not a model tensor before it" % name)
        key = re.sub(r"\W", "_", name)
        if op == "Add":
            if len(inputs) != 2 or shapes[inputs[0]] != shapes[inputs[1]]:
                raise ProjectError("%s: Add needs two inputs of one shape" % name)
            shapes[name] = shapes[inputs[0]]
        else:
            if len(inputs) != 1:
                raise ProjectError("%s: %s with %d inputs" % (name, op, len(inputs)))
            layer = _layer(op, a, shapes[inputs[0]], name)
            layers[key] = layer
            with torch.no_grad():
                was = layer.training
                layer.eval()  # the probe must not touch BatchNorm's running statistics
                shapes[name] = tuple(layer(torch.zeros((1,) + shapes[inputs[0]])).shape[1:])
                layer.train(was)
        steps.append((name, key, op, inputs))
    if image is None or logits_name not in shapes:
        raise ProjectError("no path from the image input to the loss's logits")
    smoothing = attrs_of(loss).get("label_smoothing", 0.0)
    return Graph(image, steps, layers, logits_name), smoothing


# --- data, optimizer, schedule ------------------------------------------------------------

def load_data(project, train_limit, test_limit):
    data = field(project, "data", {})
    idx = field(data, "idx")
    if idx is None:
        raise ProjectError("only IDX data sources are supported")
    for unsupported in ("validation_fraction", "no_shuffle"):
        v = field(data, unsupported)
        if v and v != {}:
            raise ProjectError("data.%s is not supported by this bench" % unsupported)
    norm = field(data, "normalization", {})
    kind = field(norm, "kind", "KIND_UNSPECIFIED")
    if kind == "FIXED":
        scale, mean, std = (field(norm, "scale", 0.0) or 1.0, field(norm, "mean", 0.0),
                            field(norm, "std", 1.0))
    elif kind in ("KIND_UNSPECIFIED", 0):
        scale, mean, std = 1.0, 0.0, 1.0
    else:
        raise ProjectError("normalization %s is not supported by this bench" % kind)
    train_limit = train_limit or field(data, "train_limit", 0)
    test_limit = test_limit or field(data, "test_limit", 0)

    def tensors(images, labels, limit):
        if limit > 0:
            images, labels = images[:limit], labels[:limit]
        # Whole set as float32 in memory, normalised once: NetLoom normalises per batch on
        # a prefetch thread, which keeps that work off its step time too.
        x = torch.from_numpy(images.astype(np.float32)).reshape(len(images), -1)
        x = (x * scale - mean) / std
        return x.contiguous(), torch.from_numpy(labels.astype(np.int64))

    read = fashion_idx.read_idx
    x_train, y_train = tensors(read(field(idx, "train_images")),
                               read(field(idx, "train_labels")), train_limit)
    x_test, y_test = tensors(read(field(idx, "test_images")),
                             read(field(idx, "test_labels")), test_limit)
    return (x_train, y_train), (x_test, y_test), (scale, mean, std)


def make_optimizer(train, params, fused=False):
    """The project's optimizer; with `fused` (on a GPU), Adam's fused kernel, PyTorch's
    fastest (one launch for every parameter)."""
    o = field(train, "optimizer", {})
    kind = field(o, "kind", "KIND_UNSPECIFIED")
    if kind in ("ADAM", "ADAMW"):
        cls = torch.optim.Adam if kind == "ADAM" else torch.optim.AdamW
        wd = field(o, "weight_decay", 0.0 if kind == "ADAM" else 0.01)
        extra = {"fused": True} if fused else {}
        return cls(params, lr=field(o, "lr", 1e-3),
                   betas=(field(o, "beta1", 0.9), field(o, "beta2", 0.999)),
                   eps=field(o, "eps", 1e-8), weight_decay=wd, **extra)
    if kind == "SGD":
        return torch.optim.SGD(params, lr=field(o, "lr", 0.01),
                               momentum=field(o, "momentum", 0.0),
                               nesterov=field(o, "nesterov", False),
                               weight_decay=field(o, "weight_decay", 0.0))
    raise ProjectError("optimizer %s is not supported by this bench" % kind)


def make_schedule(train, opt, steps_per_epoch, total_steps):
    """The project's schedule, stepped once per optimizer step as NetLoom does."""
    s = field(train, "schedule", {})
    kind = field(s, "kind", "KIND_UNSPECIFIED")
    warm, min_lr = field(s, "warmup_steps", 0), field(s, "min_lr", 0.0)
    base = opt.param_groups[0]["lr"]
    if kind == "COSINE" and warm == 0:
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_steps,
                                                          eta_min=min_lr)

    # Otherwise engine/train/schedule.cpp's formula; LambdaLR's counter is step - 1.
    def factor(counter):
        step = counter + 1
        lr = base
        if kind == "COSINE":
            t = min(max((step - 1 - warm) / max(1, total_steps - warm), 0.0), 1.0)
            lr = min_lr + 0.5 * (base - min_lr) * (1.0 + math.cos(math.pi * t))
        elif kind == "STEP":
            every = max(1, field(s, "step_epochs", 0))
            gamma = field(s, "gamma", 0.0) or 0.1
            lr = base * gamma ** (((step - 1) // max(1, steps_per_epoch)) // every)
        elif kind not in ("KIND_UNSPECIFIED", "CONSTANT"):
            raise ProjectError("schedule %s is not supported by this bench" % kind)
        if warm > 0 and step <= warm:
            lr *= step / warm
        return lr / base

    factor(0)  # raises here for an unknown kind
    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


# --- mixed precision ---------------------------------------------------------------------

class Autocast(nn.Module):
    """The model's forward pass under torch.autocast to bf16, on the device it runs on;
    the logits come back as float for the loss, as PyTorch's recipes do."""

    def __init__(self, inner, device_type):
        super().__init__()
        self.inner = inner
        self.device_type = device_type

    def forward(self, x):
        with torch.autocast(self.device_type, dtype=torch.bfloat16):
            return self.inner(x).float()


# --- augmentation ------------------------------------------------------------------------

def augmenter(project, device):
    """The project's data.augmentation as a batch transform on the batch's own device, or
    None: the same ops as NetLoom's (engine/data/augment.cpp), random crop after zero
    padding by crop_padding each side (torchvision's RandomCrop(size, padding)) and a
    left-right flip with probability 0.5, drawn per sample, for the whole batch in one
    gather. NetLoom draws from its own streams, so the samples differ, not the ops."""
    a = field(field(project, "data", {}), "augmentation", {}) or {}
    pad, flip = field(a, "crop_padding", 0), bool(field(a, "horizontal_flip", False))
    if field(a, "max_translation", 0):
        raise ProjectError("data.augmentation.max_translation is not supported by this bench")
    if pad <= 0 and not flip:
        return None
    gen = torch.Generator(device=device).manual_seed(0xA06)

    def apply(xb, yb):
        b, c, h, w = xb.shape
        padded = nn.functional.pad(xb, (pad, pad, pad, pad)) if pad else xb
        dy = torch.randint(0, 2 * pad + 1, (b, 1), device=xb.device, generator=gen)
        dx = torch.randint(0, 2 * pad + 1, (b, 1), device=xb.device, generator=gen)
        rows = dy + torch.arange(h, device=xb.device)
        cols = torch.arange(w, device=xb.device).expand(b, w)
        if flip:
            mirrored = torch.rand((b, 1), device=xb.device, generator=gen) < 0.5
            cols = torch.where(mirrored, w - 1 - cols, cols)
        cols = cols + dx
        out = padded[torch.arange(b, device=xb.device)[:, None, None, None],
                     torch.arange(c, device=xb.device)[None, :, None, None],
                     rows[:, None, :, None], cols[:, None, None, :]]
        return out.contiguous(memory_format=torch.channels_last
                              if xb.is_contiguous(memory_format=torch.channels_last)
                              and c > 1 else torch.contiguous_format), yb

    return apply


# --- the GPU's timing ----------------------------------------------------------------------

def train_gpu(model, opt, sched, loss_fn, train, batch, epochs, seed, warmup, device,
              augment=None):
    """Trains on the GPU as a PyTorch expert would time it: the data and each epoch's
    permutation live on the device (no copy or sync per batch); the first `warmup`
    steps are not timed, and before the timed steps every batch shape they will see
    (the last, short batch) has run once, so cuDNN's autotuning (cudnn.benchmark) is
    done; the timed steps are bracketed by CUDA events, with one synchronisation at
    the end; the loss is summed on the device and read once an epoch. `augment`, where
    given, transforms each batch on the device inside the timed step. Returns the dict
    of mlp_torch.train_epochs, without the evaluation."""
    x_train, y_train = train
    n = len(x_train)
    gen = torch.Generator(device=device).manual_seed(seed)
    shapes = sorted({min(batch, n - i) for i in range(0, n, batch)})

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        sched.step()
        return loss.detach()

    # Each shape three times (a compiled model records its CUDA graph on the second or
    # third run of a shape), forward and backward only, on a copy of the state put back
    # after: the timed run trains from the same weights and statistics as NetLoom's.
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    for size in shapes:
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(x_train[:size]), y_train[:size]).backward()
    opt.zero_grad(set_to_none=True)
    model.load_state_dict(saved)
    torch.cuda.synchronize(device)

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    steps, timed_samples, total_samples = 0, 0, 0
    started = False
    train_loss = float("nan")
    for _ in range(epochs):
        perm = torch.randperm(n, device=device, generator=gen)
        loss_sum = torch.zeros((), device=device)
        for i in range(0, n, batch):
            if steps == warmup:
                start.record()
                started = True
            idx = perm[i:i + batch]
            xb, yb = x_train[idx], y_train[idx]
            if augment is not None:
                xb, yb = augment(xb, yb)
            loss_sum += step(xb, yb) * len(idx)
            steps += 1
            total_samples += len(idx)
            if started:
                timed_samples += len(idx)
        train_loss = float(loss_sum) / n  # one read an epoch
    end.record()
    torch.cuda.synchronize(device)
    seconds = start.elapsed_time(end) / 1000.0 if started else 0.0
    return {"steps": steps, "train_seconds": seconds, "train_samples": timed_samples,
            "steady_seconds": seconds, "steady_samples": timed_samples,
            "train_loss": train_loss, "total_samples": total_samples}


# --- the run ------------------------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(
        description="Train a Fashion-MNIST CNN project's model in PyTorch, with the "
                    "project's own settings unless overridden.")
    p.add_argument("--model", choices=MODELS, help="projects/fashion-MODEL.nlproj")
    p.add_argument("--project", help="another .nlproj file instead of --model")
    p.add_argument("--epochs", type=int, default=0, help="default: the project's")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--batch-size", type=int, default=0, help="default: the project's")
    p.add_argument("--train-limit", type=int, default=0, help="use only the first N samples")
    p.add_argument("--test-limit", type=int, default=0, help="use only the first N samples")
    p.add_argument("--seed", type=int, default=None, help="default: the project's")
    p.add_argument("--device", default="cpu", help="cpu, or cuda / cuda:N (TF32 off, as NetLoom)")
    p.add_argument("--warmup-steps", type=int, default=20,
                   help="steps left out of steady_samples_per_sec")
    p.add_argument("--compile", action="store_true",
                   help="on a GPU, train torch.compile(model, mode='reduce-overhead'): "
                        "compiled kernels replayed as CUDA graphs (PyTorch 2 and later)")
    p.add_argument("--bf16", action="store_true",
                   help="train under torch.autocast(dtype=torch.bfloat16), the counterpart of "
                        "netloom-train --precision bf16")
    p.add_argument("--tf32", action="store_true",
                   help="on a GPU, TF32 for matrix products and convolutions (default: off)")
    p.add_argument("--channels-last", action="store_true",
                   help="images and convolutions in NHWC (torch.channels_last)")
    args = p.parse_args()
    if (args.model is None) == (args.project is None):
        p.error("give one of --model and --project")
    if min(args.epochs, args.batch_size, args.train_limit, args.test_limit) < 0 \
            or args.threads < 1:
        p.error("the counts must not be negative, and --threads at least 1")
    if args.project is None:
        args.project = os.path.join(ROOT, "projects", "fashion-%s.nlproj" % args.model)
    return args


def main():
    args = parse_args()
    wall_start = time.perf_counter()
    try:
        with open(args.project, encoding="utf-8") as f:
            project = parse_text_proto(f.read())
        train = field(project, "train", {})
        epochs = args.epochs or field(train, "epochs", 0) or 1
        batch = args.batch_size or field(train, "batch_size", 0) or 32
        seed = args.seed if args.seed is not None else field(train, "seed", 0)
        torch.set_num_threads(args.threads)
        torch.manual_seed(seed)
        (x_train, y_train), (x_test, y_test), _ = load_data(project, args.train_limit,
                                                            args.test_limit)
        model, smoothing = build_model(project)
        shape = (-1,) + model_input_shape(project)
        x_train, x_test = x_train.reshape(shape), x_test.reshape(shape)
        device = torch.device(args.device)
        gpu = device.type == "cuda"
        if gpu:
            # TF32 as asked (NetLoom computes full float32 unless autocast is on); cuDNN
            # picks its fastest kernels.
            torch.backends.cuda.matmul.allow_tf32 = args.tf32
            torch.backends.cudnn.allow_tf32 = args.tf32
            torch.backends.cudnn.benchmark = True
        model = model.to(device)
        if args.channels_last:
            # Weights in NHWC make the convolutions' outputs NHWC too.
            model = model.to(memory_format=torch.channels_last)
            if x_train.dim() == 4:
                x_train = x_train.contiguous(memory_format=torch.channels_last)
                x_test = x_test.contiguous(memory_format=torch.channels_last)
        x_train, y_train = x_train.to(device), y_train.to(device)
        x_test, y_test = x_test.to(device), y_test.to(device)
        if args.bf16:
            model = Autocast(model, device.type)
        model.train()
        loss_fn = nn.CrossEntropyLoss(label_smoothing=smoothing)
        opt = make_optimizer(train, model.parameters(), fused=gpu)
        n = len(x_train)
        steps_per_epoch = (n + batch - 1) // batch
        total_steps = epochs * steps_per_epoch
        sched = make_schedule(train, opt, steps_per_epoch, total_steps)
    except (ProjectError, OSError, ValueError, KeyError, IndexError) as e:
        sys.exit("cnn_torch.py: %s: %s" % (args.project, e))
    gen = torch.Generator().manual_seed(seed)

    # A last batch of one sample makes BatchNorm1d raise in training mode: avoid such
    # --train-limit values.
    try:
        augment = augmenter(project, device)
    except ProjectError as e:
        sys.exit("cnn_torch.py: %s: %s" % (args.project, e))
    if gpu:
        trained = model
        if args.compile:
            if not hasattr(torch, "compile"):
                sys.exit("cnn_torch.py: --compile needs PyTorch 2 or later; this is %s"
                         % torch.__version__)
            trained = torch.compile(model, mode="reduce-overhead")
        t = train_gpu(trained, opt, sched, loss_fn, (x_train, y_train), batch, epochs, seed,
                      max(args.warmup_steps, 20), device, augment)
        t["test_loss"], t["test_accuracy"] = evaluate(model, loss_fn, x_test, y_test, batch)
    else:
        t = train_epochs(model, opt, sched, loss_fn, (x_train, y_train), (x_test, y_test),
                         batch, epochs, gen, warmup=args.warmup_steps, step_hook=augment)

    print(json.dumps({
        "epochs": epochs,
        "steps": t["steps"],
        "train_loss": t["train_loss"],
        "test_loss": t["test_loss"],
        "test_accuracy": t["test_accuracy"],
        **rates(t),
        "channels_last": args.channels_last,
        "augmentation": augment is not None,
        "precision": "bf16" if args.bf16 else "fp32",
        "compiled": bool(args.compile),
        "tf32": bool(gpu and args.tf32),
        "fused_adam": bool(gpu and opt.defaults.get("fused")),
        "wall_seconds": time.perf_counter() - wall_start,
        # Weights and biases, BatchNorm's weight and bias included, as NetLoom counts them;
        # the running statistics are buffers in both.
        "parameters": sum(p.numel() for p in model.parameters()),
        "threads": torch.get_num_threads(),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch_version": torch.__version__,
        "blas": loaded_blas(),
    }))


def model_input_shape(project):
    for n in field(project, "model", {}).get("nodes", []):
        a = attrs_of(n)
        if field(n, "op") == "Input" and a.get("field", "x") != "label":
            return tuple(a["shape"])
    raise ProjectError("no image input")


if __name__ == "__main__":
    main()
