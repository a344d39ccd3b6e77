"""Each ctypes mirror of a public C struct (loom.capi, loom.cost_model) has the C struct's size and
every field at the C struct's offset: a C program compiled against include/ here prints what the
compiler lays out, for the fields the mirrors name."""
import ctypes
import os
import shutil
import subprocess

import pytest

from loom import capi, cost_model

INCLUDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")
MIRRORS = {  # C type -> its ctypes mirror
    "loomUniqueId": capi.UniqueId,
    "loomConfig_t": capi.Config,
    "loomModelConfig_t": cost_model._Config,
    "loomModelRequest_t": cost_model._Request,
    "loomModelPrediction_t": cost_model._Prediction,
    "loomModelMachine_t": cost_model._Machine,
}


def c_layout(tmp_path):
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "loom.h"', '#include "loom_model.h"',
             "int main(void) {"]
    for ctype, mirror in MIRRORS.items():
        lines.append(f'  printf("{ctype} sizeof() %zu\\n", sizeof({ctype}));')
        for field, *_ in mirror._fields_:
            lines.append(f'  printf("{ctype} {field} %zu\\n", offsetof({ctype}, {field}));')
    lines += ["  return 0;", "}"]
    source = tmp_path / "layout.c"
    source.write_text("\n".join(lines) + "\n")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to lay the structs out")
    exe = tmp_path / "layout"
    build = subprocess.run([compiler, "-std=c11", "-I", INCLUDE, str(source), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, f"a mirror names a field the C struct lacks:\n{build.stderr}"
    layout = {}
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        ctype, what, value = line.split()
        layout[(ctype, what)] = int(value)
    return layout


def test_every_mirror_has_the_c_layout(tmp_path):
    layout = c_layout(tmp_path)
    for ctype, mirror in MIRRORS.items():
        assert ctypes.sizeof(mirror) == layout[(ctype, "sizeof()")], f"{mirror.__name__} is not the size of {ctype}"
        for field, *_ in mirror._fields_:
            assert getattr(mirror, field).offset == layout[(ctype, field)], f"{mirror.__name__}.{field} vs {ctype}"
