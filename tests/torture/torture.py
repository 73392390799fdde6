#!/usr/bin/env python3
"""torture - seeded randomized configurations, op mixes and faults (tests/torture/README.md).

Case i of a run with --seed S draws everything from seed S + i, so
`tests/torture/run --seed <S+i> --cases 1` replays exactly that case's
draw (configuration, op mix, fault schedule). Process timing is not
replayed: it is real processes on a real clock.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402
import flags as F  # noqa: E402

BIN = os.environ.get("RDMEM_BIN", "build")
CLIENT = os.path.join(BIN, "tests", "torture_client")
EXCLUDE = set(x for x in os.environ.get("TORTURE_EXCLUDE", "").split(",") if x)
# Diagnosis only: "server:--flag=value,agent:--flag,fault:kill_agent" pins
# flags (no value: a switch) and adds a fault after the draw.
SET = [x for x in os.environ.get("TORTURE_SET", "").split(",") if x]
PATHS = ["auto", "eager", "lazy", "bulk", "tcp"]
OPS = ["ping", "echo", "put", "get", "del", "mget", "profile", "large", "image"]
FAULTS = ["kill_client", "kill_agent", "kill_server", "ctl", "link_cut"]
SEG_CAP = 2 << 30
# --fabric verbs (set by main): server and agents on an RDMA device at this
# address, e.g. Soft-RoCE in the rxe VM (scripts/rxe-suite.sh, check torture).
VERBS = None  # dict(addr=..., src=...) or None: the shm fabric
# The verbs draw's caps: every byte a session registers is pinned RAM, and the
# rxe guest has 2 GiB for the server, up to 3 agents and the clients.
# Under qemu TCG every step is several times slower (a 34 MiB registration
# takes seconds): the harness's own waits scale by SLOW (4 over verbs).
SLOW = 1
VERBS_SEG_CAP = 64 << 20  # an agent's front-door segment
# A server ring (slots x slot bytes), the server's reply staging (slots x
# stage bytes: 2,251 x 1 MiB pinned 2.2 GiB a session in the VM's 2 GiB,
# whose registration outlasted the agents' connect timeout), an agent ring
# (slots x resp bytes).
VERBS_REG_CAP = 16 << 20
VERBS_CAPS = {("s", "--objpool-slabs"): 256, ("s", "--max-value"): F.MI,
              ("a", "--max-value"): F.MI, ("s", "--max-sessions"): 16,
              ("s", "--workers"): 4, ("s", "--max-image"): 4 * F.MI}


def now():
    return time.monotonic_ns()


def excluded(name):
    return name in EXCLUDE


# ---------------------------------------------------------------- the draw


def draw_num(r, spec):
    lo, hi = spec["lo"], spec["hi"]
    cap = spec.get("cap")
    top = min(hi, cap) if cap else hi
    pick = r.random()
    if pick < 0.15:
        v = lo
    elif pick < 0.25:
        v = hi if not cap else top
    elif pick < 0.3:
        v = min(lo + 1, hi)
    elif pick < 0.35:
        v = max(top - 1, lo)
    elif pick < 0.5 and "default" in spec:
        v = spec["default"]
    else:  # log-uniform: small and large values alike
        v = int(round(2 ** r.uniform(0, max(top, 1).bit_length())))
        v = min(max(v, lo), top)
    if spec.get("pow2"):
        v = max(1 << (v.bit_length() - 1), lo)
    return v


def fmt_bytes(v):
    if v and v % (1 << 20) == 0:
        return "%dm" % (v >> 20)
    if v and v % 1024 == 0:
        return "%dk" % (v >> 10)
    return str(v)


def draw_flags(r, table, skip_faults):
    """Random legal values for every non-harness flag of a table: {flag: value or True}."""
    out = {}
    for name, spec in table.items():
        if spec["kind"] == "harness" or excluded("flag:" + name):
            continue
        if spec.get("fault") and skip_faults:
            continue
        if r.random() >= spec.get("p", 0.5):
            continue
        k = spec["kind"]
        if k == "bool":
            out[name] = True
        elif k == "choice":
            out[name] = r.choice(spec["choices"])
        else:
            out[name] = draw_num(r, spec)
    return out


def port_free(p):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", p))
        return True
    except OSError:
        return False
    finally:
        s.close()


def free_port(pair=True):
    """Below the ephemeral range (32768-), so no outgoing connection takes it meanwhile."""
    for _ in range(200):
        p = random.randrange(12000, 32000)
        if port_free(p) and (not pair or port_free(p + 1)):
            return p
    raise RuntimeError("no free port pair")


def netns_ok():
    return VERBS is None and os.geteuid() == 0 and shutil.which("ip") is not None and not excluded("link_cut")


def cap_segment(af):
    """The segment is clients x slots x (max-value + 65 KiB) of /dev/shm: halve clients to fit."""
    mv = af.get("--max-value", F.MI)
    clients, slots = af.get("--clients", 32), af.get("--slots", 16)
    cap = VERBS_SEG_CAP if VERBS else SEG_CAP
    while clients > 1 and clients * slots * (mv + 65 * 1024) > cap:
        clients //= 2
    while clients * slots > 16384:
        clients //= 2
    if "--clients" in af or clients != 32:
        af["--clients"] = clients


def verbs_draw(c, seed):
    """--fabric verbs: RDMA on both sides (now and then a server without an RDMA
    listener, or an agent on TCP only: AUTO's fallback), memory that sessions
    register capped (pinned RAM). Its own random stream: every other part of a
    seed's draw is what it is on shm."""
    rv = random.Random(seed * 40503 + 7)
    sf, af = c["server"], c["agent"]
    sf["--fabric"] = "verbs" if rv.random() < 0.9 else "none"
    af["--fabric"] = "verbs" if rv.random() < 0.9 else "tcp"
    for (side, flag), cap in VERBS_CAPS.items():
        d = sf if side == "s" else af
        if flag in d:
            d[flag] = min(d[flag], cap)
        elif flag == "--max-sessions":
            d[flag] = cap  # the default (64) would let restarts pile up pinned leases
    for d, strides in ((sf, ("--slot-bytes", "--stage-bytes")), (af, ("--resp-bytes",))):
        table = F.SERVER if d is sf else F.AGENT
        stride = max(d.get(f, table[f]["default"]) for f in strides)
        slots = d.get("--ring-slots", 256)
        while slots > 1 and slots * stride > VERBS_REG_CAP:
            slots //= 2
        if slots != d.get("--ring-slots", 256):
            d["--ring-slots"] = slots


def draw_case(seed, quick):
    """Everything a case does, from its seed alone."""
    r = random.Random(seed)
    sf = draw_flags(r, F.SERVER, False)
    af = draw_flags(r, F.AGENT, excluded("sim_flags"))
    c = dict(seed=seed, server=sf, agent=af)
    c["bind"] = r.choice(F.SERVER["--bind"]["choices"])
    c["image_dir"] = r.random() < F.SERVER["--image-dir"]["p"]
    c["image_hook"] = (r.choice(F.SERVER["--image-hook"]["choices"])
                       if c["image_dir"] and r.random() < F.SERVER["--image-hook"]["p"] else None)
    c["secret"] = r.random() < F.SERVER["--secret-file"]["p"]
    c["explicit_tcp_port"] = r.random() < 0.3
    c["s_metrics"] = r.random() < F.SERVER["--metrics-port"]["p"]
    c["a_metrics"] = r.random() < F.AGENT["--metrics-port"]["p"]
    c["s_metrics_bind"] = r.choice(F.SERVER["--metrics-bind"]["choices"]) if r.random() < 0.3 else None
    c["a_metrics_bind"] = r.choice(F.AGENT["--metrics-bind"]["choices"]) if r.random() < 0.3 else None
    c["shm_group"] = (r.choice(F.AGENT["--shm-group"]["choices"])
                      if r.random() < F.AGENT["--shm-group"]["p"] else None)
    c["source"] = r.random() < F.AGENT["--source"]["p"]
    c["netns"] = netns_ok() and r.random() < 0.12
    if c["netns"]:
        af["--fabric"] = "tcp"  # the shm fabric does not cross namespaces
    if VERBS:
        verbs_draw(c, seed)
    cap_segment(af)
    mv = af.get("--max-value", F.MI)
    # Workload.
    c["procs"] = r.randint(1, 16)
    c["windows"] = [r.choice([1, 2, 4, 8, 16, 32, 64, r.randint(1, 64)]) for _ in range(c["procs"])]
    dmin, dmax = (250, 800) if quick else (500, 2500)
    c["duration_ms"] = r.randint(dmin, dmax)
    c["max_calls"] = 600 if quick else 3000
    tmax = 1000 if quick else 3000
    c["timeout_ms"] = r.choice([50, 200, 500, tmax, r.randint(50, tmax)])
    est = c["procs"] * c["duration_ms"] * 3
    c["keys"] = r.randint(max(1, min(64, est // 400)), 64)
    weights = []
    for op in OPS:
        w = 0 if excluded("op:" + op) else r.choice([0, 1, 2, 4, 8]) if r.random() < 0.5 else 3
        if op in ("put", "get", "del") and not excluded("op:" + op):
            w = max(w, 2)
        weights.append(w)
    c["weights"] = weights
    paths = [str(i) for i, p in enumerate(PATHS) if not excluded("path:" + p)]
    c["paths"] = "".join(r.sample(paths, r.randint(1, len(paths)))) if paths else "0"
    smax = max(sf.get("--max-value", F.MI), mv)
    c["max_size"] = mv + 1
    bounds = {0, 1, 2, 31, 32, 33, 64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1}
    for v in (sf.get("--slot-bytes", 32 * F.KI), af.get("--resp-bytes", 16 * F.KI),
              sf.get("--stage-bytes", 16 * F.KI), af.get("--bulk-threshold", 8 * F.KI),
              af.get("--large-threshold", 8 * F.KI), sf.get("--max-value", F.MI), mv):
        for d in (-3, -2, -1, 0, 1):
            if 0 <= v + d <= smax + 1:
                bounds.add(v + d)
    c["sizes"] = ",".join(str(b) for b in sorted(bounds) if b <= c["max_size"])
    mi = sf.get("--max-image", 64 * F.MI)
    c["image_max"] = min(mi + 1, 4 * F.MI)
    # Faults: times in ms from the clients' start.
    faults = []
    nf = r.choice([0, 1, 2, 3, 4, 6])
    kinds = [k for k in FAULTS if not excluded(k) and (k != "link_cut" or c["netns"])]
    for _ in range(nf if kinds else 0):
        k = r.choice(kinds)
        f = dict(at=r.randint(0, c["duration_ms"]), kind=k)
        if k == "kill_client":
            f["which"] = r.randrange(c["procs"])
        elif k in ("kill_agent", "kill_server"):
            f["down_ms"] = r.choice([0, 10, 50, 200])
        elif k == "link_cut":
            f["down_ms"] = r.choice([100, 300, 800])
        else:
            cmd = r.choice(F.AGENT_CTL)
            f["cmd"] = cmd.format(n=r.choice([1, 2, 5, 50, F.U32]), path=r.choice(PATHS))
        faults.append(f)
    # Agents sharing the server (a multi-session server: grouping, lease
    # reuse); client j goes through agent j % agents. Drawn last so every
    # other part of a seed's draw is what it was with one agent.
    c["agents"] = 1 if r.random() < 0.6 else r.randint(2, 3)
    # Grouping only runs with more sessions than the threshold: a drawn
    # threshold (log-uniform up to 1M) is rarely below 3, so with several
    # agents it is sometimes pulled under their number (still legal).
    # Its own stream: the rest of every seed's draw stays what it was.
    rb = random.Random(seed * 2654435761 + 17)
    if c["agents"] > 1 and rb.random() < 0.2 and not excluded("flag:--group-threshold"):
        sf["--group-threshold"] = rb.randint(1, c["agents"] - 1)
        sf["--group-size"] = rb.randint(1, c["agents"])
    for item in SET:
        side, _, fv = item.partition(":")
        name, eq, val = fv.partition("=")
        table = F.SERVER if side == "server" else F.AGENT
        d = sf if side == "server" else af
        if side == "case":
            c[name] = int(val)
        elif side == "fault":
            faults.append(dict(at=r.randint(0, c["duration_ms"] // 2), kind=name, which=0,
                               down_ms=50, cmd="simulate-rdma-down on"))
        elif not eq:
            d[name] = True
        elif table.get(name, {}).get("kind") in ("num", "bytes"):
            d[name] = int(val)
        else:
            d[name] = val
    if SET:
        cap_segment(af)
    if VERBS:
        # Under TCG a call costs milliseconds, not microseconds: the drawn
        # client timeouts (50 ms..) scale by SLOW, or nearly every call would
        # time out, and fewer client processes share the guest's two vCPUs.
        c["timeout_ms"] *= SLOW
        c["procs"] = min(c["procs"], 8)
        c["windows"] = c["windows"][:c["procs"]]
    for f in faults:
        f["agent"] = r.randrange(c["agents"])
    # agent-ctl commands added since the list above (F.AGENT_CTL_LATE): a
    # fault of their own, from their own stream, so that every fault a seed
    # drew before stays what it was.
    rl = random.Random(seed * 2654435761 + 29)
    if nf and "ctl" in kinds and rl.random() < 0.3:
        faults.append(dict(at=rl.randint(0, c["duration_ms"]), kind="ctl",
                           agent=rl.randrange(c["agents"]),
                           cmd=rl.choice(F.AGENT_CTL_LATE).format(n=rl.choice([1, 2, 5, 50]))))
    # Servers the agents route keys over (rendezvous hashing, agent/route.h):
    # one in about half the cases (the single-server argv, as before), else 2
    # or 3 alike, each killed on its own. Its own stream, drawn last: every
    # other part of a seed's draw stays what it was. Over verbs one server
    # (pinned RAM). With several, the agents list them on -s or, now and
    # then, in a --servers-file that a "reload" fault rewrites and re-reads.
    rs = random.Random(seed * 2246822519 + 61)
    c["servers"] = 1 if rs.random() < 0.5 else rs.randint(2, 3)
    if VERBS:
        c["servers"] = 1
    for item in SET:
        if item.startswith("case:servers="):
            c["servers"] = int(item.partition("=")[2])
    c["servers_file"] = c["servers"] > 1 and rs.random() < 0.4
    if c["servers"] > 1:
        c["explicit_tcp_port"] = False  # a listed server's TCP port is its port + 1
    if c["servers_file"] and not excluded("reload"):
        for _ in range(rs.choice([0, 1, 2])):
            faults.append(dict(at=rs.randint(0, c["duration_ms"]), kind="reload",
                               agent=rs.randrange(c["agents"]), how=rs.choice(["sighup", "ctl"])))
    for f in faults:
        if f["kind"] == "kill_server":
            f["server"] = rs.randrange(c["servers"])
    c["faults"] = sorted(faults, key=lambda f: f["at"])
    return c


# ---------------------------------------------------------------- processes


class Case:
    def __init__(self, c, tmp):
        self.c, self.tmp = c, tmp
        self.shms = ["/rdtort%dc%da%d" % (os.getpid(), c["seed"] % 100000, i)
                     for i in range(c["agents"])]
        # Server j listens on ports[j] (TCP on ports[j] + 1, or tcp_port with
        # one server). Chosen once: a restarted server listens where the first
        # one did, so its sockets compare equal to the fd baseline taken of the first.
        self.ports = []
        for _ in range(c["servers"]):
            p = free_port()
            while any(abs(p - q) <= 1 for q in self.ports):
                p = free_port()
            self.ports.append(p)
        self.port = self.ports[0]
        self.tcp_port = free_port() if c["explicit_tcp_port"] else self.port + 1
        self.s_metrics_ports = [free_port(False) if c["s_metrics"] else 0 for _ in self.ports]
        self.servers = [None] * c["servers"]
        self.server = None  # servers[0]
        self.killed = set()  # servers killed -9 during the case
        self.servers_file = os.path.join(tmp, "servers")
        self.agents = [None] * c["agents"]
        self.clients = {}  # writer -> (Popen, hist, window)
        self.next_writer = 1
        self.resets = []
        self.faults = {}
        self.findings = []
        self.ns = None
        # One image dir a server: an upload goes to its key's server.
        self.imgs = [os.path.join(tmp, "img" if j == 0 else "img%d" % j) for j in range(c["servers"])]
        self.img = self.imgs[0]
        self.logs = []
        self.uploads_active = [0] * c["servers"]  # each holds its temp file open
        self.phases = []  # (name, seconds), for the case line
        self.t_phase = time.monotonic()

    def phase(self, name):
        t = time.monotonic()
        self.phases.append((name, t - self.t_phase))
        self.t_phase = t

    def fault(self, kind):
        self.faults[kind] = self.faults.get(kind, 0) + 1

    def find(self, kind, text):
        self.findings.append((kind, text))

    # -- netns
    def netns_up(self):
        tag = "%d%d" % (os.getpid() % 10000, self.c["seed"] % 1000)
        self.ns = dict(s="rtS" + tag, a="rtA" + tag, vs="rtvS" + tag, va="rtvA" + tag,
                       addr_s="198.18.99.1", addr_a="198.18.99.2")
        n = self.ns
        cmds = [["ip", "netns", "add", n["s"]], ["ip", "netns", "add", n["a"]],
                ["ip", "link", "add", n["vs"], "type", "veth", "peer", "name", n["va"]],
                ["ip", "link", "set", n["vs"], "netns", n["s"]],
                ["ip", "link", "set", n["va"], "netns", n["a"]],
                ["ip", "-n", n["s"], "addr", "add", n["addr_s"] + "/30", "dev", n["vs"]],
                ["ip", "-n", n["a"], "addr", "add", n["addr_a"] + "/30", "dev", n["va"]],
                ["ip", "-n", n["s"], "link", "set", n["vs"], "up"],
                ["ip", "-n", n["a"], "link", "set", n["va"], "up"],
                ["ip", "-n", n["s"], "link", "set", "lo", "up"],
                ["ip", "-n", n["a"], "link", "set", "lo", "up"]]
        for cmd in cmds:
            if subprocess.run(cmd, capture_output=True).returncode != 0:
                self.netns_down()
                return False
        return True

    def netns_down(self):
        if self.ns:
            for k in ("s", "a"):
                subprocess.run(["ip", "netns", "del", self.ns[k]], capture_output=True)
            self.ns = None

    def link(self, up):
        n = self.ns
        subprocess.run(["ip", "-n", n["a"], "link", "set", n["va"], "up" if up else "down"],
                       capture_output=True)

    # -- server and agent
    def server_log(self, j):
        return "server.log" if j == 0 else "server%d.log" % j

    def srv_addr(self):
        return self.ns["addr_s"] if self.ns else VERBS["addr"] if VERBS else "127.0.0.1"

    def server_names(self):
        """The agents' names of the servers, as route.h hashes them (host:port).
        Fixed at the first call (after the netns is up or given up): the
        checks after the case, with the netns gone, see the agents' names."""
        if getattr(self, "_names", None) is None:
            self._names = ["%s:%d" % (self.srv_addr(), p) for p in self.ports]
        return self._names

    def owner(self, key):
        """The index of the server a key lives on (agent/route.h's rendezvous pick)."""
        if len(self.ports) == 1:
            return 0
        seeds = getattr(self, "_seeds", None)
        if seeds is None:
            seeds = self._seeds = [route_hash(n.encode()) for n in self.server_names()]
        h = route_hash(key.encode())
        best, win = 0, 0
        for i, sd in enumerate(seeds):
            score = route_mix(h ^ sd)
            if i == 0 or score > best:
                best, win = score, i
        return win

    def server_argv(self, j=0):
        c, sf = self.c, self.c["server"]
        bind = self.ns["addr_s"] if self.ns else VERBS["addr"] if VERBS else c["bind"]
        a = [os.path.join(BIN, "rdmem-server"), "-b", bind, "-p", str(self.ports[j])]
        if c["explicit_tcp_port"]:
            a += ["--tcp-port", str(self.tcp_port)]
        if c["image_dir"]:
            a += ["--image-dir", self.imgs[j]]
            if c["image_hook"]:
                a += ["--image-hook", c["image_hook"]]
        if c["secret"]:
            a += ["--secret-file", os.path.join(self.tmp, "secret")]
        if c["s_metrics"]:
            a += ["--metrics-port", str(self.s_metrics_ports[j])]
        if c["s_metrics_bind"]:
            a += ["--metrics-bind", c["s_metrics_bind"]]
        if self.ns:  # the agent is across a veth: TCP only
            sf = dict(sf, **{"--fabric": "none"})
        for k, v in sf.items():
            a += [k] if v is True else [k, fmt_bytes(v) if F.SERVER[k]["kind"] == "bytes" else str(v)]
        return a

    def agent_argv(self, i):
        c, af = self.c, self.c["agent"]
        srv = self.srv_addr()
        if len(self.ports) == 1:
            a = [os.path.join(BIN, "rdmem-agent"), "-s", srv, "-p", str(self.port)]
        elif c["servers_file"]:
            self.write_servers_file()
            a = [os.path.join(BIN, "rdmem-agent"), "--servers-file", self.servers_file]
        else:
            a = [os.path.join(BIN, "rdmem-agent"), "-s", ",".join(self.server_names())]
        a += ["--shm-name", self.shms[i]]
        if c["explicit_tcp_port"]:
            a += ["--tcp-port", str(self.tcp_port)]
        if c["secret"]:
            a += ["--secret-file", os.path.join(self.tmp, "secret")]
        if c["a_metrics"]:
            a += ["--metrics-port", str(free_port(False))]
        if c["a_metrics_bind"]:
            a += ["--metrics-bind", c["a_metrics_bind"]]
        if c["shm_group"]:
            a += ["--shm-group", c["shm_group"]]
        if VERBS and VERBS["src"]:
            a += ["--source", VERBS["src"]]
        elif c["source"] and not self.ns:
            a += ["--source", VERBS["addr"] if VERBS else "127.0.0.1"]
        for k, v in af.items():
            a += [k] if v is True else [k, fmt_bytes(v) if F.AGENT[k]["kind"] == "bytes" else str(v)]
        return a

    def spawn(self, argv, log, ns=None):
        if ns:
            argv = ["ip", "netns", "exec", ns] + argv
        f = open(os.path.join(self.tmp, log), "ab")
        self.logs.append(log)
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_log(self, log, text, proc, ms=5000):
        path = os.path.join(self.tmp, log)
        end = time.monotonic() + ms * SLOW / 1000
        while time.monotonic() < end:
            try:
                with open(path, errors="replace") as f:
                    if f.read().count(text) >= self.logs.count(log):
                        return True
            except OSError:
                pass
            if proc.poll() is not None:
                return False
            time.sleep(0.005)
        return False

    def write_servers_file(self):
        """The list, replaced whole (a reload never reads a half-written file)."""
        tmp = self.servers_file + ".new"
        with open(tmp, "w") as f:
            f.write("# torture: the case's servers\n" + "".join(n + "\n" for n in self.server_names()))
        os.rename(tmp, self.servers_file)

    def start_server(self, j=0):
        sf = self.c["server"]
        # Ready once every listener is (the fd baseline needs them all);
        # --no-tcp with --fabric none is legal: a server that listens to nothing.
        want = [] if "--no-tcp" in sf else ["listening tcp"]
        if sf.get("--fabric") != "none" and not self.ns:
            want.append("listening " + sf.get("--fabric", "shm"))
        want = want or ["rdma listener disabled"]
        if self.c["s_metrics"]:  # the /metrics listener opens after the others
            want.append("metrics: serving")
        log = self.server_log(j)
        path = os.path.join(self.tmp, log)
        for _ in range(20):
            start = os.path.getsize(path) if os.path.exists(path) else 0
            self.servers[j] = self.spawn(self.server_argv(j), log, self.ns and self.ns["s"])
            if j == 0:
                self.server = self.servers[0]
            if all(self.wait_log(log, w, self.servers[j]) for w in want):
                return True
            # A port another program took since we chose it is not a finding
            # (the server may log more after the failed bind: read this
            # start's lines, the log holds the earlier starts' too).
            with open(path, errors="replace") as f:
                f.seek(start)
                text = f.read()
            if "Address already in use" not in text:
                break
            if "metrics: listening on" in text:
                self.s_metrics_ports[j] = free_port(False)
            self.logs.remove(self.server_log(j))
            time.sleep(0.1)
        self.find("start", "server %d did not start: %s" % (j, self.tail(log)))
        return False

    def start_agent(self, i):
        log = "agent%d.log" % i
        self.agents[i] = self.spawn(self.agent_argv(i), log, self.ns and self.ns["a"])
        if not self.wait_log(log, "ready:", self.agents[i]):
            self.find("start", "agent %d did not start: %s" % (i, self.tail(log)))
            return False
        return True

    def tail(self, log, n=3):
        try:
            with open(os.path.join(self.tmp, log), errors="replace") as f:
                return " | ".join(line.strip() for line in f.readlines()[-n:])
        except OSError:
            return "(no log)"

    def start_client(self, window, duration_ms, ai, final=False):
        w = self.next_writer
        self.next_writer += 1
        hist = os.path.join(self.tmp, "h%d" % w)
        c = self.c
        argv = [CLIENT, "--shm", self.shms[ai], "--hist", hist, "--writer", str(w),
                "--seed", str(c["seed"]), "--window", str(window), "--keys", str(c["keys"]),
                "--timeout", str(c["timeout_ms"]), "--duration", str(duration_ms),
                "--max-size", str(c["max_size"]), "--image-max", str(c["image_max"]),
                "--sizes", c["sizes"], "--paths", c["paths"], "--max-calls", str(c["max_calls"]),
                "--weights", ",".join(str(x) for x in c["weights"])]
        if final:
            argv += ["--final"]
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(self.tmp, "c%d.err" % w), "wb"))
        self.clients[w] = (p, hist, window, ai)
        return w

    def kill9(self, p):
        if p and p.poll() is None:
            p.send_signal(signal.SIGKILL)
        if p:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass

    def ctl(self, cmd, i, timeout_ms=1000):
        r = subprocess.run([os.path.join(BIN, "rdmem"), "--shm-name", self.shms[i], "--timeout",
                            str(timeout_ms * SLOW), "agent-ctl", cmd], capture_output=True,
                           timeout=10 * SLOW)
        self.ctl_out = (r.stdout + r.stderr).decode(errors="replace").strip()
        return r.returncode == 0

    def stats(self, what, i=0):
        # The server's STATS over TCP first: over RDMA its reply is big
        # enough to go LAZY, and the object holding it (reclaimed by the
        # agent with a later call) showed in the very objects_live the leak
        # check reads (seed 4136328685: about 1 replay in 3). The default
        # path where TCP is not there (--no-tcp, a TCP path down).
        paths = [["--path", "tcp"], []] if what == "stats" else [[]]
        for path in paths:
            try:
                r = subprocess.run([os.path.join(BIN, "rdmem"), "--shm-name", self.shms[i]] +
                                   path + ["--timeout", str(400 * SLOW), what, "--json"],
                                   capture_output=True, timeout=10 * SLOW)
                if r.returncode == 0:
                    return json.loads(r.stdout)
            except (subprocess.TimeoutExpired, ValueError):
                pass
        return None

    # -- faults
    def apply(self, f, t0):
        k = f["kind"]
        if k == "kill_client":
            live = [w for w, cl in self.clients.items() if cl[0].poll() is None]
            if not live:
                return
            w = live[f["which"] % len(live)]
            p, _, window, ai = self.clients[w]
            self.kill9(p)
            left = self.c["duration_ms"] - (now() - t0) // 1000000
            self.start_client(window, max(int(left), 50), ai)
        elif k == "kill_agent":
            self.kill9(self.agents[f.get("agent", 0)])
            time.sleep(f["down_ms"] / 1000)
            if not self.start_agent(f.get("agent", 0)):
                return
        elif k == "kill_server":
            # One server: only its keys reset (each key lives on one server).
            j = f.get("server", 0)
            t_kill = now()
            self.kill9(self.servers[j])
            self.killed.add(j)
            self.resets.append((t_kill, now(), j))
            time.sleep(f["down_ms"] / 1000)
            if not self.start_server(j):
                return
        elif k == "reload":
            # The same list again: nothing may move, no call may fail for it.
            a = self.agents[f.get("agent", 0)]
            if a is None or a.poll() is not None:
                return
            self.write_servers_file()
            # agent-ctl needs a free client entry (--clients may be 1, all
            # taken): then SIGHUP. The agent logs each reload's outcome,
            # which check_reloads reads at the end.
            if f.get("how") != "ctl" or not self.ctl("reload", f.get("agent", 0), 3000):
                a.send_signal(signal.SIGHUP)
        elif k == "link_cut":
            self.link(False)
            time.sleep(f["down_ms"] / 1000)
            self.link(True)
        elif k == "ctl":
            if not self.ctl(f["cmd"], f.get("agent", 0)):
                return  # refused or no entry free: not injected
        self.fault(k)


def route_mix(h):
    """agent/route.h's rdmem_route_mix (Murmur3's 64-bit finalizer)."""
    m = (1 << 64) - 1
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & m
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & m
    h ^= h >> 33
    return h


def route_hash(b):
    """agent/route.h's rdmem_route_key_hash: FNV-1a, then mixed with the length."""
    h = 0xcbf29ce484222325
    for x in b:
        h = ((h ^ x) * 0x100000001b3) & ((1 << 64) - 1)
    return route_mix(h ^ len(b))


def fd_list(p):
    """Sockets, memfds and files a process holds; event fds, epoll and io_uring
    instances (per worker, made on first use) are not counted."""
    out = []
    try:
        d = "/proc/%d/fd" % p.pid
        for fd in os.listdir(d):
            try:
                t = os.readlink(os.path.join(d, fd))
            except OSError:
                continue
            # Upload temp files are open until the upload ends or times out.
            if not t.startswith("anon_inode:") and not t.endswith(".part"):
                out.append(re.sub(r"\[\d+\]", "", t))
    except OSError:
        return None
    return sorted(out)


def socket_info(pid, inode):
    """What socket inode is, from the process's view of /proc/net."""
    for proto in ("unix", "tcp", "tcp6"):
        try:
            with open("/proc/%d/net/%s" % (pid, proto)) as f:
                for line in f.readlines()[1:]:
                    t = line.split()
                    if proto == "unix" and len(t) >= 7 and t[6] == inode:
                        return "unix %s state %s" % (t[7] if len(t) > 7 else "(unnamed)", t[5])
                    if proto != "unix" and len(t) >= 10 and t[9] == inode:
                        return "%s %s -> %s state %s" % (proto, t[1], t[2], t[3])
        except OSError:
            pass
    return "socket inode %s" % inode


def fd_sockets(p):
    out = []
    d = "/proc/%d/fd" % p.pid
    try:
        for fd in os.listdir(d):
            try:
                t = os.readlink(os.path.join(d, fd))
            except OSError:
                continue
            m = re.match(r"socket:\[(\d+)\]", t)
            if m:
                out.append(socket_info(p.pid, m.group(1)))
    except OSError:
        pass
    return sorted(out)


def fd_count(p):
    fds = fd_list(p)
    return -1 if fds is None else len(fds)


def wait_until(fn, ms):
    """fn() until true or ms passed; a None (cannot tell: stats unreadable) gives up."""
    end = time.monotonic() + ms / 1000
    nones = 0
    while True:
        v = fn()
        nones += v is None
        if v or time.monotonic() > end or nones >= 1:
            return v
        time.sleep(0.05)


def leak_checks(k):
    """Session, lease, object, slot, upload, fd and temp-file leaks, after the load."""
    c = k.c
    sf = c["server"]

    def srv_quiet():
        s = k.stats("stats")
        if s is None:
            return None
        # Several servers: one object a server, under its host:port.
        names = k.server_names()
        per = [s] if len(names) == 1 else [s.get("servers", {}).get(n) for n in names]
        bad = []
        for j, s in enumerate(per):
            who = "" if len(names) == 1 else "%s: " % names[j]
            if s is None:
                bad.append("%sno stats in the agent's STATS reply" % who)
                continue
            # The per-session list may be left out (null) when it is longer
            # than a reply may be (a small --max-value): the summed gauge.
            rd = s.get("rdma") or {}
            objs = s.get("objpool", {}).get("objects_live", 0)
            n = len(k.agents)
            if s.get("sessions", 0) > n:
                bad.append("%ssessions=%d with %d agents" % (who, s["sessions"], n))
            if rd.get("leases_taken", 0) > n:
                bad.append("%sleases_taken=%d with %d agents" % (who, rd["leases_taken"], n))
            if objs and sf.get("--object-ttl", 10000) <= 2000:
                bad.append("%sobjects_live=%d past the object TTL" % (who, objs))
            if s.get("uploads", {}).get("active", 0) and sf.get("--upload-timeout", 30000) <= 2000:
                bad.append("%suploads.active=%d past the upload timeout" % (who, s["uploads"]["active"]))
            k.uploads_active[j] = s.get("uploads", {}).get("active", 0)
            if s.get("hooks", {}).get("running", 0):
                bad.append("%shooks.running=%d" % (who, s["hooks"]["running"]))
        return bad or True

    ttl = max(sf.get("--object-ttl", 0) if sf.get("--object-ttl", 10000) <= 2000 else 0,
              sf.get("--upload-timeout", 0) if sf.get("--upload-timeout", 30000) <= 2000 else 0)
    res = wait_until(lambda: (lambda q: q if q is None else q is True)(srv_quiet()), 3000 * SLOW + ttl)
    if not res:
        bad = srv_quiet()
        if bad is not None:
            for b in bad if isinstance(bad, list) else []:  # True: quiet since
                k.find("leaked", "server: " + b)

    def agent_quiet(i):
        s = k.stats("agent-stats", i)
        if s is None:
            return None
        bad = []
        # Several servers: one object a server's backend, under its host:port.
        per = [("", s)] if len(k.ports) == 1 else [
            (n + ": ", s.get("servers", {}).get(n)) for n in k.server_names()]
        for who, s in per:
            if s is None:
                bad.append("%sno stats in the AGENT_STATS reply" % who)
                continue
            if s.get("rdma", {}).get("slots_in_use", 0):
                bad.append("%srdma.slots_in_use=%d" % (who, s["rdma"]["slots_in_use"]))
            if s.get("tcp", {}).get("inflight", 0):
                bad.append("%stcp.inflight=%d" % (who, s["tcp"]["inflight"]))
            if s.get("frontdoor", {}).get("clients", 0) > 1:
                bad.append("%sfrontdoor.clients=%d with no client left" % (who, s["frontdoor"]["clients"]))
        return bad or True

    for i in range(len(k.agents)):
        if not wait_until(lambda: (lambda q: q if q is None else q is True)(agent_quiet(i)), 3000 * SLOW):
            bad = agent_quiet(i)
            for b in bad if isinstance(bad, list) else []:
                k.find("leaked", "agent %d: %s" % (i, b))


def run_case(idx, seed, args):
    c = draw_case(seed, args.quick)
    tmp = tempfile.mkdtemp(prefix="rdmem-torture-%d-" % seed)
    k = Case(c, tmp)
    for d in k.imgs:
        os.makedirs(d)
    if c["secret"]:
        fd = os.open(os.path.join(tmp, "secret"), os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, os.urandom(32).hex().encode())
        os.close(fd)
    res = dict(idx=idx, seed=seed, calls=0, faults={}, findings=[], unknown=0, cfg=c)
    t_start = time.monotonic()
    try:
        run_case_body(k, args)
    finally:
        for p in [cl[0] for cl in k.clients.values()] + k.agents + k.servers:
            if p and p.poll() is None:
                k.kill9(p)
        k.netns_down()
        for name in k.shms:  # what a kill -9'd agent could not remove
            try:
                os.unlink("/dev/shm" + name)
            except OSError:
                pass
    hist = {}
    for w, (p, h, _, _) in k.clients.items():
        if os.path.exists(h):
            hist["w%d" % w] = checker.parse_history(h)
    res["calls"] = sum(len(calls) for _, calls in hist.values())
    res["rpaths"] = reply_paths(hist)
    k.phase("stop")
    kv_find, st = checker.check_kv(hist, k.resets, args.budget, k.owner)
    k.findings += kv_find
    if st["unknown"]:  # keys nobody checked: their histories, for checker.py to be run on
        path = os.path.join(tmp, "unknown-keys.json")
        with open(path, "w") as f:
            json.dump({key: [[o.inv, None if o.ret == checker.INF else o.ret, o.kind, o.val, o.src]
                             for o in ops] for key, ops in st["unknown"].items()}, f)
        k.findings.append(("unknown", "%d key(s) undecided after searches of %d and %d states "
                           "(%s): nobody checked them; `python3 tests/torture/checker.py %s "
                           "BUDGET` searches again" % (
                               len(st["unknown"]), args.budget,
                               args.budget * checker.RECHECK_FACTOR,
                               ", ".join(sorted(st["unknown"])[:3]), path)))
    check_images(k, hist)
    check_reloads(k)
    k.phase("check")
    res["phases"] = " ".join("%s %.1f" % p for p in k.phases if p[1] >= 0.5)
    res["unknown"] = len(st["unknown"])
    res["faults"] = k.faults
    res["findings"] = k.findings
    res["secs"] = time.monotonic() - t_start
    res["tmp"] = tmp
    if k.findings and not args.keep_all:
        res["kept"] = True
    elif not args.keep_all:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def reply_paths(hist):
    """Replies per path that carried them (PATHS index; 0: none recorded, e.g. a
    call refused before it left the client), and completions per status."""
    n, rcs = [0] * len(PATHS), {}
    for _, calls in hist.values():
        for cl in calls.values():
            comp = cl["comp"]
            if comp is None:
                continue
            rcs[comp["rc"]] = rcs.get(comp["rc"], 0) + 1
            if 0 <= comp["rpath"] < len(PATHS):
                n[comp["rpath"]] += 1
    return n, rcs


def check_images(k, hist):
    if not k.c["image_dir"]:
        return
    dirs = [set(os.listdir(d)) if os.path.isdir(d) else set() for d in k.imgs]
    for name, (w, calls) in hist.items():
        for cid, cl in calls.items():
            if cl["op"] != "image":
                continue
            comp = cl["comp"]
            key = cl["key"]
            j = k.owner(key)  # every chunk of an upload goes to its key's server
            names, img = dirs[j], k.imgs[j]
            if comp is not None and comp["rc"] == -74:  # EBADMSG: the server hashed other bytes
                k.find("duplicated", "%s#%d: image %s (%d bytes, chunk %s) failed its hash check "
                       "at commit: the server saw other bytes than were sent (a chunk applied "
                       "twice or changed)" % (name, cid, key, cl["vlen"], comp["extra"]))
            if key not in names:
                if comp is not None and comp["rc"] == 0:
                    k.find("lost", "%s#%d: image %s committed but absent" % (name, cid, key))
                continue
            r = subprocess.run([CLIENT, "--digest", os.path.join(img, key)], capture_output=True,
                               text=True)
            got = r.stdout.split()
            if len(got) != 2 or int(got[0]) != cl["vlen"] or got[1] != cl["vd"]:
                k.find("wrong", "%s#%d: image %s on disk is %s, uploaded %d bytes digest %s" % (
                    name, cid, key, r.stdout.strip(), cl["vlen"], cl["vd"]))
    for j, names in enumerate(dirs):
        temps = [n for n in names if n.endswith(".part")]
        if temps and j not in k.killed:
            k.find("leaked", "image dir %s holds %d upload temp files after its server stopped: "
                   "%s" % (os.path.basename(k.imgs[j]), len(temps), ", ".join(sorted(temps)[:3])))


def check_reloads(k):
    """A reload of the unchanged list adds and removes nothing, and does not fail."""
    for i in range(len(k.agents)):
        try:
            with open(os.path.join(k.tmp, "agent%d.log" % i), errors="replace") as f:
                lines = [x.strip() for x in f if "reload" in x]
        except OSError:
            continue
        for x in lines:
            if "reload failed" in x or ("reloaded:" in x and "(+0 -0)" not in x):
                k.find("reload", "agent %d, the same servers file re-read: %s" % (i, x))


def run_case_body(k, args):
    c = k.c
    if c["netns"] and not k.netns_up():
        c["netns"] = False
        c["agent"].pop("--fabric", None)
    k.server_names()  # fixed now, as the agents will name the servers
    srv_fds0, srv_socks0 = [], []
    for j in range(len(k.servers)):
        if not k.start_server(j):
            return
        srv_fds0.append(fd_list(k.servers[j]) or [])
        srv_socks0.append(fd_sockets(k.servers[j]))
    for i in range(len(k.agents)):
        if not k.start_agent(i):
            return
    for kind in ("--simulate-rdma-down", "--simulate-rdma-op-fail", "--simulate-server-pressure",
                 "--simulate-rdma-errors"):
        if kind in c["agent"]:
            k.fault("flag" + kind[len("--simulate"):])
    k.phase("start")
    t0 = now()
    for i in range(c["procs"]):
        k.start_client(c["windows"][i], c["duration_ms"], i % len(k.agents))
    for f in c["faults"]:
        delay = f["at"] / 1000 - (now() - t0) / 1e9
        if delay > 0:
            time.sleep(delay)
        k.apply(f, t0)
    k.phase("load")
    # Drain: a client stops issuing at its deadline and waits for its window.
    limit = time.monotonic() + c["duration_ms"] / 1000 + 2 * c["timeout_ms"] / 1000 + 8 * SLOW
    for w, (p, h, _, _) in list(k.clients.items()):
        try:
            p.wait(max(0.1, limit - time.monotonic()))
        except subprocess.TimeoutExpired:
            k.find("hung", "client w%d (pid %d) still running %.0f s after its deadline" % (
                w, p.pid, 2 * c["timeout_ms"] / 1000 + 8 * SLOW))
            k.kill9(p)
        if p.returncode not in (0, -9):
            k.find("crashed", "client w%d exited %s: %s" % (w, p.returncode, open(os.path.join(
                k.tmp, "c%d.err" % w), errors="replace").read()[-300:]))
    for name, log, p in ([("server" if j == 0 else "server%d" % j, k.server_log(j), s)
                          for j, s in enumerate(k.servers)] +
                         [("agent%d" % i, "agent%d.log" % i, a) for i, a in enumerate(k.agents)]):
        if p is None or p.poll() is not None:
            k.find("crashed", "%s exited %s during the case: %s" % (
                name, None if p is None else p.returncode, k.tail(log)))
            return
    k.phase("drain")
    # Lift the faults, then read every key once: acknowledged writes must be there.
    for i in range(len(k.agents)):
        k.ctl("simulate-rdma-down off", i)
        k.ctl("simulate-rdma-op-fail 0", i)
        k.ctl("simulate-rdma-link-break 0", i)
        k.ctl("simulate-server-pressure off", i)
        k.ctl("force-path " + c["agent"].get("--force-path", "auto"), i)
    w = k.start_client(1, 700, 0, final=True)
    try:
        k.clients[w][0].wait(15 * SLOW)
    except subprocess.TimeoutExpired:
        k.find("hung", "final read still running after %d s" % (15 * SLOW))
        k.kill9(k.clients[w][0])
    k.phase("final")
    leak_checks(k)
    k.phase("leaks")
    # Stop the agent: the server's fds return to what it had alone.
    for i, a in enumerate(k.agents):
        a.send_signal(signal.SIGTERM)
    for i, a in enumerate(k.agents):
        try:
            a.wait(5 * SLOW)
        except subprocess.TimeoutExpired:
            k.find("hung", "agent %d did not stop within %d s of SIGTERM" % (i, 5 * SLOW))
        if os.path.exists("/dev/shm" + k.shms[i]):
            k.find("leaked", "/dev/shm%s left by the stopped agent %d" % (k.shms[i], i))
    for j, srv in enumerate(k.servers):
        who = "server" if len(k.servers) == 1 else "server %d (%s)" % (j, k.server_names()[j])
        srv_fd0 = len(srv_fds0[j])
        fd_ok = srv_fd0 + k.uploads_active[j]
        if srv_fd0 > 0 and not wait_until(lambda: fd_count(srv) <= fd_ok, 3000 * SLOW):
            extra = list(fd_list(srv) or [])
            for f in srv_fds0[j]:
                if f in extra:
                    extra.remove(f)
            k.find("leaked", "%s holds %d fds with no agent, %d at start (+%d open uploads); "
                   "more than at start: %s" % (who, fd_count(srv), srv_fd0, k.uploads_active[j],
                                               ", ".join(extra[:6])))
            socks = fd_sockets(srv)
            for x in srv_socks0[j]:
                if x in socks:
                    socks.remove(x)
            if socks:
                k.find("leaked", "%s sockets not there at start: %s" % (who, "; ".join(socks[:4])))
    for srv in k.servers:
        srv.send_signal(signal.SIGTERM)
    for j, srv in enumerate(k.servers):
        try:
            srv.wait(5 * SLOW)
        except subprocess.TimeoutExpired:
            k.find("hung", "%s did not stop within %d s of SIGTERM" % (
                "server" if len(k.servers) == 1 else "server %d" % j, 5 * SLOW))


# ---------------------------------------------------------------- -h check


def check_help():
    """Fails when a binary's -h documents a flag the table lacks, or a range drifted."""
    bad = []
    for binary, table in (("rdmem-server", F.SERVER), ("rdmem-agent", F.AGENT)):
        path = os.path.join(BIN, binary)
        text = subprocess.run([path, "-h"], capture_output=True, text=True).stdout
        documented = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))
        documented |= {F.SHORT[s] for s in re.findall(r"(?<![\w-])(-[a-z])\b", text) if s in F.SHORT}
        for flag in sorted(documented - set(table)):
            bad.append("%s -h documents %s: add it to tests/torture/flags.py" % (binary, flag))
        for flag in sorted(set(table) - documented):
            bad.append("tests/torture/flags.py has %s, which %s -h does not document" % (flag, binary))
        for flag, spec in table.items():
            if spec["kind"] not in ("num", "bytes"):
                continue
            for v in (spec["lo"] - 1, spec["hi"] + 1):
                if v < 0:
                    continue
                extra = ["-s", "127.0.0.1"] if binary == "rdmem-agent" else []
                r = subprocess.run([path] + extra + [flag, str(v), "--shm-name", "/rdtort-never",
                                                     "-p", "1"] if binary == "rdmem-agent" else
                                   [path, flag, str(v), "-p", "1", "--fabric", "none", "--no-tcp"],
                                   capture_output=True, text=True, timeout=5)
                if r.returncode == 0 or flag not in r.stderr:
                    bad.append("%s %s %d was not refused naming the flag: the table's range "
                               "[%d, %d] drifted from the parser" % (binary, flag, v, spec["lo"],
                                                                     spec["hi"]))
    return bad


# ---------------------------------------------------------------- main


BUDGET = 20000  # linearizability search states per key (checker.check_kv)


def summary_line(r, args):
    c = r["cfg"]
    return "servers %d%s agents %d procs %d win %s keys %d %dms paths %s faults %s" % (
        c["servers"], " (file)" if c.get("servers_file") else "", c["agents"], c["procs"], max(c["windows"]), c["keys"], c["duration_ms"], c["paths"],
        ",".join("%s=%d" % kv for kv in sorted(r["faults"].items())) or "none")


def on_term(sig, frame):
    raise KeyboardInterrupt  # unwinds through each case's cleanup


def main():
    signal.signal(signal.SIGTERM, on_term)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--cases", type=int, default=None)
    ap.add_argument("--minutes", type=float, default=None)
    ap.add_argument("--quick", action="store_true", help="short cases (CI, make test)")
    ap.add_argument("--ci", action="store_true", help="200 quick cases within about 10 minutes")
    ap.add_argument("--budget", type=int, default=BUDGET,
                    help="search states per key (%d times as many for a second search)"
                    % checker.RECHECK_FACTOR)
    ap.add_argument("--keep-all", action="store_true", help="keep every case's directory")
    ap.add_argument("--no-help-check", action="store_true")
    ap.add_argument("--fabric", choices=["shm", "verbs"], default="shm",
                    help="verbs: server and agents over RDMA at --addr (e.g. Soft-RoCE)")
    ap.add_argument("--addr", help="with --fabric verbs: the RDMA device's IPv4 address")
    ap.add_argument("--src", help="with --fabric verbs: the agents' --source (another device)")
    ap.add_argument("--show", action="store_true", help="print the case's draw")
    args = ap.parse_args()
    global VERBS, SLOW
    if args.fabric == "verbs":
        if not args.addr:
            ap.error("--fabric verbs needs --addr (the RDMA device's IPv4 address)")
        VERBS = dict(addr=args.addr, src=args.src)
        SLOW = 4
    elif args.addr or args.src:
        ap.error("--addr and --src go with --fabric verbs")
    if args.ci:
        args.quick = True
        args.cases = args.cases or 200
        args.minutes = args.minutes or 10
    if args.cases is None and args.minutes is None:
        args.cases = 1 if args.seed is not None else 10
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    if SET:
        print("# WARNING: TORTURE_SET=%s pins part of the draw: diagnosis only, not a test run"
              % ",".join(SET))
    if EXCLUDE:
        print("# WARNING: TORTURE_EXCLUDE=%s restricts the draw: diagnosis only, not a test run"
              % ",".join(sorted(EXCLUDE)))
    if not os.path.exists(CLIENT):
        print("not ok - torture: %s is missing (make)" % CLIENT)
        return 1
    fails = 0
    if not args.no_help_check:
        bad = check_help()
        for b in bad:
            print("#   " + b)
        print("%sok - torture flag table covers every flag rdmem-server and rdmem-agent -h "
              "document, with their ranges" % ("not " if bad else ""))
        fails += bool(bad)
    mode = (" over verbs at %s%s (no link cuts: a netns cannot share the device)"
            % (VERBS["addr"], ", agents from " + VERBS["src"] if VERBS["src"] else "")
            if VERBS else " (netns link cuts on)" if netns_ok() else
            " (no netns: not root or no ip; link cuts off)")
    print("# torture: base seed %d%s" % (seed, mode))
    deadline = time.monotonic() + args.minutes * 60 if args.minutes else None
    tot = dict(cases=0, calls=0, faults=0, unknown=0)
    by_servers = {}
    kinds = {}
    fault_kinds = {}
    longest = 0.0
    rpaths, rcs = [0] * len(PATHS), {}
    i = 0
    while (args.cases is None or i < args.cases) and (deadline is None or time.monotonic() < deadline):
        s = seed + i
        if args.show:
            print("# draw: " + json.dumps(draw_case(s, args.quick), sort_keys=True))
        r = run_case(i, s, args)
        tot["cases"] += 1
        by_servers[r["cfg"]["servers"]] = by_servers.get(r["cfg"]["servers"], 0) + 1
        tot["calls"] += r["calls"]
        tot["unknown"] += r["unknown"]
        longest = max(longest, r["secs"])
        rpaths = [a + b for a, b in zip(rpaths, r["rpaths"][0])]
        for rc, n in r["rpaths"][1].items():
            rcs[rc] = rcs.get(rc, 0) + n
        for f, n in r["faults"].items():
            tot["faults"] += n
            fault_kinds[f] = fault_kinds.get(f, 0) + n
        line = "torture case %d seed %d: %d calls, %s (%.1fs%s)" % (
            i, s, r["calls"], summary_line(r, args), r["secs"],
            ": " + r["phases"] if r.get("phases") else "")
        if r["findings"]:
            fails += 1
            print("not ok - " + line)
            seen = {}
            for kind, text in r["findings"]:
                kinds[kind] = kinds.get(kind, 0) + 1
                seen[kind] = seen.get(kind, 0) + 1
                if seen[kind] <= 3:
                    print("#   %s: %s" % (kind, text))
            for kind, n in seen.items():
                if n > 3:
                    print("#   %s: ... %d more" % (kind, n - 3))
            knobs = "".join(" %s=%s" % (n, os.environ[n]) for n in ("TORTURE_SET", "TORTURE_EXCLUDE")
                            if os.environ.get(n))
            print("#   replay:%s RDMEM_BIN=%s tests/torture/run --seed %d --cases 1%s   (logs: %s)" % (
                knobs, BIN, s, (" --quick" if args.quick else "") + (
                    " --budget %d" % args.budget if args.budget != BUDGET else "") + (
                    " --fabric verbs --addr %s%s" % (VERBS["addr"], " --src " + VERBS["src"]
                                                     if VERBS["src"] else "") if VERBS else ""),
                r["tmp"]))
        else:
            print("ok - " + line)
        sys.stdout.flush()
        i += 1
    print("# torture summary: configurations %d, calls %d, faults injected %d (%s), wrong %d, "
          "lost %d, duplicated %d, leaked %d, hung %d, crashed %d, start %d, reload %d, "
          "unknown %d, longest case %.1fs" % (
              tot["cases"], tot["calls"], tot["faults"],
              ", ".join("%s %d" % kv for kv in sorted(fault_kinds.items())) or "none",
              kinds.get("wrong", 0), kinds.get("lost", 0), kinds.get("duplicated", 0),
              kinds.get("leaked", 0), kinds.get("hung", 0), kinds.get("crashed", 0),
              kinds.get("start", 0), kinds.get("reload", 0), tot["unknown"], longest))
    print("# torture configurations by servers: %s" % ", ".join(
        "%d: %d" % kv for kv in sorted(by_servers.items())))
    # Over verbs, the proof that RDMA carried calls (a draw can turn it off).
    print("# torture replies by path: %s" % ", ".join(
        "%s %d" % ("none" if i == 0 else p, rpaths[i]) for i, p in enumerate(PATHS)))
    print("# torture completions by status (-errno): %s" % ", ".join(
        "%d: %d" % kv for kv in sorted(rcs.items(), key=lambda kv: -kv[1])))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
