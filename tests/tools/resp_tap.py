"""resp_tap.py - what the scripts that play hostile peers against
rdmem-agent's RESP port share (tests/tools/resp_hostile.py,
resp_budget.py): one TAP line per check, raw RESP commands, the agent's
VmRSS and its counters."""

import socket
import subprocess

failed = 0


def check(name, ok, detail=""):
    """One "ok - " or "not ok - " line; failed turns 1 on the first failure."""
    global failed
    print(("ok - " if ok else "not ok - ") + name, flush=True)
    if not ok:
        failed = 1
        print("#   " + detail, flush=True)


def conn(port, timeout=10):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(timeout)
    return s


def cmd(*args):
    """A multibulk command; str arguments are encoded, bytes sent as they are."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else a
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def stat(stats_cmd, name):
    """Counter name from stats_cmd's output (`rdmem agent-stats`); -1: absent."""
    out = subprocess.run(stats_cmd, capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] == name:
            return int(f[1])
    return -1
