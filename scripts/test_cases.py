#!/usr/bin/env python3
"""Lists the cases that meson tests of a build run, one line each: 'TEST CASE' (GoogleTest binaries:
every case their arguments and environment select, from --gtest_list_tests; other tests: 'TEST -').
Nothing is run but the listing, so two builds (before and after a change to the test tree) can be
compared case by case:

    python3 scripts/test_cases.py BUILD_DIR [TEST...] [--env VAR=VALUE]... [--args ARG]... > cases.txt

--env and --args add what a runner adds (scripts/sanitize.sh: LOOM_TEST_RANKS, a --gtest_filter that
replaces the test's own). Without TEST names, every test of the build is listed.

    python3 scripts/test_cases.py --unselected BUILD_DIR

lists instead the cases of the build's GoogleTest binaries that no meson test selects (a binary that
several tests run in parts, each with its own --gtest_filter, must not leave a case out): exit 1 when
there is one. Binaries not built are passed over."""
import argparse
import json
import os
import subprocess
import sys


def is_gtest(path):
    """A GoogleTest binary (which knows --gtest_list_tests); anything else is never run here."""
    try:
        with open(path, "rb") as f:
            return b"gtest_list_tests" in f.read()
    except OSError:
        return False


def gtest_cases(cmd, env, cwd):
    """The cases a GoogleTest command line selects, or None when it is not a GoogleTest binary."""
    try:
        out = subprocess.run(cmd + ["--gtest_list_tests"], env=env, cwd=cwd, capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode not in (0, 77):  # 77: a GPU test binary without a GPU (tests/gpu/gpu_main.cc)
        return None
    cases, suite = [], None
    for line in out.stdout.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split()[0] if line.split()[0].endswith(".") else None  # else a line of the binary's own
        elif suite:
            cases.append(suite + line.split()[0])
    return cases


def unselected(intro, build):
    """Prints the cases of each GoogleTest binary (as listed in each environment its tests give it) that
    none of its tests selects; returns the exit status."""
    registered, selected = {}, set()
    for test in intro:
        binary = test["cmd"][0]
        if not is_gtest(binary):
            continue
        env = dict(os.environ, **(test.get("env") or {}))
        cwd = test.get("workdir") or build
        everything = gtest_cases([binary], env, cwd) or []
        chosen = gtest_cases(test["cmd"], env, cwd) or []
        registered.setdefault(binary, set()).update(everything)
        selected.update((binary, case) for case in chosen)
    missing = sorted((b, c) for b, cases in registered.items() for c in cases if (b, c) not in selected)
    for binary, case in missing:
        print(f"{os.path.relpath(binary, build)}: {case} is run by no test")
    print(f"{sum(len(c) for c in registered.values())} cases of {len(registered)} GoogleTest binaries, "
          f"{len(missing)} run by no test")
    return 1 if missing else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build")
    p.add_argument("tests", nargs="*")
    p.add_argument("--env", action="append", default=[], help="VAR=VALUE added to every test's environment")
    p.add_argument("--args", action="append", default=[], help="an argument added after every test's own")
    p.add_argument("--unselected", action="store_true", help="list the cases no test selects")
    a = p.parse_args()
    intro = json.loads(subprocess.run(["meson", "introspect", a.build, "--tests"], check=True,
                                      capture_output=True, text=True).stdout)
    if a.unselected:
        sys.exit(unselected(intro, a.build))
    wanted = set(a.tests)
    for test in sorted(intro, key=lambda t: t["name"]):
        if wanted and test["name"] not in wanted:
            continue
        wanted.discard(test["name"])
        env = dict(os.environ)
        env.update(test.get("env") or {})
        env.update(kv.split("=", 1) for kv in a.env)
        cmd = test["cmd"] + a.args
        cases = gtest_cases(cmd, env, test.get("workdir") or a.build) if is_gtest(cmd[0]) else None
        if cases is None:
            print(test["name"], "-")
        else:
            for case in cases:
                print(test["name"], case)
    if wanted:
        sys.exit("test_cases.py: no such test in " + a.build + ": " + " ".join(sorted(wanted)))


if __name__ == "__main__":
    main()
