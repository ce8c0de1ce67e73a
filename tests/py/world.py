#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The network world as the real tools see it, in one text: every link
(`ip -d -j link show`, as sorted JSON on one line, without the bridges'
running timers, which change by themselves), then the whole nftables
ruleset (`nft -j list ruleset`).

No arguments. Used by tests/test_policy.c.
"""

import argparse
import json
import subprocess
import sys


def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if "timer" not in k}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v


def out(*argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, check=True, text=True).stdout


def main():
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(json.dumps(strip(json.loads(out("ip", "-d", "-j", "link", "show"))), sort_keys=True))
    print(out("nft", "-j", "list", "ruleset"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
