#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The VLAN case tried from a real guest on a tagged link (issue 13).

Boots Debian 12's own kernel with a busybox initramfs (tests/guest/build.sh,
cached in --guest-dir) under QEMU (TCG) on an interface netbrokerd made
(guest-tap-exec: TapCreate, or MacvtapCreate with --link macvtap, QEMU on
the returned fd), in a private network namespace, and drives the guest's
/init (tests/guest/init.sh) step by step over its serial console while the
firewall changes on the host side.

Topology: namespace S holds the guest's interface and the peer's veth end
(tap: both in a bridge br0; macvtap: the macvtap, bridge mode, on that veth
end); namespace P holds the peer, peer0 with PEER_IP, and an nft netdev
ingress table on peer0 whose counters count what reaches the peer from the
guest: tagged frames of VLAN 10 by inner type (ARP, IPv4) and by source
MAC (the guest's, or the spoofed one), and any tagged frame at all. The
host has no 8021q, so the peer cannot have a VLAN interface: it only counts.

Phases (each counter read as a difference over the step):
  A  no-promisc + clean-traffic (netbrokerctl fw apply) for the guest's MAC
     and IP: the guest's plain ping of the peer is answered; the guest makes
     eth0.10 (its kernel has 8021q) and sends ARP and IPv4 from its own MAC
     and IP over the tag, then from a spoofed MAC: nothing tagged reaches
     the peer.
  B  the same plus a root group with one rule, from the guest: VLAN 10 from
     the guest's MAC, accept, priority -750 (after clean-traffic's MAC
     check at -800, before its final drop): the guest's tagged ARP and IPv4
     reach the peer, the spoofed MAC's still do not; ping still answered.
  C  the owner removed: the spoofed MAC's tagged frames reach the peer (so
     B's zero is the filter's doing, not a counter that cannot count).
The host side is also read with nft -j list ruleset in S: in A the owner's
final drop counted the tagged frames, in B the VLAN rule counted them.

Prints every step, what the guest said and what the peer counted, the
firewall rules' counters, the elapsed time, and "guest-vlan: PASS" or
"guest-vlan: FAIL" with each failed expectation; exit 1 on any failure,
or when anything needed is missing (said why; never a silent skip). Needs
root; exits 77 (skipped, saying why) without it, and when there is no guest
and tests/guest/build.sh may not download one (NB_GUEST_DOWNLOAD=1).

