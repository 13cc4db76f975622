#!/usr/bin/env python3
"""The loader peers, each timed the same way: RandomResizedCrop(224) (scale 0.08-1, ratio 3/4-4/3)
+ horizontal flip + normalization to float32, batches of 64 from a folder of JPEGs (class per
subfolder), one untimed warm-up epoch, then --epochs timed epochs.

usage:
  scripts/peer-loaders.py torch  DIR [--threads 2] [--epochs 2]   (/usr/bin/python3, Debian's torch)
  scripts/peer-loaders.py dali   DIR [--threads 2] [--epochs 2]   (a venv with nvidia-dali-cuda120)
  scripts/peer-loaders.py tfdata DIR [--threads 2] [--epochs 2]   (a venv with tensorflow-cpu)

Prints one JSON line: peer, threads, images, seconds, images_per_s, cpu_ms_per_image. The CPU time
is user+system of the whole process tree (the DataLoader's worker processes included), read from
/proc at the start and at the end of the timed epochs, so imports and the warm-up do not count.

The pipelines (see ../shared/peers/README.md):
  torch:  torchvision ImageFolder + DataLoader(num_workers=threads), RandomResizedCrop,
          RandomHorizontalFlip, ToTensor, Normalize (the same as ../shared/peers/torch_loader.py).
  dali:   NVIDIA DALI's CPU operators with no GPU (device_id=None, num_threads=threads):
          readers.file -> decoders.image_random_crop (libjpeg-turbo, decodes only the crop) ->
          resize(224, 224) -> crop_mirror_normalize(mirror=coin_flip, float, CHW).
  tfdata: tf.data with AUTOTUNE on a private thread pool of `threads` threads, TensorFlow's own
          pools limited to the same: read_file -> sample_distorted_bounding_box ->
          decode_and_crop_jpeg -> resize(224, 224) -> random_flip_left_right -> normalize -> CHW,
          batch, prefetch.

Install (outside the repository):
  python3 -m venv /tmp/stoke-peers-venv
  /tmp/stoke-peers-venv/bin/pip install nvidia-dali-cuda120==2.4.0 tensorflow-cpu==2.21.0
"""
import argparse, json, math, os, time

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BATCH, SIZE = 64, 224


def tree_cpu_seconds(root=None):
    """User+system seconds of process root (default: this one) and all its descendants alive now."""
    root = root or os.getpid()
    kids, stats = {}, {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        f = s[s.rindex(")") + 2:].split()  # fields after the command name, from state (field 3)
        stats[int(d)] = int(f[11]) + int(f[12])  # utime, stime (fields 14, 15)
        kids.setdefault(int(f[1]), []).append(int(d))  # ppid (field 4)
    total, todo = 0, [root]
    while todo:
        p = todo.pop()
        total += stats.get(p, 0)
        todo += kids.get(p, [])
    return total / os.sysconf("SC_CLK_TCK")


def files_of(root):
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    out = []
    for i, c in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(root, c))):
            if f.lower().endswith((".jpg", ".jpeg")):
                out.append((os.path.join(root, c, f), i))
    return out


def torch_epochs(a):
    import torch
    from torchvision import datasets, transforms as T
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(SIZE), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    dl = torch.utils.data.DataLoader(datasets.ImageFolder(a.dir, tf), batch_size=BATCH, shuffle=True,
                                     num_workers=a.threads, persistent_workers=a.threads > 0)

    def epoch():
        return sum(x.shape[0] for x, _ in dl)
    return epoch


def dali_epochs(a):
    from nvidia.dali import fn, pipeline_def, types
    n = len(files_of(a.dir))

    @pipeline_def(batch_size=BATCH, num_threads=a.threads, device_id=None)
    def pipe():
        jpegs, labels = fn.readers.file(file_root=a.dir, random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[0.75, 1.333])
        images = fn.resize(images, resize_x=SIZE, resize_y=SIZE)
        images = fn.crop_mirror_normalize(images, device="cpu", mirror=fn.random.coin_flip(),
                                          dtype=types.FLOAT, output_layout="CHW",
                                          mean=[m * 255 for m in MEAN], std=[s * 255 for s in STD])
        return images, labels

    p = pipe()
    p.build()
    batches = math.ceil(n / BATCH)

    def epoch():
        got = 0
        for _ in range(batches):
            images, _ = p.run()
            got += len(images)
        return got
    return epoch


def tfdata_epochs(a):
    import tensorflow as tf
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    paths, labels = zip(*files_of(a.dir))
    mean, std = tf.constant(MEAN), tf.constant(STD)

    def load(path, label):
        data = tf.io.read_file(path)
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.image.extract_jpeg_shape(data), bounding_boxes=tf.zeros([1, 0, 4]), min_object_covered=0,
            aspect_ratio_range=(3 / 4, 4 / 3), area_range=(0.08, 1.0), max_attempts=10,
            use_image_if_no_bounding_boxes=True)
        y, x, _ = tf.unstack(begin)
        h, w, _ = tf.unstack(size)
        img = tf.image.decode_and_crop_jpeg(data, tf.stack([y, x, h, w]), channels=3)
        img = tf.image.resize(img, [SIZE, SIZE])
        img = tf.image.random_flip_left_right(img)
        img = (img / 255.0 - mean) / std
        return tf.transpose(img, [2, 0, 1]), label

    opts = tf.data.Options()
    opts.threading.private_threadpool_size = a.threads
    ds = (tf.data.Dataset.from_tensor_slices((list(paths), list(labels))).shuffle(len(paths))
          .map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH).prefetch(tf.data.AUTOTUNE)
          .with_options(opts))

    def epoch():
        return sum(int(x.shape[0]) for x, _ in ds)
    return epoch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("peer", choices=["torch", "dali", "tfdata"])
    ap.add_argument("dir")
    ap.add_argument("--threads", type=int, default=2, help="worker processes (torch) or threads (dali, tfdata)")
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    epoch = {"torch": torch_epochs, "dali": dali_epochs, "tfdata": tfdata_epochs}[a.peer](a)
    epoch()  # warm-up: page cache, worker start-up, autotuning
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    n = sum(epoch() for _ in range(a.epochs))
    dt, cpu = time.perf_counter() - t0, tree_cpu_seconds() - cpu0
    print(json.dumps({"peer": a.peer, "threads": a.threads, "images": n, "seconds": round(dt, 3),
                      "images_per_s": n / dt, "cpu_ms_per_image": cpu * 1e3 / n}))


if __name__ == "__main__":
    main()
