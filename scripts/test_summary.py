#!/usr/bin/env python3
"""Prints the results of meson's test log (and optionally a pytest JUnit XML file) as one closing
line: 'N passed, M failed, K skipped'. A missing file counts as one failure."""
import json
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
meson_log, *junit = sys.argv[1:]
try:
    with open(meson_log) as log:
        for line in log:
            result = json.loads(line).get("result", "")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                skipped += 1
            else:
                failed += 1
except FileNotFoundError:
    failed += 1
for path in junit:
    try:
        for suite in ET.parse(path).getroot().iter("testsuite"):
            total = int(suite.get("tests", 0))
            bad = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
            skip = int(suite.get("skipped", 0))
            passed += total - bad - skip
            failed += bad
            skipped += skip
    except (FileNotFoundError, ET.ParseError):
        failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
