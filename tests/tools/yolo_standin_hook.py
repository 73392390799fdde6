#!/usr/bin/env python3
"""yolo_standin_hook.py - a stand-in for scripts/yolo_infer.py where Ultralytics
cannot be installed (CI): a real, tiny detector with the same outputs.

  yolo_standin_hook.py IMAGE.bmp
      finds the pure-red regions of a 24-bit BMP (connected components) and
      writes IMAGE.bmp.json in yolo_infer.py's format (class "red-square") and
      IMAGE.bmp.annotated.bmp with a green box around each one.
  yolo_standin_hook.py --make OUT.bmp W H [x1,y1,x2,y2 ...]
      draws a test image: grey background, a red rectangle per box
      (x2/y2 exclusive).

Results come from the pixels, so a test can check the boxes it drew come back.
Standard library only.
"""
import datetime
import json
import os
import struct
import sys
import time

RED = (220, 20, 20)
GREEN = (0, 200, 0)
MAX_PIXELS = 4096 * 4096


def read_bmp(path):
    data = open(path, "rb").read()
    if len(data) < 54 or data[:2] != b"BM":
        raise ValueError("not a BMP file")
    off, = struct.unpack_from("<I", data, 10)
    hdr, w, h, planes, bpp, comp = struct.unpack_from("<IiiHHI", data, 14)
    if hdr < 40 or planes != 1 or bpp != 24 or comp != 0 or w <= 0 or h == 0:
        raise ValueError("only uncompressed 24-bit BMP is supported")
    top_down, h = h < 0, abs(h)
    if w * h > MAX_PIXELS:
        raise ValueError("image too large")
    stride = (w * 3 + 3) & ~3
    if off + stride * h > len(data):
        raise ValueError("truncated BMP")
    px = []
    for row in range(h):
        src = row if top_down else h - 1 - row
        base = off + src * stride
        px.append([(data[base + 3 * x + 2], data[base + 3 * x + 1], data[base + 3 * x])
                   for x in range(w)])
    return w, h, px


def write_bmp(path, w, h, px):
    stride = (w * 3 + 3) & ~3
    body = bytearray()
    for row in range(h - 1, -1, -1):
        line = bytearray()
        for r, g, b in px[row]:
            line += bytes((b, g, r))
        body += line + b"\0" * (stride - len(line))
    head = b"BM" + struct.pack("<IHHI", 54 + len(body), 0, 0, 54)
    head += struct.pack("<IiiHHIIiiII", 40, w, h, 1, 24, 0, len(body), 2835, 2835, 0, 0)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head + body)
    os.replace(tmp, path)


def is_red(p):
    return p[0] > 200 and p[1] < 60 and p[2] < 60


def detect(w, h, px):
    """Connected components (4-neighbour) of red pixels: one detection each."""
    seen = [[False] * w for _ in range(h)]
    dets = []
    for y in range(h):
        for x in range(w):
            if seen[y][x] or not is_red(px[y][x]):
                continue
            stack, n = [(x, y)], 0
            seen[y][x] = True
            x1, y1, x2, y2 = x, y, x, y
            while stack:
                cx, cy = stack.pop()
                n += 1
                x1, y1, x2, y2 = min(x1, cx), min(y1, cy), max(x2, cx), max(y2, cy)
                for nx, ny in ((cx + 1, cy), (cx - 1, cy), (cx, cy + 1), (cx, cy - 1)):
                    if 0 <= nx < w and 0 <= ny < h and not seen[ny][nx] and is_red(px[ny][nx]):
                        seen[ny][nx] = True
                        stack.append((nx, ny))
            area = (x2 - x1 + 1) * (y2 - y1 + 1)
            if n >= 16:  # specks are noise
                dets.append({"class": "red-square", "class_id": 0,
                             "confidence": round(n / area, 4),
                             "box": [float(x1), float(y1), float(x2 + 1), float(y2 + 1)]})
    return dets


def annotate(w, h, px, dets):
    out = [row[:] for row in px]
    for d in dets:
        x1, y1, x2, y2 = (int(v) for v in d["box"])
        for t in range(2):
            for x in range(max(0, x1 - 2), min(w, x2 + 2)):
                for y in (y1 - 1 - t, y2 + t):
                    if 0 <= y < h:
                        out[y][x] = GREEN
            for y in range(max(0, y1 - 2), min(h, y2 + 2)):
                for x in (x1 - 1 - t, x2 + t):
                    if 0 <= x < w:
                        out[y][x] = GREEN
    return out


def hook(path):
    if not path.lower().endswith(".bmp"):
        print(f"yolo_standin_hook: {os.path.basename(path)}: not a BMP, skipped")
        return 0
    t0 = time.monotonic()
    try:
        w, h, px = read_bmp(path)
    except (OSError, ValueError) as e:
        sys.stderr.write(f"yolo_standin_hook: {path}: {e}\n")
        return 2
    dets = detect(w, h, px)
    annotated = path + ".annotated.bmp"
    write_bmp(annotated, w, h, annotate(w, h, px, dets))
    doc = {"image": os.path.basename(path), "annotated": os.path.basename(annotated),
           "engine": "rdmem stand-in (red regions)", "model": "none",
           "width": w, "height": h, "inference_ms": round((time.monotonic() - t0) * 1000, 1),
           "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "detections": dets}
    tmp = path + ".json.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path + ".json")
    print(f"yolo_standin_hook: {doc['image']}: {len(dets)} detections")
    return 0


def make(out, w, h, boxes):
    w, h = int(w), int(h)
    px = [[(128, 128, 128)] * w for _ in range(h)]
    for b in boxes:
        x1, y1, x2, y2 = (int(v) for v in b.split(","))
        for y in range(y1, y2):
            px[y] = px[y][:x1] + [RED] * (x2 - x1) + px[y][x2:]
    write_bmp(out, w, h, px)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "--make":
        sys.exit(make(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]))
    if len(sys.argv) == 2:
        sys.exit(hook(sys.argv[1]))
    sys.stderr.write(__doc__)
    sys.exit(2)
