#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Reads iperf3's JSON report (iperf3 -J) on stdin and prints the bits/s
the receiver counted (end.sum_received.bits_per_second).

No arguments. Used by tests/test_bandwidth.c.
"""

import argparse
import json
import sys


def main():
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
