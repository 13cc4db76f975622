#!/usr/bin/env python3
"""PyTorch peer of stoke's training step (go test ./train -bench 'Step/M$'): one fixed batch of
random pixels normalized as stoke does, SGD momentum 0.9, cross-entropy, on the CPU.
--model resnet18 (or any torchvision model name): torchvision's model with num_classes=10 on
--size px RGB images. --model mlp|cnn: the MNIST networks of stoke's NewModel (and of
../shared/peers/torch_mnist.py) on 1x28x28 images (--size is ignored).

usage: torch_resnet.py [--batch 32] [--size 64] [--threads 2] [--steps 10] [--model resnet18|mlp|cnn]
prints: samples_per_s=N cpu_ms_per_sample=M (timed steps after 2 warm-up steps; CPU time is
process user+system, the fairer figure on a shared machine)

Debian: apt-get install -y python3-torchvision libopenblas0-pthread (see ../../shared/peers/README.md).
"""
import argparse
import time

import torch
import torchvision


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--model", default="resnet18")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    nn = torch.nn
    channels, size = 3, a.size
    if a.model == "mlp":
        channels, size = 1, 28
        model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                              nn.Linear(256, 10))
    elif a.model == "cnn":
        channels, size = 1, 28
        model = nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = getattr(torchvision.models, a.model)(num_classes=10)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    pixels = torch.randint(0, 256, (a.batch, channels, size, size), dtype=torch.uint8)
    labels = torch.randint(0, 10, (a.batch,))

    def step():
        x = (pixels.float() / 255 - 0.3) / 0.3
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), labels)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(2):
        step()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(a.steps):
        step()
    el, cpu = time.perf_counter() - start, time.process_time() - cpu
    n = a.steps * a.batch
    print(f"model={a.model} samples_per_s={n / el:.2f} cpu_ms_per_sample={1000 * cpu / n:.4f} batch={a.batch} size={size} threads={a.threads}")


if __name__ == "__main__":
    main()
