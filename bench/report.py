#!/usr/bin/env python3
"""report.py - turns a scripts/bench.sh run into its results.

  report.py OUT_DIR [--chart=0|1]

Reads OUT_DIR/raw.jsonl (one line per client run: harness fields + the
client's record), meta.json, skipped.txt, failed.txt and callgrind.json, and
writes summary.json (medians and spread per system/op/size/window),
results.md (tables with ratios to gRPC and Redis, the targets) and chart.png
(gnuplot). Nothing is computed anywhere else: every figure comes from raw.jsonl.
"""
import json
import os
import statistics
import subprocess
import sys

METRICS = ("avg_us", "p50_us", "p99_us", "p999_us", "qps")
SYSTEMS = ("rdmem-shm", "rdmem-tcp", "grpc", "redis", "ucx-shm", "ucx-tcp")
NAMES = {
    "rdmem-shm": "RDMemRPC shm fabric",
    "rdmem-tcp": "RDMemRPC TCP path",
    "grpc": "gRPC C++",
    "redis": "Redis 7",
    "ucx-shm": "UCX 1.13 active messages, shared memory",
    "ucx-tcp": "UCX 1.13 active messages, TCP",
    "frontdoor": "RDMemRPC front door (local-ping)",
    "uds": "Unix socket echo",
    "ucx": "UCX 1.13 tag ping-pong, shared memory (ucx_perftest tag_lat)",
}
OPS = (("get", 32), ("put", 32), ("large-get", 65536), ("large-get", 1048576), ("bigput", 16384))


def size_label(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def op_label(op, size):
    return "%s %s" % (op.upper().replace("-", "_"), size_label(size))


def load(out):
    runs = []
    with open(os.path.join(out, "raw.jsonl")) as f:
        for line in f:
            if line.strip():
                runs.append(json.loads(line))
    return runs


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l.rstrip("\n") for l in f if l.strip()]


def aggregate(runs):
    """Median, min and max of every metric over the good rounds of a cell."""
    cells = {}
    for r in runs:
        rec = r["record"]
        good = r["rc"] == 0 and rec.get("failures", 1) == 0 and rec.get("n") == r["req_n"]
        key = (r["bench_system"], r["op"], r["size"], r["window"])
        c = cells.setdefault(key, {"rounds": 0, "bad_rounds": 0, "values": {m: [] for m in METRICS}})
        if not good:
            c["bad_rounds"] += 1
            continue
        c["rounds"] += 1
        for m in METRICS:
            if isinstance(rec.get(m), (int, float)):
                c["values"][m].append(float(rec[m]))
    summary = []
    for (sys_, op, size, w), c in sorted(cells.items()):
        row = {"system": sys_, "op": op, "size": size, "window": w,
               "rounds": c["rounds"], "bad_rounds": c["bad_rounds"]}
        for m, vals in c["values"].items():
            if vals:
                row[m] = statistics.median(vals)
                row[m + "_min"] = min(vals)
                row[m + "_max"] = max(vals)
        summary.append(row)
    return summary


def cell(summary, system, op, size, window):
    for r in summary:
        if (r["system"], r["op"], r["size"], r["window"]) == (system, op, size, window):
            return r
    return None


def fmt(v, digits=1):
    if v is None:
        return "–"
    if v >= 10000:
        return "{:,.0f}".format(v)
    if v >= 100:
        return "%.0f" % v
    return "%.*f" % (digits, v)


def ratio(a, b):
    """a / b as '12.3×', or '–' when either is missing."""
    if not a or not b:
        return "–"
    return "%.2f×" % (a / b)


def spread(r, m):
    if r is not None and r.get("bad_rounds") and m not in r:
        return "**FAILED** (%d of %d rounds)" % (r["bad_rounds"], r["bad_rounds"] + r["rounds"])
    if r is None or m not in r:
        return "–"
    bad = " **%d round(s) FAILED**" % r["bad_rounds"] if r.get("bad_rounds") else ""
    return "%s (%s–%s)%s" % (fmt(r[m]), fmt(r[m + "_min"]), fmt(r[m + "_max"]), bad)


def latency_table(summary):
    out = ["| op | system | avg | p50 (min–max) | p99 | p99.9 | gRPC p50 ÷ this | Redis p50 ÷ this |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for op, size in OPS:
        g = cell(summary, "grpc", op, size, 1)
        rd = cell(summary, "redis", op, size, 1)
        for s in SYSTEMS:
            r = cell(summary, s, op, size, 1)
            if r is None:
                continue
            out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                op_label(op, size), NAMES[s], fmt(r.get("avg_us")), spread(r, "p50_us"),
                fmt(r.get("p99_us")), fmt(r.get("p999_us")),
                ratio(g and g.get("p50_us"), r.get("p50_us")),
                ratio(rd and rd.get("p50_us"), r.get("p50_us"))))
    return out


