"""The torture harness's one table of server and agent flags and their legal ranges.

Ranges mirror the parsers (server/main.c parse_args, agent/main.c
rdmem_agent_numeric and rdmem_agent_text); check_help() fails when a
binary's -h documents a flag this table lacks, and probes that each numeric
range's neighbours (lo - 1, hi + 1) are refused, so a new flag or a changed
range cannot be forgotten here.

kind:
  num    integer in [lo, hi]; cap: the largest value the draw picks when the
         flag's cost grows with its value (memory, time); lo and hi are still
         drawn when cap is None, and hi is drawn when cap >= hi
  bytes  like num, printed with k/m suffixes when exact
  bool   flag without argument
  pow2   (with num) the drawn value is rounded down to a power of two
  choice one of choices
  harness set by the harness (ports, names, paths) with the listed choices
"""

U32 = 2**32 - 1
KI, MI, GI = 1 << 10, 1 << 20, 1 << 30

SERVER = {
    "--bind": dict(kind="harness", choices=["127.0.0.1", "0.0.0.0"]),
    "--port": dict(kind="harness", lo=1, hi=65535),
    "--tcp-port": dict(kind="harness", lo=0, hi=65535),
    "--no-tcp": dict(kind="bool", p=0.1),
    "--image-dir": dict(kind="harness", p=0.85),
    "--image-hook": dict(kind="harness", p=0.2, choices=["true", "sleep 0.05"]),
    "--fabric": dict(kind="choice", choices=["shm", "none"], p=0.5),  # verbs: no device here
    "--batch-budget": dict(kind="num", lo=1, hi=1024, default=32),
    "--ring-slots": dict(kind="num", lo=1, hi=4096, default=256),
    "--slot-bytes": dict(kind="bytes", lo=1024, hi=MI, default=32 * KI),
    # 64 KiB each, per session, address space only until used: the top of
    # the range is drawn (it is what 32-bit object offsets break on).
    "--objpool-slabs": dict(kind="num", lo=1, hi=65536, default=256),
    "--object-ttl": dict(kind="num", lo=10, hi=86400000, default=10000),
    "--max-sessions": dict(kind="num", lo=1, hi=4096, default=64),
    "--shared-pool": dict(kind="choice", choices=["on", "off"]),
    "--stage-bytes": dict(kind="bytes", lo=64, hi=MI, default=16 * KI),
    "--workers": dict(kind="num", lo=1, hi=64, default=1),
    "--group-threshold": dict(kind="num", lo=1, hi=MI, default=64),
    "--group-size": dict(kind="num", lo=1, hi=4096, default=32),
    # A slice of a second starves the other groups for the whole case: legal,
    # so it is drawn, rarely (the cap keeps most draws under 50 ms).
    "--slice-us": dict(kind="num", lo=10, hi=1000000, default=500, cap=50000),
    "--quiet-lane": dict(kind="num", lo=0, hi=64, default=8),
    "--busy-poll": dict(kind="bool", p=0.2),
    "--secret-file": dict(kind="harness", p=0.2),
    # TLS on TCP: the harness makes no certificates, so it never sets these
    # (tests/integration/test_tls.c covers them).
    "--tls-cert": dict(kind="harness"),
    "--tls-key": dict(kind="harness"),
    "--tls-ca": dict(kind="harness"),
    "--max-value": dict(kind="bytes", lo=4 * KI, hi=64 * MI, default=MI),
    "--max-image": dict(kind="bytes", lo=1, hi=GI, default=64 * MI),
    "--upload-timeout": dict(kind="num", lo=100, hi=86400000, default=30000),
    "--image-hook-timeout": dict(kind="num", lo=1000, hi=86400000, default=300000),
    # The KV store's memory limit: never drawn. A limit the workload reaches
    # refuses PUTs with NO_SPACE by design, which the linearizability check
    # would have to model; test_kv and test_exhaustion cover it, and
    # check_help still probes its range (default: half of the memory).
    "--kv-max-bytes": dict(kind="bytes", lo=MI, hi=16384 * GI, p=0),
    "--dedup-window": dict(kind="num", lo=16, hi=65536, default=4096, pow2=True),
    "--dedup-agents": dict(kind="num", lo=1, hi=65536, default=256),
    "--dedup-idle": dict(kind="num", lo=1, hi=86400000, default=300000),
    # Documented to let a retry run twice: the exactly-once and linearizability
    # checks do not hold with it, so the draw never sets it (check_help still
    # probes that -h documents it).
    "--no-dedup": dict(kind="bool", p=0),
    # Hostile-network limits (tests/integration/test_net_hostile.c). Reaping
    # and deadlines are drawn: agents must ride through them. The
    # per-address and capacity limits are never drawn: every agent of a case
    # and the harness share 127.0.0.1 (and shm counts per process), so a
    # small draw refuses honest peers by design rather than finding a bug;
    # check_help still probes their ranges.
    "--tcp-idle-ms": dict(kind="num", lo=1000, hi=86400000, default=300000),
    "--tcp-auth-ms": dict(kind="num", lo=100, hi=60000, default=3000),
    "--session-grace-ms": dict(kind="num", lo=100, hi=3600000, default=5000),
    # Slows readers instead of refusing anyone: drawn, so calls must ride it.
    "--tcp-out-budget": dict(kind="bytes", lo=MI, hi=1024 * GI, default=64 * MI),
    "--tcp-max-conns": dict(kind="num", lo=16, hi=65536, default=1024, p=0),
    "--tcp-max-per-addr": dict(kind="num", lo=1, hi=65536, default=64, p=0),
    "--tcp-max-partial-per-addr": dict(kind="num", lo=1, hi=65536, default=8, p=0),
    "--tcp-reserved-pct": dict(kind="num", lo=0, hi=90, default=10, p=0),
    "--max-sessions-per-addr": dict(kind="num", lo=1, hi=4096, p=0),
    "--metrics-port": dict(kind="harness", p=0.15),
    "--metrics-bind": dict(kind="harness", p=0.1, choices=["127.0.0.1", "::1"]),
    "--verbose": dict(kind="bool", p=0.1),
    "--help": dict(kind="harness"),
}

