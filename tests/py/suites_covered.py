#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks that a Check binary split into one ctest test per suite
(tests/CMakeLists.txt) has a ctest test for every suite its sources
create (suite_create("NAME")), and no ctest test for a suite that does
not exist: a new suite cannot be left out of `ctest` silently.

Arguments: --suites A;B;C (the suites CMake runs, ';' or ',' separated)
and the binary's source files. Run by ctest (label lint).
"""

import argparse
import re
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suites", required=True, help="the suites that have a ctest test")
    ap.add_argument("sources", nargs="+", help="the binary's C sources")
    a = ap.parse_args()
    listed = set(s for s in re.split(r"[;,]", a.suites) if s)
    found = set()
    for path in a.sources:
        if path.endswith(".c"):
            with open(path) as f:
                found.update(re.findall(r'suite_create\("([^"]+)"\)', f.read()))
    rc = 0
    for s in sorted(found - listed):
        print("suite %s has no ctest test: add it to the list in tests/CMakeLists.txt" % s)
        rc = 1
    for s in sorted(listed - found):
        print("ctest runs suite %s, which no source creates" % s)
        rc = 1
    if rc == 0:
        print("%d suites, each with a ctest test" % len(found))
    return rc


if __name__ == "__main__":
    sys.exit(main())
