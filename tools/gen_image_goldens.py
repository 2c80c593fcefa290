#!/usr/bin/python3
"""Writes tests/fixtures/images/: small PNG / JPEG / WebP files in every
colour type and depth the decoders handle, plus golden.safetensors with what
Pillow makes of them (`Image.open(f).convert("RGB")`) and Pillow resizes of
two source images with each convolution filter, up and down.

Run with Debian bookworm's python3-pil (Pillow 9.4.0, the version the
multimodal fixtures were made with, linked against the same libjpeg-turbo
2.1.5 and libwebp 1.2.4 as mlxcel): /usr/bin/python3 tools/gen_image_goldens.py
PNG files come from the small encoder below (Pillow cannot write 2-bit gray,
16-bit colour, interlaced files or out-of-range palette indices)."""
import io, json, os, random, struct, sys, zlib
from PIL import Image

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "images")
rng = random.Random(1234)
W, H = 23, 17


def png(w, h, ctype, depth, rows, plte=None, trns=None, interlace=False):
    """rows: list of lists of sample tuples (one tuple per pixel)."""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    def pack_row(px):
        if depth == 16:
            return b"".join(struct.pack(">" + "H" * len(p), *p) for p in px)
        if depth == 8:
            return bytes(v for p in px for v in p)
        bits, acc, n = [], 0, 0
        out = bytearray()
        for p in px:
            acc = (acc << depth) | p[0]
            n += depth
            if n == 8:
                out.append(acc)
                acc, n = 0, 0
        if n:
            out.append(acc << (8 - n))
        return bytes(out)

    raw = bytearray()
    if not interlace:
        for r in rows:
            raw += b"\0" + pack_row(r)
    else:  # Adam7
        for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)):
            for y in range(y0, h, dy):
                sub = [rows[y][x] for x in range(x0, w, dx)]
                if sub:
                    raw += b"\0" + pack_row(sub)
    s = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 1 if interlace else 0))
    if plte is not None:
        s += chunk(b"PLTE", bytes(plte))
    if trns is not None:
        s += chunk(b"tRNS", bytes(trns))
    return s + chunk(b"IDAT", zlib.compress(bytes(raw))) + chunk(b"IEND", b"")


def samples(n, maxv):
    return [[tuple(rng.randint(0, maxv) for _ in range(n)) for _ in range(W)] for _ in range(H)]


