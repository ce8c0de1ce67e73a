#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""A value from `tc -s -j KIND show dev DEV`: evaluates the Python
expression EXPR on the parsed list `d` and prints the result, e.g.
    tc_json.py qdisc h0 "[q['kind'] for q in d if q.get('root')]"

Arguments: KIND (qdisc, class, filter), DEV, EXPR. Used by
tests/test_bandwidth.c.
"""

import argparse
import json
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", help="qdisc, class or filter")
    ap.add_argument("dev", help="interface name")
    ap.add_argument("expr", help="Python expression on the list d")
    a = ap.parse_args()
    out = subprocess.run(["tc", "-s", "-j", a.kind, "show", "dev", a.dev], stdout=subprocess.PIPE,
                         check=True, text=True).stdout
    print(eval(a.expr, {"d": json.loads(out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
