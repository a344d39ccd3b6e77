#!/usr/bin/env python3
"""Checks the machine code of the CUDA kernels in a library (cuobjdump -sass): every plan kernel
(planSequenceKernel, one per dtype) and every elementwise kernel (elementwiseKernel) of each named
architecture moves data with 128-bit loads and stores (LDG/LD.E.128, STG/ST.E.128), the 16-byte
vectors of element_ops.cuh's hot loop, rather than only one element at a time. (Nothing else in these
kernels stores 128 bits at once: the lane statuses and FIFO counters are words.)

    python3 check_sass.py LIBRARY --arch sm_90 [--arch sm_80]

cuobjdump (and the nvdisasm it runs) come from $CUOBJDUMP, the PATH, the CUDA toolkit, or NVIDIA's
wheels (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm; scripts/install-deps.sh installs them next to
nvcc when the toolkit has none). Without them it exits 77 (meson: SKIP) and says where it looked.
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

KERNELS = ("planSequenceKernel", "elementwiseKernel")
LOAD_128 = re.compile(r"\b(?:LDG|LD)\.E[A-Z0-9_.]*\.128\b")
STORE_128 = re.compile(r"\b(?:STG|ST)\.E[A-Z0-9_.]*\.128\b")


def find_tools():
    """cuobjdump's path and the folder nvdisasm is in (for its PATH), or (None, places looked at)."""
    places = []
    candidates = []
    if os.environ.get("CUOBJDUMP"):
        candidates.append(pathlib.Path(os.environ["CUOBJDUMP"]))
    on_path = shutil.which("cuobjdump")
    if on_path:
        candidates.append(pathlib.Path(on_path))
    candidates.append(pathlib.Path("/usr/local/cuda/bin/cuobjdump"))
    for key in ("purelib", "platlib"):
        candidates.append(pathlib.Path(sysconfig.get_paths()[key]) / "nvidia" / "cu13" / "bin" / "cuobjdump")
    for c in candidates:
        places.append(str(c))
        if not c.is_file():
            continue
        nvdisasm = c.parent / "nvdisasm"
        if nvdisasm.is_file() or shutil.which("nvdisasm"):
            return c, (str(c.parent) if nvdisasm.is_file() else None)
        places[-1] += " (no nvdisasm beside it or on the PATH)"
    return None, places


def functions(sass):
    """(name, body) of every function in cuobjdump -sass output."""
    parts = re.split(r"\n\s*Function : ", sass)
    for part in parts[1:]:
        name, _, body = part.partition("\n")
        yield name.strip(), body


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("library")
    p.add_argument("--arch", action="append", required=True, help="sm_XX whose machine code is checked")
    args = p.parse_args()
    cuobjdump, extra = find_tools()
    if cuobjdump is None:
        print("SKIP: no cuobjdump with nvdisasm; looked at: " + ", ".join(extra))
        return 77
    env = dict(os.environ)
    if extra:
        env["PATH"] = extra + os.pathsep + env.get("PATH", "")
    problems = []
    for arch in args.arch:
        out = subprocess.run([str(cuobjdump), "-sass", "-arch", arch, args.library], env=env, capture_output=True,
                             text=True, check=False)
        if out.returncode != 0:
            problems.append(f"{arch}: cuobjdump failed: {out.stderr.strip()}")
            continue
        seen = {k: 0 for k in KERNELS}
        for name, body in functions(out.stdout):
            kernel = next((k for k in KERNELS if k in name), None)
            if kernel is None:
                continue
            seen[kernel] += 1
            loads, stores = len(LOAD_128.findall(body)), len(STORE_128.findall(body))
            verdict = "ok" if loads and stores else "NO 128-bit " + ("loads" if not loads else "stores")
            print(f"{arch} {kernel} {name[-48:]}: {loads} 128-bit loads, {stores} 128-bit stores: {verdict}")
            if not (loads and stores):
                problems.append(f"{arch}: {name}: {verdict}")
        for kernel, count in seen.items():
            if count == 0:
                problems.append(f"{arch}: no {kernel} in {args.library}")
    for line in problems:
        print("FAIL: " + line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
