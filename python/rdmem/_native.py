"""_native.py - loads librdmem.so.0 and declares the parts of libclient/rdmem.h
the binding calls: the structs it passes (their layouts copied from rdmem.h,
include/rdmem/blob.h) and every prototype, so ctypes converts and checks the
arguments instead of guessing int for each."""

import ctypes
import ctypes.util
import os

SONAME = "librdmem.so.0"  # the soname's major is RDMEM_VERSION_MAJOR (0)


def _load():
    """RDMEM_LIB=/path/librdmem.so.0 wins (tests use the build tree's library);
    else the loader's own search by soname (LD_LIBRARY_PATH, ld.so.cache), then
    ctypes.util.find_library (ldconfig -p) for a library installed elsewhere."""
    override = os.environ.get("RDMEM_LIB")
    if override:
        return ctypes.CDLL(override), override
    try:
        return ctypes.CDLL(SONAME), SONAME
    except OSError as first:
        found = ctypes.util.find_library("rdmem")
        if not found:
            raise ImportError(
                f"rdmem: cannot load {SONAME} ({first}); install librdmem "
                "(make install) or set RDMEM_LIB=/path/to/librdmem.so.0"
            ) from first
        return ctypes.CDLL(found), found


lib, lib_path = _load()
# rdmem.h documents its returned values as malloc'd ("free() it"): librdmem
# links the process's libc, so libc's free is the allocator's own.
libc = ctypes.CDLL(None)
libc.free.argtypes = [ctypes.c_void_p]
libc.free.restype = None

u8, u16, u32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64
vp, cp, P = ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER


class Info(ctypes.Structure):  # struct rdmem_info
    _fields_ = [("path", u8), ("status", u16), ("latency_ns", u64), ("late", ctypes.c_int)]


class Opts(ctypes.Structure):  # struct rdmem_opts
    _fields_ = [("path", u8), ("timeout_ms", u32), ("info", P(Info))]


class BlobArray(ctypes.Structure):  # struct rdmem_blob_array
    _fields_ = [("base", vp), ("count", u32)]


class Mget(ctypes.Structure):  # struct rdmem_mget
    _fields_ = [("blob", vp), ("len", u32), ("arr", BlobArray)]


class ProfileView(ctypes.Structure):  # struct rdmem_profile_view
    _fields_ = [
        ("base", vp),
        ("id", u64),
        ("name", vp),
        ("name_len", u32),
        ("tag_count", u32),
        ("counter_count", u32),
        ("tags_off", u32),
        ("counters_off", u32),
    ]


class Profile(ctypes.Structure):  # struct rdmem_profile
    _fields_ = [("blob", vp), ("len", u32), ("view", ProfileView)]


PROGRESS = ctypes.CFUNCTYPE(None, vp, u64, u64)


class ImageOpts(ctypes.Structure):  # struct rdmem_image_opts
    _fields_ = [("chunk_size", u32), ("progress", PROGRESS), ("arg", vp), ("upload_id", u64)]


class Counters(ctypes.Structure):  # struct rdmem_counters
    _fields_ = [
        (n, u64) for n in ("calls", "timeouts", "late", "shutdowns", "reattach", "bad_replies")
    ]


H = vp  # rdmem_t *: opaque
O = P(Opts)
_PROTOS = {
    "rdmem_version": (cp, []),
    "rdmem_strerror": (cp, [ctypes.c_int]),
    "rdmem_open": (ctypes.c_int, [cp, P(H)]),
    "rdmem_close": (None, [H]),
    "rdmem_set_timeout": (None, [H, u32]),
    "rdmem_slots": (u32, [H]),
    "rdmem_max_value": (u32, [H]),
    "rdmem_get_counters": (None, [H, P(Counters)]),
    "rdmem_ping": (ctypes.c_int, [H, O]),
    "rdmem_local_ping": (ctypes.c_int, [H, O]),
    "rdmem_echo": (ctypes.c_int, [H, vp, u32, P(vp), P(u32), O]),
    "rdmem_put": (ctypes.c_int, [H, vp, u32, vp, u32, O]),
    "rdmem_get": (ctypes.c_int, [H, vp, u32, P(vp), P(u32), O]),
    "rdmem_get_into": (ctypes.c_int, [H, vp, u32, vp, u32, P(u32), O]),
    "rdmem_del": (ctypes.c_int, [H, vp, u32, O]),
    "rdmem_mget": (ctypes.c_int, [H, P(cp), P(u32), u32, P(Mget), O]),
    "rdmem_mget_value": (ctypes.c_int, [P(Mget), u32, P(vp), P(u32)]),
    "rdmem_mget_free": (None, [P(Mget)]),
    "rdmem_profile": (ctypes.c_int, [H, u64, P(Profile), O]),
    "rdmem_profile_free": (None, [P(Profile)]),
    "rdmem_large_get": (ctypes.c_int, [H, cp, P(vp), P(u32), O]),
    "rdmem_large_verify": (ctypes.c_int, [cp, vp, u32]),
    "rdmem_image_put": (ctypes.c_int, [H, cp, vp, u64, P(ImageOpts), O]),
    "rdmem_stats": (ctypes.c_int, [H, ctypes.c_int, P(vp), P(u32), O]),
    "rdmem_agent_stats": (ctypes.c_int, [H, ctypes.c_int, P(vp), P(u32), O]),
    "rdmem_agent_ctl": (ctypes.c_int, [H, cp, P(vp), P(u32), O]),
}
for _name, (_res, _args) in _PROTOS.items():
    _fn = getattr(lib, _name)
    _fn.restype, _fn.argtypes = _res, _args
