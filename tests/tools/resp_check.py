#!/usr/bin/python3
"""resp_check.py PORT MAX_VALUE [AGENT_PID] - what redis-py users rely on, against
rdmem-agent --resp-port: values byte-exact (binary, NUL, CR LF, 1 MiB),
pipelines in order, DEL/EXISTS counts, the limits named in errors, RESP3
framing after HELLO 3, and malformed input answered with an error and a
closed connection. One "ok - " / "not ok - " line per check; exit 1 on any
failure."""
import os
import socket
import sys
import time

import redis

port, max_value = int(sys.argv[1]), int(sys.argv[2])
failed = 0


def expect(name, cond):
    global failed
    print(("ok - " if cond else "not ok - ") + name)
    failed |= not cond


r = redis.Redis(host="127.0.0.1", port=port)
binary = bytes(range(256)) * 4 + b"\0\r\n\r\n\0"
r.set(b"bin\0key\r\n", binary)
expect("redis-py: a binary value with NUL and CR LF (also in the key) comes back byte-exact",
       r.get(b"bin\0key\r\n") == binary)
big = bytes((i * 7 + 3) & 0xFF for i in range(max_value))
r.set("big", big)
expect("redis-py: a value of the agent's --max-value (%d B) comes back byte-exact" % max_value,
       r.get("big") == big)
# Refused from the header alone (the client may still be writing the value,
# so the check sends only the header and reads the answer).
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n" % (max_value + 1))
err = s.recv(1000)
s.close()
expect("a value over --max-value is refused naming the limit and the flag (%r)" % err,
       err.startswith(b"-ERR Protocol error: bulk length %d over the limit %d (the agent's "
                      b"--max-value)" % (max_value + 1, max_value)))
r = redis.Redis(host="127.0.0.1", port=port)
expect("redis-py: the connection after a refused value works", r.ping() is True)
r.mset({"m1": b"one", "m3": b"three"})
expect("redis-py: MGET keeps the order, None for a missing key",
       r.mget("m1", "m2", "m3") == [b"one", None, b"three"])
p = r.pipeline(transaction=False)
for i in range(500):
    p.set("p%d" % i, "v%d" % i)
for i in range(500):
    p.get("p%d" % i)
res = p.execute()
expect("redis-py: a pipeline of 1000 commands answers in order",
       res[:500] == [True] * 500 and res[500:] == [b"v%d" % i for i in range(500)])
expect("redis-py: EXISTS counts (repeats counted)", r.exists("m1", "m1", "m2") == 2)
expect("redis-py: DEL counts the keys removed", r.delete("m1", "m2", "m3") == 2)
expect("redis-py: a deleted key reads None", r.get("m1") is None)
r.client_setname("py-check")
expect("redis-py: CLIENT SETNAME / GETNAME", r.client_getname() in ("py-check", b"py-check"))
expect("redis-py: CLIENT ID is a number", isinstance(r.client_id(), int))
info = r.info()
expect("redis-py: INFO parses, with the Stats counters",
       info.get("total_commands_processed", 0) > 1000 and "redis_version" in info)


# A slow reader: N GETs of the largest value (N MiB of replies, far over the
# agent's 4 MiB output mark) sent at once, nothing read for a while. The
# agent must stop reading that input and sending its calls (its heap stays
# within the mark plus the replies in flight), keep serving others, and
# still answer all N in order once the reader reads.
N_SLOW = 200
# The sanitizers' shadow memory counts as the agent's heap too: ASan's 1/8
# (and its quarantine of grown buffers), TSan's 4x. Without the bound the
# growth is about N_SLOW MiB plus that.
HEAP_BOUND = {"asan": 100, "tsan": 240}.get(os.environ.get("RDMEM_SANITIZER", ""), 48)
SLOW_TIMEOUT = 120 if os.environ.get("RDMEM_SANITIZER") else 30


def rss_anon_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    return 0


