#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The nwfilter differential test (issue 13): libvirt's own rules against
netbroker's, frame for frame, for each of libvirt's 24 stock filters and
the clean-traffic + no-promisc composition.

Two identical network namespaces, each a bridge with two ports: the guest
port vnet0 (a veth whose other end, gst0, is the guest) and a peer port
(a veth whose other end, peer0, is the peer). Side A runs libvirtd (Debian
12's, from scripts/deps.sh) inside its namespace, in a private mount
namespace with tmpfs over /run and /var and only the nwfilter driver
loaded, so nothing of the host's libvirt is seen or disturbed; each filter
is instantiated with `virsh nwfilter-binding-create` on vnet0 and libvirt
writes its rules with ebtables (ebtables-nft on Debian 12). Side B
applies netbroker's through netbrokerd (nwfilter-nb-apply: FirewallApply
of nb_fw_add_filter() on vnet0). The same frames (nwfilter_frames.py) are
written on gst0 (from the guest) and on peer0 (to the guest) of both sides
and watched for on the other end with AF_PACKET; every verdict (delivered
or not) is compared.

Prints, per filter, the frames sent and the mismatches, with the first few
mismatching frames; exits 1 when there is any mismatch or a filter could
not be set up on either side. Needs root.

Arguments: --helper NETBROKERD --apply NWFILTER-NB-APPLY [--filter NAME...]
[--status FILE] [--show N] [--keep]
"""

import argparse
import ctypes
import glob
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import nwfilter_frames as nf

HERE = os.path.dirname(os.path.abspath(__file__))
OWN_XML = os.path.join(os.path.dirname(HERE), "nwfilter")
STOCK_XML = "/etc/libvirt/nwfilter"
DRIVERS = (glob.glob("/usr/lib/*/libvirt/connection-driver") or
           ["/usr/lib/x86_64-linux-gnu/libvirt/connection-driver"])[0]  # Debian's multiarch
COMPOSITION = "clean-traffic+no-promisc"
# Filters of tests/nwfilter/ that are not stock ones and not COMPOSITION's
# parts: a field no stock filter uses (gratuitous ARP and its negation).
CUSTOM = ["nb-gratuitous-arp"]
STOCK = ["allow-arp", "allow-dhcp", "allow-dhcp-server", "allow-dhcpv6", "allow-dhcpv6-server",
         "allow-incoming-ipv4", "allow-incoming-ipv6", "allow-ipv4", "allow-ipv6",
         "clean-traffic", "clean-traffic-gateway", "no-arp-ip-spoofing", "no-arp-mac-spoofing",
         "no-arp-spoofing", "no-ip-multicast", "no-ip-spoofing", "no-ipv6-multicast",
         "no-ipv6-spoofing", "no-mac-broadcast", "no-mac-spoofing", "no-other-l2-traffic",
         "no-other-rarp-traffic", "qemu-announce-self", "qemu-announce-self-rarp"]
ETH_P_ALL = 3
PACKET_OUTGOING = 4
SO_RCVBUFFORCE = 33
CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
CHUNK = 150
QUIET = 0.03

LIBVIRTD_SH = r"""
set -e
mount --make-rprivate /
mount -t sysfs sysfs /sys  # this network namespace's, as ip netns exec does
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /var
ln -s /run /var/run
mkdir -p /var/lib /var/cache /var/log /run/libvirt
mount --bind "$W/drivers" "$DRIVERS"
mount --bind "$W/xml" /etc/libvirt/nwfilter
exec libvirtd -f "$W/libvirtd.conf" -p /run/libvirtd.pid
"""


def run(*argv, check=True, quiet=False):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode:
        raise RuntimeError("%s: exit %d: %s%s" % (" ".join(argv), p.returncode, p.stdout,
                                                  p.stderr))
    return p


class Side:
    """One namespace with the bridge, its peer port and one guest port per
    filter (vnetK, guest end gstK: libvirt takes seconds to remove a
    binding, so each filter gets a port of its own), and their far ends."""

    def __init__(self, name, ks):
        self.ns = name
        run("ip", "netns", "add", name)
        x = ["ip", "netns", "exec", name]
        run(*x, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1")
        # br_netfilter, where loaded, would send bridged IP through
        # iptables: neither side has rules there, nor should it run them.
        for t in ("iptables", "ip6tables", "arptables"):
            run(*x, "sysctl", "-qw", "net.bridge.bridge-nf-call-%s=0" % t, check=False)
        ports = ["vnet%d" % k for k in ks] + ["peerp"]
        ends = ["gst%d" % k for k in ks] + ["peer0"]
        cmds = ["link add br0 type bridge stp_state 0 forward_delay 0 mcast_snooping 0"]
        cmds += ["link add %s type veth peer name %s" % pe for pe in zip(ports, ends)]
        cmds += ["link set %s master br0" % p for p in ports]
        cmds += ["link set %s up" % d for d in ["br0"] + ports + ends]
        batch(["ip", "-n", name], cmds)
        # no learning: every unicast frame floods, whatever was sent before
        batch(["bridge", "-n", name], ["link set dev %s learning off" % p for p in ports])
        self.tx, self.rx = {}, {}
        self.use(ks[0])

    def use(self, k):
        """Watch guest port k (and the peer): sockets on gstK and peer0."""
        self.close_sockets()
        with netns(self.ns):
            for end, gst in (("peer", "peer0"), ("guest", "gst%d" % k)):
                t = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
                t.bind((gst, 0))
                r = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                r.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 16 << 20)
                r.bind((gst, ETH_P_ALL))
                r.setblocking(False)
                self.tx[end], self.rx[end] = t, r

    def close_sockets(self):
        for s in list(self.tx.values()) + list(self.rx.values()):
            s.close()
        self.tx, self.rx = {}, {}

    def close(self):
        self.close_sockets()
        run("ip", "netns", "del", self.ns, check=False)


def batch(tool, cmds):
    p = subprocess.run(tool + ["-batch", "-"], input="\n".join(cmds) + "\n", text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode:
        raise RuntimeError("%s: %s" % (" ".join(tool), p.stdout))


class netns:
    """Context: this thread in network namespace `name` (sockets made
    there stay there)."""

    libc = ctypes.CDLL(None, use_errno=True)

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.old = os.open("/proc/self/ns/net", os.O_RDONLY)
        fd = os.open("/run/netns/" + self.name, os.O_RDONLY)
        try:
            if self.libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns " + self.name)
        finally:
            os.close(fd)

    def __exit__(self, *exc):
        self.libc.setns(self.old, CLONE_NEWNET)
        os.close(self.old)


def in_netns_dying_with_parent(name):
    """For Popen's preexec_fn: the child enters network namespace `name`
    and gets SIGTERM when the test dies (a ctest timeout kills it without
    its finally), so no libvirtd outlives it. No `ip netns exec`: it forks,
    and the signal would go to it."""
    def pre():
        libc = ctypes.CDLL(None)
        fd = os.open("/run/netns/" + name, os.O_RDONLY)
        if libc.setns(fd, CLONE_NEWNET) != 0 or libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM):
            os._exit(127)
        os.close(fd)
    return pre


class Libvirt:
    """libvirtd in side A's namespace, alone in its own mount namespace."""

    def __init__(self, side, work):
        self.side, self.work = side, work
        os.makedirs(work + "/drivers")
        shutil.copy(DRIVERS + "/libvirt_driver_nwfilter.so", work + "/drivers/")
        os.makedirs(work + "/xml")
        for d in (STOCK_XML, OWN_XML):
            for f in os.listdir(d):
                if f.endswith(".xml"):
                    shutil.copy(os.path.join(d, f), work + "/xml/")
        os.makedirs(work + "/sock")
        with open(work + "/libvirtd.conf", "w") as f:
            f.write('unix_sock_dir = "%s/sock"\n' % work)
            f.write('log_outputs = "3:file:%s/libvirtd.log"\n' % work)
        env = dict(os.environ, W=work, DRIVERS=DRIVERS)
        self.proc = subprocess.Popen(["unshare", "-m", "sh", "-c", LIBVIRTD_SH], env=env,
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=open(work + "/libvirtd.err", "w"),
                                     preexec_fn=in_netns_dying_with_parent(side.ns))
        self.uri = "nwfilter:///system?socket=%s/sock/libvirt-sock" % work
        for _ in range(100):
            if self.proc.poll() is not None:
                raise RuntimeError("libvirtd exited: " + open(work + "/libvirtd.err").read())
            if run("virsh", "-q", "-c", self.uri, "nwfilter-list", check=False).returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("libvirtd did not answer")

    def bind_all(self, jobs, done):
        """bind() each (k, name, variables) of jobs in turn, in a thread of
        its own; done[k] gets the rules or the RuntimeError."""
        def work():
            for k, name, variables in jobs:
                try:
                    done[k] = self.bind("vnet%d" % k, name, variables)
                except Exception as e:  # the main thread reports it
                    done[k] = RuntimeError(str(e))
        t = threading.Thread(target=work, daemon=True)
        t.start()
        return t

    def bind(self, port, name, variables):
        """Instantiate `name` on port; return libvirt's rules as
        ebtables-save prints them."""
        ref = name.replace("+", "-")
        params = "".join("    <parameter name='%s' value='%s'/>\n" % (k, v)
                         for k, vals in sorted(variables.items()) for v in vals)
        xml = ("<filterbinding>\n  <owner><name>fwdiff</name>"
               "<uuid>d5c2c3f4-0000-4000-8000-000000000001</uuid></owner>\n"
               "  <portdev name='%s'/>\n  <mac address='%s'/>\n"
               "  <filterref filter='%s'>\n%s  </filterref>\n</filterbinding>\n"
               % (port, nf.GUEST_MAC, ref, params))
        path = "%s/binding-%s.xml" % (self.work, port)
        with open(path, "w") as f:
            f.write(xml)
        run("virsh", "-q", "-c", self.uri, "nwfilter-binding-create", path)
        rules = run("ip", "netns", "exec", self.side.ns, "ebtables-save", "-t", "nat").stdout
        mine = [ln for ln in rules.splitlines()
                if re.search(r"-%s( |-|$)" % port, ln) and not ln.startswith("#")]
        if not [ln for ln in mine if ln.startswith("-A P")]:
            raise RuntimeError("libvirt installed no rules for %s:\n%s" % (name, rules))
        return "\n".join(mine)

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def netbroker_apply(side, args, port, name, variables):
    """Side B: netbroker's rules for `name` on port; None, or why not."""
    argv = ["ip", "netns", "exec", side.ns, args.apply, args.helper, port, name]
    argv += ["%s=%s" % (k, ",".join(v)) for k, v in sorted(variables.items())]
    p = run(*argv, check=False)
    if p.returncode == 4:
        return p.stdout.strip()
    if p.returncode:
        return "netbroker refused it: " + (p.stderr.strip() or p.stdout.strip())
    return None


