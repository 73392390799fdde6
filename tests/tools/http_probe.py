#!/usr/bin/env python3
"""http_probe.py - a tiny HTTP client for the /metrics tests (stdlib only).

  http_probe.py get PORT PATH [METHOD]   prints "CODE", the headers, a blank line, the body
  http_probe.py raw PORT BYTES           sends BYTES (Python escapes: \\r\\n) as is; prints CODE
  http_probe.py big PORT N               sends N header bytes that never end; prints CODE
  http_probe.py idle PORT SECONDS        connects, prints "connected NS" (wall clock, ns),
                                         sends nothing, holds the socket
  http_probe.py format FILE              checks Prometheus text format; prints problems
  http_probe.py value FILE NAME [LABELS] prints the sample's value (or "absent")

CODE is the HTTP status, or "closed" when the server closed without an answer.
"""
import re
import signal
import socket
import sys
import time

HOST = "127.0.0.1"


def exchange(port, data, timeout=10.0):
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                break
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks)


def status(resp):
    m = re.match(rb"HTTP/1\.[01] (\d{3}) ", resp)
    return m.group(1).decode() if m else "closed"


def cmd_get(port, path, method="GET"):
    resp = exchange(int(port), f"{method} {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
    head, _, body = resp.partition(b"\r\n\r\n")
    print(status(resp))
    print(head.decode("latin-1").split("\r\n", 1)[-1])
    print()
    sys.stdout.write(body.decode("utf-8", "replace"))


def cmd_raw(port, text):
    data = text.encode("latin-1").decode("unicode_escape").encode("latin-1")
    print(status(exchange(int(port), data)))


def cmd_big(port, n):
    data = b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * int(n)
    try:
        print(status(exchange(int(port), data)))
    except (BrokenPipeError, ConnectionResetError):
        print("closed")


def cmd_idle(port, secs):
    with socket.create_connection((HOST, int(port)), timeout=30) as s:
        # The kernel queues a connection in order: once this line is out, a
        # later connect is accepted after this one (the capacity test's
        # ordering rests on it).
        print(f"connected {time.time_ns()}", flush=True)
        time.sleep(float(secs))
        s.settimeout(1)
        try:
            print("closed-by-server" if s.recv(1) == b"" else "data")
        except (socket.timeout, ConnectionResetError):
            print("still-open")


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^{}]*\})? (-?[0-9.eE+-]+|\+Inf|NaN)$')
LABEL = re.compile(r'^[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"$')


def parse(path):
    samples, problems, types = [], [], {}
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) != 4 or parts[3] not in ("counter", "gauge", "histogram"):
                problems.append(f"line {n}: bad TYPE line: {line}")
            elif parts[2] in types:
                problems.append(f"line {n}: second TYPE for {parts[2]}")
            else:
                types[parts[2]] = parts[3]
            continue
        if line.startswith("# HELP ") or not line:
            continue
        m = SAMPLE.match(line)
        if not m:
            problems.append(f"line {n}: not a sample: {line}")
            continue
        labels = {}
        if m.group(2):
            for item in m.group(2)[1:-1].split(","):
                if not LABEL.match(item):
                    problems.append(f"line {n}: bad label {item!r}")
                    continue
                k, v = item.split("=", 1)
                labels[k] = v[1:-1]
        samples.append((m.group(1), labels, float(m.group(3))))
    return samples, problems, types


def cmd_format(path):
    samples, problems, types = parse(path)
    for name, labels, _ in samples:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in types and base not in types:
            problems.append(f"{name}: no TYPE line")
    # Histograms: buckets cumulative, +Inf equal to _count.
    series = {}
    for name, labels, v in samples:
        if name.endswith("_bucket"):
            key = (name[:-7], tuple(sorted((k, x) for k, x in labels.items() if k != "le")))
            series.setdefault(key, []).append((labels["le"], v))
    counts = {(n[:-6], tuple(sorted(l.items()))): v for n, l, v in samples if n.endswith("_count")}
    for key, buckets in series.items():
        values = [v for _, v in buckets]
        if values != sorted(values):
            problems.append(f"{key}: buckets not cumulative")
        if buckets[-1][0] != "+Inf":
            problems.append(f"{key}: last bucket is not +Inf")
        elif counts.get(key) != buckets[-1][1]:
            problems.append(f"{key}: _count {counts.get(key)} != +Inf bucket {buckets[-1][1]}")
    for p in problems:
        print(p)
    print(f"{len(samples)} samples, {len(types)} families, {len(problems)} problems")
    return 1 if problems or not samples else 0


def cmd_value(path, name, labels=""):
    want = dict(item.split("=", 1) for item in labels.split(",") if item) if labels else {}
    samples, _, _ = parse(path)
    for n, l, v in samples:
        if n == name and all(l.get(k) == x for k, x in want.items()):
            print(int(v) if v == int(v) else v)
            return 0
    print("absent")
    return 0


def main(argv):
    # `probe ... | head -1` closes the pipe early: die quietly like a shell tool.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    cmds = {"get": cmd_get, "raw": cmd_raw, "big": cmd_big, "idle": cmd_idle,
            "format": cmd_format, "value": cmd_value}
    if len(argv) < 2 or argv[1] not in cmds:
        sys.stderr.write(__doc__)
        return 2
    try:
        return cmds[argv[1]](*argv[2:]) or 0
    except TypeError:
        sys.stderr.write(__doc__)
        return 2
    except OSError as e:
        print(f"error: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
