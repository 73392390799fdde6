#!/usr/bin/env python3
"""yolo_infer.py - rdmem-server's post-commit hook for edge vision.

  rdmem-server --image-dir DIR --image-hook "scripts/yolo_infer.py [--model M] [--conf C]"

The server runs it as `yolo_infer.py [options] <final image path>` after each
committed upload. It runs Ultralytics YOLO on the image and writes, next to it:

  <image>.json            the detections (format below), written atomically
  <image>.annotated.jpg   the image with boxes and labels drawn

  {"image": "cat.jpg", "annotated": "cat.jpg.annotated.jpg", "engine": "ultralytics 8.x.y",
   "model": "yolov8n.pt", "width": 640, "height": 480, "inference_ms": 41.2,
   "created": "2026-01-01T00:00:00+00:00",
   "detections": [{"class": "cat", "class_id": 15, "confidence": 0.91,
                   "box": [x1, y1, x2, y2]}]}

(box in pixels of the original image). scripts/yolo_viewer.py shows them.

Without Ultralytics (`pip install ultralytics`), or without local model weights,
it exits with status 3 and one clear line: the upload itself is already
committed and stays; the server logs the hook's message and counts the failure
(`rdmem stats`: hooks.failures). It never downloads weights: --model must name a
local file (default $RDMEM_YOLO_MODEL, else yolov8n.pt beside this script).
Files that are not images (by extension) are skipped with status 0.
"""
import argparse
import datetime
import json
import os
import sys
import tempfile
import time

IMAGE_EXT = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")
EXIT_UNAVAILABLE = 3
EXIT_BAD_INPUT = 2


def fail(code, msg):
    sys.stderr.write(f"yolo_infer: {msg}\n")
    sys.exit(code)


def write_json_atomic(path, doc):
    """Writes path via a temp file and rename: the viewer never sees half a file."""
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".yolo-", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def check_image(path):
    if not os.path.isfile(path) or os.path.islink(path):
        fail(EXIT_BAD_INPUT, f"{path}: not a regular file")
    return path.lower().endswith(IMAGE_EXT)


def default_model():
    env = os.environ.get("RDMEM_YOLO_MODEL")
    return env if env else os.path.join(os.path.dirname(os.path.abspath(__file__)), "yolov8n.pt")


def main(argv):
    ap = argparse.ArgumentParser(description="YOLO post-commit hook for rdmem-server")
    ap.add_argument("--model", default=default_model(), help="local YOLO weights file")
    ap.add_argument("--conf", type=float, default=0.25, help="confidence threshold (0..1)")
    ap.add_argument("image")
    a = ap.parse_args(argv)
    if not 0.0 <= a.conf <= 1.0:
        fail(EXIT_BAD_INPUT, "--conf must be within 0..1")
    if not check_image(a.image):
        print(f"yolo_infer: {os.path.basename(a.image)}: not an image (by extension), skipped")
        return 0
    try:
        import ultralytics  # noqa: F401  (probed first: a clear message beats a traceback)
        from ultralytics import YOLO
    except ImportError:
        fail(EXIT_UNAVAILABLE, f"Ultralytics YOLO is not installed in {sys.executable} "
             f"(pip install ultralytics); no detections for {os.path.basename(a.image)}; "
             f"the upload itself is stored")
    if not os.path.isfile(a.model):
        fail(EXIT_UNAVAILABLE, f"model weights {a.model} not found (give --model or "
             f"RDMEM_YOLO_MODEL a local file; this hook never downloads)")
    t0 = time.monotonic()
    model = YOLO(a.model)
    results = model.predict(a.image, conf=a.conf, verbose=False)
    ms = (time.monotonic() - t0) * 1000.0
    r = results[0]
    names = r.names
    dets = []
    for box in r.boxes:
        cls = int(box.cls[0])
        dets.append({"class": str(names.get(cls, cls)), "class_id": cls,
                     "confidence": round(float(box.conf[0]), 4),
                     "box": [round(float(v), 1) for v in box.xyxy[0].tolist()]})
    annotated = a.image + ".annotated.jpg"
    # plot() returns the image with boxes drawn (BGR); save it through PIL.
    from PIL import Image
    plotted = r.plot()
    Image.fromarray(plotted[..., ::-1]).save(annotated + ".tmp.jpg")
    os.replace(annotated + ".tmp.jpg", annotated)
    h, w = r.orig_shape[:2]
    doc = {"image": os.path.basename(a.image), "annotated": os.path.basename(annotated),
           "engine": f"ultralytics {getattr(ultralytics, '__version__', '?')}",
           "model": os.path.basename(a.model), "width": int(w), "height": int(h),
           "inference_ms": round(ms, 1),
           "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "detections": dets}
    write_json_atomic(a.image + ".json", doc)
    print(f"yolo_infer: {doc['image']}: {len(dets)} detections in {ms:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
