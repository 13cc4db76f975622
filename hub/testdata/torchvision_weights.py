"""torchvision's weights of each name, for TestTorchvisionOracle.

    python torchvision_weights.py MODEL.MEMBER...

prints one JSON line per name (MEMBER may be DEFAULT): {"name", "url", "resize", "crop", "filter",
"mean", "std"} from torchvision's get_model_weights(MODEL)[MEMBER] (its url and transforms()), or
{"name"} alone when this torchvision has no such model or member.
"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")

import torchvision.models


def one(v):
    return v[0] if isinstance(v, (list, tuple)) else v


for name in sys.argv[1:]:
    model, member = name.split(".", 1)
    out = {"name": name}
    try:
        enum = torchvision.models.get_model_weights(model)
        w = enum.DEFAULT if member == "DEFAULT" else enum[member]
    except (ValueError, KeyError):  # a model or member of a later torchvision
        w = None
    if w is not None:
        t = w.transforms()
        out.update(url=w.url, resize=one(t.resize_size), crop=one(t.crop_size), filter=t.interpolation.value,
                   mean=[float(x) for x in t.mean], std=[float(x) for x in t.std])
    print(json.dumps(out))
