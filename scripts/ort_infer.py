"""Times onnxruntime's inference of the models models.BenchmarkInfer times in Stoke: torchvision's
architecture (random weights: the time does not depend on them), exported to ONNX (opset 17,
batch dynamic) by torch.onnx, at 224 px, on random images already in memory, on the CPU.

usage: ort_infer.py MODEL BATCH THREADS ITERS      MODEL: resnet18 | convnext_tiny | efficientnet_b0 | vit_b_16
prints images_per_s=X (after one warm-up run; the model's file is cached in $TMPDIR)
"""
import os
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

name, batch, threads, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
path = os.path.join(tempfile.gettempdir(), f"stoke-ort-{name}.onnx")
if not os.path.exists(path):
    import torch
    import torchvision

    m = getattr(torchvision.models, name)(num_classes=10).eval()
    torch.onnx.export(m, torch.randn(1, 3, 224, 224), path + ".tmp", opset_version=17, input_names=["input"],
                      output_names=["logits"], dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    os.replace(path + ".tmp", path)
so = ort.SessionOptions()
so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
x = np.random.default_rng(1).random((batch, 3, 224, 224), dtype=np.float32)
s.run(None, {"input": x})
t = time.perf_counter()
for _ in range(iters):
    s.run(None, {"input": x})
print(f"images_per_s={batch * iters / (time.perf_counter() - t):.2f}")
