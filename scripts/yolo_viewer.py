#!/usr/bin/env python3
"""yolo_viewer.py - a small local web page listing the images rdmem-server
received (its --image-dir) with the detections its YOLO hook wrote.

  scripts/yolo_viewer.py --image-dir DIR [--port 8080] [--bind 127.0.0.1]

  /                the page: newest image first, the annotated picture when the
                   hook made one, a table of detections; it polls /api/images
                   every 2 s and redraws when something arrived or changed
  /api/images      the same list as JSON
  /image/NAME      one file of DIR (only names that are listed)

Loopback only unless --bind says otherwise: the page has no authentication.
Reads <image>.json files in scripts/yolo_infer.py's format; a missing one is
shown as "waiting for the hook", a broken one as unreadable. Standard library only.
"""
import argparse
import html
import http.server
import ipaddress
import json
import os
import socketserver
import sys
import urllib.parse

RESULT_SUFFIX = ".json"
HIDDEN_SUFFIXES = (".json", ".part", ".tmp")
CONTENT_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png",
                 ".bmp": "image/bmp", ".gif": "image/gif", ".webp": "image/webp"}
MAX_RESULT_BYTES = 1 << 20
MAX_LISTED = 500


def is_image_entry(name):
    """An uploaded file: not a result, a temp file, an annotated copy or hidden."""
    return (not name.startswith(".") and not name.endswith(HIDDEN_SUFFIXES)
            and ".annotated." not in name)


def read_result(path):
    try:
        if os.path.getsize(path) > MAX_RESULT_BYTES:
            return None, "result file too large"
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as e:
        return None, f"result unreadable: {e.__class__.__name__}"
    if not isinstance(doc, dict) or not isinstance(doc.get("detections"), list):
        return None, "result unreadable: no detections list"
    dets = []
    for d in doc["detections"]:
        if not isinstance(d, dict):
            continue
        box = d.get("box") if isinstance(d.get("box"), list) else []
        try:
            dets.append({"class": str(d.get("class", "?")),
                         "confidence": float(d.get("confidence", 0)),
                         "box": [float(v) for v in box[:4]]})
        except (TypeError, ValueError):
            continue
    return {"detections": dets, "engine": str(doc.get("engine", "")),
            "model": str(doc.get("model", "")),
            "annotated": str(doc.get("annotated", "")),
            "inference_ms": doc.get("inference_ms") if isinstance(doc.get("inference_ms"), (int, float)) else None}, None


def list_images(d):
    try:
        names = os.listdir(d)
    except OSError:
        return []
    items = []
    present = set(names)
    for name in names:
        path = os.path.join(d, name)
        if not is_image_entry(name) or not os.path.isfile(path) or os.path.islink(path):
            continue
        st = os.stat(path)
        result, problem = read_result(path + RESULT_SUFFIX)
        annotated = result["annotated"] if result else ""
        if annotated not in present or "/" in annotated:
            annotated = ""
        items.append({"name": name, "size": st.st_size, "mtime": st.st_mtime,
                      "state": "done" if result else ("error" if problem else "waiting"),
                      "problem": problem or "", "annotated": annotated,
                      "detections": result["detections"] if result else [],
                      "engine": result["engine"] if result else "",
                      "inference_ms": result["inference_ms"] if result else None})
    items.sort(key=lambda i: (-i["mtime"], i["name"]))
    return items[:MAX_LISTED]


