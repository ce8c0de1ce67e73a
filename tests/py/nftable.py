# SPDX-License-Identifier: LGPL-2.1-or-later
"""Shared by nft_owners.py and nft_summary.py (imported by them): it
reads netbroker's nftables table, `table netdev netbroker`. Run alone (no
arguments) it prints the table as `nft -j` does.

run(*argv) runs a program and returns its CompletedProcess, stdout as text
and stderr discarded; table_json() returns the CompletedProcess of
`nft -j list table netdev netbroker` (returncode not 0 when there is no
such table); table_text() the text listing of the same table.
"""

import subprocess

TABLE = ("table", "netdev", "netbroker")


def run(*argv):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def table_json():
    return run("nft", "-j", "list", *TABLE)


def table_text():
    return run("nft", "list", *TABLE).stdout


def main():
    import argparse
    import sys

    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    p = table_json()
    sys.stdout.write(p.stdout)
    return p.returncode


if __name__ == "__main__":
    raise SystemExit(main())
