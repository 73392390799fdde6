"""rdmem - Python over librdmem.so (libclient/rdmem.h), with ctypes.

    import rdmem
    with rdmem.Client() as c:          # the agent's "/rdmem"; Client("/name") for another
        c.put("k", b"v")
        assert c.get("k") == b"v"

Every failure raises rdmem.Error (an OSError) carrying the library's errno and
its rdmem_strerror() text; see the subclasses below. A Client serves many
threads at once, as the C handle does (the GIL is released during each call).
"""

import ctypes
import errno as _errno
import json as _json
import os as _os
import struct as _struct
import threading
import weakref as _weakref
from dataclasses import dataclass, field

from . import _native as _n

__all__ = [
    "Client", "Error", "Timeout", "NoAgent", "TooBig", "BufferTooSmall", "ClosedError",
    "Profile", "PATHS", "version", "large_verify", "strerror",
]

# enum rdmem_path (include/rdmem/wire.h), by the names `rdmem --path` takes.
PATHS = {"auto": 0, "eager": 1, "lazy": 2, "bulk": 3, "tcp": 4}
_PATH_NAMES = {v: k for k, v in PATHS.items()}


class Error(OSError):
    """A librdmem call failed: .errno is the positive errno (-rc), .strerror
    the library's rdmem_strerror(rc) text, .op the call's name."""

    def __init__(self, rc, op="rdmem", extra=""):
        text = strerror(rc) + extra
        super().__init__(-rc, text)
        self.op = op

    def __str__(self):
        return f"{self.op}: {self.strerror} [{_errno.errorcode.get(self.errno, self.errno)}]"


class Timeout(Error, TimeoutError):
    """-ETIMEDOUT: the call passed its deadline (also an `except TimeoutError`)."""


class NoAgent(Error, ConnectionRefusedError):
    """-ECONNREFUSED: no agent runs on the segment name given."""


class TooBig(Error):
    """-E2BIG: over the agent's configured maximum (Client.max_value), or a key
    over 1024 bytes; the library's limit, not re-checked here."""


class BufferTooSmall(Error):
    """-ENOBUFS from get_into: .needed is the value's length."""

    def __init__(self, rc, op, needed):
        super().__init__(rc, op, f" (need {needed} bytes)")
        self.needed = needed


class ClosedError(Error, ValueError):
    """The Client was closed (EBADF; also a ValueError, like a closed file)."""


_BY_ERRNO = {_errno.ETIMEDOUT: Timeout, _errno.ECONNREFUSED: NoAgent, _errno.E2BIG: TooBig}


def _raise(rc, op):
    raise _BY_ERRNO.get(-rc, Error)(rc, op)


def strerror(rc):
    """rdmem_strerror(rc) of a 0 or -errno return."""
    return _n.lib.rdmem_strerror(rc).decode("utf-8", "replace")


def version():
    """rdmem_version() of the library loaded: "MAJOR.MINOR.PATCH"."""
    return _n.lib.rdmem_version().decode()


@dataclass
class Profile:
    """PROFILE reply: the fields of struct rdmem_profile_view, decoded."""

    id: int
    name: str
    tags: list = field(default_factory=list)
    counters: dict = field(default_factory=dict)


def _bytes_arg(obj, what):
    """Keys and small arguments: str as UTF-8, or any bytes-like (copied: short)."""
    if isinstance(obj, str):
        return obj.encode("utf-8")
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    raise TypeError(f"rdmem: {what} must be str or bytes-like, not {type(obj).__name__}")


# RDMEM_MAX_KEY (include/rdmem/wire.h): the library answers a longer key
# with a bare -EINVAL; TooBig names the limit, as its docstring promises.
MAX_KEY = 1024


def _key_arg(obj, op):
    k = _bytes_arg(obj, "key")
    if len(k) > MAX_KEY:
        e = TooBig(-_errno.E2BIG, op)
        e.strerror = f"key of {len(k)} bytes over the limit {MAX_KEY} bytes (RDMEM_MAX_KEY)"
        raise e
    return k


def _cstr_arg(obj, what):
    """A NUL-terminated argument (segment name, spec, command): an embedded
    NUL would cut it short in C, so "big:1k\\0x" would silently mean "big:1k"."""
    b = _bytes_arg(obj, what)
    if b"\0" in b:
        raise ValueError(f"rdmem: {what} must not contain a NUL byte")
    return b


