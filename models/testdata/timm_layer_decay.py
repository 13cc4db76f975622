"""Prints, for each timm model given as a Python expression, timm 0.9.16's layer decay of every
parameter: {expr: {name: [layer_id, layer_max, lr_scale]}}, layer_id and layer_max from the
layer_map param_groups_layer_decay builds (group_parameters over group_matcher(coarse=False)),
lr_scale from its parameter groups. Usage: timm_layer_decay.py DECAY EXPR..."""
import json
import sys

import timm  # noqa: F401 (the expressions use it)
import torch  # noqa: F401
from timm.models import group_parameters
from timm.optim.optim_factory import param_groups_layer_decay

decay = float(sys.argv[1])
out = {}
for expr in sys.argv[2:]:
    torch.manual_seed(0)
    model = eval(expr)
    layer_map = group_parameters(model, model.group_matcher(coarse=False), reverse=True)
    layer_max = max(layer_map.values())
    scale = {}
    for group in param_groups_layer_decay(model, weight_decay=0.05, layer_decay=decay):
        for p in group["params"]:
            scale[id(p)] = group["lr_scale"]
    out[expr] = {n: [layer_map.get(n, layer_max), layer_max, scale[id(p)]]
                 for n, p in model.named_parameters()}
print(json.dumps(out))
