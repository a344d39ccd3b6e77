"""ctypes declarations of Loom's C API (include/loom.h), one to one, plus error checking.

Every function raises LoomError (a RuntimeError) with loomGetErrorString + loomGetLastError
instead of returning a non-success loomResult_t.
"""
import ctypes
import ctypes.util
import os

UNIQUE_ID_BYTES = 128
CONFIG_UNDEF_INT = -(2**31)
CONFIG_MAGIC = 0x6C6F6F6D

# loomResult_t
SUCCESS, IN_PROGRESS = 0, 7
# loomDataType_t
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, FLOAT32, FLOAT64, BFLOAT16 = range(10)
# loomRedOp_t
SUM, PROD, MAX, MIN, AVG = range(5)


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class Config(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("blocking", ctypes.c_int),
        ("commName", ctypes.c_char_p),
        ("timeoutMs", ctypes.c_int),
        ("splitShare", ctypes.c_int),
    ]


class LoomError(RuntimeError):
    def __init__(self, result, message):
        super().__init__(message)
        self.result = result


def _library_path():
    """LOOM_LIBRARY when set, else the libloom installed with this package (the one loom._C loads), else
    one the dynamic loader finds."""
    chosen = os.environ.get("LOOM_LIBRARY")
    if chosen:
        if not os.path.exists(chosen):
            raise ImportError(f"LOOM_LIBRARY={chosen}: no such file (unset it to use the libloom installed with loom)")
        return chosen
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libloom.so")
    if os.path.exists(beside):
        return beside
    found = ctypes.util.find_library("loom")
    if not found:
        raise ImportError("libloom not found: install the package with pip (README: Python), or set LOOM_LIBRARY")
    return found


lib = ctypes.CDLL(_library_path())
Comm = ctypes.c_void_p
_result = ctypes.c_int

_SIGNATURES = {
    "loomGetVersion": [ctypes.POINTER(ctypes.c_int)],
    "loomGetUniqueId": [ctypes.POINTER(UniqueId)],
    "loomCommInitRank": [ctypes.POINTER(Comm), ctypes.c_int, UniqueId, ctypes.c_int],
    "loomCommInitRankConfig": [ctypes.POINTER(Comm), ctypes.c_int, UniqueId, ctypes.c_int, ctypes.POINTER(Config)],
    "loomCommInitAll": [ctypes.POINTER(Comm), ctypes.c_int, ctypes.POINTER(ctypes.c_int)],
    "loomCommSplit": [Comm, ctypes.c_int, ctypes.c_int, ctypes.POINTER(Comm), ctypes.POINTER(Config)],
    "loomCommFinalize": [Comm],
    "loomCommDestroy": [Comm],
    "loomCommAbort": [Comm],
    "loomCommCount": [Comm, ctypes.POINTER(ctypes.c_int)],
    "loomCommUserRank": [Comm, ctypes.POINTER(ctypes.c_int)],
    "loomCommLastOpId": [Comm, ctypes.POINTER(ctypes.c_uint64)],
    "loomCommWaitOp": [Comm, ctypes.c_uint64, ctypes.c_int64],
    "loomRedOpCreatePreMulSum": [ctypes.POINTER(ctypes.c_int), ctypes.c_void_p, ctypes.c_int, ctypes.c_int, Comm],
    "loomRedOpDestroy": [ctypes.c_int, Comm],
    "loomReduce": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, Comm, ctypes.c_void_p],
    "loomBroadcast": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, Comm, ctypes.c_void_p],
    "loomAllReduce": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, Comm, ctypes.c_void_p],
    "loomReduceScatter": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, Comm, ctypes.c_void_p],
    "loomAllGather": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, Comm, ctypes.c_void_p],
    "loomAlltoAll": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, Comm, ctypes.c_void_p],
    "loomGather": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, Comm, ctypes.c_void_p],
    "loomScatter": [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, Comm, ctypes.c_void_p],
    "loomSend": [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, Comm, ctypes.c_void_p],
    "loomRecv": [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, Comm, ctypes.c_void_p],
    "loomGroupStart": [],
    "loomGroupEnd": [],
}

lib.loomGetErrorString.restype = ctypes.c_char_p
lib.loomGetErrorString.argtypes = [ctypes.c_int]
lib.loomGetLastError.restype = ctypes.c_char_p
lib.loomGetLastError.argtypes = [Comm]


def error_text(result, comm=None):
    """Loom's text for a failed call: the result's meaning and the last error (per thread without comm)."""
    detail = lib.loomGetLastError(comm).decode(errors="replace")
    text = lib.loomGetErrorString(result).decode(errors="replace")
    return f"{text}: {detail}" if detail else text


def _checked(name, argtypes):
    fn = getattr(lib, name)
    fn.argtypes = argtypes
    fn.restype = _result

    def call(*args):
        result = fn(*args)
        if result != SUCCESS and not (name == "loomCommWaitOp" and result == IN_PROGRESS):
            raise LoomError(result, f"{name} failed: {error_text(result)}")
        return result

    call.__name__ = name
    return call


for _name, _args in _SIGNATURES.items():
    globals()[_name] = _checked(_name, _args)


def default_config(blocking=None, name=None, timeout_ms=None):
    """A loomConfig_t as LOOM_CONFIG_INITIALIZER makes it, with the given fields set."""
    version = ctypes.c_int()
    loomGetVersion(ctypes.byref(version))  # noqa: F821 (defined above through globals())
    cfg = Config(ctypes.sizeof(Config), CONFIG_MAGIC, version.value, CONFIG_UNDEF_INT, None, CONFIG_UNDEF_INT,
                 CONFIG_UNDEF_INT)
    if blocking is not None:
        cfg.blocking = int(blocking)
    if name is not None:
        cfg.commName = name.encode()
    if timeout_ms is not None:
        cfg.timeoutMs = int(timeout_ms)
    return cfg
