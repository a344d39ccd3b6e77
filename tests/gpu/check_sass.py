#!/usr/bin/env python3
"""Checks the machine code of the CUDA kernels in a library (cuobjdump -sass): every plan kernel
(planSequenceKernel, one per dtype) and every elementwise kernel (elementwiseKernel) of each named
architecture moves data with 128-bit loads and stores (LDG/LD.E.128, STG/ST.E.128), the 16-byte
vectors of element_ops.cuh's hot loop, rather than only one element at a time. (Nothing else in these
kernels stores 128 bits at once: the lane statuses and FIFO counters are words.)

And of every plan kernel (cuobjdump -res-usage and its fences): its registers let a 512-thread block
fit an SM (at most 128 per thread, with kPlanUnroll's vectors in flight) without spilling to local
memory, and it holds the GPU-scope fences (MEMBAR.*.GPU) that FIFOs between kernels of one GPU
publish with, beside the system-scope ones (MEMBAR.*.SYS) for everything else. That a step publishes
with one fence is the host emulation's to count (PlanInterpreter.EveryStepPublishesWithOneRelease...).
Prints each plan kernel's registers and fences of each scope (docs/PERFORMANCE.md quotes them).

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
FENCE = re.compile(r"\bMEMBAR\.[A-Z]+\.(SYS|GPU)\b")
RESOURCES = re.compile(r"Function ([^:\s]+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)")
PLAN_THREADS = 512  # kernels/cuda/plan_launch.h's kPlanThreads
REGISTERS_PER_SM = 65536


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
            if kernel == "planSequenceKernel":
                scopes = [m.group(1) for m in FENCE.finditer(body)]
                sys_fences, gpu_fences = scopes.count("SYS"), scopes.count("GPU")
                print(f"{arch} {name[-48:]}: fences {sys_fences} system-scope, {gpu_fences} GPU-scope")
                if gpu_fences == 0:
                    problems.append(f"{arch}: {name}: no GPU-scope fence (every FIFO publishes at system scope)")
        for kernel, count in seen.items():
            if count == 0:
                problems.append(f"{arch}: no {kernel} in {args.library}")
        usage = subprocess.run([str(cuobjdump), "-res-usage", "-arch", arch, args.library], env=env,
                               capture_output=True, text=True, check=False)
        plans = [m for m in RESOURCES.finditer(usage.stdout) if "planSequenceKernel" in m.group(1)]
        if usage.returncode != 0 or not plans:
            problems.append(f"{arch}: cuobjdump -res-usage gave no plan kernel: {usage.stderr.strip()}")
        most = REGISTERS_PER_SM // PLAN_THREADS
        for m in plans:
            name, regs, stack, local = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
            verdict = "ok" if regs <= most and stack == 0 and local == 0 else "too many"
            print(f"{arch} {name[-48:]}: {regs} registers, stack {stack}, local {local}: {verdict}")
            if verdict != "ok":
                problems.append(f"{arch}: {name}: {regs} registers (at most {most} for {PLAN_THREADS} threads on an SM), "
                                f"{stack} bytes of stack, {local} of local memory (spills)")
    for line in problems:
        print("FAIL: " + line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