def qps_table(summary):
    out = ["| op | system | QPS (min–max) | p50 µs | MB/s | this ÷ gRPC | this ÷ Redis |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for op, size in OPS:
        g = cell(summary, "grpc", op, size, 32)
        rd = cell(summary, "redis", op, size, 32)
        for s in SYSTEMS:
            r = cell(summary, s, op, size, 32)
            if r is None:
                continue
            q = r.get("qps")
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                op_label(op, size), NAMES[s], spread(r, "qps"), fmt(r.get("p50_us")),
                fmt(q * size / 1e6 if q is not None else None), ratio(q, g and g.get("qps")),
                ratio(q, rd and rd.get("qps"))))
    return out


def frontdoor_table(summary):
    fd = cell(summary, "frontdoor", "local-ping", 8, 1)
    ud = cell(summary, "uds", "local-ping", 8, 1)
    ux = cell(summary, "ucx", "local-ping", 8, 1)
    if not fd and not ud:
        return []
    out = ["| round trip, window 1 | avg | p50 (min–max) | p99 | p99.9 |",
           "|---|---:|---:|---:|---:|"]
    for name, r in (("frontdoor", fd), ("uds", ud), ("ucx", ux)):
        if r:
            out.append("| %s | %s | %s | %s | %s |" % (NAMES[name], fmt(r.get("avg_us")),
                                                      spread(r, "p50_us"), fmt(r.get("p99_us")),
                                                      fmt(r.get("p999_us"))))
    return out


def ucx_floor_table(summary):
    """ucx_perftest under the UCX store: round trip and streaming rate."""
    out = ["| transport | size | tag_lat round trip p50 µs | tag_bw msg/s | tag_bw MB/s "
           "| UCX store GET w1 p50 µs | UCX store GET w32 QPS |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for t, label in (("shm", "shared memory (posix)"), ("tcp", "TCP (loopback)")):
        for size in (32, 65536, 1048576):
            lat_c = cell(summary, "ucx-perf-" + t, "tag_lat", size, 1)
            bw_c = cell(summary, "ucx-perf-" + t, "tag_bw", size, 1)
            lat, bw = (lat_c or {}).get("p50_us"), (bw_c or {}).get("qps")
            op = "get" if size == 32 else "large-get"
            if lat_c is None and bw_c is None:
                continue
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                label, size_label(size), spread(lat_c, "p50_us"), spread(bw_c, "qps"),
                fmt(bw * size / 1e6 if bw is not None else None),
                fmt(get(summary, "ucx-" + t, op, size, 1, "p50_us")),
                fmt(get(summary, "ucx-" + t, op, size, 32, "qps"))))
    return out if len(out) > 2 else []


def get(summary, system, op, size, window, m):
    r = cell(summary, system, op, size, window)
    return r.get(m) if r else None


def target(name, have, need, ok_when_le, unit, detail="", failed=False):
    """One target row; have/need are the compared figures."""
    if failed:
        return {"target": name, "measured": "runs FAILED (see below)%s" % detail, "met": False}
    if have is None or need is None:
        return {"target": name, "measured": "not measured", "met": None}
    met = have <= need if ok_when_le else have >= need
    return {"target": name, "met": met,
            "measured": "%s %s vs limit %s %s%s" % (fmt(have, 2), unit, fmt(need, 2), unit, detail)}


