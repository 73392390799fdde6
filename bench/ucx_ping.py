#!/usr/bin/env python3
"""ucx_ping.py - UCX's ping-pong as one more local round trip next to the
front door's local-ping and the Unix-socket echo (scripts/bench.sh).

  ucx_ping.py --peer-cpu C --port P -n N [--size B] [--tls posix|tcp] [--test tag_lat|tag_bw]

Runs `ucx_perftest -t tag_lat` (UCP tag messages) with UCX_TLS=posix,self
(or tcp,self on loopback): its peer process pinned to C, this process's
client where the caller pinned it. ucx_perftest reports one-way latency
(half the round trip) as its 50th percentile and average; the record
printed here (bench/latency.h's common form, op local-ping, or tag_lat
with --test) is the round trip, twice each, so it reads like the front
door's. UCX gives no p99: those fields are null, never invented.
With --test tag_bw (messages streamed one way, no reply) the record's op is
tag_bw, its qps UCX's message rate and its latency fields null.

UCX busy-polls without yielding: with its peer on the caller's CPU a round
trip costs a scheduler time slice (about 6 ms measured here), so bench.sh
runs it only where the two ends have CPUs of their own.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

# Final: iterations, latency p50, average, overall (µs), MB/s average, overall,
# msg/s average, overall. "average" is since the last report; "overall" is
# the whole run, the figure taken here.
FINAL = re.compile(r"^Final:\s+(\d+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+([\d.]+)")


def run(args):
    tls = "posix,self" if args.tls == "posix" else "tcp,self"
    env = dict(os.environ, UCX_TLS=tls, UCX_WARN_UNUSED_ENV_VARS="n")
    if args.tls == "tcp":
        env["UCX_NET_DEVICES"] = "lo"
    base = ["ucx_perftest", "-t", args.test, "-s", str(args.size), "-n", str(args.n),
            "-p", str(args.port)]
    peer = subprocess.Popen(["taskset", "-c", args.peer_cpu] + base, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        # The peer listens within a moment; the client retries until it does.
        deadline = time.monotonic() + 10
        while True:
            out = subprocess.run(base + ["127.0.0.1"], env=env, capture_output=True, text=True,
                                 timeout=args.timeout)
            if out.returncode == 0 or time.monotonic() > deadline or peer.poll() is not None:
                break
            time.sleep(0.1)
        peer.wait(timeout=10)
    finally:
        if peer.poll() is None:
            peer.kill()
            peer.wait()
    if out.returncode != 0:
        sys.stderr.write("ucx_ping: ucx_perftest exit %d\n%s%s" % (out.returncode, out.stdout,
                                                                 out.stderr))
        return 1
    for line in out.stdout.splitlines():
        m = FINAL.match(line.strip())
        if not m:
            continue
        n, p50, avg, rate = int(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4))
        rec = {"system": "ucx", "op": "local-ping", "size": args.size, "window": 1, "n": n,
               "avg_us": 2 * avg, "p50_us": 2 * p50, "p99_us": None, "p999_us": None,
               "qps": 1e6 / (2 * avg) if avg > 0 else None, "failures": 0,
               "extra": {"one_way_p50_us": p50, "one_way_avg_us": avg,
                         "transport": tls, "test": args.test}}
        if args.test == "tag_bw":
            rec.update(op="tag_bw", avg_us=None, p50_us=None, qps=rate)
            rec["extra"] = {"send_overhead_p50_us": p50, "transport": tls, "test": args.test}
        elif args.op:
            rec["op"] = args.op
        print(json.dumps(rec))
        return 0
    sys.stderr.write("ucx_ping: no Final line in ucx_perftest's output\n" + out.stdout)
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer-cpu", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--size", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--tls", choices=("posix", "tcp"), default="posix")
    ap.add_argument("--test", choices=("tag_lat", "tag_bw"), default="tag_lat")
    ap.add_argument("--op", help="the op named in a tag_lat record (default local-ping)")
    sys.exit(run(ap.parse_args()))


if __name__ == "__main__":
    main()
