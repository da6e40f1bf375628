

# ---- weights: safetensors files as NetLoom writes them ----------------------------

_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
           "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
           "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def read_safetensors(path):
    """The tensors of a safetensors file by name: an 8-byte little-endian header
    length, a JSON header {name: {dtype, shape, data_offsets}}, then the data."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length].decode("utf-8"))
    body = memoryview(data)[8 + length:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = _DTYPES[info["dtype"]]
        if end > begin:
            flat = torch.frombuffer(bytearray(body[begin:end]), dtype=dtype)
        else:
            flat = torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(info["shape"])
    return tensors


def write_safetensors(path, tensors):
    """Writes `tensors` ({name: tensor}) as safetensors, through a temporary file
    so that a reader never sees half a file."""
    names = {dtype: name for name, dtype in _DTYPES.items()}
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().cpu().contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in chunks:
            f.write(raw)
    import os
    os.replace(tmp, path)


def _module_attr(model, path):
    """The module holding the parameter at dotted `path`, and its attribute name."""
    *parents, attr = path.split(".")
    owner = model
    for p in parents:
        owner = getattr(owner, p)
    return owner, attr


def tie_shared(model):
    """Makes each parameter of SHARED the very tensor it is shared with (NetLoom's
    model.shared, weight tying), as NetLoom trains them."""
    for name, source in SHARED.items():
        owner, attr = _module_attr(model, TORCH_NAMES.get(name, name))
        source_owner, source_attr = _module_attr(model, TORCH_NAMES.get(source, source))
        setattr(owner, attr, getattr(source_owner, source_attr))
    return model


def load_weights(model, path, strict=True):
    """Loads a NetLoom run's safetensors into `model` (strictly, unless told). A shared
    parameter is saved once, under the name it is shared with."""
    tensors = {TORCH_NAMES.get(name, name): t for name, t in read_safetensors(path).items()}
    for name, source in SHARED.items():
        tensors[TORCH_NAMES.get(name, name)] = tensors[TORCH_NAMES.get(source, source)]
    model.load_state_dict(tensors, strict=strict)
    return model


def netloom_state_dict(model):
    """The state dict under NetLoom's names, without PyTorch's own BatchNorm counters
    and with each shared parameter once."""
    return {NETLOOM_NAMES.get(name, name): t for name, t in model.state_dict().items()
            if not name.endswith("num_batches_tracked")
            and NETLOOM_NAMES.get(name, name) not in SHARED}


def save_weights(model, path):
    """Writes the weights as a safetensors file netloom-train --init-weights reads."""
    write_safetensors(path, netloom_state_dict(model))