def _value_arg(obj, what="value"):
    """A value as (pointer argument, length, keep-alive). bytes pass their own
    buffer; writable buffers (bytearray, writable memoryview) are shared through
    from_buffer, which also stops a bytearray resizing during the call; other
    contiguous read-only buffers are copied once. str is refused: values are bytes."""
    if isinstance(obj, bytes):
        return obj, len(obj), obj
    if isinstance(obj, (bytearray, memoryview)):
        mv = memoryview(obj)
        if not mv.contiguous:
            raise TypeError(f"rdmem: {what} must be a contiguous buffer")
        n = mv.nbytes
        if mv.readonly:
            b = mv.tobytes()
            return b, n, b
        if n == 0:
            return None, 0, None
        arr = (ctypes.c_char * n).from_buffer(mv.cast("B") if mv.format != "B" else mv)
        return arr, n, arr
    raise TypeError(f"rdmem: {what} must be bytes, bytearray or memoryview, not {type(obj).__name__}")


def _take(ptr, n):
    """Copies n bytes of a buffer the library malloc'd and frees it."""
    try:
        return ctypes.string_at(ptr, n) if n else b""
    finally:
        _n.libc.free(ptr)


def large_verify(spec, data):
    """rdmem_large_verify: True when data is exactly the object spec names,
    False on -EBADMSG; other failures (a bad spec: -EINVAL) raise."""
    ptr, n, keep = _value_arg(data, "data")
    rc = _n.lib.rdmem_large_verify(_cstr_arg(spec, "spec"), ptr, n)
    del keep
    if rc == -_errno.EBADMSG:
        return False
    if rc:
        _raise(rc, "large_verify")
    return True


# Every open Client, for the fork handler below.
_live = _weakref.WeakSet()


def _after_fork_in_child():
    """A handle is not carried across fork() (rdmem.h). In the child each
    Client opened before the fork is cut loose without rdmem_close(): that
    shuts the attachment's socket down, which the child shares with the
    parent, so the agent would drop the parent's attachment under its calls
    in flight. Its lock and call count are the parent's copies, taken
    mid-call by other threads (close() in the child waited for them forever),
    so both are new. Calls in the child raise ClosedError saying why."""
    for c in list(_live):
        c._cv = threading.Condition(threading.Lock())
        c._active = 0
        if c._h is not None:
            c._h = None
            c._forked = True


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork_in_child)


