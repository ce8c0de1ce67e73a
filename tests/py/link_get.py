#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Walks a dotted path (e.g. "mtu", "linkinfo.info_data.mode",
"stats64.rx.packets") through `ip -d -s -j link show dev DEV`, and prints
the value there with no newline: a string as is, anything else as JSON;
"(absent)" (testutil.h's TU_ABSENT) when the path is not there. An empty
PATH prints the whole object. Exits 3 when there is no such device.

Arguments: NETNS (a netns path for nsenter --net=, or "" for the current
one), DEV, PATH. Used by tests/testutil.c (tu_link_get_ns).
"""

import argparse
import json
import subprocess
import sys

ABSENT = "(absent)"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("netns", help='network namespace path, or "" for the current one')
    ap.add_argument("dev", help="interface name")
    ap.add_argument("path", help='dotted path into the object, or "" for all of it')
    a = ap.parse_args()
    cmd = ["ip", "-d", "-s", "-j", "link", "show", "dev", a.dev]
    if a.netns:
        cmd = ["nsenter", "--net=" + a.netns] + cmd
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if p.returncode:
        return 3
    v = json.loads(p.stdout)[0]
    for k in a.path.split(".") if a.path else []:
        if not isinstance(v, dict) or k not in v:
            print(ABSENT, end="")
            return 0
        v = v[k]
    print(v if isinstance(v, str) else json.dumps(v), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
