"""The console scripts loom-info, loom-perf and loom-doctor: the binaries installed inside this package (loom/_bin,
beside the libloom they load), run in place of this process with the caller's arguments."""
import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin")


def _run(name):
    path = os.path.join(_BIN, name)
    if not os.path.exists(path):
        sys.exit(f"{name}: not installed with this package ({path} is missing; was it built without CLI11?)")
    os.execv(path, [name] + sys.argv[1:])


def loom_info():
    _run("loom-info")


def loom_perf():
    _run("loom-perf")


def loom_doctor():
    _run("loom-doctor")
