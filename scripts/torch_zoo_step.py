"""Times PyTorch training steps of the models models.BenchmarkTrainStep times in Stoke: the same
architectures (torchvision's), batches, optimizers and random 3-channel images, on the CPU.

usage: torch_zoo_step.py MODEL THREADS STEPS      MODEL: vit | vit_p4 | convnext_tiny | efficientnet_b0 | swin_t
prints samples_per_s=X cpu_ms_per_step=Y (steps after two warm-up steps; CPU time is the
process's, time.process_time, the figure to compare when other work shares the cores)
"""
import sys
import time

import torch
import torchvision

name, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
torch.manual_seed(1)
if name in ("vit", "vit_p4"):
    size, n = 28, 64
    if name == "vit":  # the README's Fashion-MNIST ViT
        m = torchvision.models.VisionTransformer(28, 7, 2, 4, 32, 64, num_classes=10)
    else:  # the issue's: patch 4, 4 layers, hidden 64, MLP 256
        m = torchvision.models.VisionTransformer(28, 4, 4, 4, 64, 256, num_classes=10)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
else:
    size, n = 64, 16
    m = getattr(torchvision.models, name)(num_classes=10)
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
m.train()
x = torch.rand(n, 3, size, size)
y = torch.randint(0, 10, (n,))
loss_fn = torch.nn.CrossEntropyLoss()


def step():
    opt.zero_grad(set_to_none=True)
    loss_fn(m(x), y).backward()
    opt.step()


for _ in range(2):
    step()
t0, c0 = time.perf_counter(), time.process_time()
for _ in range(steps):
    step()
print(f"samples_per_s={steps * n / (time.perf_counter() - t0):.1f} cpu_ms_per_step={(time.process_time() - c0) / steps * 1e3:.3f}")
