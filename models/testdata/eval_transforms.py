"""The evaluation transform of each model's default weights, for TestEvalTransforms.

    python eval_transforms.py NAME...

prints one JSON line per NAME: {"name", "resize", "crop", "filter", "mean", "std"} from
torchvision's get_model_weights(NAME).DEFAULT.transforms(), or for "timm/NAME" from the transform
timm.data.create_transform makes of the model's pretrained_cfg; {"name"} alone when neither has
weights of that name.
"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")

import timm
import timm.data
import torchvision.models
import torchvision.transforms as T


def one(v):
    return v[0] if isinstance(v, (list, tuple)) else v


for name in sys.argv[1:]:
    out = {"name": name}
    if name.startswith("timm/"):
        m = timm.create_model(name[len("timm/"):], pretrained=False)
        t = timm.data.create_transform(**timm.data.resolve_data_config({}, model=m))
        for s in t.transforms:
            if isinstance(s, T.Resize):
                out["resize"], out["filter"] = one(s.size), s.interpolation.value
            elif isinstance(s, T.CenterCrop):
                out["crop"] = one(s.size)
            elif isinstance(s, T.Normalize):
                out["mean"], out["std"] = [float(x) for x in s.mean], [float(x) for x in s.std]
    else:
        try:
            w = torchvision.models.get_model_weights(name).DEFAULT
        except ValueError:  # no such torchvision model: a builder of Stoke's own
            w = None
        if w is not None:
            t = w.transforms()
            out.update(resize=one(t.resize_size), crop=one(t.crop_size), filter=t.interpolation.value,
                       mean=list(t.mean), std=list(t.std))
    print(json.dumps(out))
