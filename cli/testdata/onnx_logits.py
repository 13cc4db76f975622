"""Logits of a stoke export --format onnx run by onnxruntime, for the interop test.

usage: onnx_logits.py MODEL.onnx IMAGE...

Checks the model with onnx.checker (full_check: shapes inferred too), reads the input's shape,
mean and std from its metadata_props (stoke.input_shape, stoke.mean, stoke.std), center-crops each
image to that size (the offsets of torchvision's CenterCrop, which stoke's evaluation transform
also uses; the test's images are already at the Resize size), scales it to [0, 1] and normalizes
it, then runs onnxruntime on the images one at a time (batch 1) and three at a time (batch 3).
Prints one JSON object: {"batch1": [logits per image], "batch3": [logits per image]}.
"""
import json
import sys

import numpy as np
import onnx
import onnxruntime
from PIL import Image


def main():
    path, images = sys.argv[1], sys.argv[2:]
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    meta = {p.key: p.value for p in model.metadata_props}
    c, h, w = (int(v) for v in meta["stoke.input_shape"].split(","))
    mean = np.array([float(v) for v in meta["stoke.mean"].split(",")], dtype=np.float32).reshape(c, 1, 1)
    std = np.array([float(v) for v in meta["stoke.std"].split(",")], dtype=np.float32).reshape(c, 1, 1)
    batch = []
    for name in images:
        img = np.asarray(Image.open(name).convert("RGB" if c == 3 else "L"), dtype=np.float32)
        if c == 1:
            img = img[:, :, None]
        ih, iw = img.shape[:2]
        top, left = int(round((ih - h) / 2.0)), int(round((iw - w) / 2.0))
        img = img[top:top + h, left:left + w].transpose(2, 0, 1) / np.float32(255)
        batch.append((img - mean) / std)
    x = np.stack(batch).astype(np.float32)
    sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    if inp.name != "input" or inp.shape[0] != "batch":
        sys.exit("input %s %s: want input [batch, ...]" % (inp.name, inp.shape))
    out = {"batch1": [], "batch3": []}
    for i in range(len(x)):
        out["batch1"] += sess.run(["logits"], {"input": x[i:i + 1]})[0].tolist()
    for i in range(0, len(x), 3):
        out["batch3"] += sess.run(["logits"], {"input": x[i:i + 3]})[0].tolist()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
