"""The thin ctypes binding (loom.capi / loom.comm) on numpy arrays; ranks are threads."""
import threading

import numpy as np
import pytest

from loom import capi
from loom.comm import Communicator, group


def on_threads(n, fn):
    """Runs fn(rank) on n threads; re-raises the first failure."""
    errors = [None] * n

    def body(r):
        try:
            fn(r)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            errors[r] = e

    threads = [threading.Thread(target=body, args=(r,)) for r in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not any(th.is_alive() for th in threads), "a rank hung"
    for e in errors:
        if e is not None:
            raise e


def test_collectives_on_threads():
    n = 3
    comms = Communicator.init_all(n)

    def rank(r):
        c = comms[r]
        assert (c.rank, c.size) == (r, n)
        x = np.full(10, r + 1, dtype=np.float32)
        c.all_reduce(x)
        np.testing.assert_array_equal(x, np.full(10, 6, dtype=np.float32))
        y = np.arange(4, dtype=np.int64) if r == 0 else np.zeros(4, dtype=np.int64)
        c.broadcast(y, root=0)
        np.testing.assert_array_equal(y, np.arange(4))
        out = np.zeros(3 * n, dtype=np.int32)
        c.all_gather(np.full(3, r, dtype=np.int32), out)
        np.testing.assert_array_equal(out, np.repeat(np.arange(n, dtype=np.int32), 3))
        m = np.array([r, -r], dtype=np.float64)
        c.all_reduce(m, op="max")
        np.testing.assert_array_equal(m, [n - 1, 0])
        got = np.zeros(2, dtype=np.uint8)
        payload = np.full(2, r, dtype=np.uint8)  # alive until the group ends: the send runs there
        with group():
            c.send(payload, (r + 1) % n)
            c.recv(got, (r - 1) % n)
        np.testing.assert_array_equal(got, np.full(2, (r - 1) % n))

    try:
        on_threads(n, rank)
    finally:
        for c in comms:
            c.destroy()


def test_nonblocking_communicator():
    n = 2
    uid = Communicator.unique_id()

    def rank(r):
        with Communicator(n, uid, r, blocking=False, name="capi-test", timeout_ms=20000) as c:
            x = np.full(1 << 16, r + 1.0)
            c.all_reduce(x)
            assert c.wait(timeout_ms=20000)
            np.testing.assert_array_equal(x, np.full(1 << 16, 3.0))

    on_threads(n, rank)


def test_errors_carry_loom_text():
    (c,) = Communicator.init_all(1)
    try:
        with pytest.raises(capi.LoomError, match=r"root 7 is outside 0\.\.0"):
            c.broadcast(np.zeros(2, dtype=np.float32), root=7)
        with pytest.raises(ValueError, match="C-contiguous"):
            c.all_reduce(np.zeros((4, 4), dtype=np.float32).T)
    finally:
        c.destroy()
