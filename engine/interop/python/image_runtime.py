

# ---- images: folders of class folders and path,label lists, as NetLoom reads them --

def _image_libraries():
    try:
        import numpy
        from PIL import Image
    except ImportError as e:
        sys.exit(f"this project reads images, which needs numpy and Pillow ({e}); on Debian: "
                 "apt-get install python3-numpy python3-pil")
    return numpy, Image


def is_image_file(path):
    dot = path.rfind(".")
    return dot >= 0 and path[dot + 1:].lower() in ("png", "jpg", "jpeg")


def list_image_folder(folder, class_names=None):
    """(paths, labels, class names): classes are the sorted subfolder names, each
    class's files found recursively and sorted by their full path."""
    if not os.path.isdir(folder):
        sys.exit(f"'{folder}' is not a folder")
    folders = sorted((e.name for e in os.scandir(folder) if e.is_dir()), key=os.fsencode)
    if not folders:
        sys.exit(f"'{folder}' holds no class folders")
    if class_names is not None:
        for f in folders:
            if f not in class_names:
                sys.exit(f"'{os.path.join(folder, f)}' is a class the training images do not have")
    else:
        class_names = folders
    paths, labels = [], []
    for label, name in enumerate(class_names):
        class_dir = os.path.join(folder, name)
        if not os.path.isdir(class_dir):
            continue
        found = [os.path.join(root, f) for root, _, files in os.walk(class_dir, followlinks=True)
                 for f in files]
        images = sorted((p for p in found if is_image_file(p)), key=os.fsencode)
        paths += images
        labels += [label] * len(images)
    if not paths:
        sys.exit(f"'{folder}' holds no PNG or JPEG images")
    return paths, labels, class_names


def _split_list_line(line):
    if line.startswith('"'):
        path, i = "", 1
        while i < len(line):
            if line[i] == '"' and i + 1 < len(line) and line[i + 1] == '"':
                path += '"'
                i += 1
            elif line[i] == '"':
                break
            else:
                path += line[i]
            i += 1
        comma = line.find(",", i)
        if i >= len(line) or comma < 0:
            return None
        return path, line[comma + 1:].strip(" \t\r")
    comma = line.rfind(",")
    if comma < 0:
        return None
    return line[:comma].strip(" \t\r"), line[comma + 1:].strip(" \t\r")


def read_image_list(csv_path, has_header, class_names=None):
    """(paths, labels, class names) of a CSV of path,label lines; paths are relative
    to the CSV's folder; labels all whole numbers are indices, else names, sorted."""
    if not os.path.isfile(csv_path):
        sys.exit(f"'{csv_path}' does not exist")
    base = os.path.dirname(csv_path)
    with open(csv_path, "rb") as f:
        lines = f.read().decode("utf-8", "surrogateescape").split("\n")
    paths, names, numbers = [], [], []
    for number, line in enumerate(lines, 1):
        if (has_header and number == 1) or not line.strip(" \t\r"):
            continue
        parts = _split_list_line(line)
        if parts is None or not parts[0] or not parts[1]:
            sys.exit(f"'{csv_path}' line {number}: expected an image path, a comma and a label")
        path, label = parts
        if not is_image_file(path):
            continue
        paths.append(os.path.normpath(os.path.join(base, path)))
        names.append(label)
        numbers.append(number)
    if not paths:
        sys.exit(f"'{csv_path}' lists no PNG or JPEG images")
    indices = all(n.isascii() and n.isdigit() and len(n) < 10 for n in names)
    if class_names is None:
        if indices:
            class_names = [str(c) for c in range(max(int(n) for n in names) + 1)]
        else:
            class_names = sorted(set(names), key=lambda n: n.encode("utf-8", "surrogateescape"))
    labels = []
    for name, number in zip(names, numbers):
        if name in class_names:
            labels.append(class_names.index(name))
        elif indices and int(name) < len(class_names):
            labels.append(int(name))
        else:
            sys.exit(f"'{csv_path}' line {number}: class '{name}' is not one the training "
                     "images have")
    return paths, labels, class_names


def _bilinear_axis(np, out_size, start, span, in_size):
    # Pixel centres aligned: output i reads the source at start + (i + 0.5) * step - 0.5.
    step = span / out_size
    src = [min(max(start + (i + 0.5) * step - 0.5, 0.0), float(in_size - 1))
           for i in range(out_size)]
    lo = np.array([math.floor(s) for s in src], dtype=np.int64)
    hi = np.minimum(lo + 1, in_size - 1)
    t = np.array([s - int(l) for s, l in zip(src, lo)], dtype=np.float64).astype(np.float32)
    return lo, hi, t


def fit_image(np, pixels, height, width, fit):
    """H × W × C bytes to C × height × width: stretched, or the centred part with the
    output's aspect ratio; bilinear in float32, rounded half away from zero."""
    in_h, in_w = pixels.shape[0], pixels.shape[1]
    x0, y0, w, h = 0.0, 0.0, float(in_w), float(in_h)
    if fit == "center_crop":
        scale = max(width / in_w, height / in_h)
        w, h = width / scale, height / scale
        x0, y0 = (in_w - w) / 2, (in_h - h) / 2
    if width == in_w and height == in_h and x0 == 0 and y0 == 0:
        return np.ascontiguousarray(pixels.transpose(2, 0, 1))
    ylo, yhi, ty = _bilinear_axis(np, height, y0, h, in_h)
    xlo, xhi, tx = _bilinear_axis(np, width, x0, w, in_w)
    p = pixels.astype(np.int32)
    tx, ty = tx[None, :, None], ty[:, None, None]

    def row(rows):
        a, b = p[rows][:, xlo], p[rows][:, xhi]
        return a.astype(np.float32) + (b - a).astype(np.float32) * tx

    top, bottom = row(ylo), row(yhi)
    v = top + (bottom - top) * ty
    r = np.floor(v)
    r = r + (v - r >= np.float32(0.5))
    return np.clip(r, 0, 255).astype(np.uint8).transpose(2, 0, 1).copy()