def scene(w, h, noise=12):
    """Gradients, a disc and noise: smooth areas and edges."""
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):
            r = int(255 * x / max(1, w - 1))
            g = int(255 * y / max(1, h - 1))
            b = 255 if (x - w / 2) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 3) ** 2 else 40
            n = rng.randint(-noise, noise)
            px[x, y] = tuple(max(0, min(255, v + n)) for v in (r, g, b))
    return im


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    for d in (1, 2, 4, 8, 16):
        files[f"png_gray{d}.png"] = png(W, H, 0, d, samples(1, (1 << d) - 1))
    g = samples(1, 255)
    g[0][:5] = [(7,)] * 5  # pixels that match the transparent value
    files["png_gray8_trns.png"] = png(W, H, 0, 8, g, trns=[0, 7])
    files["png_gray2_trns.png"] = png(W, H, 0, 2, samples(1, 3), trns=[0, 0])
    g = samples(1, 300)
    g[1][:4] = [(200,)] * 4
    files["png_gray16_trns.png"] = png(W, H, 0, 16, g, trns=[0, 200])
    files["png_gray16_interlaced.png"] = png(W, H, 0, 16, samples(1, 65535), interlace=True)
    files["png_gray_alpha8.png"] = png(W, H, 4, 8, samples(2, 255))
    files["png_gray_alpha16.png"] = png(W, H, 4, 16, samples(2, 65535))
    files["png_rgb8.png"] = png(W, H, 2, 8, samples(3, 255))
    files["png_rgb8_interlaced.png"] = png(W, H, 2, 8, samples(3, 255), interlace=True)
    files["png_rgb16.png"] = png(W, H, 2, 16, samples(3, 65535))
    g = samples(3, 255)
    g[2][3:9] = [(1, 2, 3)] * 6
    files["png_rgb8_trns.png"] = png(W, H, 2, 8, g, trns=[0, 1, 0, 2, 0, 3])
    files["png_rgba8.png"] = png(W, H, 6, 8, samples(4, 255))
    files["png_rgba16_interlaced.png"] = png(W, H, 6, 16, samples(4, 65535), interlace=True)
    for d in (1, 2, 4, 8):
        n = max(1, (1 << d) - 1)  # a palette one entry short: the last index is out of range
        plte = [rng.randint(0, 255) for _ in range(3 * n)]
        files[f"png_palette{d}.png"] = png(W, H, 3, d, samples(1, (1 << d) - 1), plte=plte, trns=[0, 128][: min(2, n)],
                                           interlace=(d == 4))
    base = scene(W, H)
    for name, mode, kw in (("jpeg_gray.jpg", "L", {}), ("jpeg_rgb420.jpg", "RGB", {}),
                           ("jpeg_rgb444.jpg", "RGB", {"subsampling": 0}), ("jpeg_rgb422.jpg", "RGB", {"subsampling": 1}),
                           ("jpeg_progressive.jpg", "RGB", {"progressive": True}), ("jpeg_cmyk.jpg", "CMYK", {})):
        b = io.BytesIO()
        base.convert(mode).save(b, "JPEG", quality=90, **kw)
        files[name] = b.getvalue()
    rgba = base.convert("RGBA")
    a = rgba.load()
    for y in range(H):
        for x in range(W):
            a[x, y] = a[x, y][:3] + ((x * 37 + y * 11) % 256 if (x + y) % 5 else 0,)
    for name, im, kw in (("webp_lossy.webp", base, {"quality": 80}), ("webp_lossless.webp", base, {"lossless": True}),
                         ("webp_lossless_alpha.webp", rgba, {"lossless": True, "exact": True}),
                         ("webp_lossy_alpha.webp", rgba, {"quality": 80})):
        b = io.BytesIO()
        im.save(b, "WEBP", **kw)
        files[name] = b.getvalue()
    b = io.BytesIO()
    rgba.save(b, "WEBP", save_all=True, append_images=[base.convert("RGBA").transpose(Image.FLIP_LEFT_RIGHT)],
              duration=100, lossless=True)
    files["webp_animated.webp"] = b.getvalue()

    tensors = {}
    for name, data in sorted(files.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        im = Image.open(io.BytesIO(data))
        rgb = im.convert("RGB")
        tensors["rgb/" + name] = ("U8", [rgb.height, rgb.width, 3], rgb.tobytes())
        # Idefics3's convert_to_rgb: convert("RGBA") composited over white
        white = Image.alpha_composite(Image.new("RGBA", im.size, (255, 255, 255)), im.convert("RGBA")).convert("RGB")
        tensors["white/" + name] = ("U8", [rgb.height, rgb.width, 3], white.tobytes())

    # resize goldens: a smooth scene and pure noise (bicubic/lanczos overshoot, clipping)
    noise = Image.frombytes("RGB", (31, 19), bytes(rng.randint(0, 255) for _ in range(31 * 19 * 3)))
    sources = {"scene": scene(41, 29), "noise": noise}
    filters = {"lanczos": Image.LANCZOS, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC, "box": Image.BOX,
               "hamming": Image.HAMMING}
    for sname, src in sources.items():
        tensors[f"src/{sname}"] = ("U8", [src.height, src.width, 3], src.tobytes())
        sw, sh = src.size
        sizes = [(17, 11), (7, 5), (1, 1), (56, 56), (97, 40), (sw, 60), (20, sh), (3, 2), (sw + 1, sh - 1)]
        for fname, fid in filters.items():
            for (w, h) in sizes:
                out = src.resize((w, h), resample=fid)
                tensors[f"resize/{sname}/{fname}/{w}x{h}"] = ("U8", [h, w, 3], out.tobytes())

    header, off, blobs = {}, 0, []
    for k in sorted(tensors):
        dt, shape, data = tensors[k]
        header[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
        blobs.append(data)
    import PIL
    header["__metadata__"] = {"pillow": PIL.__version__, "generator": "tools/gen_image_goldens.py"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(OUT, "golden.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    print(f"{len(files)} files, {len(tensors)} tensors, {off} bytes")


if __name__ == "__main__":
    sys.exit(main())
