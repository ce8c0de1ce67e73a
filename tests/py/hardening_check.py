#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks that built ELF files are hardened, with binutils' readelf, as
Debian's hardening-check does:

* PIE: a program's ELF type is DYN (and its FLAGS_1 say PIE);
* RELRO: a GNU_RELRO program header;
* BIND_NOW: BIND_NOW in FLAGS, or NOW in FLAGS_1 (full RELRO with it);
* stack protector: the file imports __stack_chk_fail;
* FORTIFY (--fortify): the file imports at least one of glibc's __*_chk
  functions (glibc keeps the plain call where a size is unknown at compile
  time, so plain calls beside them are no failure);
* no executable stack: GNU_STACK is RW, not RWE.

Arguments: FILE... (programs and shared libraries), --fortify (require
_FORTIFY_SOURCE's checked calls). Run by ctest (label hardening) on
netbrokerd, netbrokerctl and libnetbroker.so of the build.
"""

import argparse
import re
import subprocess
import sys


def readelf(*args):
    """readelf's output (wide, C locale)."""
    return subprocess.run(["readelf", "-W", *args], stdout=subprocess.PIPE, check=True,
                          text=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"}).stdout


def check(path, fortify):
    """The problems of one file, as sentences (empty when hardened)."""
    out = []
    hdr = readelf("-h", path)
    dyn = readelf("-d", path)
    phdr = readelf("-l", path)
    syms = readelf("--dyn-syms", path)
    etype = re.search(r"Type:\s+(\w+)", hdr).group(1)
    shared_lib = "(SONAME)" in dyn
    if etype != "DYN":
        out.append("not position independent (ELF type %s, not DYN)" % etype)
    elif not shared_lib and not re.search(r"\(FLAGS_1\).*\bPIE\b", dyn):
        out.append("ELF type DYN but FLAGS_1 lacks PIE")
    if "GNU_RELRO" not in phdr:
        out.append("no GNU_RELRO segment (no RELRO)")
    if not (re.search(r"\(FLAGS\).*\bBIND_NOW\b", dyn) or re.search(r"\(FLAGS_1\).*\bNOW\b", dyn)):
        out.append("no BIND_NOW (RELRO is partial: the GOT stays writable)")
    imported = set(re.findall(r"\sUND\s+([^\s@]+)", syms))
    if "__stack_chk_fail" not in imported:
        out.append("no __stack_chk_fail: built without a stack protector")
    chk = sorted(s for s in imported if re.match(r"^__\w+_chk$", s) and s != "__stack_chk_fail")
    if fortify and not chk:
        out.append("no __*_chk function: built without _FORTIFY_SOURCE")
    m = re.search(r"GNU_STACK.*\s(RWE|RW)\s", phdr)
    if m and m.group(1) == "RWE":
        out.append("executable stack (GNU_STACK RWE)")
    print("%s: %s, %s; fortified calls: %s" % (
        path, "shared library" if shared_lib else "program", etype, " ".join(chk) or "none"))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--fortify", action="store_true", help="require __*_chk calls")
    a = ap.parse_args()
    n = 0
    for f in a.files:
        for p in check(f, a.fortify):
            print("hardening-check: FAIL: %s: %s" % (f, p))
            n += 1
    print("hardening-check: %d files, %d problems" % (len(a.files), n))
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())