def targets(summary):
    g = lambda *a: get(summary, *a)
    shm_p50 = g("rdmem-shm", "get", 32, 1, "p50_us")
    grpc_p50 = g("grpc", "get", 32, 1, "p50_us")
    redis_p50 = g("redis", "get", 32, 1, "p50_us")
    shm_q = g("rdmem-shm", "get", 32, 32, "qps")
    redis_q = g("redis", "get", 32, 32, "qps")
    grpc_q = g("grpc", "get", 32, 32, "qps")
    tcp_p50 = g("rdmem-tcp", "get", 32, 1, "p50_us")
    fd = g("frontdoor", "local-ping", 8, 1, "p50_us")
    uds = g("uds", "local-ping", 8, 1, "p50_us")
    big_q = g("rdmem-shm", "large-get", 1048576, 32, "qps")
    big_p50 = g("rdmem-shm", "large-get", 1048576, 1, "p50_us")
    div = lambda a, b: a / b if a is not None and b else None
    mul = lambda a, b: a * b if a is not None and b is not None else None
    w1_gbs = (1048576 / (big_p50 * 1e-6) / 1e9) if big_p50 else None
    return [
        target("GET w1 p50 (shm) ≤ 1/10 gRPC", shm_p50, div(grpc_p50, 10), True, "µs"),
        target("GET w1 p50 (shm) ≤ 1/3 Redis", shm_p50, div(redis_p50, 3), True, "µs"),
        target("GET w32 QPS (shm) ≥ 2× Redis pipelined", shm_q, mul(redis_q, 2), False, "/s"),
        target("GET w32 QPS (shm) ≥ 10× gRPC async", shm_q, mul(grpc_q, 10), False, "/s"),
        target("GET w1 p50 (TCP path) ≤ 1/2 gRPC", tcp_p50, div(grpc_p50, 2), True, "µs"),
        target("front door round trip ≤ 1/5 Unix socket", fd, div(uds, 5), True, "µs"),
        target("LARGE_GET 1 MiB (shm) ≥ 5 GB/s (w32)", mul(big_q, 1048576 / 1e9), 5.0, False,
               "GB/s", "" if w1_gbs is None else "; window 1: %.2f GB/s (1 MiB / p50)" % w1_gbs,
               failed=big_q is None and bool((cell(summary, "rdmem-shm", "large-get", 1048576, 32)
                                              or {}).get("bad_rounds"))),
    ]


def callgrind_table(out):
    path = os.path.join(out, "callgrind.json")
    if not os.path.exists(path):
        return [], []
    with open(path) as f:
        rows = json.load(f)
    procs = ("client", "agent", "server")
    by_sys, wqes, fabric = {}, {}, {}
    for r in rows:
        key = (r["system"], r.get("window", 1))
        if "wqes_per_call" in r:
            wqes[key] = r["wqes_per_call"]
        elif "fabric_per_call" in r:
            fabric[key] = fabric.get(key, 0) + r["fabric_per_call"]
        else:
            by_sys.setdefault(key, {})[r["process"]] = r["ir_per_call"]
    lines = ["| system | window | client | agent | server | total | of which the shm fabric "
             "| total without it | RDMA WQEs per GET |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    order = lambda kv: (kv[0][1], SYSTEMS.index(kv[0][0]) if kv[0][0] in SYSTEMS else 9)
    for (s, w), d in sorted(by_sys.items(), key=order):
        total = sum(d.values())
        fab = fabric.get((s, w)) if s == "rdmem-shm" else None
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            NAMES.get(s, s), w, *["{:,.0f}".format(d[p]) if p in d else "–" for p in procs],
            "{:,.0f}".format(total),
            "–" if fab is None else "{:,.0f}".format(fab),
            "–" if fab is None else "{:,.0f}".format(total - fab),
            "{:.2f}".format(wqes[(s, w)]) if (s, w) in wqes else "–"))
    return lines, rows


def placement_table(out, summary, meta):
    """GET 32 B, p50 at window 1 and QPS at window 32, per placement."""
    pdir = os.path.join(out, "placement")
    if not os.path.isdir(pdir):
        return []
    pl = meta.get("placement", {})
    cols = [("split (this run): servers CPU %s, clients CPU %s, agent CPU %s" % (
        pl.get("server"), pl.get("client"), pl.get("agent")), summary)]
    for name in ("one-cpu", "agent-on-server-cpu", "unpinned"):
        path = os.path.join(pdir, name, "summary.json")
        if os.path.exists(path):
            with open(path) as f:
                d = json.load(f)
            p = d["meta"].get("placement", {})
            cols.append(("%s: servers %s, clients %s, agent %s" % (
                name, p.get("server"), p.get("client"), p.get("agent")), d["cells"]))
    out_lines = ["| placement | " + " | ".join(NAMES[s] for s in SYSTEMS) + " |",
                 "|---|" + "---:|" * len(SYSTEMS)]
    for label, cells in cols:
        vals = []
        for s in SYSTEMS:
            a, b = get(cells, s, "get", 32, 1, "p50_us"), get(cells, s, "get", 32, 32, "qps")
            vals.append("–" if a is None else "%s µs / %s/s" % (fmt(a), fmt(b)))
        out_lines.append("| %s | %s |" % (label, " | ".join(vals)))
    fd = [(label, get(cells, "frontdoor", "local-ping", 8, 1, "p50_us"),
           get(cells, "uds", "local-ping", 8, 1, "p50_us"),
           get(cells, "ucx", "local-ping", 8, 1, "p50_us")) for label, cells in cols]
    if any(f[1] is not None for f in fd):
        # UCX runs only where its peer has a CPU of its own ("–" elsewhere:
        # it busy-polls, see bench/ucx_ping.py).
        out_lines += ["", "| placement | front door p50 µs | Unix socket p50 µs | UCX p50 µs |",
                      "|---|---:|---:|---:|"]
        out_lines += ["| %s | %s | %s | %s |" % (l, fmt(a), fmt(b), fmt(c))
                      for l, a, b, c in fd]
    return out_lines


