#!/usr/bin/env python3
"""normalize.py SYSTEM - reads one client's JSON record on stdin and prints
the common record of bench/latency.h:
  system, op, size, window, n, avg_us, p50_us, p99_us, p999_us, qps, failures
`rdmem bench --json` and tests/tools/uds_echo print their own keys ("ops"
for n; rdmem splits failed calls and wrong values): they are mapped here,
and every other field is kept under "extra". Figures are copied, never
recomputed."""
import json
import sys

COMMON = ("op", "size", "window", "avg_us", "p50_us", "p99_us", "p999_us", "qps")


def main():
    system = sys.argv[1]
    rec = json.loads(sys.stdin.read())
    if "n" in rec and "system" in rec:  # already the common record (grpc, redis)
        print(json.dumps(rec, separators=(",", ":")))
        return
    out = {"system": system}
    for k in COMMON:
        out[k] = rec.get(k)
    out["n"] = rec.get("ops")
    # A wrong value is a failure as much as an error status is. uds_echo has
    # no such count: its exit status is its check.
    out["failures"] = int(rec.get("failures", 0)) + int(rec.get("wrong", 0))
    out["extra"] = {k: v for k, v in rec.items() if k not in COMMON + ("ops",)}
    print(json.dumps(out, separators=(",", ":")))


if __name__ == "__main__":
    main()
