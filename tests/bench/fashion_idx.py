# Reads Fashion-MNIST from the gzipped IDX files Debian ships, with gzip and numpy only,
# so the Python benches need no torchvision and see exactly the bytes NetLoom reads.
import gzip
import os

import numpy as np

DEFAULT_DIR = "/usr/share/datasets/fashion-mnist"

# IDX type codes (third byte of the magic) and the numpy types they hold, big-endian.
_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path):
    """Returns the array stored in one IDX file (gzipped or not), shaped as the header says."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise ValueError(f"{path}: not an IDX file (magic {data[:4].hex()})")
    dtype = np.dtype(_DTYPES[data[2]])
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", ndim, 4))
    count = int(np.prod(shape))
    if len(data) - header != count * dtype.itemsize:
        raise ValueError(f"{path}: header says {shape} but holds {len(data) - header} data bytes")
    return np.frombuffer(data, dtype, count, header).reshape(shape)


def load(directory=DEFAULT_DIR):
    """Returns (train_images, train_labels, test_images, test_labels) as uint8 arrays."""
    names = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    return tuple(read_idx(os.path.join(directory, n)) for n in names)
