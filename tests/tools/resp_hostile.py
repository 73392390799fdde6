#!/usr/bin/env python3
"""resp_hostile.py - a hostile peer against rdmem-agent's RESP port, for
tests/integration/resp_hostile.sh. One TAP line per check.

    resp_hostile.py PORT AGENT_PID SERVER_PID STATS_CMD...

STATS_CMD prints `rdmem agent-stats` (name value lines)."""

import os
import signal
import socket
import sys
import threading
import time

import resp_tap
from resp_tap import check, cmd, rss_kib

PORT, AGENT, SERVER = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
STATS = sys.argv[4:]


def conn(timeout=10):
    return resp_tap.conn(PORT, timeout)


def read_replies(s, n, deadline=60):
    """n simple/error/integer replies (one line each)."""
    buf, got, end = b"", [], time.time() + deadline
    while len(got) < n and time.time() < end:
        while b"\r\n" in buf and len(got) < n:
            line, buf = buf.split(b"\r\n", 1)
            got.append(line)
        if len(got) < n:
            try:
                d = s.recv(1 << 16)
            except socket.timeout:
                continue
            if not d:
                break
            buf += d
    return got


def stat(name):
    return resp_tap.stat(STATS, name)


def stalled_server_memory():
    """A pipeline of large SETs behind a stopped server: the agent must stop
    reading (backpressure), not copy every command it is sent."""
    value, want = b"v" * 1000000, 150
    stream = b"".join(cmd("SET", "big%d" % (i % 8), value) for i in range(want))
    s = conn()
    s.sendall(cmd("SET", "warm", value))
    read_replies(s, 1)
    paused0, before = stat("resp.paused"), rss_kib(AGENT)
    os.kill(SERVER, signal.SIGSTOP)
    off = 0
    try:
        s.settimeout(2)
        try:
            while off < len(stream):
                off += s.send(stream[off:off + (1 << 20)])
        except socket.timeout:
            pass  # the agent stopped reading: the point
        time.sleep(1)
        grown = rss_kib(AGENT) - before
        paused = stat("resp.paused") - paused0
    finally:
        os.kill(SERVER, signal.SIGCONT)
    # Sanitizer runtimes shadow what the agent touches: a looser RSS bound there.
    bound = 64 if not os.environ.get("RDMEM_SANITIZER") else 192
    check("a stopped server and 150 pipelined 1 MB SETs: the agent takes under 48 MB "
          "before it pushes back (%d MB) and grows by under %d MiB (%d KiB)" %
          (off // 1000000, bound, grown), off < 48000000 and grown < bound * 1024,
          "the agent buffered the pipeline instead of pausing its input")
    check("resp.paused counts the connection held back (+%d)" % paused, paused >= 1,
          "resp.paused did not move")
    rest = threading.Thread(target=lambda: s.sendall(stream[off:]))
    s.settimeout(10)
    rest.start()
    replies = read_replies(s, want, 120)
    rest.join()
    # A call the stop outlived fails with its deadline: an error, still one reply.
    ok = sum(r == b"+OK" for r in replies)
    check("every SET is answered once the server runs (%d +OK, %d errors)" %
          (ok, len(replies) - ok), len(replies) == want and
          all(r == b"+OK" or r.startswith(b"-ERR") for r in replies),
          "%d replies of %d: %r" % (len(replies), want, replies[-3:]))
    s.close()


def fair_big_del():
    """A DEL of 65535 keys takes every call slot: other connections must
    still get calls while it runs."""
    n = 65535
    body = cmd("DEL", *[b"k%05d" % i for i in range(n)])
    during, stop, started = [0], [False], threading.Event()
    inflight = [False]

    def pinger():
        o = conn()
        started.set()
        while not stop[0]:
            o.sendall(cmd("PING"))
            if o.recv(64) != b"+PONG\r\n":
                break
            if inflight[0]:
                during[0] += 1
        o.close()

    t = threading.Thread(target=pinger)
    t.start()
    started.wait()
    time.sleep(0.2)
    s = conn(60)
    t0 = time.time()
    inflight[0] = True
    s.sendall(body)
    r = s.recv(64)
    inflight[0] = False
    took = time.time() - t0
    stop[0] = True
    t.join()
    check("DEL of 65535 keys answers :0", r == b":0\r\n", repr(r))
    check("another connection's PINGs go on during a DEL of 65535 keys "
          "(%d PINGs in its %.2f s)" % (during[0], took), during[0] >= 20,
          "the DEL's connection took every freed call, pass after pass")
    s.close()


def dribble():
    """Commands arriving a few bytes at a time parse to the same replies."""
    n = 65536
    # An unknown command: the parse is the work, not 65535 calls.
    big = cmd("NOSUCH", *[b"x%05d" % i for i in range(n - 1)])
    val = bytes(range(256)) * 3000 + b"\r\n\0"
    stream = (big + cmd("SET", b"d\r\n\0k", val) + b"PING\r\n" + cmd("GET", b"d\r\n\0k") +
              b"ECHO  hi\r\n")
    err = b"-ERR unknown command 'NOSUCH', with args beginning with: 'x00000' 'x00001' "
    want = b"+OK\r\n+PONG\r\n$%d\r\n%s\r\n$2\r\nhi\r\n" % (len(val), val)
    s = conn(60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.time()
    for i in range(0, len(stream), 2048):
        s.sendall(stream[i:i + 2048])
        time.sleep(0.0005)  # one read, one parse of the partial command, each
    got = b""
    while not got.endswith(want):
        d = s.recv(1 << 20)
        if not d:
            break
        got += d
    first, _, got = got.partition(b"\r\n")
    check("a 65536-argument command and a 768 KB value sent 2 KiB at a time: exact replies "
          "(%.2f s)" % (time.time() - t0), first.startswith(err) and got == want,
          "got %r... then %r..." % (first[:80], got[:80]))
    s.close()


def lockout():
    """At --resp-max-conns (6 here) silent peers, some holding half a
    command, are replaced by new connections once silent for
    --resp-idle-evict (2 s here); a peer that talks is never replaced."""
    evicted0 = stat("resp.evicted")
    silent = [conn() for _ in range(5)]
    for s in silent[::2]:
        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nhalf")
    talker = conn()
    talker.sendall(cmd("PING"))
    ok = talker.recv(64) == b"+PONG\r\n"
    time.sleep(0.2)
    s = conn()
    try:
        early = s.recv(256)
    except OSError as e:  # refused: the error line may be lost to a reset
        early = repr(e).encode()
    s.close()
    check("at the cap a new connection is refused while the others are fresh",
          b"max number of clients" in early or b"reset" in early, repr(early))
    newcomers, socks = [], []
    t0 = time.time()
    while time.time() - t0 < 3.0:  # the talker stays heard
        talker.sendall(cmd("PING"))
        ok = ok and talker.recv(64) == b"+PONG\r\n"
        time.sleep(0.25)
    for _ in range(5):
        n = conn()
        socks.append(n)
        n.sendall(cmd("PING"))
        newcomers.append(n.recv(64))
        talker.sendall(cmd("PING"))
        ok = ok and talker.recv(64) == b"+PONG\r\n"
    gone = 0
    for x in silent:
        x.settimeout(2)
        try:
            gone += x.recv(64) == b""
        except socket.timeout:
            pass  # still open
        except OSError:  # reset: closed too
            gone += 1
    check("5 new connections are served in place of 5 silent ones (2 s silent)",
          newcomers == [b"+PONG\r\n"] * 5, repr(newcomers))
    check("the silent ones (half commands included) were closed: %d of 5" % gone, gone == 5)
    check("the connection that talks was never replaced", ok)
    check("resp.evicted counts them", stat("resp.evicted") - evicted0 == 5,
          "resp.evicted %d -> %d" % (evicted0, stat("resp.evicted")))
    for x in silent + socks:
        x.close()
    talker.close()


sections = {"lockout": lockout, "memory": stalled_server_memory, "fair": fair_big_del, "dribble": dribble}
for name in os.environ.get("RESP_HOSTILE", "memory fair dribble lockout").split():
    sections[name]()
sys.exit(resp_tap.failed)