def render_items(items):
    if not items:
        return '<p id="empty">No image received yet.</p>'
    out = []
    for it in items:
        name = html.escape(it["name"])
        src = "/image/" + urllib.parse.quote(it["annotated"] or it["name"])
        if it["state"] == "done":
            if it["detections"]:
                rows = "".join(
                    f'<tr class="det"><td class="cls">{html.escape(d["class"])}</td>'
                    f'<td class="conf">{d["confidence"]:.2f}</td>'
                    f'<td class="box">{", ".join(f"{v:.0f}" for v in d["box"])}</td></tr>'
                    for d in it["detections"])
                body = (f'<table><tr><th>class</th><th>confidence</th><th>box (x1, y1, x2, y2)</th>'
                        f'</tr>{rows}</table>')
            else:
                body = '<p class="none">no detections</p>'
            ms = f', {it["inference_ms"]:.0f} ms' if it["inference_ms"] is not None else ""
            n = len(it["detections"])
            meta = f'{n} detection{"" if n == 1 else "s"} by {html.escape(it["engine"])}{ms}'
        elif it["state"] == "error":
            body, meta = f'<p class="problem">{html.escape(it["problem"])}</p>', "hook result unreadable"
        else:
            body, meta = '<p class="waiting">waiting for the hook</p>', "no result yet"
        out.append(f'<li class="image {it["state"]}" data-name="{name}">'
                   f'<img src="{html.escape(src)}" alt="{name}" width="240">'
                   f'<div><h2>{name}</h2><p class="meta">{it["size"]} bytes; {meta}</p>{body}</div></li>')
    return '<ul id="images">' + "".join(out) + "</ul>"


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>RDMemRPC edge vision</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; background: #fafafa; }}
ul {{ list-style: none; padding: 0; }}
li.image {{ display: flex; gap: 1em; background: #fff; border: 1px solid #ddd; margin: 0 0 1em; padding: 1em; }}
li.image img {{ border: 1px solid #ccc; image-rendering: pixelated; }}
h2 {{ margin: 0 0 .3em; font-size: 1.1em; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: .2em .6em; }}
.meta, #status {{ color: #666; }} .waiting {{ color: #a60; }} .problem {{ color: #b00; }}
</style></head>
<body><h1>Images received</h1>
<p id="status">{count} images in {dir}</p>
<div id="list">{items}</div>
<script>
// Polls the list and redraws when it changed: new uploads and hook results appear by themselves.
let last = "";
function esc(s) {{ return String(s).replace(/[&<>"']/g, c => ({{"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}}[c])); }}
function render(items) {{
  if (!items.length) return '<p id="empty">No image received yet.</p>';
  return '<ul id="images">' + items.map(it => {{
    const src = "/image/" + encodeURIComponent(it.annotated || it.name);
    let body, meta;
    if (it.state === "done") {{
      body = it.detections.length ? '<table><tr><th>class</th><th>confidence</th><th>box (x1, y1, x2, y2)</th></tr>' +
        it.detections.map(d => '<tr class="det"><td class="cls">' + esc(d.class) + '</td><td class="conf">' +
          d.confidence.toFixed(2) + '</td><td class="box">' + d.box.map(v => v.toFixed(0)).join(", ") + '</td></tr>').join("") +
        '</table>' : '<p class="none">no detections</p>';
      meta = it.detections.length + (it.detections.length === 1 ? ' detection' : ' detections') + ' by ' + esc(it.engine) +
        (it.inference_ms === null ? '' : ', ' + it.inference_ms.toFixed(0) + ' ms');
    }} else if (it.state === "error") {{
      body = '<p class="problem">' + esc(it.problem) + '</p>'; meta = 'hook result unreadable';
    }} else {{ body = '<p class="waiting">waiting for the hook</p>'; meta = 'no result yet'; }}
    return '<li class="image ' + it.state + '" data-name="' + esc(it.name) + '"><img src="' + esc(src) + '" alt="' +
      esc(it.name) + '" width="240"><div><h2>' + esc(it.name) + '</h2><p class="meta">' + it.size + ' bytes; ' +
      meta + '</p>' + body + '</div></li>';
  }}).join("") + '</ul>';
}}
async function poll() {{
  try {{
    const r = await fetch("/api/images", {{cache: "no-store"}});
    const items = await r.json();
    const sig = JSON.stringify(items);
    if (sig !== last) {{
      last = sig;
      document.getElementById("list").innerHTML = render(items);
      document.getElementById("status").textContent = items.length + " images, updated " + new Date().toLocaleTimeString();
      document.body.dataset.rendered = "js";
    }}
  }} catch (e) {{ document.getElementById("status").textContent = "viewer unreachable: " + e; }}
}}
poll();
setInterval(poll, 2000);
</script></body></html>
"""


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "rdmem-yolo-viewer"
    image_dir = "."

    def log_message(self, fmt, *args):
        sys.stderr.write("yolo_viewer: %s %s\n" % (self.address_string(), fmt % args))

    def send(self, code, ctype, body, head_only=False):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if not head_only:
            self.wfile.write(body)

    def route(self, head_only):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/":
            # ?js=1 leaves the list to the page's script (tests its redraw path).
            js_only = urllib.parse.parse_qs(url.query).get("js") == ["1"]
            items = list_images(self.image_dir)
            page = PAGE.format(count=len(items), dir=html.escape(self.image_dir),
                               items="" if js_only else render_items(items))
            return self.send(200, "text/html; charset=utf-8", page.encode(), head_only)
        if url.path == "/api/images":
            body = json.dumps(list_images(self.image_dir)).encode()
            return self.send(200, "application/json", body, head_only)
        if url.path.startswith("/image/"):
            name = urllib.parse.unquote(url.path[len("/image/"):])
            # Only a plain name that the directory really holds: no traversal.
            if "/" in name or "\0" in name or name in ("", ".", "..") or name.startswith("."):
                return self.send(404, "text/plain", b"not found\n", head_only)
            path = os.path.join(self.image_dir, name)
            if not os.path.isfile(path) or os.path.islink(path) or name.endswith(".json"):
                return self.send(404, "text/plain", b"not found\n", head_only)
            ext = os.path.splitext(name)[1].lower()
            with open(path, "rb") as f:
                data = f.read()
            return self.send(200, CONTENT_TYPES.get(ext, "application/octet-stream"), data, head_only)
        return self.send(404, "text/plain", b"not found\n", head_only)

    def do_GET(self):
        self.route(False)

    def do_HEAD(self):
        self.route(True)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    ap = argparse.ArgumentParser(description="local page of received images and detections")
    ap.add_argument("--image-dir", required=True, help="rdmem-server's --image-dir")
    ap.add_argument("--port", type=int, default=8080)
    ap.add_argument("--bind", default="127.0.0.1", help="numeric address (default loopback)")
    a = ap.parse_args()
    if not 1 <= a.port <= 65535:
        ap.error("--port must be 1..65535")
    try:
        addr = ipaddress.ip_address(a.bind)
    except ValueError:
        ap.error("--bind needs a numeric IPv4 or IPv6 address")
    if not os.path.isdir(a.image_dir):
        ap.error(f"--image-dir {a.image_dir} is not a directory")
    Handler.image_dir = os.path.abspath(a.image_dir)
    if addr.version == 6:
        Server.address_family = __import__("socket").AF_INET6
    httpd = Server((a.bind, a.port), Handler)
    print(f"yolo_viewer: serving http://{a.bind if addr.version == 4 else '[' + a.bind + ']'}:{a.port}/ "
          f"for {Handler.image_dir}", flush=True)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
