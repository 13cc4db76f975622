"""Builds a torchvision model from a Python expression, gives it seeded random weights and
BatchNorm statistics, saves them as safetensors and prints its eval-mode logits (one JSON row per
image) on the given uint8 pixels, normalized with ImageNet's mean and std.

usage: torchvision_parity.py OUT.safetensors PIXELS.u8 N SIZE EXPR [GRADS.safetensors]
  SIZE is the images' side, or HxW
  e.g. EXPR = "torchvision.models.VisionTransformer(16, 4, 2, 2, 16, 32, num_classes=5)"
With GRADS, it also saves the eval-mode gradients of sum(logits²)/2 for every parameter.
"""
import json
import sys

import numpy as np
import torch
import torchvision  # noqa: F401 (EXPR uses it)
from safetensors.torch import save_file

out, u8, n, size, expr = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
h, w = (int(v) for v in size.split("x")) if "x" in size else (int(size),) * 2
grads = sys.argv[6] if len(sys.argv) > 6 else None
torch.manual_seed(0)
m = eval(expr)
with torch.no_grad():
    for name, p in m.named_parameters():
        # Random everywhere (torchvision zeros some heads, tokens and biases): every tensor counts.
        fan_in = p[0].numel() if p.dim() > 1 else 4
        p.copy_(torch.randn_like(p) * (0.5 if p.dim() == 1 else 1 / fan_in ** 0.5))
    for name, b in m.named_buffers():
        if name.endswith("running_mean"):
            b.copy_(torch.randn_like(b) * 0.1)
        elif name.endswith("running_var"):
            b.copy_(torch.rand_like(b) + 0.5)
m.eval()
save_file({k: v.contiguous() for k, v in m.state_dict().items()}, out)
px = np.fromfile(u8, dtype=np.uint8).reshape(n, 3, h, w).astype(np.float32) / 255
mean = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(1, 3, 1, 1)
std = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(1, 3, 1, 1)
with torch.set_grad_enabled(grads is not None):
    logits = m(torch.from_numpy((px - mean) / std))
if grads:
    (logits * logits).sum().mul(0.5).backward()
    save_file({k: p.grad.contiguous() for k, p in m.named_parameters()}, grads)
for row in logits.tolist():
    print(json.dumps(row))