def chart(out, summary):
    """p50 latency (window 1) and QPS (window 32) per op per system, log scales."""
    cols = list(SYSTEMS) + ["uds"]
    present = [s for s in cols if any(r["system"] == s for r in summary)
               or (s == "rdmem-shm" and cell(summary, "frontdoor", "local-ping", 8, 1))]
    if not present:
        return False
    lat = [(op_label(o, s), [get(summary, x, o, s, 1, "p50_us") for x in present]) for o, s in OPS]
    qps = [(op_label(o, s), [get(summary, x, o, s, 32, "qps") for x in present]) for o, s in OPS]
    # The front door's round trip sits in the RDMemRPC column, the socket's in its own.
    ping = [get(summary, "frontdoor" if x == "rdmem-shm" else x, "local-ping", 8, 1, "p50_us")
            for x in present]
    if any(v is not None for v in ping):
        lat.append(("front door | UDS", ping))
    names = " ".join('"%s"' % NAMES[x] for x in present)

    def write(path, rows):
        with open(path, "w") as f:
            f.write("op %s\n" % names)
            for label, vals in rows:
                f.write('"%s" %s\n' % (label, " ".join("NaN" if v is None else "%g" % v
                                                        for v in vals)))

    lat_dat, qps_dat = os.path.join(out, "chart-p50.dat"), os.path.join(out, "chart-qps.dat")
    write(lat_dat, lat)
    write(qps_dat, qps)

    def plot(dat):
        return ", ".join("'%s' using %d:xtic(1) title columnheader(%d)" % (dat, i + 2, i + 2)
                         for i in range(len(present)))

    script = """
set terminal pngcairo size 1300,1050 font 'DejaVu Sans,11'
set output '%s'
set datafile missing 'NaN'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set logscale y
set grid ytics mytics
set key below horizontal noenhanced
set xtics noenhanced
set multiplot layout 2,1 title '%s'
set title 'p50 latency at window 1 (µs, lower is better; median of rounds)'
set ylabel 'µs'
plot %s
set title 'throughput at window 32 (calls/s, higher is better; median of rounds)'
set ylabel 'calls/s'
plot %s
unset multiplot
""" % (os.path.join(out, "chart.png"), "RDMemRPC vs gRPC vs Redis, one host (2 vCPUs)",
       plot(lat_dat), plot(qps_dat))
    gp = os.path.join(out, "chart.gp")
    with open(gp, "w") as f:
        f.write(script)
    try:
        subprocess.run(["gnuplot", gp], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print("report: no chart: %s" % (getattr(e, "stderr", "") or e), file=sys.stderr)
        return False
    return True


def main():
    out = sys.argv[1]
    want_chart = "--chart=0" not in sys.argv[2:]
    runs = load(out)
    meta = {}
    if os.path.exists(os.path.join(out, "meta.json")):
        with open(os.path.join(out, "meta.json")) as f:
            meta = json.load(f)
    summary = aggregate(runs)
    tgts = targets(summary)
    cg_lines, cg_rows = callgrind_table(out)
    skipped = read_lines(os.path.join(out, "skipped.txt"))
    # Paths relative to the repository, so the copy under docs/ reads anywhere.
    failed = [l.replace(os.getcwd() + "/", "") for l in read_lines(os.path.join(out, "failed.txt"))]
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"meta": meta, "cells": summary, "targets": tgts, "callgrind": cg_rows,
                   "skipped": skipped, "failed": failed}, f, indent=1)
    have_chart = want_chart and chart(out, summary)

    md = ["# RDMemRPC benchmark: RDMemRPC, gRPC, Redis, UCX and Unix sockets on one host", ""]
    if meta:
        pl = meta.get("placement", {})
        md += ["Command: `make bench` (`scripts/bench.sh`). Machine: %s, %s CPUs, %s GiB, kernel %s; "
               "gRPC %s, Redis %s; git %s%s; %s." % (
                   meta.get("cpu", "?"), meta.get("nproc"), meta.get("mem_gib"), meta.get("kernel"),
                   meta.get("grpc") or "–", meta.get("redis") or "–", meta.get("git"),
                   " (uncommitted changes)" if meta.get("git_dirty") else "", meta.get("date")),
               "",
               ("Extra options: rdmem-server `%s`, rdmem-agent `%s`. " % (
                   meta.get("server_extra") or "–", meta.get("agent_extra") or "–")
                if meta.get("server_extra") or meta.get("agent_extra") else "") +
               "Load average at start: `%s`, at end: `%s` (the machine is shared; figures taken under "
               "load are noisy, compare ratios within one run). Placement (taskset): servers on CPU %s, "
               "clients on CPU %s, rdmem-agent on CPU %s. %s rounds, systems taking turns; figures are "
               "medians of the rounds, (min–max) the spread." % (
                   meta.get("loadavg_start"), meta.get("loadavg_end"), pl.get("server"),
                   pl.get("client"), pl.get("agent"), meta.get("rounds")),
               ""]
    ucx_ran = any(r["system"].startswith("ucx-") for r in summary)
    md += [("Redis and the UCX store (bench/ucx_kv_*.c: a hash map behind UCP active messages, "
            "what a team would build on UCX instead) map" if ucx_ran else "Redis maps") +
           " LARGE_GET to a GET of a stored value holding the same bytes, BIGPUT to SET. " +
           ("Both UCX ends busy-poll, each on its own CPU (UCX's default way); RDMemRPC's "
            "server and agent do not by default. " if ucx_ran else "") +
           "Every client is one thread and verifies every value it receives.", ""]
    md += ["## Latency at window 1 (µs)", ""] + latency_table(summary) + [""]
    md += ["## Throughput at window 32 (calls/s)", ""] + qps_table(summary) + [""]
    uft = ucx_floor_table(summary)
    if uft:
        md += ["## UCX's transport floor (ucx_perftest, same sizes and placement)", "",
               "ucx_perftest's tag ping-pong (round trip = 2 x its one-way p50) and one-way "
               "streaming over the transports the UCX store runs on, next to the store's own GET: "
               "what the transport costs, and what a store on it adds. tag_lat carries the size both "
               "ways, a GET only back, so at 64 KiB and 1 MiB a GET can beat the ping-pong.", ""] + uft + [""]
    fdt = frontdoor_table(summary)
    if fdt:
        md += ["## Front door alone vs Unix-domain-socket round trip (µs)", ""] + fdt + [""]
    if cg_lines:
        md += ["## Instructions per GET (callgrind, GET 32 B)", "",
               "Instructions each process executes per GET, from the difference of two runs "
               "(%s calls apart at window 1, 10x that at window 32), so start-up and connection "
               "set-up cancel out. At window 1 "
               "the count includes waiting: spinning and yielding before sleeping and "
               "time-driven checks, which run ~50x longer under valgrind (so these vary run to "
               "run); at window 32 the actors are busy and the count is mostly work: the "
               "figure to compare run to run. RDMA WQEs per GET: the send work requests "
               "RDMemRPC's agent and server posted per GET (requests, replies, control-page "
               "and LAZY READs, RECLAIMs), by the same difference (agent-stats rdma.wqes + "
               "the server sessions' wqes); its TCP path posts none. Of which the shm "
               "fabric: agent and server instructions inside the fabric's calls (post, poll, "
               "receives, arming), on the shm fabric the emulated NIC and its provider, "
               "which a NIC and its verbs provider replace (their cost is not measured "
               "here); the column beside it is the rest, RDMemRPC's own." %
               meta.get("callgrind_calls", "?"), ""] + cg_lines + [""]
    pt = placement_table(out, summary, meta)
    if pt:
        md += ["## Placement check (GET 32 B: p50 at window 1 / QPS at window 32)", "",
               "The same GET measured with other process placements (2 rounds each), to show "
               "how much the choice matters on this machine.", ""] + pt + [""]
    md += ["## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for t in tgts:
        md.append("| %s | %s | %s |" % (t["target"], t["measured"],
                                         "–" if t["met"] is None else ("yes" if t["met"] else "**no**")))
    md.append("")
    if have_chart:
        md += ["![p50 latency and QPS per op and system](chart.png)", ""]
    if skipped:
        md += ["## Not measured", ""] + ["- %s: %s" % tuple((l.split("\t") + [""])[:2]) for l in skipped] + [""]
    if failed:
        md += ["## FAILED runs", ""] + ["- " + l for l in failed] + [""]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
