#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every device, nftables object and qdisc in the current network
namespace, one per line, sorted, so two snapshots compare as strings.

Handles are part of a line, so an object deleted and made again shows as a
change. netbroker's own table (netdev netbroker) is made at its first apply
and stays, empty, after its last owner is removed: it is not listed, but
anything in it is. Its generation mark (table arp netbroker_gen, one chain
"generation" whose comment names the helper's last commit, and the set
"owners", the summary of the owners written with it) is left out too: it
changes with every commit by design, and an owner left behind shows as its
chains in netdev netbroker. No arguments. Used by
tests/test_load.c.
"""

import argparse
import json
import subprocess
import sys


def run(*argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, check=True, text=True).stdout


def main():
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    out = []
    for link in json.loads(run("ip", "-j", "link", "show")):
        out.append("link %s" % link["ifname"])
    for o in json.loads(run("nft", "-j", "list", "ruleset"))["nftables"]:
        for k, v in o.items():
            if k == "table" and (v["family"], v["name"]) == ("netdev", "netbroker"):
                continue
            if (v.get("family"), v.get("table", v.get("name"))) == ("arp", "netbroker_gen") and \
                    k in ("table", "chain", "set") and \
                    v.get("name") in ("netbroker_gen", "generation", "owners"):
                continue
            if k != "metainfo":
                out.append("nft %s %s %s %s %s" % (k, v.get("family"), v.get("table", ""),
                                                   v.get("name", v.get("chain", "")),
                                                   v.get("handle", "")))
    for q in json.loads(run("tc", "-j", "qdisc", "show") or "[]"):
        out.append("qdisc %s %s %s %s" % (q.get("dev"), q.get("kind"), q.get("handle"),
                                          q.get("parent", "root")))
    print("\n".join(sorted(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