AGENT = {
    "--server": dict(kind="harness"),
    # Several servers (tests/torture draws 1 to 3): -s h:p,h:p or this file.
    "--servers-file": dict(kind="harness"),
    "--port": dict(kind="harness", lo=1, hi=65534),
    "--tcp-port": dict(kind="harness", lo=1, hi=65535),
    "--fabric": dict(kind="choice", choices=["shm", "tcp"], p=0.4),  # verbs: no device
    "--shm-name": dict(kind="harness"),
    "--socket": dict(kind="harness"),  # the harness names fronts by --shm-name
    "--shm-reset": dict(kind="bool", p=0.3),
    "--shm-group": dict(kind="harness", p=0.2, choices=["root", "0"]),
    "--admin-group": dict(kind="harness", p=0.2, choices=["root", "0"]),
    # clients x slots x (max-value + 65 KiB) of /dev/shm address space: the
    # draw shrinks clients until the segment is under 2 GiB.
    "--clients": dict(kind="num", lo=1, hi=1024, default=32),
    # a share for uids other than root and the agent's (the torture clients are
    # root: never capped); default half of --clients
    "--clients-per-uid": dict(kind="num", lo=1, hi=1024, default=16),
    "--client-strikes": dict(kind="num", lo=0, hi=1000000, default=16),
    "--slots": dict(kind="num", lo=1, hi=64, default=16),
    "--max-value": dict(kind="bytes", lo=1, hi=64 * MI, default=MI),
    # Budgets of pinned client memory (agent/pin.h): 0 sends every large
    # AUTO call over TCP and fails forced BULK/LAZY ones -ENOMEM.
    "--max-client-mem": dict(kind="bytes", lo=0, hi=1 << 40, default=64 * MI),
    "--max-total-mem": dict(kind="bytes", lo=0, hi=1 << 40, default=256 * MI),
    "--force-path": dict(kind="choice", choices=["auto", "eager", "lazy", "bulk", "tcp"]),
    "--bulk-threshold": dict(kind="bytes", lo=0, hi=U32, default=8 * KI),
    "--large-threshold": dict(kind="bytes", lo=0, hi=U32, default=8 * KI),
    "--error-threshold": dict(kind="num", lo=0, hi=U32, default=8),
    "--ring-slots": dict(kind="num", lo=1, hi=4096, default=256),
    "--resp-bytes": dict(kind="bytes", lo=64, hi=MI, default=16 * KI),
    # Time each reconnect may take: the draw keeps it under the case length.
    "--connect-timeout": dict(kind="num", lo=1, hi=600000, default=2000, cap=3000),
    "--rdma-stall-ms": dict(kind="num", lo=50, hi=600000, default=500, cap=5000),
    "--max-reads": dict(kind="num", lo=1, hi=255),
    "--busy-poll": dict(kind="bool", p=0.2),
    "--secret-file": dict(kind="harness"),
    "--tls-ca": dict(kind="harness"),
    "--tls-server-name": dict(kind="harness"),
    "--tls-cert": dict(kind="harness"),
    "--tls-key": dict(kind="harness"),
    "--source": dict(kind="harness", p=0.2, choices=["127.0.0.1"]),
    "--simulate-rdma-down": dict(kind="bool", p=0.1, fault=True),
    "--simulate-rdma-op-fail": dict(kind="num", lo=0, hi=U32, p=0.15, fault=True),
    "--simulate-server-pressure": dict(kind="choice", choices=["ring", "objpool"], p=0.1,
                                       fault=True),
    "--simulate-rdma-errors": dict(kind="num", lo=0, hi=U32, p=0.1, fault=True),
    "--metrics-port": dict(kind="harness", p=0.15),
    "--metrics-bind": dict(kind="harness", p=0.1, choices=["127.0.0.1", "::1"]),
    # The Redis protocol front end (agent/resp.c): tests/integration/resp.sh
    # drives it with the Redis clients; torture cases leave it off.
    "--resp-port": dict(kind="harness", lo=1, hi=65535),
    "--resp-bind": dict(kind="harness", choices=["127.0.0.1", "::1"]),
    "--resp-socket": dict(kind="harness"),
    "--resp-max-conns": dict(kind="num", lo=1, hi=1000000, default=1024),
    "--resp-idle-evict": dict(kind="num", lo=0, hi=86400, default=10),
    # The floor also grows with --max-value (checked at start with RESP on).
    "--resp-max-memory": dict(kind="bytes", lo=16 * MI, hi=64 * GI, default=256 * MI),
    "--verbose": dict(kind="bool", p=0.1),
    "--help": dict(kind="harness"),
}

# Short options the -h text shows next to their long form.
SHORT = {"-b": "--bind", "-p": "--port", "-s": "--server", "-v": "--verbose", "-h": "--help"}

# Runtime `rdmem agent-ctl` commands (agent/session.c rdmem_agent_apply_ctl).
AGENT_CTL = [
    "simulate-rdma-down on", "simulate-rdma-down off",
    "simulate-rdma-op-fail {n}", "simulate-rdma-errors {n}",
    "simulate-server-pressure ring", "simulate-server-pressure objpool",
    "simulate-server-pressure off", "force-path {path}",
]
# Commands added since: a fault of their own, drawn from a stream of their
# own (torture.py draw_case), so every fault a seed drew before stays.
AGENT_CTL_LATE = ["simulate-rdma-link-break {n}"]
