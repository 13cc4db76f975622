"""Prints the parameter shapes of torchvision classifiers built by name, as one JSON object:
{name: {parameter: shape}}. Initialization is skipped (the values are never read), so even the
largest models build in a moment.

usage: torchvision_shapes.py CLASSES NAME...
"""
import json
import sys

import torch
import torchvision

for f in dir(torch.nn.init):
    if f.endswith("_") and not f.startswith("_"):
        setattr(torch.nn.init, f, lambda t, *a, **k: t)

classes = int(sys.argv[1])
out = {}
for name in sys.argv[2:]:
    m = getattr(torchvision.models, name)(num_classes=classes)
    out[name] = {k: list(p.shape) for k, p in m.named_parameters()}
print(json.dumps(out))
