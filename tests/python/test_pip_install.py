"""pip install of the repository into a fresh virtual environment, as a user does it (README, Python):
the console scripts on the venv's PATH, loom.torch imported from outside the checkout, a 2-rank
all_reduce on the loom backend with libloom found without LD_LIBRARY_PATH, then pip uninstall leaving
nothing behind.

The venv sees this interpreter's packages (torch, numpy, meson-python), as `--system-site-packages`
makes it, and installs its own loom. The build folder scripts/install-python.sh made (build-python/) is
reused, with the options it was set up with (scripts/test.sh's CPU build: no CUDA, -Og), so only what
differs for the venv's interpreter is rebuilt."""
import json
import os
import subprocess
import sys
import tempfile
import venv

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, "build-python")

ALL_REDUCE = r"""
import os, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
import loom, loom.torch

def rank_main(rank, init):
    dist.init_process_group("loom", init_method=init, rank=rank, world_size=2)
    x = torch.arange(5, dtype=torch.float32) + rank
    dist.all_reduce(x)
    assert x.tolist() == [1.0, 3.0, 5.0, 7.0, 9.0], x
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(rank_main, args=("file://" + os.path.join(sys.argv[1], "rendezvous"),), nprocs=2)
    print("all_reduce over loom from", os.path.dirname(loom.__file__))
"""


def setup_args_of(build):
    """-Csetup-args for the options install-python.sh may have changed from the package's defaults, as the
    build folder has them now (meson-python's own setup arguments would set the optimization back)."""
    with open(os.path.join(build, "meson-info", "intro-buildoptions.json")) as f:
        options = {o["name"]: o["value"] for o in json.load(f)}
    return [f"-Csetup-args=-D{name}={options[name]}" for name in ("optimization", "cuda") if name in options]


def tree(path):
    """Every file and folder under path, relative."""
    out = set()
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            out.add(os.path.relpath(os.path.join(top, name), path))
    return out


def test_pip_install_into_a_fresh_venv():
    if not os.path.isdir(BUILD):
        pytest.skip("no build-python/ (scripts/install-python.sh makes it): a build from nothing takes too long here")
    work = tempfile.mkdtemp(prefix="loom-venv-")
    env_dir = os.path.join(work, "venv")
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    python, bin_dir = os.path.join(env_dir, "bin", "python"), os.path.join(env_dir, "bin")
    before = tree(env_dir)
    # A user's shell: the venv's bin first, no library path, no PYTHONPATH, outside the checkout.
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH", "LOOM_LIBRARY")}
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")

    def run(*cmd, timeout=300):
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc.stdout

    run(python, "-m", "pip", "install", "--disable-pip-version-check", "--no-build-isolation", "--no-deps",
        f"-Cbuild-dir={BUILD}", *setup_args_of(BUILD), ROOT, timeout=1800)
    installed = tree(env_dir) - before
    for script in ("loom-info", "loom-plan", "loom-perf", "loom-doctor"):
        assert os.path.join("bin", script) in installed, f"{script} is not on the venv's PATH"

    info = json.loads(run("loom-info", "--json", "--no-network"))
    assert info["loom"]["version"] and info["topology"]["numa"], info
    assert "LOOM_TIMEOUT_MS" in run("loom-info", "--settings")
    assert "--devices" in run("loom-plan", "--help")
    assert "--list" in run("loom-doctor", "--help")
    assert "Out of bounds values : 0 OK" in run("loom-perf", "all_reduce", "-t", "2", "-b", "8", "-e", "1K", "-n", "2",
                                                "-w", "1")
    where = run(python, "-c", "import loom, loom.torch, loom._C, loom.capi; print(loom.__file__); print(loom.capi.lib._name)")
    assert all(line.startswith(env_dir) for line in where.split()), f"not the venv's loom: {where}"
    script = os.path.join(work, "all_reduce.py")
    with open(script, "w") as f:
        f.write(ALL_REDUCE)
    assert env_dir in run(python, script, work, timeout=240)

    run(python, "-m", "pip", "uninstall", "--disable-pip-version-check", "-y", "loom-collectives")
    left = {p for p in tree(env_dir) - before if "loom" in p or "__pycache__" not in p}
    assert not left, f"pip uninstall left {sorted(left)[:20]}"
