#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks the systemd units as systemd would, offline (no systemd as PID 1
needed): `systemd-analyze verify` of netbrokerd.service and netbrokerd.socket,
and `systemd-analyze security --offline=yes` of the service, whose overall
exposure must be at or below that of systemd-networkd.service measured the
same way on this machine (both printed), less the findings the design takes
on purpose: CAP_SETUID and CAP_SETGID (0.3) and CAP_KILL (0.1) in the
bounding set, with which an Exec child of a caller other than root becomes
that caller instead of running as uid 0, and is ended at its timeout
(helper/child_start.h). The service is the configured one
with ExecStart= pointing at the helper just built, so verify finds it.

Arguments: --service FILE (the configured netbrokerd.service), --socket FILE,
--helper FILE (the built netbrokerd), --reference UNIT (default: the
installed systemd-networkd.service). Run by ctest (label lint).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

OVERALL = re.compile(r"Overall exposure level for \S+: ([0-9.]+)")
# The findings taken on purpose, and their exposure as the report prints it.
ON_PURPOSE = re.compile(r"^(\S+) CapabilityBoundingSet=~CAP_(?:SET\(UID\|GID\|PCAP\)|KILL) .* "
                        r"([0-9.]+)\s*$", re.M)


def exposure(unit):
    """The overall exposure systemd-analyze gives unit (a path), as a float."""
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", unit],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    m = OVERALL.search(p.stdout)
    if not m:
        sys.exit("systemd-analyze security %s: no overall level in:\n%s" % (unit, p.stdout))
    return float(m.group(1)), p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--service", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--helper", required=True)
    ap.add_argument("--reference", default="/lib/systemd/system/systemd-networkd.service")
    a = ap.parse_args()
    if not shutil.which("systemd-analyze"):
        sys.exit("systemd-analyze is missing (package systemd)")
    with tempfile.TemporaryDirectory() as d:
        with open(a.service) as f:
            text = f.read()
        text = re.sub(r"(?m)^ExecStart=.*$", "ExecStart=" + os.path.abspath(a.helper), text)
        service = os.path.join(d, "netbrokerd.service")
        with open(service, "w") as f:
            f.write(text)
        shutil.copy(a.socket, os.path.join(d, "netbrokerd.socket"))
        p = subprocess.run(["systemd-analyze", "verify", "--man=no", service,
                            os.path.join(d, "netbrokerd.socket")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # verify also reports units of the host that it loads on the way;
        # only lines about ours count.
        ours = [ln for ln in p.stdout.splitlines() if "netbrokerd" in ln]
        if p.returncode or ours:
            print("systemd-analyze verify: exit %d\n%s" % (p.returncode, p.stdout))
            return 1
        mine, report = exposure(service)
        ref, _ = exposure(a.reference)
    purpose = sum(float(m.group(2)) for m in ON_PURPOSE.finditer(report)
                  if m.group(1) != "\u2713")
    print("exposure: netbrokerd.service %.1f (%.1f of it CAP_SETUID/CAP_SETGID/CAP_KILL, on "
          "purpose), %s %.1f" % (mine, purpose, os.path.basename(a.reference), ref))
    if mine - purpose > ref + 1e-9:
        print(report)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
