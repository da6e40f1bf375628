

# ---- NetLoom's random streams (SplitMix64), so orders and draws are the same ------

M64 = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def hash_combine(a, b):
    return mix64(a ^ mix64(b))


class Rng:
    def __init__(self, seed):
        self.state = mix64(seed & M64)

    def next(self):
        value = mix64(self.state)
        self.state = (self.state + 1) & M64
        return value

    def uniform(self, lo=0.0, hi=1.0):
        return lo + (hi - lo) * ((self.next() >> 11) * 2.0 ** -53)

    def below(self, n):
        return self.next() % n

    def normal(self):
        u1, u2 = self.uniform(), self.uniform()
        u1 = max(u1, 1e-300)
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2)


def epoch_order(n, shuffle, seed, epoch):
    order = list(range(n))
    if shuffle:
        rng = Rng(hash_combine(seed, epoch))
        for i in range(n - 1, 0, -1):
            j = rng.below(i + 1)
            order[i], order[j] = order[j], order[i]
    return order


# ---- data: the same samples, splits and normalisation as NetLoom ------------------

class Dataset:
    def __init__(self, x, labels, targets=None):
        self.x = x                # raw features: uint8 (images) or float32, n × sample shape
        self.labels = labels      # int64 class indices
        self.targets = labels.float() if targets is None else targets  # raw float labels
        self.classes = int(labels.max()) + 1 if len(labels) else 0

    def __len__(self):
        return len(self.labels)

    def subset(self, indices):
        idx = torch.tensor(indices, dtype=torch.int64)
        out = Dataset(self.x[idx], self.labels[idx], self.targets[idx])
        out.classes = self.classes
        return out


def _open(path):
    with open(path, "rb") as f:
        head = f.read(2)
    return gzip.open(path, "rb") if head == b"\x1f\x8b" else open(path, "rb")


def read_idx_file(path):
    with _open(path) as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        sys.exit(f"'{path}': not an IDX file of unsigned bytes")
    dims = struct.unpack(">" + "I" * data[3], data[4:4 + 4 * data[3]])
    values = torch.frombuffer(bytearray(data[4 + 4 * data[3]:]), dtype=torch.uint8)
    return values.reshape(dims)


def read_idx(images, labels):
    x, y = read_idx_file(images), read_idx_file(labels).long()
    if x.dim() == 3:
        x = x.unsqueeze(1)  # N × H × W images are one channel
    return Dataset(x, y)


def read_csv(path, label_column, has_header, delimiter):
    with open(path, encoding="utf-8-sig") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    names = None
    if has_header:
        names = [field.strip().strip('"') for field in lines.pop(0).split(delimiter)]
    rows = [[float(field.strip().strip('"')) for field in line.split(delimiter)] for line in lines]
    columns = len(names) if names else len(rows[0])
    if not label_column:
        index = columns - 1
    elif names:
        index = names.index(label_column)
    else:
        index = int(label_column)
    values = torch.tensor(rows, dtype=torch.float64).float()
    targets = values[:, index].clone()
    x = torch.cat([values[:, :index], values[:, index + 1:]], dim=1)
    # Class indices round half away from zero, as NetLoom's lround.
    labels = (targets.double().sign() * (targets.double().abs() + 0.5).floor()).long()
    return Dataset(x.contiguous(), labels, targets)


