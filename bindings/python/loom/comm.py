"""A thin object wrapper over loom.capi for numpy arrays (C-contiguous, host memory).

    ids = Communicator.unique_id()            # on one rank, then share the bytes
    comm = Communicator(nranks, ids, rank)
    comm.all_reduce(x)                        # in place
    comm.all_gather(x, out)

On a nonblocking communicator (blocking=False) calls return at once; keep the arrays alive and
untouched until comm.wait() returned.
"""
import contextlib
import ctypes

import numpy as np

from loom import capi

_DTYPES = {
    np.dtype(np.int8): capi.INT8,
    np.dtype(np.uint8): capi.UINT8,
    np.dtype(np.bool_): capi.UINT8,
    np.dtype(np.int32): capi.INT32,
    np.dtype(np.uint32): capi.UINT32,
    np.dtype(np.int64): capi.INT64,
    np.dtype(np.uint64): capi.UINT64,
    np.dtype(np.float16): capi.FLOAT16,
    np.dtype(np.float32): capi.FLOAT32,
    np.dtype(np.float64): capi.FLOAT64,
}
_OPS = {"sum": capi.SUM, "prod": capi.PROD, "max": capi.MAX, "min": capi.MIN, "avg": capi.AVG}


def _buf(a, name):
    if a is None:
        return None, 0, capi.UINT8
    if not isinstance(a, np.ndarray) or not a.flags.c_contiguous:
        raise ValueError(f"{name} must be a C-contiguous numpy array")
    if a.dtype not in _DTYPES:
        raise ValueError(f"{name}: Loom has no datatype for {a.dtype}")
    return ctypes.c_void_p(a.ctypes.data), a.size, _DTYPES[a.dtype]


@contextlib.contextmanager
def group():
    """loomGroupStart/loomGroupEnd around the calls made inside (on any communicator). The calls run
    when the block ends: keep their arrays alive until then (not temporaries made in the call)."""
    capi.loomGroupStart()
    try:
        yield
    finally:
        capi.loomGroupEnd()


class Communicator:
    def __init__(self, nranks, unique_id, rank, blocking=True, name=None, timeout_ms=None, _handle=None):
        self._comm = capi.Comm(_handle)
        if _handle is None:
            uid = capi.UniqueId.from_buffer_copy(unique_id)
            cfg = capi.default_config(blocking=blocking, name=name, timeout_ms=timeout_ms)
            capi.loomCommInitRankConfig(ctypes.byref(self._comm), nranks, uid, rank, ctypes.byref(cfg))

    @staticmethod
    def unique_id():
        uid = capi.UniqueId()
        capi.loomGetUniqueId(ctypes.byref(uid))
        return bytes(uid)  # all 128 bytes (the field itself would stop at the first NUL)

    @classmethod
    def init_all(cls, n):
        """n communicators whose ranks are threads of this process (loomCommInitAll)."""
        handles = (capi.Comm * n)()
        capi.loomCommInitAll(handles, n, None)
        return [cls(n, None, i, _handle=handles[i]) for i in range(n)]

    @property
    def rank(self):
        v = ctypes.c_int()
        capi.loomCommUserRank(self._comm, ctypes.byref(v))
        return v.value

    @property
    def size(self):
        v = ctypes.c_int()
        capi.loomCommCount(self._comm, ctypes.byref(v))
        return v.value

    def all_reduce(self, send, recv=None, op="sum"):
        s, n, t = _buf(send, "send")
        r = _buf(recv, "recv")[0] if recv is not None else s
        capi.loomAllReduce(s, r, n, t, _OPS[op], self._comm, None)

    def reduce(self, send, recv=None, op="sum", root=0):
        s, n, t = _buf(send, "send")
        r = _buf(recv, "recv")[0] if recv is not None else s
        capi.loomReduce(s, r, n, t, _OPS[op], root, self._comm, None)

    def broadcast(self, buf, root=0):
        b, n, t = _buf(buf, "buf")
        capi.loomBroadcast(b, b, n, t, root, self._comm, None)

    def all_gather(self, send, recv):
        s, n, t = _buf(send, "send")
        capi.loomAllGather(s, _buf(recv, "recv")[0], n, t, self._comm, None)

    def reduce_scatter(self, send, recv, op="sum"):
        r, n, t = _buf(recv, "recv")
        capi.loomReduceScatter(_buf(send, "send")[0], r, n, t, _OPS[op], self._comm, None)

    def all_to_all(self, send, recv):
        s, n, t = _buf(send, "send")
        capi.loomAlltoAll(s, _buf(recv, "recv")[0], n // self.size, t, self._comm, None)

    def gather(self, send, recv=None, root=0):
        s, n, t = _buf(send, "send")
        capi.loomGather(s, _buf(recv, "recv")[0], n, t, root, self._comm, None)

    def scatter(self, send, recv, root=0):
        r, n, t = _buf(recv, "recv")
        capi.loomScatter(_buf(send, "send")[0], r, n, t, root, self._comm, None)

    def send(self, buf, peer):
        b, n, t = _buf(buf, "buf")
        capi.loomSend(b, n, t, peer, self._comm, None)

    def recv(self, buf, peer):
        b, n, t = _buf(buf, "buf")
        capi.loomRecv(b, n, t, peer, self._comm, None)

    @property
    def last_op_id(self):
        v = ctypes.c_uint64()
        capi.loomCommLastOpId(self._comm, ctypes.byref(v))
        return v.value

    def wait(self, op_id=None, timeout_ms=-1):
        """True when operation op_id (default: the last one) and all before it completed."""
        op_id = self.last_op_id if op_id is None else op_id
        return capi.loomCommWaitOp(self._comm, op_id, timeout_ms) == capi.SUCCESS

    def destroy(self):
        if self._comm:
            capi.loomCommDestroy(self._comm)
            self._comm = capi.Comm(None)

    def abort(self):
        if self._comm:
            capi.loomCommAbort(self._comm)
            self._comm = capi.Comm(None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
