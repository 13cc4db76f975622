#!/usr/bin/env python3
"""PyTorch peer of `stoke train --data mnist:DIR --model 'vit(...)' --epochs 5`: torchvision's
VisionTransformer trained with stoke's default vit recipe (train.RecipeFor, models/recipes.go) on
the same MNIST-format IDX files, for issue 31's "within 1 point" comparison (docs/figures.md,
"ViT on Fashion-MNIST").

What it copies from stoke, and where stoke defines it:
  * data: DIR's {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; no augmentation (stoke's
    training transform for 28x28 gray images without --augment or --size is none: cli/data.go
    baseTransform); pixels (v/255 - mean)/std with Fashion-MNIST's 0.2860/0.3530 (datasets/mnist.go,
    --mean/--std to change); a new shuffle each epoch; the last partial batch kept (59,945 images
    at batch 64: 937 steps an epoch);
  * model: torchvision.models.VisionTransformer with the given arguments, num_classes 10, its own
    initialization (stoke's models/vit.go copies it), dropout 0, its patch projection replaced by
    one of 1 input channel (torchvision's takes 3; stoke's the images' own), initialized as
    torchvision's (truncated normal, std sqrt(1/fan_in), bias zeros);
  * optimizer: AdamW betas (0.9, 0.999), eps 1e-8, lr 4e-3 * batch/512 (5e-4 at batch 64), weight
    decay 0.05 on weights only: not on biases, LayerNorms, the position embedding or the class
    token (train.Param.Decayed);
  * schedule: per optimizer step s (from 0) of S in all, P per epoch, warm = int(0.2 * P):
    factor (s+1)/warm while s < warm, then 0.5 * (1 + cos(pi * (s - warm) / (S - warm)))
    (train.Cosine);
  * loss: cross-entropy with label smoothing 0.1, the mean over the batch;
  * evaluation: top-1 accuracy on the t10k files after every epoch.

usage: torch_vit_fmnist.py DIR [--seed 1] [--epochs 5] [--vit image_size=28,patch_size=7,...]
prints per epoch: loss, test accuracy, seconds; last line: accuracy=X (a fraction, as stoke's
test_acc). Needs torch >= 2 and torchvision (e.g. a venv). One thread by default (--threads): on
a busy 2-core machine two threads made torch's steps of this small model 20 times slower (285 ms
against 14 ms a step), its OpenMP threads waiting on each other.
"""
import argparse
import gzip
import math
import os
import struct
import time

import torch
import torchvision


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def find(d, base):
    for name in (base, base + ".gz"):
        if os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    raise SystemExit(f"no {base}[.gz] in {d}")


def load(d, prefix, mean, std):
    x = read_idx(find(d, f"{prefix}-images-idx3-ubyte"))
    y = read_idx(find(d, f"{prefix}-labels-idx1-ubyte")).long()
    x = (x.float().unsqueeze(1) / 255 - mean) / std
    return x, y


def cosine(step, per_epoch, total, warmup_epochs):
    """train.Cosine."""
    warm = int(warmup_epochs * per_epoch)
    if step < warm:
        return (step + 1) / warm
    span = total - warm
    if span <= 0:
        return 1.0
    return 0.5 * (1 + math.cos(math.pi * (step - warm) / span))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--vit", default="image_size=28,patch_size=7,num_layers=2,num_heads=4,hidden_dim=32,mlp_dim=64")
    ap.add_argument("--lr", type=float, default=4e-3, help="peak lr per 512 samples of batch")
    ap.add_argument("--wd", type=float, default=0.05)
    ap.add_argument("--warmup-epochs", type=float, default=0.2)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--mean", type=float, default=0.2860)
    ap.add_argument("--std", type=float, default=0.3530)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    xtr, ytr = load(a.dir, "train", a.mean, a.std)
    xte, yte = load(a.dir, "t10k", a.mean, a.std)
    kw = {k: int(v) for k, v in (kv.split("=") for kv in a.vit.split(","))}
    model = torchvision.models.VisionTransformer(num_classes=10, **kw)
    # torchvision's patch projection takes 3 channels; stoke's takes the images' 1. Replace it
    # and initialize it as torchvision's VisionTransformer.__init__ does its own.
    proj = model.conv_proj
    model.conv_proj = torch.nn.Conv2d(1, proj.out_channels, proj.kernel_size, stride=proj.stride)
    torch.nn.init.trunc_normal_(model.conv_proj.weight, std=math.sqrt(1 / (1 * proj.kernel_size[0] * proj.kernel_size[1])))
    torch.nn.init.zeros_(model.conv_proj.bias)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.ndim <= 1 or name in ("class_token", "encoder.pos_embedding"):
            no_decay.append(p)
        else:
            decay.append(p)
    lr = a.lr * a.batch / 512
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.999), eps=1e-8)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=a.label_smoothing)
    n = len(ytr)
    per_epoch = math.ceil(n / a.batch)
    total = per_epoch * a.epochs
    print(f"torch {torch.__version__} torchvision {torchvision.__version__}, {torch.get_num_threads()} threads; "
          f"vit({a.vit}) {sum(p.numel() for p in model.parameters())} parameters; {n} train, {len(yte)} test images; "
          f"adamw lr={lr:g} wd={a.wd:g} (on {len(decay)} of {len(decay) + len(no_decay)} tensors), batch {a.batch}, "
          f"{per_epoch} steps/epoch, seed {a.seed}", flush=True)
    gen = torch.Generator().manual_seed(a.seed)
    step, acc = 0, 0.0
    for epoch in range(1, a.epochs + 1):
        model.train()
        start, loss_sum = time.perf_counter(), 0.0
        order = torch.randperm(n, generator=gen)
        for i in range(per_epoch):
            idx = order[i * a.batch:(i + 1) * a.batch]
            f = cosine(step, per_epoch, total, a.warmup_epochs)
            for g in opt.param_groups:
                g["lr"] = lr * f
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xtr[idx]), ytr[idx])
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(idx)
            step += 1
        train_s = time.perf_counter() - start
        model.eval()
        correct = 0
        with torch.no_grad():
            for i in range(0, len(yte), 1000):
                correct += (model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
        acc = correct / len(yte)
        print(f"epoch {epoch}/{a.epochs}: train loss {loss_sum / n:.4f}, test accuracy {100 * acc:.2f}%, "
              f"{train_s:.1f} s training, {time.perf_counter() - start:.1f} s with the evaluation", flush=True)
    print(f"accuracy={acc:.4f}")


if __name__ == "__main__":
    main()
