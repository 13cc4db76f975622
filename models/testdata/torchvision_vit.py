"""Builds a small torchvision VisionTransformer with seeded random weights, saves them as
safetensors and prints its eval-mode logits (one JSON row per image) on the given uint8 pixels,
normalized with ImageNet's mean and std.

usage: torchvision_vit.py OUT.safetensors PIXELS.u8 N SIZE CLASSES PATCH LAYERS HEADS HIDDEN MLP
"""
import json
import sys

import numpy as np
import torch
import torchvision
from safetensors.torch import save_file

out, u8, n, size, classes, patch, layers, heads, hidden, mlp = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
torch.manual_seed(0)
m = torchvision.models.VisionTransformer(size, patch, layers, heads, hidden, mlp, num_classes=classes)
with torch.no_grad():
    for name, p in m.named_parameters():
        # Random everywhere (torchvision zeros the head and the class token): every tensor counts.
        p.copy_(torch.randn_like(p) * (0.5 if p.dim() == 1 else 1 / p.shape[-1] ** 0.5))
m.eval()
save_file({k: v.contiguous() for k, v in m.state_dict().items()}, out)
px = np.fromfile(u8, dtype=np.uint8).reshape(n, 3, size, size).astype(np.float32) / 255
mean = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(1, 3, 1, 1)
std = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 3, 1, 1)
with torch.no_grad():
    logits = m(torch.from_numpy((px - mean) / std))
for row in logits.tolist():
    print(json.dumps(row))
