"""test_hostile.py - the Python binding used the wrong way: across fork()
(with other threads mid-call), with a zero-length get_into buffer, NUL bytes
in C-string arguments, a key over RDMEM_MAX_KEY. Run by
tests/integration/python.sh next to test_rdmem.py (same environment)."""

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


def wait_child(pid, seconds):
    """The child's exit status, or None (killed) when it did not end in time."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


@unittest.skipUnless(SHM, "RDMEM_TEST_SHM is not set (run tests/integration/python.sh)")
class HostileTest(unittest.TestCase):
    def setUp(self):
        self.c = rdmem.Client(SHM)
        self.key = f"pyh:{self.id().rsplit('.', 1)[-1]}"

    def tearDown(self):
        self.c.close()

    def _child(self, body):
        """Runs body() in a forked child: exit 0 when it returns True."""
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.alarm(10)  # a hang in the child ends it: a failure, not a stuck test
                code = 0 if body() else 2
            finally:
                os._exit(code)
        return pid

    def test_fork_with_threads_in_calls(self):
        """A child forked while other threads are mid-call: close() (what
        `with` and garbage collection do) returns at once instead of waiting
        for the parent's calls forever, calls raise ClosedError naming
        fork(), and the parent's attachment is not shut down under it."""
        self.c.put(self.key, b"parent")
        stop, errors, calls = threading.Event(), [], [0]

        def loop():
            while not stop.is_set():
                try:
                    if self.c.get(self.key) != b"parent":
                        errors.append("wrong value")
                    calls[0] += 1
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(repr(e))

        ts = [threading.Thread(target=loop) for _ in range(4)]
        for t in ts:
            t.start()
        before = self.c.counters()

        def child_closes():
            self.c.close()
            return self.c.closed

        def child_calls():
            try:
                self.c.get(self.key)
                return False  # a handle carried across fork() must not serve
            except rdmem.ClosedError as e:
                return e.errno == errno.EBADF and "fork" in str(e)

        codes = []
        for i in range(10):
            while calls[0] == 0:
                time.sleep(0.001)
            codes.append(wait_child(self._child(child_calls if i % 2 else child_closes), 15))
            time.sleep(0.02)
        stop.set()
        for t in ts:
            t.join()
        after = self.c.counters()
        self.assertEqual(codes, [0] * 10, "child exit codes (None: hung, killed)")
        self.assertEqual(errors, [])
        self.assertEqual(after["reattach"] - before["reattach"], 0,
                         "a child's close() detached the parent")
        self.assertEqual(self.c.get(self.key), b"parent")

    def test_get_into_empty_buffer(self):
        """A zero-length buffer: BufferTooSmall with the length, not success."""
        self.c.put(self.key, b"hello world")
        with self.assertRaises(rdmem.BufferTooSmall) as cm:
            self.c.get_into(self.key, bytearray(0))
        self.assertEqual(cm.exception.needed, 11)
        self.c.put(self.key, b"")
        self.assertEqual(self.c.get_into(self.key, bytearray(0)), 0)
        self.assertIsNone(self.c.get_into(self.key + ":none", bytearray(0)))

    def test_nul_in_c_strings(self):
        for call in (lambda: self.c.large_get(b"big:1k\0junk"),
                     lambda: self.c.agent_ctl("help\0x"),
                     lambda: self.c.image_put(b"img\0x", b"data"),
                     lambda: rdmem.Client(SHM + "\0x"),
                     lambda: rdmem.large_verify("big:1k\0x", b"")):
            with self.assertRaises(ValueError):
                call()

    def test_key_over_max_is_too_big(self):
        k = b"K" * (rdmem.MAX_KEY + 1)
        for call in (lambda: self.c.put(k, b"v"), lambda: self.c.get(k),
                     lambda: self.c.delete(k), lambda: self.c.mget([b"a", k]),
                     lambda: self.c.get_into(k, bytearray(4))):
            with self.assertRaises(rdmem.TooBig) as cm:
                call()
            self.assertEqual(cm.exception.errno, errno.E2BIG)
            self.assertIn("over the limit 1024 bytes", str(cm.exception))
        self.c.put(b"K" * rdmem.MAX_KEY, b"at the limit")
        self.assertEqual(self.c.get(b"K" * rdmem.MAX_KEY), b"at the limit")


if __name__ == "__main__":
    unittest.main()