def decode_image(path, channels, height, width, fit):
    """The image as C × height × width bytes, or (None, why). Channels as stb_image
    converts them: grey from RGB by (77 r + 150 g + 29 b) >> 8, RGB from grey by
    repetition, alpha dropped, 16-bit samples by their high byte."""
    np, Image = _image_libraries()
    try:
        with Image.open(path) as im:
            if im.format not in ("PNG", "JPEG"):
                return None, "is not a PNG or JPEG image"
            mode = im.mode
            if mode.startswith("I"):
                grey = (np.asarray(im).astype(np.int64) >> 8).clip(0, 255).astype(np.uint8)
                pixels = grey[:, :, None]
            elif mode in ("1", "L"):
                pixels = np.asarray(im.convert("L"))[:, :, None]
            elif mode in ("LA", "La"):
                pixels = np.asarray(im.getchannel(0))[:, :, None]
            else:
                pixels = np.asarray(im.convert("RGB"))
    except Exception as e:  # PIL raises many kinds for a bad file
        return None, f"cannot be decoded ({e})"
    if channels == 1 and pixels.shape[2] == 3:
        q = pixels.astype(np.int32)
        pixels = ((q[:, :, 0] * 77 + q[:, :, 1] * 150 + q[:, :, 2] * 29) >> 8).astype(np.uint8)
        pixels = pixels[:, :, None]
    elif channels == 3 and pixels.shape[2] == 1:
        pixels = np.repeat(pixels, 3, axis=2)
    return fit_image(np, pixels, height, width, fit), None


def decode_images(paths, labels, data, what):
    """Decodes every image once; an unreadable one ends the run naming it, or with
    skip_unreadable is left out and counted."""
    np, _ = _image_libraries()
    from concurrent.futures import ThreadPoolExecutor
    c, h, w = data["channels"], data["height"], data["width"]
    threads = data["decode_threads"] or min(max(os.cpu_count() or 1, 1), 4)
    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(lambda p: decode_image(p, c, h, w, data["fit"]), paths))
    x, kept, bad = [], [], []
    for path, label, (pixels, why) in zip(paths, labels, results):
        if pixels is None:
            if not data["skip_unreadable"]:
                sys.exit(f"{what} image '{path}' {why} (set skip_unreadable to skip such images)")
            bad.append(f"'{path}' {why}")
            continue
        x.append(pixels)
        kept.append(label)
    if bad:
        print(f"skipped {len(bad)} unreadable {what} image(s), the first {bad[0]}")
    if not x:
        sys.exit(f"no {what} image can be read")
    return Dataset(torch.from_numpy(np.stack(x)), torch.tensor(kept, dtype=torch.int64))


def load_images(data, seed):
    """(train, test, validation or None) as NetLoom splits and limits them."""
    if data["channels"] not in (1, 3) or data["height"] <= 0 or data["width"] <= 0:
        sys.exit("images need channels (1 or 3), height and width")
    folder = data["source"] == "image_folder"

    def index(path, classes=None):
        if folder:
            return list_image_folder(path, classes)
        return read_image_list(path, data["has_header"], classes)

    paths, labels, classes = index(data["train"])
    test_paths = test_labels = val = None
    if data["test"]:
        test_paths, test_labels, _ = index(data["test"], classes)
    else:
        n = len(paths)
        k = min(max(int(math.floor(n * data["test_fraction"] + 0.5)), 0), n)
        order = epoch_order(n, True, hash_combine(seed, 0x13A6E), 0)
        held, keep = sorted(order[:k]), sorted(order[k:])
        test_paths, test_labels = [paths[i] for i in held], [labels[i] for i in held]
        paths, labels = [paths[i] for i in keep], [labels[i] for i in keep]
    # A limit takes samples spread by a seeded draw, kept in listing order (a folder
    # lists class by class); only those are decoded.
    def limit(paths, labels, n, stream):
        if n <= 0 or n >= len(paths):
            return paths, labels
        keep = sorted(epoch_order(len(paths), True, hash_combine(seed, stream), 0)[:n])
        return [paths[i] for i in keep], [labels[i] for i in keep]
    paths, labels = limit(paths, labels, data["train_limit"], 0x11A17)
    test_paths, test_labels = limit(test_paths, test_labels, data["test_limit"], 0x7E511A)
    train = decode_images(paths, labels, data, "training")
    test = decode_images(test_paths, test_labels, data, "test") if test_paths else None
    if data["validation"]:
        val_paths, val_labels, _ = index(data["validation"], classes)
        val = decode_images(val_paths, val_labels, data, "validation")
    for ds in (train, test, val):
        if ds is not None:
            ds.classes = len(classes)
    if test is None:
        test = Dataset(train.x[:0], train.labels[:0])
        test.classes = len(classes)
    return train, test, val