agent_pid = int(sys.argv[3]) if len(sys.argv) > 3 else 0
rss_before = rss_anon_kib(agent_pid) if agent_pid else 0
slow = socket.create_connection(("127.0.0.1", port))
slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
req = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * N_SLOW + b"*1\r\n$4\r\nPING\r\n"
slow.setblocking(False)
sent = 0
t0 = time.time()
while sent < len(req) and time.time() - t0 < 2:
    try:
        sent += slow.send(req[sent:])
    except BlockingIOError:
        time.sleep(0.01)
ok = r.ping() is True and r.get("big") == big
expect("a slow reader with %d MiB of replies pending does not stop other clients" % N_SLOW, ok)
if agent_pid:
    time.sleep(0.5)
    grew = (rss_anon_kib(agent_pid) - rss_before) // 1024
    # 4 MiB mark + 16 replies in flight + allocator slack.
    expect("the agent holds a slow reader's output bounded (heap grew %d MiB, at most %d)"
           % (grew, HEAP_BOUND), grew <= HEAP_BOUND)
slow.setblocking(True)
slow.settimeout(SLOW_TIMEOUT)
if sent < len(req):
    slow.sendall(req[sent:])
unit = b"$%d\r\n" % max_value + big + b"\r\n"
buf, values, exact = bytearray(), 0, True
while values < N_SLOW:
    d = slow.recv(1 << 20)
    if not d:
        break
    buf += d
    while values < N_SLOW and len(buf) >= len(unit):
        exact = exact and buf[:len(unit)] == unit
        del buf[:len(unit)]
        values += 1
while len(buf) < 7:
    d = slow.recv(100)
    if not d:
        break
    buf += d
expect("the slow reader then gets all %d values byte-exact and in order (%d)" % (N_SLOW, values),
       values == N_SLOW and exact and bytes(buf) == b"+PONG\r\n")
slow.close()


def raw(payload, wait_close=False):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(payload)
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return data, True
            data += d
            if not wait_close and data.endswith(b"\r\n"):
                s.settimeout(0.3)
    except socket.timeout:
        return data, False
    finally:
        s.close()


data, _ = raw(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*2\r\n$3\r\nGET\r\n$6\r\nnokey!\r\n"
              b"*1\r\n$4\r\nPING\r\n")
expect("RESP3: HELLO 3 answers a map (%7) with proto 3", data.startswith(b"%7\r\n")
       and b"$5\r\nproto\r\n:3\r\n" in data)
expect("RESP3: a missing key is _ (null)", b"\r\n_\r\n+PONG\r\n" in data)
data, _ = raw(b"HELLO 3\r\nMGET nokey! nokey!\r\nHELLO 2\r\nGET nokey!\r\n")
expect("RESP3 MGET nulls are _; HELLO 2 goes back to $-1 (inline commands)",
       b"*2\r\n_\r\n_\r\n" in data and data.endswith(b"$-1\r\n"))
data, _ = raw(b"HELLO 4\r\n")
expect("HELLO 4 is refused NOPROTO", data.startswith(b"-NOPROTO"))

for name, bad in (("oversized bulk length", b"*2\r\n$3\r\nGET\r\n$999999999\r\n"),
                  ("negative bulk length", b"*1\r\n$-5\r\n"),
                  ("garbage multibulk count", b"*x1\r\n"),
                  ("nested array", b"*2\r\n*1\r\n$1\r\na\r\n"),
                  ("wrong type (integer)", b"*1\r\n:1\r\n")):
    data, closed = raw(b"PING\r\n" + bad, wait_close=True)
    expect("bad RESP (%s): the command before it answered, then -ERR Protocol error and "
           "the connection closed (%r)" % (name, data[:80]),
           data.startswith(b"+PONG\r\n-ERR Protocol error") and closed)
expect("the agent still answers after the bad input", r.ping() is True)
sys.exit(1 if failed else 0)
