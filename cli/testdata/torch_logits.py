"""Logits of torchvision's resnet18 loaded from a stoke export, for the interop test.

usage: torch_logits.py MODEL.safetensors CLASSES SIZE IMAGE...

Each image is center-cropped to SIZE (the offsets of torchvision's CenterCrop, which stoke's
evaluation transform also uses; the test's images are already at the Resize size), normalized with
the ImageNet mean and std, and run through torchvision.models.resnet18(num_classes=CLASSES) in
evaluation mode after load_state_dict (strict). Prints one JSON list of logits per image.
"""
import json
import sys

import numpy as np
import torch
import torchvision
from PIL import Image
from safetensors.torch import load_file


def main():
    path, classes, size, images = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    model = torchvision.models.resnet18(num_classes=classes)
    model.load_state_dict(load_file(path))
    model.eval()
    mean = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
    std = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)
    batch = []
    for name in images:
        img = np.asarray(Image.open(name).convert("RGB"), dtype=np.float32)
        h, w = img.shape[:2]
        top, left = int(round((h - size) / 2.0)), int(round((w - size) / 2.0))
        img = img[top:top + size, left:left + size].transpose(2, 0, 1) / 255.0
        batch.append((img - mean) / std)
    with torch.no_grad():
        logits = model(torch.from_numpy(np.stack(batch)))
    for row in logits.tolist():
        print(json.dumps(row))


if __name__ == "__main__":
    main()
