#!/usr/bin/env python3
"""Runs every bench scenario at a small size (`netbroker-bench all --quick
--json --png`), so the bench never rots: it must run and exit 0, its JSON
parse, every scenario end without error and give finite positive ratios,
and the chart be a PNG. Timings are not checked. Prints one line per
scenario with its ratios.

Argument: the netbroker-bench binary. The helpers' log level is "warning",
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


def check(d, png):
    runs = d["runs"]
    assert len(runs) >= 5, "only %d scenarios ran" % len(runs)
    for run in runs:
        name = run["label"]
        assert run["error"] is None, "%s failed: %s" % (name, run["error"])
        ratios = d["scenarios"][name]["ratios"]
        assert ratios, "%s: no ratios" % name
        assert all(v is not None and math.isfinite(v) and v > 0 for v in ratios.values()), name
        lines = [s for s in d["summary"] if s["scenario"] == name]
        assert lines and all(s["ratio"] > 0 for s in lines), "%s: no summary ratio" % name
        print("%-10s %5.1f s  %s" % (name, run["elapsed_s"], ", ".join(
            "%s %.3g" % (s["what"], s["ratio"]) for s in lines)))
    print("all --quick: %.1f s" % d["elapsed_s"])
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", "the chart is not a PNG"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench", help="path of netbroker-bench")
    a = ap.parse_args()
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
