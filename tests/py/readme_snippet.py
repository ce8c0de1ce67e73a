#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks that README.md's "The API in one screen" compiles: its C block,
wrapped in a main(), built with the C compiler against the public header
(warnings are errors, so an undefined name or an unused variable fails),
as a newcomer would paste it. Prints the compiler's complaints and exits 1
when it does not compile.

Arguments: --readme FILE (README.md), --include DIR (repeatable: where
netbroker.h is), --cc COMPILER (default cc). Run by ctest (label lint).
"""

import argparse
import os
import subprocess
import sys
import tempfile

HEADING = "## The API in one screen"


def snippet(text):
    """The first ```c block after the heading, or None."""
    at = text.find(HEADING)
    if at < 0:
        return None
    start = text.find("```c\n", at)
    end = text.find("```", start + 5) if start >= 0 else -1
    return text[start + 5:end] if end > 0 else None


def program(code):
    """The block as a translation unit: its #includes first, the rest in main()."""
    lines = code.splitlines()
    inc = [ln for ln in lines if ln.startswith("#include")]
    body = [ln for ln in lines if not ln.startswith("#include")]
    return "\n".join(inc + ["#include <err.h>", "#include <stdio.h>",
                            "int main(void)", "{"] + body + ["return 0;", "}", ""])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", required=True)
    ap.add_argument("--include", action="append", default=[])
    ap.add_argument("--cc", default="cc")
    a = ap.parse_args()
    with open(a.readme) as fh:
        code = snippet(fh.read())
    if code is None:
        print("readme-snippet: no C block under %r in %s" % (HEADING, a.readme))
        return 1
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "snippet.c")
        with open(src, "w") as fh:
            fh.write(program(code))
        cmd = [a.cc, "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", src]
        for inc in a.include:
            cmd += ["-I", inc]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("readme-snippet: README's API example does not compile:")
            print(r.stdout + r.stderr)
            return 1
    print("readme-snippet: README's API example compiles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
