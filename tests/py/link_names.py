#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The names of the links in the current network namespace (`ip -j link
show`), each preceded by a newline, so "\\nNAME\\n" can be searched for.

With --alias ALIAS, prints instead how many links have that ifalias (from
`ip -d -j link show`), e.g. --alias netbroker:uid=65534.
Used by tests/testutil.c (tu_link_names) and tests/test_hostile_user.c.
"""

import argparse
import json
import subprocess
import sys


def links(*opts):
    out = subprocess.run(["ip", *opts, "-j", "link", "show"], stdout=subprocess.PIPE, check=True,
                         text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alias", help="count the links with this ifalias instead")
    a = ap.parse_args()
    if a.alias is not None:
        print(sum(1 for link in links("-d") if link.get("ifalias") == a.alias))
    else:
        print("".join("\n" + link["ifname"] for link in links()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
