"""Runs PyTorch's distributed test suite (DistributedTest._DistTestBase) on one backend at world
size 2 and prints one line per test, then "N passed, M failed, K skipped"; exits non-zero when a
test failed (or did not run within the time budget).

    python3 tests/torch_suite/run.py                  # backend loom
    python3 tests/torch_suite/run.py --backend gloo   # the same tests on Gloo, for comparison
    python3 tests/torch_suite/run.py -k monitored     # tests whose name contains a word

Excluded tests (exclusions.py) count as skipped and are listed with their reasons. See README.md.
"""
import argparse
import logging
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", choices=["loom", "gloo"], default="loom")
    p.add_argument("-k", dest="patterns", action="append", default=[],
                   help="run only tests whose name contains this (repeatable)")
    p.add_argument("--test-timeout", type=int, default=120,
                   help="seconds one test may take before its ranks are killed (the suite's own limit)")
    p.add_argument("--budget", type=int, default=600,
                   help="seconds for the whole run; tests not started by then count as failed")
    p.add_argument("--no-exclusions", action="store_true", help="run the excluded tests too")
    p.add_argument("--list", action="store_true", help="print the tests that would run, and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="full tracebacks of failures")
    return p.parse_args()


class Result(unittest.TestResult):
    """One test's outcome: 'passed', 'failed' (with its text) or 'skipped' (with the reason)."""

    def __init__(self):
        super().__init__()
        self.outcome, self.detail = "passed", ""

    def addError(self, test, err):
        self.outcome, self.detail = "failed", "".join(traceback.format_exception(*err))

    addFailure = addError

    def addSkip(self, test, reason):
        self.outcome, self.detail = "skipped", reason


def failure_summary(detail, verbose):
    if verbose:
        return detail
    # The suite reports a rank's failure as "Process r exited with error code 10 and exception:\n
    # <traceback>"; the last lines of each traceback say what went wrong.
    lines = [ln for ln in detail.splitlines() if ln.strip()]
    return "\n".join(lines[-12:])


def main():
    args = parse_args()
    os.environ["LOOM_SUITE_BACKEND"] = args.backend
    # This run's files: the init file, the suite's per-test directories, the ranks' output.
    os.environ["LOOM_SUITE_INIT_DIR"] = tempfile.mkdtemp(prefix=f"loom-torch-suite-{args.backend}-")
    os.environ["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.test_timeout)
    # Two ranks share this machine's cores with whatever else runs: one thread each.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # The forkserver imports suite.py before it forks ranks; Python 3.11's forkserver ignores the
    # parent's sys.path, so the module is found through PYTHONPATH.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, HERE)
    start = time.monotonic()
    import suite  # noqa: E402 - reads the environment set above
    from exclusions import excluded_for

    # The suite logs every rank it starts; its warnings and errors (a timed-out rank's stack) stay.
    logging.getLogger("torch.testing._internal.common_distributed").setLevel(logging.WARNING)

    names = suite.test_names()
    excluded = {} if args.no_exclusions else excluded_for(args.backend)
    stale = sorted(set(excluded) - set(names))
    if stale:  # a test renamed or removed upstream: the list must be looked at again
        print(f"exclusions name tests the suite does not have: {', '.join(stale)}")
        return 2
    suite.exclude(excluded)
    if args.patterns:
        names = [n for n in names if any(p in n for p in args.patterns)]
    if args.list:
        print("\n".join(names))
        return 0

    multiprocessing.set_forkserver_preload(["suite"])
    log_dir = os.environ["LOOM_SUITE_LOG_DIR"] = os.path.join(os.environ["LOOM_SUITE_INIT_DIR"], "logs")
    os.makedirs(log_dir, exist_ok=True)
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    failures = []
    print(f"torch distributed suite: backend {args.backend}, world size {suite.WORLD_SIZE}, {len(names)} tests",
          flush=True)
    for name in names:
        if time.monotonic() - start > args.budget:
            outcome, detail, took = "failed", f"not started: the run's budget of {args.budget} s was spent", 0.0
        else:
            t0 = time.monotonic()
            result = Result()
            suite.TorchDistributedSuite(name).run(result)
            outcome, detail, took = result.outcome, result.detail, time.monotonic() - t0
        counts[outcome] += 1
        note = f"  ({detail})" if outcome == "skipped" else ""
        print(f"{outcome.upper():7} {name} {took:.1f}s{note}", flush=True)
        if outcome == "failed":
            failures.append(name)
            print("    " + failure_summary(detail, args.verbose).replace("\n", "\n    "), flush=True)
            print(f"    ranks' output: {os.path.join(log_dir, name)}.rank*.log", flush=True)

    print(f"backend {args.backend}: {time.monotonic() - start:.0f} s; failed: {', '.join(failures) or 'none'}; "
          f"excluded: {', '.join(n for n in excluded if n in names) or 'none'}")
    if failures:
        print(f"ranks' output kept in {log_dir}")
    else:
        shutil.rmtree(os.environ["LOOM_SUITE_INIT_DIR"], ignore_errors=True)
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
