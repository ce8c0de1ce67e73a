#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Measures what a stalled log reader does to the helper's clients: the
worst Ping (wall time of `netbrokerctl ping`, its process start included)
while the reader of the helper's stderr stops reading for STALL seconds
and clients make the helper log (refused LinkDeletes: an audit line each,
and debug lines for every request at log_level = debug).

The helper's stderr is a pipe of one page (F_SETPIPE_SZ 4096) read by
this script, which stops reading for the stall and then drains it. With
a blocking log write on the loop, every Ping waits for the reader; with
the log thread, lines are dropped and counted instead (log_lines_dropped).

Usage, as root, in a network namespace of its own (the helper sweeps the
namespace it starts in):

  unshare -n python3 tests/py/log_stall.py BUILD_DIR [--stall S] [--helper PATH]

Prints the worst and median Ping during the stall and after it, the
helper's log_lines_dropped, and the lines of its log that say what was
dropped.
"""

import argparse
import fcntl
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

F_SETPIPE_SZ = 1031


def ping_ms(ctl, env, failed):
    """Wall time of one `netbrokerctl ping`; a failed one is counted in
    failed[0] and its time kept (what its caller waited)."""
    t0 = time.monotonic()
    p = subprocess.run([ctl, "ping"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode:
        failed[0] += 1
        failed[1] = p.stderr.strip()
    return (time.monotonic() - t0) * 1000.0


def flood(ctl, env, stop):
    """Refused LinkDeletes (a template names nothing): a log line each."""
    n = 0
    while not stop.is_set():
        subprocess.run([ctl, "link", "delete", "f%%d%d" % n], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        n += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", metavar="BUILD_DIR")
    ap.add_argument("--stall", type=float, default=3.0, metavar="S")
    ap.add_argument("--helper", metavar="PATH", help="default: BUILD_DIR/netbrokerd")
    a = ap.parse_args()
    helper = a.helper or os.path.join(a.build, "netbrokerd")
    ctl = os.path.join(a.build, "netbrokerctl")
    tmp = tempfile.mkdtemp(prefix="nblogstall-")
    sock = os.path.join(tmp, "sock")
    conf = os.path.join(tmp, "conf")
    with open(conf, "w") as f:
        f.write("log_level = debug\nprogram_dir = %s\n" % tmp)
    rfd, wfd = os.pipe()
    fcntl.fcntl(wfd, F_SETPIPE_SZ, 4096)
    env = dict(os.environ, NETBROKER_SOCKET=sock)
    env.pop("NETBROKERD_LOG_LEVEL", None)
    p = subprocess.Popen([helper, "--listen", sock, "--config", conf], stderr=wfd,
                         stdout=subprocess.DEVNULL, env=env)
    os.close(wfd)
    log = bytearray()
    reading = threading.Event()
    reading.set()

    def reader():
        while True:
            reading.wait()
            b = os.read(rfd, 65536)
            if not b:
                return
            log.extend(b)

    rt = threading.Thread(target=reader, daemon=True)
    rt.start()
    for _ in range(500):
        if os.path.exists(sock) and subprocess.run(
                [ctl, "ping"], env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            break
        time.sleep(0.02)
    stop = threading.Event()
    ft = threading.Thread(target=flood, args=(ctl, env, stop), daemon=True)
    reading.clear()
    ft.start()
    stalled, after = [], []
    failed = [0, ""]
    # The reader resumes on time, whatever a Ping under way waits for.
    threading.Timer(a.stall, reading.set).start()
    t_end = time.monotonic() + a.stall
    while time.monotonic() < t_end:
        stalled.append(ping_ms(ctl, env, failed))
        time.sleep(0.02)
    reading.wait()
    t_end = time.monotonic() + 1.0
    while time.monotonic() < t_end:
        after.append(ping_ms(ctl, env, failed))
        time.sleep(0.02)
    stop.set()
    ft.join()
    stats = subprocess.run([ctl, "stats"], env=env, capture_output=True, text=True).stdout
    dropped = [ln.strip() for ln in stats.splitlines() if "log_" in ln and "dropped" in ln]
    p.terminate()
    p.wait()
    rt.join(5)
    text = log.decode(errors="replace")
    notes = [ln for ln in text.splitlines() if "were dropped" in ln or "were lost" in ln]
    print("helper %s, stall %.1f s" % (helper, a.stall))
    print("pings while stalled: %d, worst %.1f ms, median %.1f ms" %
          (len(stalled), max(stalled), statistics.median(stalled)))
    print("pings after: %d, worst %.1f ms, median %.1f ms" %
          (len(after), max(after), statistics.median(after)))
    print("pings that failed: %d%s" % (failed[0], (" (" + failed[1] + ")") if failed[0] else ""))
    print("counters: %s" % (", ".join(dropped) or "(none)"))
    print("log: %d lines, %d saying what was dropped%s" %
          (text.count("\n"), len(notes), (": " + notes[0]) if notes else ""))
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
