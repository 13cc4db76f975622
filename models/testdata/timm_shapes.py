"""Prints the parameter shapes of timm classifiers built by name, as one JSON object:
{name: {parameter: shape}}. Initialization is skipped (the values are never read): torch.nn.init's, and the random fills
timm's own trunc_normal_ makes.

usage: timm_shapes.py CLASSES NAME...
"""
import json
import sys

import torch
import timm

for f in dir(torch.nn.init):
    if f.endswith("_") and not f.startswith("_"):
        setattr(torch.nn.init, f, lambda t, *a, **k: t)
for f in ("uniform_", "normal_", "erfinv_"):
    setattr(torch.Tensor, f, lambda t, *a, **k: t)

classes = int(sys.argv[1])
out = {}
for name in sys.argv[2:]:
    m = timm.create_model(name, num_classes=classes)
    out[name] = {k: list(p.shape) for k, p in m.named_parameters()}
print(json.dumps(out))
