"""Builds a torchvision (or timm) model from a Python expression, gives it seeded random weights
and BatchNorm statistics, saves them as safetensors and prints its eval-mode logits (one JSON row
per image) on the given uint8 pixels, normalized with ImageNet's mean and std.

With AT_SIZE, a second expression (the same architecture for SIZE px images, while EXPR is for
another size), the weights saved are EXPR's, and the logits printed are AT_SIZE's model's with
those weights, its position embeddings resampled by timm's resample_abs_pos_embed (bicubic,
antialias off): what a weights file made at one image size predicts at another.

With --grads GRADS.safetensors, it also saves the eval-mode gradients of sum(logits²)/2 for every
parameter.

usage: torchvision_parity.py OUT.safetensors PIXELS.u8 N SIZE EXPR [AT_SIZE] [--grads GRADS]
  SIZE is the images' side, or HxW
  e.g. EXPR = "torchvision.models.VisionTransformer(16, 4, 2, 2, 16, 32, num_classes=5)"
       EXPR = "timm.create_model('vit_tiny_patch16_224', img_size=32, patch_size=4, num_classes=5)"
"""
import json
import sys

import numpy as np
import torch
import torchvision  # noqa: F401 (EXPR uses it)
from safetensors.torch import save_file

out, u8, n, size, rest = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
h, w = (int(v) for v in size.split("x")) if "x" in size else (int(size),) * 2
grads = None
if "--grads" in rest:
    i = rest.index("--grads")
    grads = rest[i + 1]
    del rest[i : i + 2]
exprs = rest
if len(exprs) > 1 or any("timm." in e for e in exprs):
    import timm  # noqa: F401 (EXPR uses it)
    from timm.layers import resample_abs_pos_embed
torch.manual_seed(0)
m = eval(exprs[0])
with torch.no_grad():
    for name, p in m.named_parameters():
        # Random everywhere (torchvision zeros some heads, tokens and biases): every tensor counts.
        fan_in = p[0].numel() if p.dim() > 1 else 4
        # Position embeddings as large as a bias, so that resampling them wrongly shows.
        big = p.dim() == 1 or "pos_embed" in name
        p.copy_(torch.randn_like(p) * (0.5 if big else 1 / fan_in ** 0.5))
    for name, b in m.named_buffers():
        if name.endswith("running_mean"):
            b.copy_(torch.randn_like(b) * 0.1)
        elif name.endswith("running_var"):
            b.copy_(torch.rand_like(b) + 0.5)
m.eval()
sd = {k: v.contiguous() for k, v in m.state_dict().items()}
save_file(sd, out)
if len(exprs) > 1:
    m = eval(exprs[1]).eval()
    for k, v in m.state_dict().items():
        if v.shape != sd[k].shape and k in ("pos_embed", "encoder.pos_embedding"):
            side = int(round((v.shape[1] - 1) ** 0.5))
            sd[k] = resample_abs_pos_embed(sd[k], (side, side), num_prefix_tokens=1, antialias=False)
    m.load_state_dict(sd)
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
