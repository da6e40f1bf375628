#!/usr/bin/env python3
"""Writes Fashion-MNIST's IDX files as a folder of PNGs, one folder per class:

    OUT/train/0_T-shirt_top/00000.png ... OUT/test/9_Ankle_boot/09999.png

Classes are numbered so that their sorted folder names keep the IDX label order.
Nothing is downloaded: the files come from Debian's dataset-fashion-mnist.
Usage: scripts/fashion_folder.py OUT [--idx-dir DIR] [--limit N]
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]


def read_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = struct.unpack(">" + "I" * (magic & 0xFF), data[4:4 + 4 * (magic & 0xFF)])
    return dims, data[4 + 4 * len(dims):]


def png(width, height, pixels):
    """An 8-bit grayscale PNG: signature, IHDR, one IDAT of unfiltered rows, IEND."""
    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body +
                struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    rows = b"".join(b"\x00" + pixels[y * width:(y + 1) * width] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
            chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b""))


def folder_name(label):
    return "%d_%s" % (label, CLASSES[label].replace("/", "_").replace(" ", "_"))


def write_split(out, images, labels, limit):
    (count, rows, cols), pixels = read_idx(images)
    (_,), label_bytes = read_idx(labels)
    count = min(count, limit) if limit else count
    for label in range(len(CLASSES)):
        os.makedirs(os.path.join(out, folder_name(label)), exist_ok=True)
    size = rows * cols
    for i in range(count):
        label = label_bytes[i]
        path = os.path.join(out, folder_name(label), "%05d.png" % i)
        tmp = path + ".part"
        with open(tmp, "wb") as f:
            f.write(png(cols, rows, pixels[i * size:(i + 1) * size]))
        os.replace(tmp, path)
    return count


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--idx-dir", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--limit", type=int, default=0, help="first N images of each split")
    args = parser.parse_args()
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images = os.path.join(args.idx_dir, prefix + "-images-idx3-ubyte.gz")
        labels = os.path.join(args.idx_dir, prefix + "-labels-idx1-ubyte.gz")
        if not os.path.exists(images):
            sys.exit("fashion_folder: %s does not exist (Debian: apt install dataset-fashion-mnist)"
                     % images)
        n = write_split(os.path.join(args.out, split), images, labels, args.limit)
        print("fashion_folder: wrote %d %s images to %s" % (n, split, os.path.join(args.out, split)))


if __name__ == "__main__":
    main()