def drain(sides, got, deadline_quiet):
    socks = {}
    for si, s in enumerate(sides):
        for end, r in s.rx.items():
            socks[r.fileno()] = (si, end, r)
    while True:
        ready, _, _ = select.select(list(socks), [], [], deadline_quiet)
        if not ready:
            return
        for fd in ready:
            si, end, r = socks[fd]
            while True:
                try:
                    data, addr = r.recvfrom(65535)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                ident = nf.ident_of(data)
                if ident is not None:
                    got[si].add((end, ident))


def send_corpus(sides, frames):
    """Which frames each side delivered: a set of identifiers per side."""
    got = [set() for _ in sides]
    for start in range(0, len(frames), CHUNK):
        for ident in range(start, min(start + CHUNK, len(frames))):
            direction, data, _ = frames[ident]
            end = "guest" if direction == "from-guest" else "peer"
            for s in sides:
                s.tx[end].send(data)
        drain(sides, got, QUIET)
    drain(sides, got, 5 * QUIET)  # stragglers of the last chunk on a loaded machine
    out = []
    for g in got:
        out.append({i for end, i in g
                    if end == ("peer" if frames[i][0] == "from-guest" else "guest")})
    return out


def control(sides):
    """Without any rules, both topologies deliver every frame of the whole
    corpus: a frame that one of them drops by itself would agree by
    accident."""
    frames = nf.corpus(set(nf.FAMILIES))
    base = nf.corpus({"base"})
    for _ in range(100):  # until the bridge ports forward
        if all(len(g) == len(base) for g in send_corpus(sides, base)):
            break
        time.sleep(0.05)
    else:
        raise RuntimeError("the bridges do not forward every base frame")
    for side, got in zip(sides, send_corpus(sides, frames)):
        lost = [frames[i][2] for i in range(len(frames)) if i not in got]
        if lost:
            raise RuntimeError("%s delivers %d of %d frames without rules; lost e.g. %s"
                               % (side.ns, len(got), len(frames), "; ".join(lost[:3])))


