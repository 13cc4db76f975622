"""Loads a checkpoint that stoke train wrote into PyTorch, as a PyTorch user would, and prints
the model's logits, for cli/checkpointtorch_test.go.

usage: torch_checkpoint.py torchvision|timm MODEL CHECKPOINT IMAGE...

The checkpoint is a safetensors file: safetensors.torch.load_file reads its state_dict, which
torchvision.models.MODEL(num_classes=K) or timm.create_model(MODEL, num_classes=K) loads with
load_state_dict(strict=True), K being the checkpoint's num_classes. Its metadata's
"pretrained_cfg" (timm's keys) gives the input size, the exact resize side, the mean and the std:
each image, already at that resize side, is center-cropped to the input size with torchvision's
CenterCrop offsets and normalized. Prints one JSON list of logits per image (evaluation mode).
"""
import json
import sys

import numpy as np
import torch
from PIL import Image
from safetensors import safe_open
from safetensors.torch import load_file


def main():
    kind, name, ck, images = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    with safe_open(ck, "pt") as f:
        cfg = json.loads(f.metadata()["pretrained_cfg"])
    classes = cfg["num_classes"]
    if kind == "torchvision":
        import torchvision
        model = getattr(torchvision.models, name)(num_classes=classes)
    else:
        import timm
        model = timm.create_model(name, pretrained=False, num_classes=classes)
    model.load_state_dict(load_file(ck), strict=True)
    model.eval()
    size = cfg["input_size"][1]
    if cfg["resize"] < size:
        sys.exit("resize %d below the input size %d" % (cfg["resize"], size))
    mean = np.array(cfg["mean"], dtype=np.float32).reshape(3, 1, 1)
    std = np.array(cfg["std"], dtype=np.float32).reshape(3, 1, 1)
    batch = []
    for path in images:
        img = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32)
        h, w = img.shape[:2]
        if (h, w) != (cfg["resize"], cfg["resize"]):
            sys.exit("%s is %dx%d; want the resize side %d" % (path, w, h, cfg["resize"]))
        top, left = int(round((h - size) / 2.0)), int(round((w - size) / 2.0))
        batch.append((img[top:top + size, left:left + size].transpose(2, 0, 1) / 255.0 - mean) / std)
    with torch.no_grad():
        logits = model(torch.from_numpy(np.ascontiguousarray(np.stack(batch), dtype=np.float32)))
    for row in logits.tolist():
        print(json.dumps(row))


if __name__ == "__main__":
    main()
