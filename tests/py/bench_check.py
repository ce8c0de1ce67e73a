#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Runs every bench scenario at a small size (`netbroker-bench all --quick
--json --png`), so the bench never rots: it must run and exit 0, its JSON
parse, every scenario end without error and give finite positive ratios,
every scenario that has a floor (spawn, names, restart, roundtrip,
fairness: its Pings and its deletion) report it with a finite positive helper/floor ratio, in its own
report and in the run's "floors" and "floor_ratios", network report its
four methods (start and restart, each way: it checks the rulesets and
dnsmasqs itself), and the chart be a PNG. Timings are not checked. Prints
one line per scenario with its ratios and floors.

Argument: the netbroker-bench binary. Not root: exits 77 (ctest's
"skipped"), saying why. The helpers' log level is "warning",
so their audit lines (the baseline's thousands of Execs) stay out of the
log. Run by ctest (label bench-quick).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile


FLOORED = ("spawn", "names", "restart", "roundtrip", "fairness")


def positive(v):
    return v is not None and math.isfinite(v) and v > 0


def check_floors(d, name):
    floors = [f for f in d["floors"] if f["scenario"] == name]
    own = d["scenarios"][name]["floors"]
    assert len(own) == len(floors), "%s: %d floors, %d in the summary" % (
        name, len(own), len(floors))
    if name in FLOORED:
        assert floors, "%s: no floor" % name
    for f in floors:
        assert f["of"] in ("median", "p99"), f
        assert f["floor"]["runs"] > 0 and f["helper"]["runs"] > 0, f
        assert positive(f["ratio"]), "%s: %s: ratio %r" % (name, f["what"], f["ratio"])
    return floors


def check(d, png):
    runs = d["runs"]
    assert len(runs) >= 5, "only %d scenarios ran" % len(runs)
    for run in runs:
        name = run["label"]
        assert run["error"] is None, "%s failed: %s" % (name, run["error"])
        ratios = d["scenarios"][name]["ratios"]
        assert ratios, "%s: no ratios" % name
        assert all(positive(v) for v in ratios.values()), name
        lines = [s for s in d["summary"] if s["scenario"] == name]
        floors = check_floors(d, name)
        # fairness has no baseline, only its floor (the Ping without load).
        assert lines or floors, "%s: no summary ratio and no floor" % name
        assert all(s["ratio"] > 0 for s in lines), "%s: a summary ratio is not positive" % name
        print("%-10s %5.1f s  %s" % (name, run["elapsed_s"], ", ".join(
            ["%s %.3g" % (s["what"], s["ratio"]) for s in lines] +
            ["floor: %s%s %s/%s %.3g" % (f["what"], " p99" if f["of"] == "p99" else "",
                                         f["helper"]["method"], f["floor"]["method"], f["ratio"])
             for f in floors])))
    assert len(d["floor_ratios"]) == len(d["floors"]), "floor_ratios and floors differ"
    assert all(positive(v) for v in d["floor_ratios"].values()), "a floor ratio"
    fair = {r["method"] for r in d["scenarios"]["fairness"]["rows"]}
    assert fair == {"P0", "P1", "R1", "P2", "R2", "D0", "P3", "E1"}, \
        "fairness rows: %s" % sorted(fair)
    # The deletion is held against the kernel's own (D0), not only the Pings.
    held = {(f["helper"]["method"], f["floor"]["method"]) for f in d["floors"]
            if f["scenario"] == "fairness"}
    assert ("R2", "D0") in held, "fairness: no floor for the deletion: %s" % sorted(held)
    # Each load's Pings, the ensure's among them, are held against the quiet spells'.
    assert {("P1", "P0"), ("P2", "P0"), ("P3", "P0")} <= held, \
        "fairness: a load's Pings have no floor: %s" % sorted(held)
    net = {r["method"] for r in d["scenarios"]["network"]["rows"]}
    assert net == {"A", "B", "AR", "BR"}, "network rows: %s" % sorted(net)
    print("all --quick: %.1f s" % d["elapsed_s"])
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "the chart is not a PNG"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", help="path of netbroker-bench")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench-quick: skipped: needs root (the bench makes network namespaces and runs "
              "netbrokerd)")
        return 77
    env = dict(os.environ, NETBROKERD_LOG_LEVEL="warning")
    with tempfile.TemporaryDirectory() as tmp:
        png = os.path.join(tmp, "bench.png")
        p = subprocess.run([a.bench, "all", "--quick", "--json", "--png", png],
                           stdout=subprocess.PIPE, env=env, text=True)
        if p.returncode:
            print("netbroker-bench exited with status %d" % p.returncode)
            return 1
        try:
            check(json.loads(p.stdout), png)
        except (AssertionError, KeyError, TypeError, ValueError, OSError) as e:
            print("bench --quick: %r" % e)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
