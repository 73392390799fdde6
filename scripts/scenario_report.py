#!/usr/bin/env python3
"""scenario_report.py - turns the scenario driver's JSON lines into the
business-scenario report: a Markdown table and one JSON document.

  scenario_report.py RESULTS.jsonl [--md OUT.md] [--json OUT.json]
                     [--expect a,b,...] [--meta KEY=VALUE ...] [--tap]

RESULTS.jsonl holds one JSON object per scenario, as tests/tools/rdmem_scenarios
prints them. --expect names the scenarios that must be there (a missing one,
e.g. after a crash, is a failure). --tap prints one "ok - " / "not ok - " line
per check (skipped checks as "ok - ... # SKIP reason") for scripts/run-tests.sh.
Exit status: 0 every expected scenario present and no check failed, 1 otherwise,
2 usage or unreadable input. Python 3 standard library only.
"""
import argparse
import datetime
import json
import sys

FIELDS = ("scenario", "title", "ok", "checks", "figures")
STATUSES = ("ok", "fail", "skip")


def load(path):
    """Returns (scenarios, problems): malformed lines become problems, never crashes."""
    scenarios, problems = [], []
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        raise SystemExit(f"scenario_report: {path}: {e.strerror}")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            s = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"line {n}: not JSON ({e.msg})")
            continue
        if not isinstance(s, dict) or any(k not in s for k in FIELDS):
            problems.append(f"line {n}: not a scenario record")
            continue
        checks = s["checks"]
        if not isinstance(checks, list) or not isinstance(s["figures"], dict) or not all(
                isinstance(c, dict) and c.get("status") in STATUSES and isinstance(c.get("name"), str)
                for c in checks):
            problems.append(f"line {n}: scenario {s['scenario']!r}: malformed checks or figures")
            continue
        # The verdict is recomputed from the checks, not taken from the record.
        s["ok"] = bool(checks) and not any(c["status"] == "fail" for c in checks)
        scenarios.append(s)
    return scenarios, problems


def num(v, digits=1):
    if not isinstance(v, (int, float)):
        return "-"
    if v >= 100 or float(v).is_integer():
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


KEY_FIGURES = {
    "ycsb": [("hot10_share_pct", "hot 10% keys share %"), ("read_p99_us", "read p99 µs"),
             ("update_p99_us", "update p99 µs")],
    "profile": [("profile_p50_us", "PROFILE p50 µs"), ("mget_p50_us", "MGET p50 µs")],
    "cdn": [("mib_per_s", "MiB/s"), ("lazy", "LAZY replies")],
    "image": [("mib_per_s", "MiB/s")],
    "tcp": [("rdma_back_ms", "back on RDMA ms")],
    "faults": [("normal_p50_us", "normal p50 µs"), ("fault_p50_us", "under fault p50 µs"),
               ("error_burst_recovery_ms", "recovery ms")],
    "async": [("window", "window"), ("qps_window1", "QPS at window 1"), ("speedup", "speedup")],
}


def counts(s):
    c = {k: 0 for k in STATUSES}
    for chk in s["checks"]:
        c[chk["status"]] += 1
    return c


def markdown(scenarios, missing, problems, meta):
    out = ["# RDMemRPC business scenarios", ""]
    if meta:
        out += [", ".join(f"{k}: {v}" for k, v in meta.items()), ""]
    out += ["| # | Scenario | Result | Checks ok/skip/fail | Ops | QPS | p50 µs | p99 µs | Other figures |",
            "|---|---|---|---|---|---|---|---|---|"]
    for i, s in enumerate(scenarios, 1):
        c, f = counts(s), s["figures"]
        extra = "; ".join(f"{label} {num(f[k], 2)}" for k, label in KEY_FIGURES.get(s["scenario"], [])
                          if k in f)
        out.append(f"| {i} | **{s['scenario']}**: {s['title']} | {'PASS' if s['ok'] else 'FAIL'} | "
                   f"{c['ok']}/{c['skip']}/{c['fail']} | {num(f.get('ops'))} | {num(f.get('qps'))} | "
                   f"{num(f.get('p50_us'))} | {num(f.get('p99_us'))} | {extra or '-'} |")
    for name in missing:
        out.append(f"| - | **{name}** | FAIL | missing: the driver did not report it | - | - | - | - | - |")
    out.append("")
    for p in problems:
        out.append(f"- input problem: {p}")
    out += ["", "## Checks", ""]
    for s in scenarios:
        out.append(f"### {s['scenario']}: {'PASS' if s['ok'] else 'FAIL'}")
        out.append("")
        for c in s["checks"]:
            mark = {"ok": "[x]", "fail": "[ ] **FAIL**", "skip": "[~] skipped:"}[c["status"]]
            detail = c.get("detail", "")
            out.append(f"- {mark} {c['name']}" + (f" ({detail})" if detail else ""))
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results")
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--expect", default="")
    ap.add_argument("--meta", action="append", default=[])
    ap.add_argument("--tap", action="store_true")
    a = ap.parse_args()
    meta = {}
    for m in a.meta:
        k, sep, v = m.partition("=")
        if not sep or not k:
            ap.error(f"--meta wants KEY=VALUE, not {m!r}")
        meta[k] = v
    scenarios, problems = load(a.results)
    seen = {s["scenario"] for s in scenarios}
    missing = [e for e in a.expect.split(",") if e and e not in seen]
    total = {k: sum(counts(s)[k] for s in scenarios) for k in STATUSES}
    ok = not missing and not problems and bool(scenarios) and all(s["ok"] for s in scenarios)
    doc = {
        "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "meta": meta,
        "ok": ok,
        "summary": {"scenarios": len(scenarios), "passed": sum(s["ok"] for s in scenarios),
                    "failed": sum(not s["ok"] for s in scenarios) + len(missing),
                    "missing": missing, "checks": sum(total.values()), "checks_ok": total["ok"],
                    "checks_skipped": total["skip"], "checks_failed": total["fail"],
                    "input_problems": problems},
        "scenarios": scenarios,
    }
    md = markdown(scenarios, missing, problems, meta)
    if a.md:
        with open(a.md, "w", encoding="utf-8") as f:
            f.write(md + "\n")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    if a.tap:
        for s in scenarios:
            for c in s["checks"]:
                line = f"{s['scenario']}: {c['name']}"
                if c["status"] == "ok":
                    print(f"ok - {line}")
                elif c["status"] == "skip":
                    print(f"ok - {line} # SKIP {c.get('detail', '')}")
                else:
                    print(f"not ok - {line} ({c.get('detail', '')})")
        for name in missing:
            print(f"not ok - {name}: scenario missing from the results")
        for p in problems:
            print(f"not ok - results: {p}")
    else:
        print(md)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