def variables_for(name, used):
    v = {k: nf.VARS[k] for k in used if k in nf.VARS}
    if "DHCPSERVER" in used:
        v["DHCPSERVER"] = nf.DHCPSERVER_V6 if "dhcpv6" in name else nf.DHCPSERVER_V4
    return v


def filter_plan(name, xml_dir):
    """The families of name's corpus and the variables its binding gets."""
    fams, used = set(), set()
    for part in name.split("+"):
        f, u = nf.filter_fields(part, [xml_dir])
        fams |= f
        used |= u
    return fams, variables_for(name, used)


def check_filter(k, name, sides, rules, fams, variables, args, log):
    port = "vnet%d" % k
    if isinstance(rules, RuntimeError):
        return {"name": name, "frames": 0, "mismatches": None, "why": "libvirt: %s" % rules}
    log.write("== %s (%s)\n%s\n" % (name, ", ".join(sorted(fams)), rules))
    why = netbroker_apply(sides[1], args, port, name, variables)
    if why:
        return {"name": name, "frames": 0, "mismatches": None, "why": why}
    for s in sides:
        s.use(k)
    frames = nf.corpus(fams)
    a, b = send_corpus(sides, frames)
    diff = sorted(a ^ b)
    known = [i for i in diff if documented(frames[i][2], i in a, i in b)]
    bad = [i for i in diff if i not in known]
    lines = ["  %s: libvirt %s, netbroker %s" % (frames[i][2], "passes" if i in a else "drops",
                                                 "passes" if i in b else "drops") for i in bad]
    known_lines = ["  documented: %s: libvirt passes, netbroker drops" % frames[i][2]
                   for i in known]
    return {"name": name, "frames": len(frames), "mismatches": len(bad), "lines": lines,
            "known": len(known), "known_lines": known_lines, "passed": len(a), "rules": rules}


