#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The HTB classes of a device, one line each: "HANDLE AVG PEAK BURST",
rates in kB/s (1024 bytes) and burst in kB, parsed from the text of
`tc class show dev DEV` (tc of Debian 12 prints classes as text only).

Argument: DEV. Used by tests/test_bandwidth.c.
"""

import argparse
import re
import subprocess
import sys

RATE = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}
SIZE = {"b": 1, "Kb": 1024, "Mb": 1048576}
CLASS = re.compile(r"class htb (\S+) .*rate (\d+)(\w?)bit ceil (\d+)(\w?)bit burst (\d+)(\w+)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dev", help="interface name")
    a = ap.parse_args()
    out = subprocess.run(["tc", "class", "show", "dev", a.dev], stdout=subprocess.PIPE,
                         text=True).stdout
    for line in out.splitlines():
        m = CLASS.match(line)
        if m:
            g = m.groups()
            print(g[0], round(int(g[1]) * RATE[g[2]] / 8192), round(int(g[3]) * RATE[g[4]] / 8192),
                  round(int(g[5]) * SIZE[g[6]] / 1024))
    return 0


if __name__ == "__main__":
    sys.exit(main())
