#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Lints the tests' Python helpers (tests/py/*.py, or the FILEs given):
each must compile, pass pyflakes (Debian's python3-pyflakes,
installed by scripts/deps.sh; missing pyflakes is a failure, not a skip),
have a module docstring, and, when it is a command, answer --help.

Arguments: FILE... (default: every .py beside this script). Run by ctest
(label lint).
"""

import argparse
import ast
import glob
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", metavar="FILE")
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    files = a.files or sorted(glob.glob(os.path.join(here, "*.py")))
    bad = 0
    for f in files:
        with open(f) as fh:
            src = fh.read()
        try:
            compile(src, f, "exec")
        except SyntaxError as e:
            print("%s: %s" % (f, e))
            bad += 1
            continue
        if not ast.get_docstring(ast.parse(src)):
            print("%s: no docstring saying what it does and its arguments" % f)
            bad += 1
        if "__main__" in src:
            p = subprocess.run([sys.executable, f, "--help"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
            if p.returncode:
                print("%s --help: exit %d %s" % (f, p.returncode, p.stderr))
                bad += 1
    p = subprocess.run([sys.executable, "-m", "pyflakes", *files])
    if p.returncode:
        print("pyflakes: exit %d" % p.returncode)
        bad += 1
    print("%d files, %d problems" % (len(files), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
