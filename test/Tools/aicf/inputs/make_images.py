"""Writes the digits table as an image folder, as torchvision's ImageFolder reads one.

    make_images.py DIGITS.csv.gz OUT [--split] [--rgb] [--scale K] [--bmp N] [--per-class N] [--names]

One 8x8 gray PNG per row (pixels 0..16 written as 0..255), in OUT/<label>/<row>.png
(`--names`: OUT/digit-<label>/...); `--split` puts every fifth row in OUT/val/ and the
rest in OUT/train/; `--rgb` writes RGB images (the digit in red and green, blue 0);
`--scale K` writes them K times larger (nearest neighbour); `--bmp N` writes the
first N images of each class as BMP instead; `--per-class N` keeps N rows of each
class. Pure Python (zlib, struct): no imaging library needed.
"""

import argparse
import gzip
import os
import struct
import zlib


def png(width, height, channels, rows):
    """PNG bytes of 8-bit gray (1 channel) or RGB (3) pixels, `rows` a list of byte rows."""
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    colour = {1: 0, 3: 2}[channels]
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def bmp(width, height, channels, rows):
    """24-bit BMP bytes (gray written as equal R, G, B), bottom row first."""
    pad = (4 - (width * 3) % 4) % 4
    data = b""
    for r in reversed(rows):
        line = b""
        for x in range(width):
            px = r[x * channels:(x + 1) * channels]
            rgb = px * 3 if channels == 1 else px
            line += bytes([rgb[2], rgb[1], rgb[0]])
        data += line + b"\x00" * pad
    header = struct.pack("<2sIHHI", b"BM", 54 + len(data), 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(data), 2835, 2835, 0, 0)
    return header + info + data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("table")
    ap.add_argument("out")
    ap.add_argument("--split", action="store_true")
    ap.add_argument("--rgb", action="store_true")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--bmp", type=int, default=0)
    ap.add_argument("--per-class", type=int, default=0)
    ap.add_argument("--names", action="store_true")
    a = ap.parse_args()
    opener = gzip.open if a.table.endswith(".gz") else open
    with opener(a.table, "rt") as f:
        lines = [l.strip() for l in f if l.strip()]
    kept = {}
    for i, line in enumerate(lines):
        values = [float(v) for v in line.split(",")]
        pixels, label = values[:-1], int(values[-1])
        n = kept.get(label, 0)
        if a.per_class and n >= a.per_class:
            continue
        kept[label] = n + 1
        side = 8 * a.scale
        channels = 3 if a.rgb else 1
        rows = []
        for y in range(side):
            row = []
            for x in range(side):
                v = int(round(pixels[(y // a.scale) * 8 + x // a.scale] * 255 / 16))
                row += [v, v, 0] if a.rgb else [v]
            rows.append(row)
        part = ""
        if a.split:
            part = "val" if i % 5 == 0 else "train"
        folder = os.path.join(a.out, part, f"digit-{label}" if a.names else str(label))
        os.makedirs(folder, exist_ok=True)
        if n < a.bmp:
            name, data = f"{i:04d}.bmp", bmp(side, side, channels, rows)
        else:
            name, data = f"{i:04d}.png", png(side, side, channels, rows)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
