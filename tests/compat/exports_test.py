"""Loom's libnccl.so.2 exports what programs linked against NCCL resolve: every public function of
NVIDIA's libnccl.so.2 found here (the CUDA toolkit's, PyPI's nvidia-nccl-cu13 that torch pins) and
every NCCL function torch's libtorch_cuda.so needs, each as NCCL exports it (a weak ncclX over a
strong pncclX); libloom.so itself gains no dependency.

    exports_test.py LIBNCCL LIBLOOM [CUDA_ROOT]"""
import glob
import importlib.util
import os
import subprocess
import sys


def dynamic_symbols(path, defined=True):
    """{name: nm's type letter} of the dynamic symbol table."""
    args = ["nm", "-D", "--defined-only" if defined else "--undefined-only", path]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    symbols = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            symbols[parts[-1].split("@")[0]] = parts[-2]
    return symbols


def public(symbols):
    return {s for s in symbols if s.startswith("nccl")}


def module_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    return list(spec.submodule_search_locations or [os.path.dirname(spec.origin)])[0]


def main():
    ours_path, libloom, cuda_root = sys.argv[1], sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else "")
    ours = dynamic_symbols(ours_path)
    failures = []
    required = {}
    toolkit = sorted(glob.glob(os.path.join(cuda_root, "lib*", "libnccl.so.2"))) if cuda_root else []
    for lib in toolkit[:1]:
        required[f"NVIDIA's {lib}"] = public(dynamic_symbols(lib))
    wheel_dir = module_dir("nvidia")
    for lib in glob.glob(os.path.join(wheel_dir, "nccl", "lib", "libnccl.so.2")) if wheel_dir else []:
        required[f"nvidia-nccl-cu13's {lib}"] = public(dynamic_symbols(lib))
    torch_dir = module_dir("torch")
    torch_cuda = os.path.join(torch_dir, "lib", "libtorch_cuda.so") if torch_dir else ""
    if torch_cuda and os.path.exists(torch_cuda):
        required["torch's libtorch_cuda.so"] = public(dynamic_symbols(torch_cuda, defined=False))
    if not required:
        print("SKIP: no NVIDIA libnccl.so.2 and no torch here to compare with")
        return 77
    for what, names in required.items():
        missing = sorted(names - set(ours))
        if missing:
            failures.append(f"missing what {what} has: {' '.join(missing)}")
        print(f"{what}: {len(names)} NCCL functions, {len(names) - len(missing)} exported")
    for name in sorted(public(ours)):
        if ours[name] not in ("W", "V"):
            failures.append(f"{name} is '{ours[name]}', not a weak symbol")
        if ours.get("p" + name) != "T":
            failures.append(f"{name} has no strong p{name}")
    loom_needs = subprocess.run(["readelf", "-d", libloom], check=True, capture_output=True, text=True).stdout
    if "libnccl" in loom_needs:
        failures.append("libloom.so depends on libnccl")
    for f in failures:
        print("FAIL:", f)
    print("compat_exports:", "FAILED" if failures else "OK")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
