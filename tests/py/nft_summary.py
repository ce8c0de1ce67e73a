#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""One line per chain of netbroker's nftables table, in the kernel's order,
each line starting with a newline: NAME, for a base chain its hook, type,
prio, policy, comment and device, then its rule count and its rules as nft
prints them, without the comment each rule carries (its text in libvirt's
terms, derived from the model and tested on its own). The rule count comes
from the JSON, the rules from the text;
the two must agree (exit 1 when they do not). Prints "(no table)" when
there is no table.

No arguments. Used by tests/test_firewall.c.
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
        print("(no table)")
        return 0
    j = json.loads(p.stdout)["nftables"]
    info, body, cur = {}, {}, None
    for line in table_text().splitlines():
        s = line.strip()
        m = re.match(r"chain (\S+) \{$", s)
        if m:
            cur = m.group(1)
            body[cur], info[cur] = [], ""
            continue
        if cur is None or s == "":
            continue
        if s == "}":
            cur = None
            continue
        m = re.match(r'comment "(.*)"$', s)
        if m:
            info[cur] += ' comment="%s"' % m.group(1)
            continue
        m = re.search(r'hook \S+ device "([^"]+)"', s)
        if m:
            info[cur] += " dev=%s" % m.group(1)
            continue
        body[cur].append(re.sub(r' comment ".*"$', "", s))
    count = {}
    for o in j:
        if "rule" in o:
            count[o["rule"]["chain"]] = count.get(o["rule"]["chain"], 0) + 1
    for o in j:
        if "chain" not in o:
            continue
        c = o["chain"]
        n = c["name"]
        hook = ""
        if "hook" in c:
            hook = " hook=%s type=%s prio=%s policy=%s" % (c["hook"], c["type"], c["prio"],
                                                           c["policy"])
        if count.get(n, 0) != len(body.get(n, [])):
            sys.exit("json and text disagree on %s" % n)
        print("\n%s%s%s rules=%d: %s" % (n, hook, info.get(n, ""), count.get(n, 0),
                                         "; ".join(body.get(n, []))), end="")
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
