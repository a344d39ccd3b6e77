"""torch with Loom's libnccl.so.2 preloaded, as a user swaps NCCL: `import torch` binds every NCCL
function libtorch_cuda.so names (all at import) to Loom's library, and ncclGetVersion, as torch's
ProcessGroupNCCL asks it at run time, is Loom's answer. torch also maps the nvidia-nccl-cu13 copy it
preloads by path, but no call of torch's reaches it. (torch.cuda.nccl.version() reports the NCCL
headers torch was compiled with, not the library in use.) Skipped (77) where torch is not installed
or was built without CUDA.

    torch_preload_test.py LIBNCCL"""
import os
import re
import subprocess
import sys

PROBE = """
import ctypes, torch
if not torch.backends.cuda.is_built():
    raise SystemExit(77)
version = ctypes.c_int(0)
assert ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(version)) == 0
print("ncclGetVersion", version.value)
"""


def main():
    lib = os.path.realpath(sys.argv[1])
    env = dict(os.environ, LD_PRELOAD=lib, LD_DEBUG="bindings")
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=100)
    if proc.returncode == 77 or "No module named 'torch'" in proc.stderr:
        print("SKIP: no torch built with CUDA here")
        return 77
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:])
        print("FAIL: import torch with Loom's libnccl.so.2 preloaded")
        return 1
    # "binding file <torch_cuda> [0] to <library> [0]: normal symbol `ncclX'"
    bound = {}
    for m in re.finditer(r"binding file (\S*libtorch_cuda\.so) \[\d+\] to (\S+) \[\d+\]: normal symbol `(nccl\w+)'",
                         proc.stderr):
        bound[m.group(3)] = os.path.realpath(m.group(2))
    elsewhere = {name: where for name, where in bound.items() if where != lib}
    print(f"libtorch_cuda.so: {len(bound)} NCCL functions bound, {len(bound) - len(elsewhere)} to {lib}")
    version = int(proc.stdout.split("ncclGetVersion")[-1].split()[0])
    print("ncclGetVersion:", version)
    failed = False
    if len(bound) < 40 or elsewhere:
        print("FAIL: torch's NCCL calls bound elsewhere:", elsewhere or "too few bindings seen")
        failed = True
    if version != 23000:
        print("FAIL: expected Loom's answer, 23000 (NCCL API 2.30)")
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
