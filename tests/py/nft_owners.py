#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Per owner in netbroker's nftables table: its chains and rules (from
`nft -j`) and the hashes in its base chains' comments (from the text
listing: nft 1.0's JSON leaves chain comments out).

Prints one line per owner, sorted: "OWNER CHAINS RULES HASHES" (HASHES
comma-separated, "-" when none); nothing when there is no table.
No arguments. Used by tests/test_crash.c.
"""

import argparse
import json
import re
import sys

from nftable import table_json, table_text


def main():
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    p = table_json()
    if p.returncode:
        return 0
    own = {}

    def get(chain):
        return own.setdefault(chain.split("/")[0], [0, 0, set()])

    for o in json.loads(p.stdout)["nftables"]:
        if "chain" in o:
            get(o["chain"]["name"])[0] += 1
        elif "rule" in o:
            get(o["rule"]["chain"])[1] += 1
    cur = None
    for line in table_text().splitlines():
        s = line.strip()
        m = re.match(r"chain (\S+) \{$", s)
        if m:
            cur = m.group(1)
        m = re.match(r'comment "netbroker (\S+) ', s)
        if m and cur:
            get(cur)[2].add(m.group(1))
    for k in sorted(own):
        c, r, h = own[k]
        print(k, c, r, ",".join(sorted(h)) or "-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
