#!/usr/bin/env python3
"""bench_get.py - Client.get of a 32-byte value from Python, one call at a
time (window 1), beside `rdmem bench --op get --size 32 --window 1` (C, the
inline fast path) against the same agent in the same run.

    python3 python/bench_get.py [--shm-name /rdmem] [-n 20000] [--rdmem build/rdmem]

RDMEM_LIB=/path/librdmem.so.0 picks the library (else the installed one)."""

import argparse
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rdmem  # noqa: E402


def python_get(name, n, size):
    with rdmem.Client(name) as c:
        c.put("bench:py", bytes(range(size)))
        want = bytes(range(size))
        for _ in range(min(n, 1000)):  # warm up
            c.get("bench:py")
        lat = []
        get, clock = c.get, time.perf_counter_ns
        t0 = clock()
        for _ in range(n):
            s = clock()
            v = get("bench:py")
            lat.append(clock() - s)
        secs = (clock() - t0) / 1e9
        if v != want:
            sys.exit("bench_get: Client.get returned a wrong value")
    lat.sort()
    return lat[len(lat) // 2] / 1000, lat[len(lat) * 99 // 100] / 1000, n / secs


def c_get(rdmem_bin, name, n, size):
    out = subprocess.run([rdmem_bin, "--shm-name", name, "bench", "--op", "get", "--size", str(size),
                          "--window", "1", "-n", str(n)], check=True, capture_output=True, text=True).stdout
    ops = float(re.search(r"([\d.]+) ops/s", out).group(1))
    p50 = float(re.search(r"p50 ([\d.]+)", out).group(1))
    p99 = float(re.search(r"p99 ([\d.]+)", out).group(1))
    return p50, p99, ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shm-name", default=None, help="the agent's segment (default /rdmem)")
    ap.add_argument("-n", type=int, default=20000, help="gets per side (default 20000)")
    ap.add_argument("--size", type=int, default=32, help="value bytes (default 32)")
    ap.add_argument("--rdmem", default=os.path.join(os.environ.get("RDMEM_BIN", "build"), "rdmem"),
                    help="the rdmem CLI (default $RDMEM_BIN/rdmem)")
    a = ap.parse_args()
    name = a.shm_name or "/rdmem"
    py = python_get(a.shm_name, a.n, a.size)
    c = c_get(a.rdmem, name, a.n, a.size)
    print(f"GET {a.size} B, window 1, {a.n} ops each, agent {name}, librdmem {rdmem.version()}")
    print(f"{'':28}{'p50 us':>10}{'p99 us':>10}{'ops/s':>12}")
    for label, r in (("Python rdmem.Client.get", py), ("C rdmem bench --op get", c)):
        print(f"{label:28}{r[0]:>10.2f}{r[1]:>10.2f}{r[2]:>12.0f}")


if __name__ == "__main__":
    main()
