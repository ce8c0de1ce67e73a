#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks that the project is licensed as a distribution expects: COPYING
holds the LGPL 2.1, and every tracked source file (C, headers, the .proto,
scripts, CMake, man pages, units, XML) carries the line
"SPDX-License-Identifier: LGPL-2.1-or-later" in its first three lines.
Fuzz corpora, images and Markdown are data, not source, and are exempt.

Arguments: --root DIR (default: the repository holding this script). Run by
ctest (label lint); needs git to list the tracked files: outside a git
checkout (a release tarball) it exits 77, ctest's "skipped", saying so.
"""

import argparse
import os
import re
import subprocess
import sys

TAG = "SPDX-License-Identifier: LGPL-2.1-or-later"
EXEMPT = re.compile(r"(^tests/fuzz/corpus/|\.(png|md|supp)$|^COPYING$)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    a = ap.parse_args()
    git = subprocess.run(["git", "-C", a.root, "ls-files"], text=True, capture_output=True)
    if git.returncode != 0 or not git.stdout:
        # A release tarball: the files to check are the ones git tracks.
        print("spdx: skipped: %s is not a git checkout" % a.root)
        return 77
    files = git.stdout.split()
    bad = 0
    with open(os.path.join(a.root, "COPYING")) as fh:
        copying = fh.read(4096)
    if "GNU LESSER GENERAL PUBLIC LICENSE" not in copying or "Version 2.1" not in copying:
        print("COPYING: not the LGPL 2.1")
        bad += 1
    checked = 0
    for f in files:
        if EXEMPT.search(f):
            continue
        checked += 1
        with open(os.path.join(a.root, f), errors="replace") as fh:
            head = [fh.readline() for _ in range(3)]
        if not any(TAG in line for line in head):
            print("%s: no '%s' line at its top" % (f, TAG))
            bad += 1
    print("%d files checked, %d without the licence line" % (checked, bad))
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