# The one difference netbroker(7) documents and this test accepts: nft reads
# ARP's IPs at the fixed offsets of 6-byte hardware addresses, ebt_arp behind
# hardware addresses of any length. Accepted only in the direction where
# netbroker is the stricter (libvirt passes, netbroker drops): an ARP packet
# whose hardware address length is not 6, which no Ethernet receiver takes
# (Linux's arp_rcv drops it). The other direction (a negated rule letting it
# through) stays a mismatch.
ARP_ODD_HLEN = re.compile(r"\bARP\b.* hlen (\d+)\b")


def documented(desc, libvirt_passes, netbroker_passes):
    m = ARP_ODD_HLEN.search(desc)
    return bool(m) and int(m.group(1)) != 6 and libvirt_passes and not netbroker_passes


def report(results, show, elapsed):
    out, total_f, total_m, total_k, broken = [], 0, 0, 0, 0
    for r in results:
        if r["mismatches"] is None:
            out.append("filter %s: %s" % (r["name"], r["why"]))
            broken += 1
            continue
        total_f += r["frames"]
        total_m += r["mismatches"]
        total_k += r["known"]
        out.append("filter %s: %d frames (libvirt passes %d), %d mismatches%s"
                   % (r["name"], r["frames"], r["passed"], r["mismatches"],
                      ", %d documented differences" % r["known"] if r["known"] else ""))
        out.extend(r["known_lines"][:show])
        out.extend(r["lines"][:show])
        if len(r["lines"]) > show:
            out.append("  ... and %d more" % (len(r["lines"]) - show))
        if r["mismatches"]:
            out.append("  libvirt's rules (ebtables-save):")
            out.extend("    " + ln for ln in r["rules"].splitlines() if not ln.startswith(":"))
    out.append("total: %d filters, %d frames, %d mismatches, %d documented differences, "
               "%d filters not compared, %.1f s"
               % (len(results), total_f, total_m, total_k, broken, elapsed))
    return "\n".join(out) + "\n", total_m == 0 and broken == 0