def make_spirals(classes, samples, noise, seed):
    # NetLoom's generator: sample i is class i % classes, arms winding 4 radians.
    per_class = (samples + classes - 1) // classes
    rng, x = Rng(seed), []
    for i in range(samples):
        k = i % classes
        t = (i // classes) / (per_class - 1) if per_class > 1 else 0.0
        angle = 6.283185307179586 * k / classes + 4.0 * t
        nx, ny = noise * rng.normal(), noise * rng.normal()
        x.append([t * math.cos(angle) + nx, t * math.sin(angle) + ny])
    labels = torch.tensor([i % classes for i in range(samples)], dtype=torch.int64)
    ds = Dataset(torch.tensor(x, dtype=torch.float64).float(), labels)
    ds.classes = classes
    return ds


def make_blobs(classes, samples, features, stddev, seed):
    centre_rng = Rng(hash_combine(seed, 0xCE17E5))
    centres = [centre_rng.uniform(-10.0, 10.0) for _ in range(classes * features)]
    rng, x = Rng(hash_combine(seed, 0x9017)), []
    for i in range(samples):
        k = i % classes
        x.append([centres[k * features + j] + stddev * rng.normal() for j in range(features)])
    labels = torch.tensor([i % classes for i in range(samples)], dtype=torch.int64)
    ds = Dataset(torch.tensor(x, dtype=torch.float64).float(), labels)
    ds.classes = classes
    return ds


def split_off(ds, fraction, key):
    """Holds out round(n * fraction) samples by a seeded shuffle; both keep file order."""
    n = len(ds)
    k = min(max(int(math.floor(n * fraction + 0.5)), 0), n)
    order = epoch_order(n, True, key, 0)
    return ds.subset(sorted(order[k:])), ds.subset(sorted(order[:k]))


def load_sources(data, seed):
    kind = data["source"]
    if kind == "idx":
        return (read_idx(data["train_images"], data["train_labels"]),
                read_idx(data["test_images"], data["test_labels"]))
    if kind == "csv":
        train = read_csv(data["train_path"], data["label_column"], data["has_header"],
                         data["delimiter"])
        if data["test_path"]:
            return train, read_csv(data["test_path"], data["label_column"], data["has_header"],
                                   data["delimiter"])
        return split_off(train, data["test_fraction"], hash_combine(seed, 0x7E57))
    if kind == "spirals":
        return (make_spirals(data["classes"], data["train_samples"], data["noise"],
                             hash_combine(seed, 1)),
                make_spirals(data["classes"], data["test_samples"], data["noise"],
                             hash_combine(seed, 2)))
    if kind == "blobs":
        n = data["train_samples"] + data["test_samples"]
        both = make_blobs(data["classes"], n, data["features"], data["noise"], seed)
        return (both.subset(range(data["train_samples"])),
                both.subset(range(data["train_samples"], n)))
    if kind in ("image_folder", "image_list"):
        return load_images(data, seed)
    sys.exit(f"data source '{kind}' is not exported to PyTorch")


def _histogram_stats(hist, scale):
    # In NetLoom's order of double operations, so the values are the same bits.
    total, count = 0.0, 0
    for v, h in enumerate(hist):
        total += v * scale * h
        count += h
    mean = total / count if count else 0.0
    sum_sq = 0.0
    for v, h in enumerate(hist):
        sum_sq += h * (v * scale - mean) * (v * scale - mean)
    return mean, (math.sqrt(sum_sq / count) if count else 1.0)


def standardize(train, scale):
    """Mean and std of the training split: per channel of byte images (C × H × W),
    over every value of other data."""
    if train.x.dtype == torch.uint8:
        channels = train.x.shape[1] if train.x.dim() == 4 else 1
        planes = train.x.reshape(len(train), channels, -1).transpose(0, 1).reshape(channels, -1)
        stats = [_histogram_stats(torch.bincount(p.long(), minlength=256).tolist(), scale)
                 for p in planes]
    else:
        values = train.x.double() * scale
        mean = values.mean().item()
        stats = [(mean, ((values - mean) ** 2).mean().sqrt().item())]
    means = [m for m, _ in stats]
    stds = [s if s > 1e-12 else 1.0 for _, s in stats]
    return (means[0], stds[0]) if len(stats) == 1 else (means, stds)


def fixed_channels(norm, train, std):
    """FIXED per-channel values, a list's missing values taken from mean and std."""
    cm, cs = norm["channel_mean"], norm["channel_std"]
    channels = train.x.shape[1] if train.x.dim() == 4 else 0
    for name, values in (("channel_mean", cm), ("channel_std", cs)):
        if values and len(values) != channels:
            sys.exit(f"data.normalization.{name} has {len(values)} values but the samples "
                     f"have {channels} channels")
    return ([cm[c] if cm else norm["mean"] for c in range(channels)],
            [cs[c] if cs else std for c in range(channels)])


# ---- text, as NetLoom reads it (engine/data/text.cpp) -------------------------------

class TextWindows:
    """Windows of `context` tokens of one token stream: sample i starts at starts[i],
    and its labels are the window one token on; none reads at or past `end`."""

    def __init__(self, tokens, starts, context, end, classes):
        self.tokens, self.starts, self.context, self.end = tokens, starts, context, end
        self.classes = classes

    def __len__(self):
        return len(self.starts)

    def subset(self, indices):
        return TextWindows(self.tokens, [self.starts[i] for i in indices], self.context,
                           self.end, self.classes)


def read_text_files(path):
    """A file, or a folder's regular files in name order (links and files holding a
    NUL byte left out), as bytes each."""
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            return [f.read()]
    parts = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.islink(full) or not os.path.isfile(full):
            continue
        with open(full, "rb") as f:
            raw = f.read()
        if b"\0" not in raw:
            parts.append(raw)
    return parts


def read_text(path, vocabulary, vocab, validation_fraction):
    """Token ids and the vocabulary: bytes, or characters with token 0 for one the
    training part lacks (U+FFFD) and the training part's characters by code point."""
    raw = b"".join(read_text_files(path))
    if not raw:
        sys.exit(f"text file '{path}' is empty")
    if vocabulary == "byte":
        return list(raw), [bytes([b]) for b in range(256)]
    chars = raw.decode("utf-8")
    if not vocab:
        train = max(int(len(chars) * (1 - validation_fraction)), 1)
        vocab = ["\ufffd"] + sorted(set(chars[:train]))
    ids = {c: i for i, c in enumerate(vocab)}
    return [ids.get(c, 0) for c in chars], vocab


def windows(tokens, begin, end, context, classes):
    """One window every `context` tokens whose next token is still before `end`."""
    return TextWindows(tokens, list(range(begin, end - context, context)), context, end, classes)


def load_text(data):
    tokens, vocab = read_text(data["path"], data["vocabulary"], data["vocab"],
                              data["validation_fraction"])
    n, context, fraction = len(tokens), data["context"], data["validation_fraction"]
    split = int(n * (1 - fraction)) if fraction > 0 else n
    stream = torch.tensor(tokens, dtype=torch.int64)
    train = windows(stream, 0, split, context, len(vocab))
    val = windows(stream, split, n, context, len(vocab))
    test = val
    if data["test_path"]:
        test_tokens, _ = read_text(data["test_path"], data["vocabulary"], vocab, 0)
        test = windows(torch.tensor(test_tokens, dtype=torch.int64), 0, len(test_tokens),
                       context, len(vocab))
    if data["train_limit"] > 0:
        train = train.subset(range(min(data["train_limit"], len(train))))
    if data["test_limit"] > 0:
        test = test.subset(range(min(data["test_limit"], len(test))))
    return train, val, test, None


def text_batches(ds, batch_size, shuffle, seed, epoch):
    """Windows and their next tokens: training windows start at an offset drawn for the
    epoch, in the epoch's seeded order."""
    order = epoch_order(len(ds), shuffle, seed, epoch)
    shift = hash_combine(seed, epoch) % ds.context if shuffle else 0
    t = ds.context
    for at in range(0, len(order), batch_size):
        starts = [min(ds.starts[i] + shift, ds.end - t - 1) for i in order[at:at + batch_size]]
        x = torch.stack([ds.tokens[s:s + t] for s in starts])
        y = torch.stack([ds.tokens[s + 1:s + t + 1] for s in starts])
        yield x, y, y.float()


def load_data(data, seed):
    if data["source"] == "text":
        return load_text(data)
    train, test, *rest = load_sources(data, seed)
    val = rest[0] if rest else None
    if data["train_limit"] > 0:
        train = train.subset(range(min(data["train_limit"], len(train))))
    if data["test_limit"] > 0:
        test = test.subset(range(min(data["test_limit"], len(test))))
    if data["validation_fraction"] > 0 and val is not None:
        sys.exit("data.validation_fraction is set but the images name a validation set of "
                 "their own: use one or the other")
    if data["validation_fraction"] > 0:
        train, val = split_off(train, data["validation_fraction"], hash_combine(seed, 0x7A11D))
    classes = max(train.classes, test.classes)
    for ds in (train, val, test):
        if ds is not None:
            ds.classes = classes
    norm = data["normalization"]
    scale, mean, std = norm["scale"], 0.0, 1.0
    if norm["kind"] == "fixed":
        mean, std = norm["mean"], norm["std"] if norm["std"] != 0 else 1.0
        if norm["channel_mean"] or norm["channel_std"]:
            mean, std = fixed_channels(norm, train, std)
    elif norm["kind"] == "standardize":
        mean, std = standardize(train, scale)
    return train, val, test, (scale, mean, std)


def normalise(x, norm):
    # x' = (x * scale - mean) * (1 / std) in float, as NetLoom's loader computes it;
    # per channel when mean and std are lists.
    scale, mean, std = (torch.tensor(v, dtype=torch.float32) for v in norm)
    if mean.dim() == 1:
        mean, std = mean.view(-1, 1, 1), std.view(-1, 1, 1)
    return (x.float() * scale - mean) * (1.0 / std)


def _axis(n, crop, shift):
    offset = crop - shift
    lo, hi = max(0, shift, shift - crop), min(n, n + shift, n + shift - crop)
    return offset, lo, max(hi, lo)


def augment(sample, seed, epoch, index, aug):
    """Random crop, translation and flip of one raw C × H × W sample, drawn as NetLoom
    draws them from (seed, epoch, sample index); zero enters at the edges."""
    key = hash_combine(hash_combine(hash_combine(seed, 0xA06), epoch), index)
    rng = Rng(key)
    symmetric = lambda t: rng.below(2 * t + 1) - t  # noqa: E731
    crop_y = crop_x = shift_y = shift_x = 0
    if aug["crop_padding"] > 0:
        crop_y, crop_x = symmetric(aug["crop_padding"]), symmetric(aug["crop_padding"])
    if aug["max_translation"] > 0:
        shift_y, shift_x = symmetric(aug["max_translation"]), symmetric(aug["max_translation"])
    flip = aug["horizontal_flip"] and (rng.next() >> 63) != 0
    h, w = sample.shape[1], sample.shape[2]
    ry, y0, y1 = _axis(h, crop_y, shift_y)
    rx, x0, x1 = _axis(w, crop_x, shift_x)
    out = torch.zeros_like(sample)
    if y1 > y0 and x1 > x0:
        out[:, y0:y1, x0:x1] = sample[:, y0 + ry:y1 + ry, x0 + rx:x1 + rx]
    return out.flip(2) if flip else out


def batches(ds, norm, batch_size, shuffle=False, seed=0, epoch=0, aug=None):
    """One epoch of (features, class labels, float targets), normalised."""
    if isinstance(ds, TextWindows):
        yield from text_batches(ds, batch_size, shuffle, seed, epoch)
        return
    order = epoch_order(len(ds), shuffle, seed, epoch)
    augmenting = aug is not None and (aug["crop_padding"] > 0 or aug["horizontal_flip"]
                                      or aug["max_translation"] > 0)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        x = ds.x[torch.tensor(idx, dtype=torch.int64)]
        if augmenting:
            x = torch.stack([augment(x[k], seed, epoch, i, aug) for k, i in enumerate(idx)])
        yield normalise(x, norm), ds.labels[idx], ds.targets[idx]


# ---- the learning rate of every step, as NetLoom computes it ----------------------

def learning_rate(sched, base_lr, step, steps_per_epoch, total_steps):
    """The rate of 1-based `step`: the schedule, then linear warm-up from 0."""
    lr, warm = base_lr, sched["warmup_steps"]
    if sched["kind"] == "step":
        epoch = (step - 1) // max(1, steps_per_epoch)
        lr = base_lr * sched["gamma"] ** (epoch // max(1, sched["step_epochs"]))
    elif sched["kind"] == "cosine":
        span = float(max(1, total_steps - warm))
        t = min(max((step - 1 - warm) / span, 0.0), 1.0)
        lr = sched["min_lr"] + 0.5 * (base_lr - sched["min_lr"]) * (1.0 + math.cos(math.pi * t))
    if warm > 0 and step <= warm:
        lr *= step / warm
    return lr


def make_optimizer(params, opt):
    if opt["kind"] == "sgd":
        return torch.optim.SGD(params, lr=opt["lr"], momentum=opt["momentum"],
                               nesterov=opt["nesterov"], weight_decay=opt["weight_decay"])
    kind = torch.optim.AdamW if opt["kind"] == "adamw" else torch.optim.Adam
    return kind(params, lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["eps"],
                weight_decay=opt["weight_decay"])


# ---- training ---------------------------------------------------------------------

def run_batch(model, x, y, t, device):
    x = x.reshape(x.shape[0], *netloom_model.INPUT_SHAPE).to(device)
    y, t = y.to(device), t.to(device)
    outputs = model(x)
    return compute_loss(outputs, x, y, t), compute_metrics(outputs, x, y, t)


def evaluate(model, ds, norm, batch_size, device):
    model.eval()
    loss, metrics = 0.0, {}
    with torch.no_grad():
        for x, y, t in batches(ds, norm, batch_size):
            batch_loss, batch_metrics = run_batch(model, x, y, t, device)
            loss += batch_loss.item() * len(y)
            for name, value in batch_metrics.items():
                metrics[name] = metrics.get(name, 0.0) + value.item() * len(y)
    return loss / len(ds), {name: value / len(ds) for name, value in metrics.items()}


def describe(loss, metrics):
    return f"loss {loss:.4f}" + "".join(f" {name} {value:.4f}" for name, value in metrics.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=TRAIN["epochs"])
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this many steps")
    parser.add_argument("--train-limit", type=int, default=None, help="first N training samples")
    parser.add_argument("--test-limit", type=int, default=None, help="first N test samples")
    parser.add_argument("--batch-size", type=int, default=TRAIN["batch_size"])
    parser.add_argument("--weights", help="start from these weights (safetensors)")
    parser.add_argument("--save", help="write the trained weights here (safetensors)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:0, ...")
    parser.add_argument("--dump-first-batch", metavar="F",
                        help="write the first training batch (float32) to F, its labels and "
                        "the normalisation to F.json, and stop")
    args = parser.parse_args()

    seed = TRAIN["seed"]
    torch.manual_seed(seed)
    if TRAIN["threads"] > 0:
        torch.set_num_threads(TRAIN["threads"])
    data = dict(DATA)
    if args.train_limit is not None:
        data["train_limit"] = args.train_limit
    if args.test_limit is not None:
        data["test_limit"] = args.test_limit
    train, val, test, norm = load_data(data, seed)

    if args.dump_first_batch:
        x, y, _ = next(batches(train, norm, args.batch_size, not DATA["no_shuffle"], seed, 1,
                               DATA["augmentation"]))
        with open(args.dump_first_batch, "wb") as f:
            f.write(x.contiguous().numpy().tobytes())
        with open(args.dump_first_batch + ".json", "w") as f:
            json.dump({"labels": y.tolist(), "scale": norm[0], "mean": norm[1], "std": norm[2],
                       "train": len(train), "test": len(test),
                       "validation": len(val) if val else 0}, f)
        return

    device = torch.device(args.device)
    model = netloom_model.build_model()
    if args.weights:
        netloom_model.load_weights(model, args.weights)
    model.to(device)
    optimizer = make_optimizer(model.parameters(), TRAIN["optimizer"])
    base_lr = TRAIN["optimizer"]["lr"]
    per_epoch = (len(train) + args.batch_size - 1) // args.batch_size
    total = per_epoch * args.epochs
    if args.max_steps > 0:
        total = min(total, args.max_steps)
    print(f"{len(train)} training, {len(val) if val else 0} validation, {len(test)} test "
          f"samples; {per_epoch} steps per epoch, {total} in all")

    step, training_seconds = 0, 0.0
    for epoch in range(1, args.epochs + 1):
        if step >= total:
            break
        started = time.time()
        epoch_training = time.perf_counter()
        model.train()
        loss_sum, metric_sums, seen = 0.0, {}, 0
        for x, y, t in batches(train, norm, args.batch_size, not DATA["no_shuffle"], seed, epoch,
                               DATA["augmentation"]):
            step += 1
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(TRAIN["schedule"], base_lr, step, per_epoch, total)
            loss, metrics = run_batch(model, x, y, t, device)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if not math.isfinite(loss.item()):
                sys.exit(f"step {step}: the loss is {loss.item()}")
            loss_sum += loss.item() * len(y)
            seen += len(y)
            for name, value in metrics.items():
                metric_sums[name] = metric_sums.get(name, 0.0) + value.item() * len(y)
            if step >= total:
                break
        training_seconds += time.perf_counter() - epoch_training
        line = f"epoch {epoch}: train " + describe(
            loss_sum / seen, {name: value / seen for name, value in metric_sums.items()})
        if val is not None and len(val):
            line += " | val " + describe(*evaluate(model, val, norm, args.batch_size, device))
        if len(test):
            line += " | test " + describe(*evaluate(model, test, norm, args.batch_size, device))
        print(line + f" ({time.time() - started:.1f} s)", flush=True)
    print(f"trained {step} steps in {training_seconds:.3f} s (evaluation left out)")
    if args.save:
        netloom_model.save_weights(model, args.save)
        print(f"weights written to {args.save}")


if __name__ == "__main__":
    main()
