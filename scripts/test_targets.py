#!/usr/bin/env python3
"""Prints the ninja targets that the named meson tests need (their executables and the tools they
run), one per line, so that a build directory can build only those:
    ninja -C DIR $(python3 scripts/test_targets.py DIR TEST...)
scripts/sanitize.sh uses it: its sanitizer builds leave out what they do not run (loom-perf, the
process-mode API tests), which is minutes on a 2-core machine."""
import json
import os
import subprocess
import sys

if len(sys.argv) < 3:  # no test named must not mean "build everything"
    sys.exit("usage: test_targets.py BUILD_DIR TEST...")
build_dir, *names = sys.argv[1:]
intro = json.loads(subprocess.run(["meson", "introspect", build_dir, "--tests", "--targets"],
                                  check=True, capture_output=True, text=True).stdout)
files = {t["id"]: t["filename"] for t in intro["targets"]}
wanted = set(names)
root = os.path.realpath(build_dir)
targets = set()
for test in intro["tests"]:
    if test["name"] in wanted:
        wanted.discard(test["name"])
        for dep in test["depends"]:
            targets.update(os.path.relpath(f, root) for f in files[dep])
if wanted:
    sys.exit(f"test_targets.py: no such test in {build_dir}: {' '.join(sorted(wanted))}")
print("\n".join(sorted(targets)))
