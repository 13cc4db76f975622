"""A torchvision resnet with non-trivial BatchNorm statistics, saved with safetensors, and its
logits, for the tests of stoke's weight import (train/torchvision_test.go, cmd/stoke).

usage: torchvision_weights.py MODEL CLASSES OUT.safetensors SIZE (PIXELS.u8 N | IMAGE...)

The model is torchvision.models.MODEL(num_classes=CLASSES) initialized with torch.manual_seed(0)
(no download). Its BatchNorm running statistics are first estimated in training mode from two
batches of Gaussian noise at SIZE px (so that activations keep their scale through the network in
evaluation mode), then every BatchNorm's weight, bias, running mean and running variance are
perturbed by seeded random amounts (a bottleneck's last BatchNorm scaled down, so that resnet50's
logits stay near 1 and a difference of 1e-4 is not float32's rounding of large values) and
num_batches_tracked set to 7. The state_dict is written to
OUT with safetensors.torch.save_file, or with torch.save when OUT ends in .pth.

The inputs are either PIXELS.u8, N uint8 images [N][3][SIZE][SIZE], or image files, each
center-cropped to SIZE with torchvision's CenterCrop offsets; both are normalized with the ImageNet
mean and std. Prints one JSON list of logits per image (evaluation mode).
"""
import json
import sys

import numpy as np
import torch
import torchvision
from safetensors.torch import save_file

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)


def inputs(size, rest):
    if rest[0].endswith(".u8"):
        n = int(rest[1])
        return np.fromfile(rest[0], dtype=np.uint8).reshape(n, 3, size, size).astype(np.float32) / 255.0
    from PIL import Image
    batch = []
    for name in rest:
        img = np.asarray(Image.open(name).convert("RGB"), dtype=np.float32)
        h, w = img.shape[:2]
        top, left = int(round((h - size) / 2.0)), int(round((w - size) / 2.0))
        batch.append(img[top:top + size, left:left + size].transpose(2, 0, 1) / 255.0)
    return np.stack(batch)


def main():
    name, classes, out, size, rest = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5:]
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=classes)
    bns = [(k, m) for k, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for _, m in bns:
        m.momentum = None  # a cumulative average over the calibration batches
        m.reset_running_stats()
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(8, 3, size, size))
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for k, m in bns:
            c = m.num_features
            # A bottleneck's last BatchNorm gets a smaller scale (as zero_init_residual would,
            # less far), so that 16 residual additions keep resnet50's logits near 1.
            lo, hi = (0.1, 0.4) if k.endswith("bn3") else (0.5, 1.5)
            m.weight.copy_(torch.empty(c).uniform_(lo, hi, generator=g))
            m.bias.copy_(torch.randn(c, generator=g) * 0.1)
            m.running_mean.add_(torch.randn(c, generator=g) * 0.05)
            m.running_var.mul_(torch.empty(c).uniform_(0.8, 1.25, generator=g))
            m.num_batches_tracked.fill_(7)
    model.eval()
    if out.endswith(".pth"):
        torch.save(model.state_dict(), out)
    else:
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, out)
    x = (inputs(size, rest) - MEAN) / STD
    with torch.no_grad():
        logits = model(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)))
    for row in logits.tolist():
        print(json.dumps(row))


if __name__ == "__main__":
    main()