Arguments: --helper NETBROKERD --ctl NETBROKERCTL --tap-exec GUEST-TAP-EXEC
--build-script tests/guest/build.sh --guest-dir DIR [--link tap|macvtap]
[--timeout S] [--log FILE]
"""

import argparse
import ctypes
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time

GMAC = "52:54:00:4e:42:02"
SPOOFMAC = "52:54:00:66:66:66"
PEERMAC = "02:00:00:4e:42:01"
GUEST_IP, PEER_IP = "10.77.0.2", "10.77.0.1"
VPEER_IP = "10.77.10.1"  # routed over the tag; the guest's address there is GUEST_IP
VLAN_RULE_PRIORITY = -750
PR_SET_PDEATHSIG = 1

COUNTERS = ["plain_ip", "v10_arp", "v10_ip", "spoof_v10_arp", "spoof_v10_ip", "tagged_any"]


def run(*argv, check=True, ns=None, stdin=None):
    if ns:
        argv = ("ip", "netns", "exec", ns) + argv
    p = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if check and p.returncode:
        raise RuntimeError("%s: exit %d: %s%s" % (" ".join(argv), p.returncode, p.stdout,
                                                  p.stderr))
    return p


def peer_table(ifname):
    decl = "".join("  counter %s { }\n" % c for c in COUNTERS)
    return """table netdev nbgv {
%s  chain in {
    type filter hook ingress device "%s" priority 0; policy accept;
    ether saddr %s ether type ip counter name "plain_ip"
    ether saddr %s ether type 8021q vlan id 10 vlan type arp counter name "v10_arp"
    ether saddr %s ether type 8021q vlan id 10 vlan type ip counter name "v10_ip"
    ether saddr %s ether type 8021q vlan id 10 vlan type arp counter name "spoof_v10_arp"
    ether saddr %s ether type 8021q vlan id 10 vlan type ip counter name "spoof_v10_ip"
    ether type 8021q counter name "tagged_any"
  }
}
""" % (decl, ifname, GMAC, GMAC, GMAC, SPOOFMAC, SPOOFMAC)


def firewall(owner, vlan):
    text = ("owner %s replace\n"
            "filter no-promisc %s\n"
            "filter clean-traffic %s %s\n" % (owner, GMAC, GMAC, GUEST_IP))
    if vlan:
        text += ("group allow-vlan10 root\n"
                 "rule from accept vlan 10 ether-src %s priority %d comment \"guest VLAN 10\"\n"
                 % (GMAC, VLAN_RULE_PRIORITY))
    return text


class Guest:
    """QEMU's serial console, line by line, with a hard deadline."""

    def __init__(self, argv, ns, log, deadline):
        def pre():
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            os.setpgrp()
        self.p = subprocess.Popen(("ip", "netns", "exec", ns) + tuple(argv),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, bufsize=1,
                                  preexec_fn=pre)
        self.q = queue.Queue()
        self.log = log
        self.deadline = deadline
        threading.Thread(target=self.reader, daemon=True).start()

    def reader(self):
        for line in self.p.stdout:
            line = line.rstrip("\r\n")
            self.log.write(line + "\n")
            self.log.flush()
            self.q.put(line)
        self.q.put(None)

    def expect(self, prefix, limit):
        """The first line starting with prefix, within limit seconds (and the
        test's deadline); "NBG error" lines are failures."""
        end = min(time.monotonic() + limit, self.deadline)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise RuntimeError("no %r from the guest in time (see the console log)" % prefix)
            try:
                line = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise RuntimeError("QEMU exited (status %s) waiting for %r" %
                                   (self.p.wait(), prefix))
            if line.startswith("NBG error"):
                raise RuntimeError("the guest says: " + line)
            if line.startswith(prefix):
                return line

    def step(self, name, limit=90):
        """Run one of the guest's steps; its NBG lines (without "done")."""
        self.p.stdin.write(name + "\n")
        self.p.stdin.flush()
        said = []
        while True:
            line = self.expect("NBG ", limit)
            if line == "NBG done " + name:
                return said
            said.append(line)

    def close(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.p.wait()


def fields(line):
    return dict(w.split("=", 1) for w in line.split()[2:] if "=" in w)


class Test:
    def __init__(self, a):
        self.a = a
        tag = "%d" % os.getpid()
        self.ns, self.nsp = "nbgv-s" + tag, "nbgv-p" + tag
        self.ifname = "vnetg0" if a.link == "tap" else "mvtg0"
        self.failures = []
        self.start = time.monotonic()
        self.deadline = self.start + a.timeout
        self.guest = None

    def check(self, ok, what):
        print("  %s %s" % ("ok  " if ok else "FAIL", what))
        if not ok:
            self.failures.append(what)

    def ctl(self, *args, stdin=None):
        t = time.monotonic()
        out = run(self.a.ctl, "--spawn", self.a.helper, *args, ns=self.ns, stdin=stdin).stdout
        print("  %s  [netbrokerctl %.1f s, at %.1f s]" % (out.strip(), time.monotonic() - t,
                                                        time.monotonic() - self.start))

    def counters(self):
        j = json.loads(run("nft", "-j", "list", "counters", "table", "netdev", "nbgv",
                           ns=self.nsp).stdout)
        return {o["counter"]["name"]: o["counter"]["packets"]
                for o in j["nftables"] if "counter" in o}

    def fw_rules(self):
        """(comment, packets) of every rule of the owner's base chain from
        the guest, from nft -j list ruleset in S."""
        j = json.loads(run("nft", "-j", "list", "ruleset", ns=self.ns).stdout)
        out = []
        for o in j["nftables"]:
            r = o.get("rule")
            if not r or r["table"] != "netbroker" or r["chain"] != self.ifname + "/from":
                continue
            pk = [e["counter"]["packets"] for e in r["expr"] if "counter" in e]
            out.append((r.get("comment", ""), pk[0] if pk else None))
        return out

    def fw_packets(self, needle):
        return sum(p or 0 for c, p in self.fw_rules() if needle in c)

    def guest_step(self, name):
        before = self.counters()
        t = time.monotonic()
        said = self.guest.step(name)
        took = time.monotonic() - t
        time.sleep(0.5)  # the last frame through veth and bridge
        after = self.counters()
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in COUNTERS}
        for line in said:
            print("  guest: " + line)
        print("  peer counted: " + " ".join("%s=%d" % (k, delta[k]) for k in COUNTERS) +
              "  [guest %.1f s, at %.1f s]" % (took, time.monotonic() - self.start))
        return said, delta

    def sent(self, said, what):
        line = next((s for s in said if s.startswith("NBG " + what + " ")), None)
        f = fields(line) if line else {}
        arp, ip = int(f.get("arping_tx", 0)), int(f.get("ping_tx", 0))
        self.check(arp >= 3 and ip >= 3, "the guest sent tagged ARP and IPv4 (%s: arping %d, "
                   "ping %d frames)" % (what, arp, ip))

    def plain(self):
        said, delta = self.guest_step("plain")
        line = next((s for s in said if s.startswith("NBG plain")), "")
        self.check(fields(line).get("answered") == "3/3",
                   "the guest's plain ping of the peer is answered (%s)" %
                   fields(line).get("answered"))
        self.check(delta["plain_ip"] >= 3, "the peer saw the guest's pings untagged (%d)" %
                   delta["plain_ip"])

    def topology(self):
        run("ip", "netns", "add", self.ns)
        run("ip", "netns", "add", self.nsp)
        def s(*argv, **kw):
            return run(*argv, ns=self.ns, **kw)

        def p(*argv, **kw):
            return run(*argv, ns=self.nsp, **kw)

        s("ip", "link", "set", "lo", "up")
        s("ip", "link", "add", "up0", "type", "veth", "peer", "name", "peer0", "netns", self.nsp)
        s("ip", "link", "set", "up0", "up")
        if self.a.link == "tap":
            s("ip", "link", "add", "br0", "type", "bridge", "stp_state", "0",
              "mcast_snooping", "0")
            s("ip", "link", "set", "up0", "master", "br0")
            s("ip", "link", "set", "br0", "up")
        p("ip", "link", "set", "lo", "up")
        p("ip", "link", "set", "peer0", "address", PEERMAC)
        p("ip", "addr", "add", PEER_IP + "/24", "dev", "peer0")
        p("ip", "link", "set", "peer0", "up")
        p("nft", "-f", "-", stdin=peer_table("peer0"))

    def boot(self):
        g = self.a.guest_dir
        append = ("console=ttyS0 quiet panic=-1 nbg.ip=%s/24 nbg.peer=%s nbg.vpeer=%s "
                  "nbg.peermac=%s nbg.spoofmac=%s" %
                  (GUEST_IP, PEER_IP, VPEER_IP, PEERMAC, SPOOFMAC))
        qemu = ["qemu-system-x86_64", "-nodefaults", "-display", "none", "-serial", "stdio",
                "-no-reboot", "-m", "256", "-machine", "pc,accel=tcg",
                "-kernel", os.path.join(g, "vmlinuz"), "-initrd", os.path.join(g, "initrd.gz"),
                "-append", append,
                "-netdev", "tap,fd=@FD@,id=n0", "-device",
                "virtio-net-pci,netdev=n0,mac=" + GMAC]
        if self.a.link == "tap":
            link = ["tap", self.ifname]
        else:
            link = ["macvtap", self.ifname, "up0", GMAC]
        self.guest = Guest([self.a.tap_exec, self.a.helper] + link + ["--"] + qemu, self.ns,
                           self.log, self.deadline)
        for _ in range(100):
            if run("ip", "link", "show", self.ifname, ns=self.ns, check=False).returncode == 0:
                break
            if self.guest.p.poll() is not None:
                raise RuntimeError("guest-tap-exec exited (%d): see the console log" %
                                   self.guest.p.returncode)
            time.sleep(0.1)
        if self.a.link == "tap":
            run("ip", "link", "set", self.ifname, "master", "br0", ns=self.ns)
        run("ip", "link", "set", self.ifname, "up", ns=self.ns)
        line = self.guest.expect("NBG ready", 150)
        print("guest up after %.1f s: %s" % (time.monotonic() - self.start, line))

    def phases(self):
        print("phase A: no-promisc + clean-traffic for %s %s on %s %s" %
              (GMAC, GUEST_IP, self.a.link, self.ifname))
        self.ctl("fw", "apply", "-", stdin=firewall(self.ifname, False))
        self.plain()
        said, _ = self.guest_step("vlan")
        self.check(any(s.startswith("NBG vlan dev=eth0.10 ") and " id=10 " in s for s in said),
                   "the guest made eth0.10, VLAN 10 (its 8021q)")
        drop0 = self.fw_packets("out drop priority='1000'")
        said, delta = self.guest_step("send")
        self.sent(said, "send")
        self.check(delta["v10_arp"] == 0 and delta["v10_ip"] == 0 and delta["tagged_any"] == 0,
                   "clean-traffic: nothing tagged from the guest reaches the peer")
        drop1 = self.fw_packets("out drop priority='1000'")
        self.check(drop1 - drop0 >= 6, "nft: the owner's final drop counted the tagged frames "
                   "(%d)" % (drop1 - drop0))
        said, delta = self.guest_step("spoof")
        self.sent(said, "spoof")
        self.check(delta["spoof_v10_arp"] == 0 and delta["spoof_v10_ip"] == 0 and
                   delta["tagged_any"] == 0,
                   "clean-traffic: nothing tagged from the spoofed MAC reaches the peer")

        print("phase B: the same + VLAN 10 from %s, accept, priority %d" %
              (GMAC, VLAN_RULE_PRIORITY))
        self.ctl("fw", "apply", "-", stdin=firewall(self.ifname, True))
        self.plain()
        v0 = self.fw_packets("vlanid='10'")
        said, delta = self.guest_step("send")
        self.sent(said, "send")
        self.check(delta["v10_arp"] > 0, "VLAN 10 allowed: the guest's tagged ARP reaches the "
                   "peer (%d)" % delta["v10_arp"])
        self.check(delta["v10_ip"] > 0, "VLAN 10 allowed: the guest's tagged IPv4 reaches the "
                   "peer (%d)" % delta["v10_ip"])
        v1 = self.fw_packets("vlanid='10'")
        self.check(v1 - v0 >= 6, "nft: the VLAN 10 rule counted them (%d)" % (v1 - v0))
        said, delta = self.guest_step("spoof")
        self.sent(said, "spoof")
        self.check(delta["spoof_v10_arp"] == 0 and delta["spoof_v10_ip"] == 0 and
                   delta["tagged_any"] == 0,
                   "VLAN 10 allowed: nothing tagged from the spoofed MAC reaches the peer")

        print("phase C: no filter (fw remove %s)" % self.ifname)
        self.ctl("fw", "remove", self.ifname)
        said, delta = self.guest_step("spoof")
        self.sent(said, "spoof")
        self.check(delta["spoof_v10_arp"] > 0 and delta["spoof_v10_ip"] > 0,
                   "no filter: the spoofed MAC's tagged frames reach the peer (the counters "
                   "count; arp %d, ipv4 %d)" % (delta["spoof_v10_arp"], delta["spoof_v10_ip"]))
        self.guest.p.stdin.write("off\n")
        self.guest.p.stdin.flush()
        try:
            self.guest.p.wait(timeout=max(1, min(30, self.deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            self.check(False, "the guest powered off when told to")

    def close(self):
        if self.guest:
            self.guest.close()
        for ns in (self.ns, self.nsp):
            run("ip", "netns", "del", ns, check=False)


def missing(a):
    for prog in ("qemu-system-x86_64", "nft", "ip"):
        if not shutil.which(prog):
            return "%s is not installed (scripts/deps.sh installs it)" % prog
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing: no taps on this host"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helper", required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--tap-exec", required=True)
    ap.add_argument("--build-script", required=True)
    ap.add_argument("--guest-dir", required=True)
    ap.add_argument("--link", choices=["tap", "macvtap"], default="tap")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--log", help="the guest's console (default: GUEST_DIR/console-LINK.log)")
    a = ap.parse_args()
    for k in ("helper", "ctl", "tap_exec", "build_script", "guest_dir"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    if os.geteuid() != 0:
        print("guest-vlan: skipped: needs root (network namespaces, nftables, the helper)")
        return 77  # ctest's SKIP_RETURN_CODE
    why = missing(a)
    if why:
        print("guest-vlan: FAIL: " + why)
        return 1
    t0 = time.monotonic()
    p = run("bash", a.build_script, a.guest_dir, check=False)
    print(p.stdout.strip())
    if p.returncode == 77:
        # Offline (a packager's build): no guest, and no leave to download one.
        print("guest-vlan: " + p.stderr.strip())
        return 77
    if p.returncode:
        print("guest-vlan: FAIL: the guest could not be built: " + p.stderr.strip())
        return 1
    print("guest ready in %.1f s" % (time.monotonic() - t0))
    t = Test(a)
    log_path = a.log or os.path.join(a.guest_dir, "console-%s.log" % a.link)
    with open(log_path, "w") as t.log:
        try:
            t.topology()
            t.boot()
            t.phases()
        except RuntimeError as e:
            t.failures.append(str(e))
            print("  FAIL " + str(e))
        finally:
            t.close()
    print("console log: " + log_path)
    print("elapsed %.1f s (build %.1f s)" % (time.monotonic() - t0, t.start - t0))
    if t.failures:
        print("guest-vlan: FAIL (%d): %s" % (len(t.failures), "; ".join(t.failures)))
        return 1
    print("guest-vlan: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