def remove_stale_netns():
    """Namespaces an earlier run that was killed left (nbfwdPID...)."""
    for name in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
        m = re.fullmatch(r"nbfwd(\d+)(a\d+|b)", name)
        if m and not os.path.exists("/proc/" + m.group(1)):
            run("ip", "netns", "del", name, check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--helper", required=True, help="netbrokerd")
    ap.add_argument("--apply", required=True, help="nwfilter-nb-apply")
    ap.add_argument("--filter", action="append", help="only this filter (repeatable)")
    ap.add_argument("--status", help="also write the report to this file")
    ap.add_argument("--show", type=int, default=5, help="mismatching frames shown per filter")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--libvirtds", type=int, default=3,
                    help="libvirtd instances binding in parallel (default 3)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("nwfilter_diff: skipped: needs root (namespaces, libvirtd)")
        return 77  # ctest's SKIP_RETURN_CODE
    t0 = time.monotonic()
    remove_stale_netns()
    tag = "nbfwd%d" % os.getpid()
    work = tempfile.mkdtemp(prefix="nwfilter-diff.")
    sides, lvs, results = [], [], []
    try:
        names = a.filter or STOCK + [COMPOSITION] + CUSTOM
        n_lv = max(1, min(a.libvirtds, len(names)))
        # libvirt takes seconds per binding (some 70 ebtables processes):
        # n_lv libvirtds, each in a namespace A<i> of its own with the
        # ports of every n_lv-th filter, bind at the same time.
        part = [list(range(i, len(names), n_lv)) for i in range(n_lv)]
        a_sides = [Side("%sa%d" % (tag, i), part[i]) for i in range(n_lv)]
        sides = a_sides + [Side(tag + "b", list(range(len(names))))]
        lvs = [Libvirt(a_sides[i], "%s/libvirtd%d" % (work, i)) for i in range(n_lv)]
        plans = [filter_plan(n, lvs[0].work + "/xml") for n in names]
        done, threads = {}, []
        for i, lv in enumerate(lvs):
            jobs = [(k, COMPOSITION.replace("+", "-") if names[k] == COMPOSITION else names[k],
                     plans[k][1]) for k in part[i]]
            threads.append(lv.bind_all(jobs, done))
        for i in range(n_lv):
            control([a_sides[i], sides[-1]])
        with open(work + "/libvirt-rules.txt", "w") as log:
            for k, name in enumerate(names):
                while k not in done:
                    time.sleep(0.02)
                pair = [a_sides[k % n_lv], sides[-1]]
                results.append(check_filter(k, name, pair, done[k], plans[k][0], plans[k][1],
                                            a, log))
                print("filter %s: %s" % (name, "%d mismatches" % results[-1]["mismatches"]
                                         if results[-1]["mismatches"] is not None
                                         else results[-1]["why"]), file=sys.stderr, flush=True)
    finally:
        for lv in lvs:
            lv.close()
        for s in sides:
            s.close()
        if a.keep:
            print("work directory: " + work, file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    text, ok = report(results, a.show, time.monotonic() - t0)
    sys.stdout.write(text)
    if a.status:
        with open(a.status, "w") as f:
            f.write(time.strftime("%Y-%m-%d %H:%M:%S UTC\n", time.gmtime()) + text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
