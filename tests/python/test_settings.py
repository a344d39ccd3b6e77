"""The Python package's side of the settings table (src/base/settings.def): LOOM_LIBRARY chooses the
libloom loom.capi loads (a missing file is an ImportError naming it), the default is the libloom
installed with the package, and the table reads the same through loomParamGetParameter."""
import ctypes
import os
import subprocess
import sys

from harness import package_env


def python(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=package_env(**env), capture_output=True, text=True,
                          timeout=60)


def test_default_library_is_the_packages():
    proc = python("import os, loom, loom.capi; print(os.path.dirname(loom.capi.lib._name) == os.path.dirname(loom.__file__))")
    assert proc.returncode == 0 and proc.stdout.strip() == "True", proc.stdout + proc.stderr


def test_loom_library_names_another():
    import loom.capi

    proc = python("import loom.capi; print(loom.capi.lib._name)", LOOM_LIBRARY=loom.capi.lib._name)
    assert proc.returncode == 0 and proc.stdout.strip() == loom.capi.lib._name, proc.stderr


def test_missing_loom_library_is_named():
    proc = python("import loom.capi", LOOM_LIBRARY="/nonexistent-loom-dir/libloom.so")
    assert proc.returncode != 0
    assert "ImportError: LOOM_LIBRARY=/nonexistent-loom-dir/libloom.so: no such file" in proc.stderr, proc.stderr


def test_parameters_through_the_c_api():
    import loom.capi

    lib = loom.capi.lib
    value, length = ctypes.c_char_p(), ctypes.c_int()
    os.environ["LOOM_NCHANNELS"] = "5"
    try:
        assert lib.loomParamGetParameter(b"nchannels", ctypes.byref(value), ctypes.byref(length)) == 0
        assert value.value == b"5" and length.value == 1
    finally:
        del os.environ["LOOM_NCHANNELS"]
    assert lib.loomParamGetParameter(b"LOOM_NO_SUCH_SETTING", ctypes.byref(value), ctypes.byref(length)) != 0