class Client:
    """One rdmem_t handle on an agent's front-door segment.

    name: the agent's --shm-name ("/rdmem" when None, as rdmem_open(NULL)
    and the CLI). timeout_ms: the handle's default deadline (the library's is
    5000). path: the default path of every call ('auto', 'eager', 'lazy',
    'bulk', 'tcp'). Every call also takes path= and timeout_ms= for itself,
    and info= a dict it fills with the path that carried it, the wire status,
    latency_ns and late.
    """

    def __init__(self, name=None, timeout_ms=None, path=None):
        self._h = None
        self._forked = False
        self._path = self._path_id(path or "auto")
        h = _n.H()
        rc = _n.lib.rdmem_open(None if name is None else _cstr_arg(name, "name"), ctypes.byref(h))
        if rc:
            _raise(rc, f"open {name or '/rdmem'}")
        self._h = h
        self.name = name or "/rdmem"
        # close() waits for calls in flight (the C handle must not be closed
        # under them); a call only counts itself in and out under the lock.
        self._cv = threading.Condition(threading.Lock())
        self._active = 0
        _live.add(self)
        if timeout_ms is not None:
            _n.lib.rdmem_set_timeout(h, self._ms(timeout_ms))

    # ---- lifecycle ----------------------------------------------------

    def close(self):
        """Detaches; waits for other threads' calls in flight. Idempotent."""
        with self._cv:
            h, self._h = self._h, None
            while self._active:
                self._cv.wait()
        if h:
            _n.lib.rdmem_close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if getattr(self, "_h", None):
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: modules may be gone
            pass

    @property
    def closed(self):
        return self._h is None

    def _enter(self, op):
        with self._cv:
            if self._h is None:
                raise ClosedError(-_errno.EBADF, op, " (the client was opened before fork(): open "
                                  "a new rdmem.Client in this process)" if self._forked else
                                  " (the client is closed)")
            self._active += 1
            return self._h

    def _leave(self):
        with self._cv:
            self._active -= 1
            if not self._active:
                self._cv.notify_all()

    def _call(self, op, fn, *args, path=None, timeout_ms=None, info=None, ok=(0,)):
        """Runs fn(h, *args, opts) and returns rc (one of ok), else raises."""
        o = self._opts(path, timeout_ms, info)
        h = self._enter(op)
        try:
            rc = fn(h, *args, ctypes.byref(o[0]))
        finally:
            self._leave()
        if o[1] is not None:
            info.update(path=_PATH_NAMES.get(o[1].path, "unknown") if o[1].path else "local",
                        status=o[1].status, latency_ns=o[1].latency_ns, late=bool(o[1].late))
        if rc not in ok:
            _raise(rc, op)
        return rc

    # ---- options ------------------------------------------------------

    @staticmethod
    def _path_id(path):
        if not isinstance(path, str) or path not in PATHS:
            raise ValueError(f"rdmem: path must be one of {', '.join(PATHS)}, not {path!r}")
        return PATHS[path]

    @staticmethod
    def _ms(ms, what="timeout_ms"):
        """A uint32 argument (0: the library's default)."""
        if not isinstance(ms, int) or isinstance(ms, bool) or not 0 <= ms <= 0xFFFFFFFF:
            raise TypeError(f"rdmem: {what} must be an int in 0..2^32-1 (0: the default), not {ms!r}")
        return ms

    def _opts(self, path, timeout_ms, info):
        o = _n.Opts()
        o.path = self._path if path is None else self._path_id(path)
        o.timeout_ms = 0 if timeout_ms is None else self._ms(timeout_ms)
        i = None
        if info is not None:
            if not isinstance(info, dict):
                raise TypeError("rdmem: info must be a dict to fill")
            i = _n.Info()
            o.info = ctypes.pointer(i)
        return o, i

    # ---- properties of the handle -------------------------------------

    def version(self):
        return version()

    def _handle(self, op, fn, *args):
        """fn(h, *args) for the handle's own queries (no call, no opts)."""
        h = self._enter(op)
        try:
            return fn(h, *args)
        finally:
            self._leave()

    @property
    def max_value(self):
        """rdmem_max_value(): the largest value (or image chunk) a call may carry."""
        return self._handle("max_value", _n.lib.rdmem_max_value)

    @property
    def slots(self):
        """rdmem_slots(): calls this client can have in flight at once."""
        return self._handle("slots", _n.lib.rdmem_slots)

    def counters(self):
        """rdmem_get_counters() as a dict."""
        c = _n.Counters()
        self._handle("counters", _n.lib.rdmem_get_counters, ctypes.byref(c))
        return {f: getattr(c, f) for f, _ in _n.Counters._fields_}

    # ---- calls ----------------------------------------------------------

    def ping(self, **kw):
        self._call("ping", _n.lib.rdmem_ping, **kw)

    def local_ping(self, **kw):
        """To the agent's front door only (no server)."""
        self._call("local_ping", _n.lib.rdmem_local_ping, **kw)

    def echo(self, data, **kw):
        ptr, n, keep = _value_arg(data, "data")
        out, out_len = _n.vp(), _n.u32()
        self._call("echo", _n.lib.rdmem_echo, ptr, n, ctypes.byref(out), ctypes.byref(out_len), **kw)
        del keep
        return _take(out, out_len.value)

    def put(self, key, value, **kw):
        k = _key_arg(key, "put")
        ptr, n, keep = _value_arg(value)
        self._call("put", _n.lib.rdmem_put, k, len(k), ptr, n, **kw)
        del keep

    def get(self, key, **kw):
        """The value as bytes (one copy, from the library's malloc'd reply), or
        None when the key does not exist."""
        k = _key_arg(key, "get")
        out, n = _n.vp(), _n.u32()
        rc = self._call("get", _n.lib.rdmem_get, k, len(k), ctypes.byref(out), ctypes.byref(n),
                        ok=(0, -_errno.ENOENT), **kw)
        return None if rc else _take(out, n.value)

    def get_into(self, key, buffer, **kw):
        """Writes the value into a writable buffer (bytearray, writable
        memoryview, array, mmap) with no copy in Python; returns its length,
        or None when the key does not exist. Raises BufferTooSmall (.needed)
        when it does not fit."""
        k = _key_arg(key, "get_into")
        try:
            mv = memoryview(buffer)
        except TypeError:
            raise TypeError(f"rdmem: buffer must be a writable buffer, not {type(buffer).__name__}") from None
        if mv.readonly or not mv.contiguous:
            raise TypeError("rdmem: buffer must be writable and contiguous")
        mv = mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv
        cap = mv.nbytes
        # A zero-length buffer still passes a pointer: with NULL the library
        # takes the call for rdmem_get (it allocates the reply) and answers 0
        # with the value's length, as if that many bytes had been written.
        arr = (ctypes.c_char * cap).from_buffer(mv) if cap else (ctypes.c_char * 1)()
        n = _n.u32()
        try:
            rc = self._call("get_into", _n.lib.rdmem_get_into, k, len(k), arr, cap, ctypes.byref(n),
                            ok=(0, -_errno.ENOENT, -_errno.ENOBUFS), **kw)
        finally:
            del arr
            mv.release()
        if rc == -_errno.ENOBUFS:
            raise BufferTooSmall(rc, "get_into", n.value)
        return None if rc else n.value

    def delete(self, key, **kw):
        """True when the key existed, False when it did not."""
        k = _key_arg(key, "delete")
        return self._call("delete", _n.lib.rdmem_del, k, len(k), ok=(0, -_errno.ENOENT), **kw) == 0

    def mget(self, keys, **kw):
        """A list with each key's bytes, or None for a missing key, in order."""
        if isinstance(keys, (str, bytes)):
            raise TypeError("rdmem: mget takes a list of keys, not one key")
        ks = [_key_arg(k, "mget") for k in keys]
        n = len(ks)
        if not n:  # the library refuses an empty MGET (-EINVAL): nothing to ask
            return []
        arr = (_n.cp * n)(*ks)
        lens = (_n.u32 * n)(*map(len, ks))
        m = _n.Mget()
        self._call("mget", _n.lib.rdmem_mget, arr, lens, n, ctypes.byref(m), **kw)
        try:
            out, data, dlen = [], _n.vp(), _n.u32()
            for i in range(n):
                have = _n.lib.rdmem_mget_value(ctypes.byref(m), i, ctypes.byref(data), ctypes.byref(dlen))
                out.append(ctypes.string_at(data, dlen.value) if have and dlen.value else
                           (b"" if have else None))
            return out
        finally:
            _n.lib.rdmem_mget_free(ctypes.byref(m))

    def profile(self, id, **kw):
        """PROFILE id as a Profile(id, name, tags, counters), None when the
        server has no such id."""
        if not isinstance(id, int) or isinstance(id, bool) or not 0 <= id < 1 << 64:
            raise TypeError(f"rdmem: profile id must be an int in 0..2^64-1, not {id!r}")
        p = _n.Profile()
        if self._call("profile", _n.lib.rdmem_profile, id, ctypes.byref(p), ok=(0, -_errno.ENOENT), **kw):
            return None
        try:
            return _decode_profile(p)
        finally:
            _n.lib.rdmem_profile_free(ctypes.byref(p))

    def large_get(self, spec, **kw):
        """The server's deterministic object "big:<n>[k|m]" as bytes."""
        out, n = _n.vp(), _n.u32()
        self._call("large_get", _n.lib.rdmem_large_get, _cstr_arg(spec, "spec"), ctypes.byref(out),
                   ctypes.byref(n), **kw)
        return _take(out, n.value)

    def image_put(self, key, data, chunk_size=0, progress=None, **kw):
        """Uploads data as image key in chunks of chunk_size (0: the library's
        24 KiB); progress(done, total) after each chunk. Returns the upload id."""
        k = _cstr_arg(key, "key")
        ptr, n, keep = _value_arg(data, "data")
        io = _n.ImageOpts()
        io.chunk_size = self._ms(chunk_size, "chunk_size")
        if progress is not None:
            if not callable(progress):
                raise TypeError("rdmem: progress must be callable(done, total)")
            io.progress = _n.PROGRESS(lambda _arg, done, total: progress(done, total))
        self._call("image_put", _n.lib.rdmem_image_put, k, ptr, n, ctypes.byref(io), **kw)
        del keep
        return io.upload_id

    def _text(self, op, fn, arg, **kw):
        out, n = _n.vp(), _n.u32()
        self._call(op, fn, arg, ctypes.byref(out), ctypes.byref(n), **kw)
        return _take(out, n.value).decode("utf-8", "replace")

    def stats(self, json=True, **kw):
        """The server's counters: a dict (json=True) or its text form."""
        t = self._text("stats", _n.lib.rdmem_stats, 1 if json else 0, **kw)
        return _json.loads(t) if json else t

    def agent_stats(self, json=True, **kw):
        """The agent's telemetry: a dict (json=True) or its text form."""
        t = self._text("agent_stats", _n.lib.rdmem_agent_stats, 1 if json else 0, **kw)
        return _json.loads(t) if json else t

    def agent_ctl(self, cmd, **kw):
        """A runtime command for the agent (`rdmem agent-ctl`); its text reply."""
        return self._text("agent_ctl", _n.lib.rdmem_agent_ctl, _cstr_arg(cmd, "cmd"), **kw)


def _decode_profile(p):
    """The tags and counters of a profile blob the library validated
    (rdmem_blob_profile_open): little-endian {off, len} and {off, len, value}."""
    v = p.view
    blob = ctypes.string_at(p.blob, p.len)

    def s(off, n):
        return blob[off:off + n].decode("utf-8", "replace")

    tags = [s(*_struct.unpack_from("<II", blob, v.tags_off + 8 * i)) for i in range(v.tag_count)]
    counters = {}
    for i in range(v.counter_count):
        off, n, val = _struct.unpack_from("<IIQ", blob, v.counters_off + 16 * i)
        counters[s(off, n)] = val
    return Profile(v.id, ctypes.string_at(v.name, v.name_len).decode("utf-8", "replace"), tags, counters)
