"""What building loom._C against the torch installed here takes, for meson (bindings/python/meson.build):
three lines, each a ';'-separated list: include directories, library directories, compiler arguments.
Exits 1 when torch cannot be imported.

c10d's C++ API moves between torch releases: what this torch has is read off its headers, so that the
binding builds against the torch it will run with (the GPU machine's may be older than this one's).
"""
import pathlib
import sys

try:
    import torch
    from torch.utils import cpp_extension
except Exception as e:  # noqa: BLE001 - any failure to import torch means: no extension
    print(f"torch cannot be imported: {e}", file=sys.stderr)
    sys.exit(1)

c10d = pathlib.Path(torch.__file__).parent / "include" / "torch" / "csrc" / "distributed" / "c10d"


def c10d_has(header, text):
    path = c10d / header
    return path.exists() and text in path.read_text(errors="replace")


args = [
    "-DTORCH_API_INCLUDE_EXTENSION_H",
    "-DTORCH_EXTENSION_NAME=_C",
    f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
    # The PREMUL_SUM factor's holder: NCCLPreMulSumSupplement in older releases.
    "-DLOOM_C10D_PREMUL_SUPPLEMENT=" + ("PreMulSumSupplement" if c10d_has("Types.hpp", "struct PreMulSumSupplement")
                                       else "NCCLPreMulSumSupplement"),
]
if c10d_has("Work.hpp", "getTimeout"):
    args.append("-DLOOM_C10D_WORK_HAS_TIMEOUT=1")
if c10d_has("Work.hpp", "ALLGATHER_INTO_TENSOR_COALESCED"):
    args.append("-DLOOM_C10D_TENSOR_COALESCED_OPS=1")
# Older torch releases pass pybind11's ABI tags to extensions so that their types interoperate.
abi_flags = getattr(cpp_extension, "_get_pybind11_abi_build_flags", None)
if abi_flags is not None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args += abi_flags()

print(";".join(cpp_extension.include_paths()))
print(";".join(cpp_extension.library_paths()))
print(";".join(args))
