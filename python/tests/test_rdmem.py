"""test_rdmem.py - the Python binding against a real rdmem-server and
rdmem-agent: tests/integration/python.sh starts them and sets RDMEM_TEST_SHM
(the agent's segment), RDMEM_TEST_SERVER_PID and RDMEM_LIB (the build
tree's librdmem.so.0). Run: python3 -m unittest python/tests/test_rdmem.py."""

import ctypes
import errno
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import rdmem  # noqa: E402

SHM = os.environ.get("RDMEM_TEST_SHM")


def pattern(n, seed):
    """n bytes depending on seed and position, NULs included."""
    return bytes((i * 31 + seed * 7 + (i >> 8)) & 0xFF for i in range(n))


def wait_stopped(pid):
    """Until every thread of pid is stopped (kill() only makes SIGSTOP pending)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        states = []
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        if all(s in "tT" for s in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"server {pid} did not stop")


@unittest.skipUnless(SHM, "RDMEM_TEST_SHM is not set (run tests/integration/python.sh)")
class ClientTest(unittest.TestCase):
    def setUp(self):
        self.c = rdmem.Client(SHM)
        self.key = f"py:{self.id().rsplit('.', 1)[-1]}"

    def tearDown(self):
        self.c.close()

    def test_put_get_binary_with_nul(self):
        v = b"\x00a\x00\xff\x00" + pattern(300, 1) + b"\x00"
        self.c.put(self.key, v)
        self.assertEqual(self.c.get(self.key), v)

    def test_empty_value(self):
        self.c.put(self.key, b"")
        self.assertEqual(self.c.get(self.key), b"")

    def test_missing_key_is_none(self):
        self.assertIsNone(self.c.get("py:never-written"))

    def test_value_at_max(self):
        mx = self.c.max_value
        self.assertGreater(mx, 1000)
        v = pattern(mx, 3)
        self.c.put(self.key, v)
        self.assertEqual(self.c.get(self.key), v)

    def test_value_over_max_raises_e2big(self):
        with self.assertRaises(rdmem.TooBig) as cm:
            self.c.put(self.key, bytes(self.c.max_value + 1))
        self.assertEqual(cm.exception.errno, errno.E2BIG)
        self.assertIsInstance(cm.exception, OSError)
        self.assertEqual(cm.exception.strerror, rdmem.strerror(-errno.E2BIG))
        self.assertIn("too big", str(cm.exception))

    def test_every_path_put_get(self):
        for i, path in enumerate(rdmem.PATHS):
            with self.subTest(path=path):
                # Values over the bulk/lazy thresholds (8k) too, so both shapes run.
                for n in (40, 20000):
                    v = pattern(n, i + n)
                    k = f"{self.key}:{path}:{n}"
                    pinfo, ginfo = {}, {}
                    self.c.put(k, v, path=path, timeout_ms=3000, info=pinfo)
                    self.assertEqual(self.c.get(k, path=path, info=ginfo), v)
                    if path != "auto":
                        self.assertEqual(pinfo["path"], path)
                        # A reply over the response slot (16k) comes LAZY on any RDMA path.
                        big = n > 16384 and path in ("eager", "bulk")
                        self.assertEqual(ginfo["path"], "lazy" if big else path)
                    self.assertEqual(ginfo["status"], 0)

    def test_bad_path_and_types(self):
        with self.assertRaises(ValueError):
            self.c.get(self.key, path="fast")
        with self.assertRaises(TypeError):
            self.c.put(self.key, "a str value")
        with self.assertRaises(TypeError):
            self.c.put(42, b"v")
        with self.assertRaises(TypeError):
            self.c.get(self.key, timeout_ms=-1)

    def test_bytearray_and_memoryview_values(self):
        ba = bytearray(pattern(5000, 9))
        self.c.put(self.key, ba)
        self.assertEqual(self.c.get(self.key), bytes(ba))
        mv = memoryview(ba)[100:200]
        self.c.put(self.key, mv)
        self.assertEqual(self.c.get(self.key), bytes(ba[100:200]))
        ro = memoryview(bytes(ba))[7:77]
        self.c.put(self.key, ro)
        self.assertEqual(self.c.get(self.key), bytes(ba[7:77]))

    def test_get_into_memoryview(self):
        v = pattern(1000, 4)
        self.c.put(self.key, v)
        buf = bytearray(b"\xee" * 4096)
        n = self.c.get_into(self.key, memoryview(buf)[10:])
        self.assertEqual(n, 1000)
        self.assertEqual(bytes(buf[10:1010]), v)
        self.assertEqual(buf[:10], b"\xee" * 10)
        self.assertEqual(buf[1010:1020], b"\xee" * 10)
        self.assertIsNone(self.c.get_into("py:never-written", buf))

    def test_get_into_too_small(self):
        self.c.put(self.key, pattern(500, 5))
        with self.assertRaises(rdmem.BufferTooSmall) as cm:
            self.c.get_into(self.key, bytearray(499))
        self.assertEqual(cm.exception.needed, 500)
        self.assertEqual(cm.exception.errno, errno.ENOBUFS)
        with self.assertRaises(TypeError):
            self.c.get_into(self.key, b"read-only bytes")

    def test_mget_order_and_missing(self):
        vals = {f"{self.key}:{i}": pattern(10 + i * 100, i) for i in range(5)}
        for k, v in vals.items():
            self.c.put(k, v)
        self.c.put(f"{self.key}:empty", b"")
        keys = [f"{self.key}:3", "py:missing-a", f"{self.key}:0", f"{self.key}:empty",
                f"{self.key}:4", "py:missing-b", f"{self.key}:1"]
        got = self.c.mget(keys)
        want = [vals.get(k) for k in keys]
        want[3] = b""
        self.assertEqual(got, want)
        self.assertEqual(self.c.mget([]), [])

    def test_delete(self):
        self.c.put(self.key, b"x")
        self.assertTrue(self.c.delete(self.key))
        self.assertIsNone(self.c.get(self.key))
        self.assertFalse(self.c.delete(self.key))

    def test_profile(self):
        p = self.c.profile(1001)  # the server's seeded ids: 1001..11000
        self.assertIsInstance(p, rdmem.Profile)
        self.assertEqual(p.id, 1001)
        self.assertTrue(p.name)
        self.assertTrue(p.tags)
        self.assertIn("followers", p.counters)
        self.assertEqual(p, self.c.profile(1001))  # deterministic
        self.assertNotEqual(p, self.c.profile(1002))
        self.assertIsNone(self.c.profile(5))

    def test_large_get_verified(self):
        for spec, n in (("big:100k", 100 << 10), ("big:1m", 1 << 20)):
            with self.subTest(spec=spec):
                v = self.c.large_get(spec)
                self.assertEqual(len(v), n)
                self.assertTrue(rdmem.large_verify(spec, v))
                bad = bytearray(v)
                bad[n // 2] ^= 1
                self.assertFalse(rdmem.large_verify(spec, bad))

    def test_image_put(self):
        data = pattern(100000, 11)
        seen = []
        name = "py_image_put.jpg"
        uid = self.c.image_put(name, data, chunk_size=16384,
                               progress=lambda d, t: seen.append((d, t)))
        self.assertNotEqual(uid, 0)
        with open(os.path.join(os.environ["RDMEM_TEST_IMAGE_DIR"], name), "rb") as f:
            self.assertEqual(f.read(), data)
        self.assertEqual(seen[-1], (100000, 100000))
        self.assertEqual(len(seen), 7)  # ceil(100000 / 16384)
        with self.assertRaises(rdmem.TooBig):
            self.c.image_put(name, data, chunk_size=self.c.max_value + 1)
        with self.assertRaises(rdmem.Error) as cm:
            self.c.image_put("../escape", data)
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_ping_echo_version(self):
        self.c.ping()
        self.c.local_ping()
        self.assertEqual(self.c.echo(b"he\x00llo"), b"he\x00llo")
        self.assertRegex(rdmem.version(), r"^0\.\d+\.\d+$")

    def test_stats_dicts(self):
        before = self.c.stats()
        self.assertIsInstance(before, dict)
        self.c.put(self.key, b"s")
        self.assertIsInstance(self.c.agent_stats(), dict)
        self.assertIsInstance(self.c.stats(json=False), str)
        self.assertGreater(self.c.counters()["calls"], 0)

    def test_timeout_raises(self):
        pid = int(os.environ.get("RDMEM_TEST_SERVER_PID", "0"))
        if not pid:
            self.skipTest("RDMEM_TEST_SERVER_PID is not set")
        self.c.ping(path="tcp")  # the TCP connection is up before the server stops
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_stopped(pid)
            t0 = time.monotonic()
            with self.assertRaises(rdmem.Timeout) as cm:
                self.c.get(self.key, path="tcp", timeout_ms=300)
            took = time.monotonic() - t0
        finally:
            os.kill(pid, signal.SIGCONT)
        self.assertIsInstance(cm.exception, TimeoutError)
        self.assertEqual(cm.exception.errno, errno.ETIMEDOUT)
        self.assertLess(took, 3.0)
        deadline = time.monotonic() + 5
        while True:  # the server answers again
            try:
                self.c.ping(timeout_ms=1000)
                break
            except rdmem.Error:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def test_no_agent(self):
        with self.assertRaises(rdmem.NoAgent) as cm:
            rdmem.Client(f"/rdmem-py-none-{os.getpid()}")
        self.assertEqual(cm.exception.errno, errno.ECONNREFUSED)
        self.assertIsInstance(cm.exception, ConnectionRefusedError)

    def test_context_manager_and_closed(self):
        with rdmem.Client(SHM) as c:
            c.put(self.key, b"cm")
            self.assertFalse(c.closed)
        self.assertTrue(c.closed)
        c.close()  # idempotent
        with self.assertRaises(rdmem.ClosedError) as cm:
            c.get(self.key)
        self.assertEqual(cm.exception.errno, errno.EBADF)
        self.assertIsInstance(cm.exception, ValueError)
        self.assertEqual(self.c.get(self.key), b"cm")

    def test_four_threads(self):
        errors, n = [], 200

        def work(t):
            try:
                for i in range(n):
                    k = f"{self.key}:{t}:{i % 10}"
                    v = pattern(16 + (i * 37 + t) % 3000, t * 1000 + i)
                    self.c.put(k, v)
                    got = self.c.get(k)
                    if got != v:
                        errors.append(f"thread {t} op {i}: {len(got or b'')} bytes, want {len(v)}")
                        return
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"thread {t}: {e!r}")

        ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errors, [])

    @unittest.skipIf(os.environ.get("LD_PRELOAD"), "a preloaded sanitizer runtime owns malloc: mallinfo2 says nothing")
    def test_no_leak(self):
        """Each reply the library malloc's is freed: 300 calls of each kind may
        not grow glibc's heap by more than 64 KiB (a missed free grows it by
        300 x the reply: 90 KiB for a profile, 1.2 MiB for a 4 KiB get)."""
        class Mallinfo2(ctypes.Structure):
            _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                      "usmblks", "fsmblks", "uordblks", "fordblks",
                                                      "keepcost")]
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = Mallinfo2

        def used():
            m = libc.mallinfo2()
            return m.uordblks + m.hblkhd

        v = pattern(4096, 2)
        self.c.put(self.key, v)
        buf = bytearray(8192)
        calls = {
            "get": lambda: self.c.get(self.key),
            "get_into": lambda: self.c.get_into(self.key, buf),
            "mget": lambda: self.c.mget([self.key, "py:missing", self.key]),
            "profile": lambda: self.c.profile(1001),
            "large_get": lambda: self.c.large_get("big:64k"),
            "echo": lambda: self.c.echo(v),
            "stats": lambda: self.c.stats(),
            "agent_stats": lambda: self.c.agent_stats(json=False),
        }
        for name, fn in calls.items():
            with self.subTest(call=name):
                for _ in range(50):
                    fn()
                before = used()
                for _ in range(300):
                    fn()
                grew = used() - before
                self.assertLess(grew, 64 << 10, f"{name}: heap grew {grew} bytes in 300 calls")

    def test_close_waits_for_threads(self):
        c = rdmem.Client(SHM)
        stop = threading.Event()
        bad = []

        def loop():
            while not stop.is_set():
                try:
                    if c.get(self.key) not in (None, b"z"):
                        bad.append("wrong value")
                except rdmem.ClosedError:
                    return
        c.put(self.key, b"z")
        ts = [threading.Thread(target=loop) for _ in range(2)]
        for t in ts:
            t.start()
        time.sleep(0.1)
        c.close()
        stop.set()
        for t in ts:
            t.join()
        self.assertEqual(bad, [])


if __name__ == "__main__":
    unittest.main()
