"""NCCL's settings files through Loom's libnccl.so.2, as a program written for NCCL meets them: a value
in the file NCCL_CONF_FILE names (or in ~/.nccl.conf when it is unset) is what ncclParam* reads and what
ncclCommInitRank uses, its source named by file and line in the init's log (NCCL_DEBUG=INFO, itself
from the file); and a bad line of Loom's own loom.conf makes ncclCommInitRank fail with
ncclInvalidArgument, ncclGetLastError naming the file and line. Each case runs in a process of its own
(the files are read once per process). Needs no GPU: one rank in host memory.

    conf_file_test.py LIBNCCL"""
import os
import subprocess
import sys
import tempfile

PROBE = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.ncclGetLastError.restype = ctypes.c_char_p

class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]

value, length = ctypes.c_char_p(), ctypes.c_int()
rc = lib.ncclParamGetParameter(b"NCCL_IB_TC", ctypes.byref(value), ctypes.byref(length))
print("NCCL_IB_TC", rc, value.value.decode() if rc == 0 else "")
handle, sl = ctypes.c_void_p(), ctypes.c_int32(-1)
rc = lib.ncclParamBind(ctypes.byref(handle), b"NCCL_IB_SL")
if rc == 0:
    rc = lib.ncclParamGetI32(handle, ctypes.byref(sl))
print("NCCL_IB_SL", rc, sl.value)
uid, comm = UniqueId(), ctypes.c_void_p()
rc = lib.ncclGetUniqueId(ctypes.byref(uid))
if rc == 0:
    rc = lib.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0)
print("init", rc, lib.ncclGetLastError(None).decode())
if rc == 0:
    lib.ncclCommDestroy(comm)
"""

NCCL_INVALID_ARGUMENT = 4


def probe(lib, home, **variables):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOM_", "NCCL_"))}
    env.update(HOME=home, **variables)
    proc = subprocess.run([sys.executable, "-c", PROBE, lib], env=env, capture_output=True, text=True, timeout=60)
    answers = {}
    for line in proc.stdout.splitlines():
        name, rc, rest = (line.split(" ", 2) + [""])[:3]
        answers[name] = (int(rc), rest)
    return proc, answers


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return path


def main():
    lib = os.path.realpath(sys.argv[1])
    failures = []
    with tempfile.TemporaryDirectory() as scratch:
        home = os.path.join(scratch, "home")
        os.makedirs(home)
        # NCCL_CONF_FILE: NCCL's names, comments and blank lines; NCCL_DEBUG=INFO from it makes the init log.
        conf = write(os.path.join(scratch, "nccl.conf"),
                     "# NCCL's settings\n\nNCCL_IB_TC=96\nNCCL_DEBUG=INFO\nNCCL_SOCKET_IFNAME=lo\n")
        proc, got = probe(lib, home, NCCL_CONF_FILE=conf, LOOM_CONF_FILE="/dev/null")
        if got.get("NCCL_IB_TC") != (0, "96"):
            failures.append(f"ncclParamGetParameter(NCCL_IB_TC) with NCCL_CONF_FILE: {got.get('NCCL_IB_TC')}")
        if got.get("init", (None,))[0] != 0:
            failures.append(f"ncclCommInitRank with NCCL_CONF_FILE: {got.get('init')}: {proc.stderr[-2000:]}")
        if f"LOOM_SOCKET_IFNAME=lo (from {conf}:5 (NCCL_SOCKET_IFNAME))" not in proc.stderr:
            failures.append(f"the init's log does not name {conf}:5 as the source:\n{proc.stderr[-2000:]}")

        # ~/.nccl.conf where NCCL_CONF_FILE is unset; the environment wins over it.
        write(os.path.join(home, ".nccl.conf"), "NCCL_IB_SL=5\nNCCL_IB_TC=32\n")
        _, got = probe(lib, home, LOOM_CONF_FILE="/dev/null")
        if got.get("NCCL_IB_SL") != (0, "5") or got.get("NCCL_IB_TC") != (0, "32"):
            failures.append(f"~/.nccl.conf: NCCL_IB_SL {got.get('NCCL_IB_SL')}, NCCL_IB_TC {got.get('NCCL_IB_TC')}")
        _, got = probe(lib, home, LOOM_CONF_FILE="/dev/null", NCCL_IB_SL="7")
        if got.get("NCCL_IB_SL") != (0, "7"):
            failures.append(f"NCCL_IB_SL=7 in the environment over ~/.nccl.conf: {got.get('NCCL_IB_SL')}")

        # A bad line of loom.conf: the init's error, named.
        bad = write(os.path.join(scratch, "loom.conf"), "LOOM_NCHANNELS=2\nnonsense here\n")
        proc, got = probe(lib, home, LOOM_CONF_FILE=bad)
        rc, error = got.get("init", (None, ""))
        if rc != NCCL_INVALID_ARGUMENT or f"{bad}:2: not NAME=VALUE: nonsense here" not in error:
            failures.append(f"a bad line of loom.conf: ncclCommInitRank {rc}, ncclGetLastError {error!r}; "
                            f"{proc.stderr[-1000:]}")
    for f in failures:
        print("FAIL:", f)
    print("compat_conf_file:", "FAILED" if failures else "OK")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
