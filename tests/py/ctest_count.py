#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Counts the results of scripts/test.sh's ctest runs, from machine-readable
output only, and prints the total as its last line: "N passed, N failed".

For each BUILD_DIR it reads BUILD_DIR/ctest-junit.xml (ctest --output-junit)
and BUILD_DIR/check-logs/TEST.tap, the TAP log Check writes for each ctest
test that runs a Check binary (CK_TAP_LOG_FILE_NAME, set in
tests/CMakeLists.txt). A Check test counts its individual checks ("ok" /
"not ok" lines); one that ran no check, or failed (valgrind's or ASan's
verdict at exit, a crash, a timeout) with every check passed, counts one
more failure. Any other ctest test counts as one.

Arguments: BUILD_DIR..., and --failed STEP (repeatable) for a step that
failed before ctest ran (a configure or build), counted as one failure.
Each failed check's TAP line (file, case, test and message, with up to
five lines of a message that goes on) is printed again just above the
total, where a reader of only the log's tail finds it. Exits 1 when
anything failed.
"""

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET


def tap_counts(path, why):
    """Counts a TAP log's checks; appends each failed check's line (Check puts
    its file, case, test and message there) to why, and up to five lines of
    a message that goes on."""
    ok = bad = 0
    more = 0
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("ok "):
                ok += 1
                more = 0
            elif line.startswith("not ok "):
                bad += 1
                why.append(line.rstrip("\n"))
                more = 5
            elif more and not line.startswith("1.."):
                why.append("   " + line.rstrip("\n"))
                more -= 1
    return ok, bad


def count_build(build, failures, why):
    passed = failed = 0
    junit = os.path.join(build, "ctest-junit.xml")
    if not os.path.exists(junit):
        failures.append("%s (no ctest results)" % build)
        return 0, 1
    for tc in ET.parse(junit).getroot().iter("testcase"):
        name = tc.get("name")
        ran_ok = tc.get("status") == "run" and not any(
            tc.find(t) is not None for t in ("failure", "error", "skipped"))
        tap = os.path.join(build, "check-logs", re.sub(r"[^\w.-]", "_", name) + ".tap")
        label = "%s: %s" % (os.path.basename(os.path.normpath(build)), name)
        if not os.path.exists(tap):
            if ran_ok:
                passed += 1
            else:
                failed += 1
                failures.append(label)
            continue
        ok, bad = tap_counts(tap, why)
        passed += ok
        failed += bad
        if bad:
            failures.append(label)
        elif ok == 0:
            print("-- %s: ran no check" % label)
            failed += 1
            failures.append(label)
        elif not ran_ok:
            print("-- %s: every check passed, but the test failed (exit status, crash "
                  "or timeout)" % label)
            failed += 1
            failures.append(label)
    return passed, failed


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--failed", action="append", default=[], metavar="STEP",
                    help="a step that failed before ctest ran (counted as one failure)")
    ap.add_argument("builds", nargs="*", metavar="BUILD_DIR")
    a = ap.parse_args()
    passed, failed, failures, why = 0, len(a.failed), list(a.failed), []
    for b in a.builds:
        p, f = count_build(b, failures, why)
        passed += p
        failed += f
    # Repeated at the end, where a reader of only the log's tail finds them:
    # the checks' own lines are thousands of lines above.
    for line in why:
        print("-- " + line)
    if failures:
        print("failed: " + "; ".join(failures))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
