"""PIL's (and torchvision's) view of JPEG files, for the exact-decode tests of transforms.

    python3 pilref.py gen OUT SRC...   write PIL-encoded variants of the images SRC into OUT
    python3 pilref.py ref FILE...      write FILE.rgb: PIL's decode, convert("RGB"), HWC bytes;
                                       with torchvision, also FILE.eval224.rgb and FILE.eval32.rgb:
                                       Resize(size*8//7) + CenterCrop(size), as transforms.Eval,
                                       and FILE.bicubic224.rgb: Resize(232, bicubic) +
                                       CenterCrop(224), swin_t's weights' transform

Each output starts with a line "W H\\n" then the bytes.
"""
import os
import sys

from PIL import Image


def gen(out, srcs):
    os.makedirs(out, exist_ok=True)
    for n, src in enumerate(srcs):
        im = Image.open(src).convert("RGB")
        base = os.path.join(out, "p%d" % n)
        im.save(base + "-420.jpg", quality=90, subsampling=2)
        im.save(base + "-422.jpg", quality=85, subsampling=1)
        im.save(base + "-444.jpg", quality=95, subsampling=0)
        im.save(base + "-420-q50.jpg", quality=50, subsampling=2)
        im.save(base + "-prog420.jpg", quality=90, subsampling=2, progressive=True)
        im.save(base + "-prog444.jpg", quality=80, subsampling=0, progressive=True)
        im.convert("L").save(base + "-gray.jpg", quality=90)
        im.convert("CMYK").save(base + "-cmyk.jpg", quality=90)
        w, h = im.size
        odd = im.crop((3, 5, min(w, 3 + 67), min(h, 5 + 45)))
        odd.save(base + "-odd420.jpg", quality=90, subsampling=2)
        odd.save(base + "-odd422.jpg", quality=90, subsampling=1)
        odd.resize((5, 3)).save(base + "-tiny420.jpg", quality=90, subsampling=2)
        odd.resize((2, 7)).save(base + "-narrow420.jpg", quality=90, subsampling=2)


def write(path, w, h, data):
    with open(path, "wb") as f:
        f.write(b"%d %d\n" % (w, h))
        f.write(data)


def ref(files):
    try:
        import torchvision.transforms as T
    except Exception:
        T = None
    for f in files:
        im = Image.open(f)
        im.load()
        rgb = im.convert("RGB")
        write(f + ".rgb", rgb.size[0], rgb.size[1], rgb.tobytes())
        if T is None:
            continue
        for size in (224, 32):
            t = T.Compose([T.Resize(size * 8 // 7), T.CenterCrop(size)])
            o = t(rgb)
            write(f + ".eval%d.rgb" % size, o.size[0], o.size[1], o.tobytes())
        t = T.Compose([T.Resize(232, interpolation=T.InterpolationMode.BICUBIC), T.CenterCrop(224)])
        o = t(rgb)
        write(f + ".bicubic224.rgb", o.size[0], o.size[1], o.tobytes())


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], sys.argv[3:])
    else:
        ref(sys.argv[2:])
