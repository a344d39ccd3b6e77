#!/usr/bin/env python3
"""Prints meson's test results as one closing line: 'N passed, M failed, K skipped'."""
import json
import sys

passed = failed = skipped = 0
try:
    with open(sys.argv[1]) as log:
        for line in log:
            result = json.loads(line).get("result", "")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:
                failed += 1
except FileNotFoundError:
    failed = 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
