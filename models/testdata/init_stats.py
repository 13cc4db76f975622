"""Builds each torchvision (or timm) model of the given Python expressions as its constructor
initializes it (seeded) and prints, for each, one JSON object: every floating-point tensor of its
state_dict by name, with the statistics of its values that the Go test compares with Stoke's fresh
model's (init_test.go).

usage: init_stats.py EXPR...
  e.g. EXPR = "torchvision.models.VisionTransformer(16, 4, 2, 2, 16, 32, num_classes=5)"
"""
import json
import sys

import torch
import torchvision  # noqa: F401 (EXPR uses it)

if any("timm." in e for e in sys.argv[1:]):
    import timm  # noqa: F401 (EXPR uses it)

for expr in sys.argv[1:]:
    torch.manual_seed(0)
    m = eval(expr)
    out = {}
    for name, v in m.state_dict().items():
        if not v.is_floating_point():
            continue
        x = v.detach().double().flatten()
        mean = x.mean().item()
        std = x.std(unbiased=False).item()
        out[name] = {
            "n": x.numel(),
            "mean": mean,
            "std": std,
            "min": x.min().item(),
            "max": x.max().item(),
            # The share within one standard deviation of the mean: 0.683 for a normal, 0.577
            # for a uniform (a shape statistic that, unlike the kurtosis, one outlier leaves
            # alone: torch's trunc_normal_ clamps an erfinv of ±1 to ±2 about once in 2^24).
            "within1": ((x - mean).abs() <= std).double().mean().item(),
            "constant": bool((x == x[0]).all()),
        }
    print(json.dumps(out))
