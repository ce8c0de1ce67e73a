# SPDX-License-Identifier: LGPL-2.1-or-later
"""The frame corpus of the nwfilter differential test (nwfilter_diff.py),
generated systematically, not at random.

A filter's XML (libvirt's stock filters, followed through their filterrefs)
names the layers its rules match: mac, arp, rarp, ip (IPv4), ipv6, or a
chain of one of those. For every layer there is a family of probes: the
right value and a wrong one for every field libvirt's stock filters match
there (MAC source and destination, ether type, ARP opcode, hardware and
protocol types and lengths, sender and target MAC and IP, RARP the same,
IPv4 and IPv6 source, destination, protocol, DHCP ports, fragments, DSCP,
multicast and broadcast destinations). Every probe is sent untagged,
802.1Q-tagged (VLAN 5, and priority-tagged: VLAN 0), 802.1ad-tagged and
double-tagged (802.1ad outside, 802.1Q inside), from the guest and to the
guest. The
"base" family (one frame of every ether type, right and wrong MACs) is in
every filter's corpus.

A library for nwfilter_diff.py; no command line.
"""

import ipaddress
import struct
import xml.etree.ElementTree as ET

GUEST_MAC = "52:54:00:12:34:56"
PEER_MAC = "52:54:00:00:00:01"  # the peer is the guest's gateway
OTHER_MAC = "52:54:00:66:66:66"
BCAST_MAC = "ff:ff:ff:ff:ff:ff"
MCAST_MAC = "01:00:5e:00:00:01"
MCAST6_MAC = "33:33:00:01:00:02"
GUEST_IPS = ["10.0.0.5", "10.0.0.7"]
OTHER_IP = "10.0.0.99"
PEER_IP = "10.0.0.1"
GUEST_IP6 = "fd00::5"
PEER_IP6 = "fd00::1"

# The variables a binding gets when its filter references them.
VARS = {
    "MAC": [GUEST_MAC],
    "IP": GUEST_IPS,
    "IPV6": [GUEST_IP6],
    "GATEWAY_MAC": [PEER_MAC],
}
DHCPSERVER_V4 = [PEER_IP]
DHCPSERVER_V6 = [PEER_IP6]

MARK = b"NBFWDIFF"
# (name, the tags' (TPID, TCI) outermost first)
TAGS = ((None, ()), ("802.1Q vid 5", ((0x8100, 5),)), ("802.1ad vid 5", ((0x88A8, 5),)),
        ("802.1Q vid 0 (priority 3)", ((0x8100, 3 << 13),)),
        ("802.1ad vid 5 + 802.1Q vid 7", ((0x88A8, 5), (0x8100, 7))))
DIRECTIONS = ("from-guest", "to-guest")


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def ip4(s):
    return ipaddress.IPv4Address(s).packed


def ip6(s):
    return ipaddress.IPv6Address(s).packed


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


# ---- layer 3 and 4 builders; each returns (ether type, bytes, text) ----

def udp(sport, dport):
    return struct.pack("!HHHH", sport, dport, 8 + 4, 0) + b"data"


def tcp(sport, dport, flags=0x02):
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, flags, 8192, 0, 0)


def icmp(typ, code):
    b = struct.pack("!BBHI", typ, code, 0, 0)
    return b[:2] + struct.pack("!H", csum(b)) + b[4:]


def l4(proto, sport=1234, dport=80):
    """The L4 header of proto (a name) and its text."""
    if proto == "udp":
        return 17, udp(sport, dport), "udp %d>%d" % (sport, dport)
    if proto == "tcp":
        return 6, tcp(sport, dport), "tcp %d>%d" % (sport, dport)
    if proto == "icmp":
        return 1, icmp(8, 0), "icmp echo"
    if proto == "icmpv6":
        return 58, icmp(128, 0), "icmpv6 echo"
    if proto == "gre":
        return 47, b"\0\0\x08\x00", "gre"
    raise ValueError(proto)


def ipv4(src, dst, proto="udp", sport=1234, dport=80, frag=0, mf=False, tos=0, opts=b""):
    pnum, payload, text = l4(proto, sport, dport)
    if opts:
        text += ", %d bytes of IP options" % len(opts)
    if frag:
        payload = b"fragment"  # a non-first fragment has no L4 header
        text = "%s, fragment offset %d" % (proto, frag * 8)
    elif mf:
        text += ", first fragment"
    flags = (0x2000 if mf else 0) | frag
    h = struct.pack("!BBHHHBBH4s4s", 0x45 + len(opts) // 4, tos, 20 + len(opts) + len(payload),
                    1, flags, 64, pnum, 0, ip4(src), ip4(dst)) + opts
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    if tos:
        text += ", dscp %d ecn %d" % (tos >> 2, tos & 3)
    return 0x0800, h + payload, "IPv4 %s > %s %s" % (src, dst, text)


def ipv6(src, dst, proto="udp", sport=1234, dport=80, ext=None):
    pnum, payload, text = l4(proto, sport, dport)
    nh = pnum
    if ext == "frag":  # a non-first fragment: no L4 header after it
        payload = struct.pack("!BBHI", pnum, 0, 8 << 3, 7) + b"fragment"
        nh, text = 44, "%s, fragment offset 64" % proto
    elif ext == "hbh":
        payload = struct.pack("!BB6s", pnum, 0, b"\x01\x04\0\0\0\0") + payload
        nh, text = 0, "hop-by-hop, " + text
    h = struct.pack("!IHBB16s16s", 6 << 28, len(payload), nh, 64, ip6(src), ip6(dst))
    return 0x86DD, h + payload, "IPv6 %s > %s %s" % (src, dst, text)


def arp(op=1, sha=GUEST_MAC, spa=GUEST_IPS[0], tha="00:00:00:00:00:00", tpa=PEER_IP,
        htype=1, ptype=0x0800, hlen=6, plen=4, etype=0x0806):
    def addr(b, n):
        return (b + bytes(n))[:n]
    body = struct.pack("!HHBBH", htype, ptype, hlen, plen, op)
    body += addr(mac(sha), hlen) + addr(ip4(spa), plen) + addr(mac(tha), hlen) + addr(ip4(tpa), plen)
    name = {0x0806: "ARP", 0x8035: "RARP", 0x0835: "0x0835"}[etype]
    text = "%s op %d %s/%s > %s/%s" % (name, op, sha, spa, tha, tpa)
    if (htype, ptype, hlen, plen) != (1, 0x0800, 6, 4):
        text += " htype %d ptype 0x%04x hlen %d plen %d" % (htype, ptype, hlen, plen)
    return etype, body, text


def rarp(op=3, sha=GUEST_MAC, spa="0.0.0.0", tha=GUEST_MAC, tpa="0.0.0.0", etype=0x8035):
    return arp(op, sha, spa, tha, tpa, etype=etype)


def other_type(etype=0x88B5):
    return etype, b"experimental", "ether type 0x%04x" % etype


def llc():
    """An 802.3 frame: a length where the type would be, then LLC."""
    body = b"\x42\x42\x03" + bytes(35)
    return len(body) + 12, body, "802.3 length %d, LLC (STP SAPs)" % (len(body) + 12)


# ---- families: each a list of (src kind, dst kind, layer-3 builder result) ----
# src kind: "sender" (the guest from the guest, the peer to the guest) or
# "other"; dst kind: "receiver" (the peer from the guest, the guest to it),
# "other", "bcast", "mcast", "mcast6".

def fam_base():
    out = []
    l3s = [ipv4(GUEST_IPS[0], PEER_IP), arp(), rarp(), ipv6(GUEST_IP6, PEER_IP6),
           rarp(etype=0x0835), other_type(), llc()]
    for l3 in l3s:
        out.append(("sender", "receiver", l3))
        out.append(("other", "receiver", l3))
    return out


def fam_mac():
    out = []
    for l3 in (ipv4(GUEST_IPS[0], PEER_IP), arp(), ipv6(GUEST_IP6, PEER_IP6), other_type()):
        for d in ("other", "bcast", "mcast", "mcast6"):
            out.append(("sender", d, l3))
        out.append(("other", "bcast", l3))
    return out


def fam_arp():
    g, g2 = GUEST_IPS
    l3s = [arp(op) for op in (1, 2, 3, 4, 8, 9, 0x100)]
    l3s += [arp(spa=g2), arp(spa=OTHER_IP), arp(spa="0.0.0.0"), arp(sha=OTHER_MAC),
            arp(sha=PEER_MAC, spa=PEER_IP, tpa=g, op=2, tha=GUEST_MAC),
            arp(tpa=g), arp(spa=g, tpa=g), arp(tha=GUEST_MAC), arp(tha=BCAST_MAC),
            arp(htype=6), arp(ptype=0x86DD), arp(hlen=8), arp(plen=16), arp(op=2, htype=6)]
    # gratuitous (sender IP == target IP) or not, whichever byte differs,
    # and behind the header checks ebt_arp makes for it
    l3s += [arp(spa=g, tpa="11.0.0.5"), arp(spa=g, tpa="10.0.9.5"), arp(spa=g, tpa="10.0.0.6"),
            arp(spa=OTHER_IP, tpa=OTHER_IP), arp(spa=g, tpa=g, op=2), arp(spa=g, tpa=g, htype=6),
            arp(spa=g, tpa=g, ptype=0x86DD), arp(spa=g, tpa=g, plen=16), arp(spa=g, tpa=g, hlen=8)]
    out = [("sender", "bcast", l3) for l3 in l3s]
    out += [("sender", "receiver", arp(op=2)), ("other", "bcast", arp())]
    return out


def fam_rarp():
    l3s = [rarp(), rarp(op=4), rarp(op=1), rarp(sha=OTHER_MAC), rarp(tha=OTHER_MAC),
           rarp(spa=GUEST_IPS[0]), rarp(tpa=GUEST_IPS[0]), rarp(etype=0x0835),
           rarp(op=4, etype=0x0835), arp(op=3, etype=0x0806)]
    out = [("sender", "bcast", l3) for l3 in l3s]
    out += [("sender", "receiver", rarp()), ("other", "bcast", rarp()),
            ("sender", "mcast", rarp())]
    return out


def fam_ipv4():
    g, g2 = GUEST_IPS
    b = "255.255.255.255"
    l3s = [ipv4(g, PEER_IP), ipv4(g2, PEER_IP), ipv4(OTHER_IP, PEER_IP),
           ipv4("0.0.0.0", PEER_IP), ipv4(g, PEER_IP, "tcp"), ipv4(OTHER_IP, PEER_IP, "tcp"),
           ipv4(g, PEER_IP, "icmp"), ipv4(g, PEER_IP, "gre"), ipv4(PEER_IP, g),
           ipv4(PEER_IP, g, "tcp"),
           # multicast and broadcast destinations
           ipv4(g, "224.0.0.1"), ipv4(g, "239.1.2.3"), ipv4(g, "223.255.255.255"),
           ipv4(g, "240.0.0.1"), ipv4(g, b),
           # DHCP requests, then each field wrong
           ipv4("0.0.0.0", b, "udp", 68, 67), ipv4(g, b, "udp", 68, 67),
           ipv4("0.0.0.0", PEER_IP, "udp", 68, 67), ipv4("0.0.0.0", b, "udp", 1234, 67),
           ipv4("0.0.0.0", b, "udp", 68, 1234), ipv4("0.0.0.0", b, "tcp", 68, 67),
           ipv4("0.0.0.0", b, "udp", 67, 68),
           ipv4("0.0.0.0", b, "udp", 68, 67, opts=b"\x94\x04\0\0"),  # router alert
           ipv4("0.0.0.0", b, "udp", 1234, 67, opts=b"\x94\x04\0\0"),
           # DHCP answers: from the server, another one, wrong ports
           ipv4(PEER_IP, g, "udp", 67, 68), ipv4(PEER_IP, b, "udp", 67, 68),
           ipv4(OTHER_IP, g, "udp", 67, 68), ipv4(PEER_IP, g, "udp", 1234, 68),
           ipv4(PEER_IP, g, "udp", 67, 1234), ipv4(PEER_IP, g, "tcp", 67, 68),
           # fragments and DSCP
           ipv4("0.0.0.0", b, "udp", 68, 67, frag=100), ipv4(g, PEER_IP, "udp", frag=100),
           ipv4(OTHER_IP, PEER_IP, "udp", frag=100), ipv4(g, PEER_IP, "udp", mf=True),
           ipv4(g, PEER_IP, tos=46 << 2), ipv4(g, PEER_IP, tos=(46 << 2) | 1)]
    out = [("sender", "receiver", l3) for l3 in l3s]
    out += [("sender", "bcast", ipv4("0.0.0.0", b, "udp", 68, 67)),
            ("other", "bcast", ipv4("0.0.0.0", b, "udp", 68, 67)),
            ("sender", "mcast", ipv4(g, "224.0.0.1"))]
    return out


def fam_ipv6():
    g = GUEST_IP6
    srv = "ff02::1:2"
    l3s = [ipv6(g, PEER_IP6), ipv6("fd00::99", PEER_IP6), ipv6("fe80::1", PEER_IP6),
           ipv6("fe80::1", PEER_IP6, "tcp"), ipv6(g, PEER_IP6, "tcp"),
           ipv6(g, PEER_IP6, "icmpv6"), ipv6("::", srv, "icmpv6"), ipv6(PEER_IP6, g),
           # multicast destinations
           ipv6(g, "ff02::1"), ipv6(g, "ff05::1:3"), ipv6(g, "fe00::1"),
           # DHCPv6 requests, then each field wrong
           ipv6("fe80::1", srv, "udp", 546, 547), ipv6("febf::1", srv, "udp", 546, 547),
           ipv6("fec0::1", srv, "udp", 546, 547), ipv6(g, srv, "udp", 546, 547),
           ipv6("fe80::1", "ff02::1", "udp", 546, 547),
           ipv6("fe80::1", srv, "udp", 1234, 547), ipv6("fe80::1", srv, "udp", 546, 1234),
           ipv6("fe80::1", srv, "tcp", 546, 547),
           # DHCPv6 answers
           ipv6(PEER_IP6, "fe80::5", "udp", 547, 546), ipv6("fd00::99", "fe80::5", "udp", 547, 546),
           ipv6(PEER_IP6, "fe80::5", "udp", 1234, 546), ipv6(PEER_IP6, "fe80::5", "udp", 547, 1234),
           # extension headers
           ipv6("fe80::1", srv, "udp", 546, 547, ext="frag"), ipv6(g, PEER_IP6, ext="frag"),
           ipv6("fe80::1", srv, "udp", 546, 547, ext="hbh"), ipv6(g, PEER_IP6, ext="hbh")]
    out = [("sender", "receiver", l3) for l3 in l3s]
    out += [("sender", "mcast6", ipv6("fe80::1", srv, "udp", 546, 547)),
            ("other", "mcast6", ipv6("fe80::1", srv, "udp", 546, 547))]
    return out


FAMILIES = {"base": fam_base, "mac": fam_mac, "arp": fam_arp, "rarp": fam_rarp,
            "ipv4": fam_ipv4, "ipv6": fam_ipv6}
ELEMENT_FAMILY = {"mac": "mac", "arp": "arp", "rarp": "rarp", "ip": "ipv4", "ipv6": "ipv6"}


def chain_family(chain):
    for prefix, fam in (("rarp", "rarp"), ("arp", "arp"), ("ipv4", "ipv4"), ("ipv6", "ipv6"),
                        ("mac", "mac")):
        if chain.startswith(prefix):
            return fam
    return "base"


def filter_fields(name, xml_dirs, seen=None):
    """The families and the variables filter `name` uses, following its
    filterrefs, from its XML in xml_dirs."""
    seen = set() if seen is None else seen
    fams, variables = {"base"}, set()
    if name in seen:
        return fams, variables
    seen.add(name)
    root = None
    for d in xml_dirs:
        try:
            root = ET.parse("%s/%s.xml" % (d, name)).getroot()
            break
        except FileNotFoundError:
            continue
    if root is None:
        raise FileNotFoundError("no XML for filter %s in %s" % (name, xml_dirs))
    fams.add(chain_family(root.get("chain", "root")))
    for el in root:
        if el.tag == "filterref":
            f, v = filter_fields(el.get("filter"), xml_dirs, seen)
            fams |= f
            variables |= v
            continue
        for child in el:
            fams.add(ELEMENT_FAMILY.get(child.tag, "base"))
            if child.get("protocolid") in ("arp", "rarp", "ipv4", "ipv6"):
                fams.add({"ipv4": "ipv4"}.get(child.get("protocolid"), child.get("protocolid")))
            if child.get("protocolid") == "0x835":
                fams.add("rarp")
            for v in child.attrib.values():
                if v.startswith("$"):
                    variables.add(v[1:].split("[")[0])
    return fams, variables


def addr_of(kind, direction):
    """The MAC for a src/dst kind in a direction."""
    guest_sends = direction == "from-guest"
    if kind == "sender":
        return GUEST_MAC if guest_sends else PEER_MAC
    if kind == "receiver":
        return PEER_MAC if guest_sends else GUEST_MAC
    return {"other": OTHER_MAC, "bcast": BCAST_MAC, "mcast": MCAST_MAC,
            "mcast6": MCAST6_MAC}[kind]


def with_mark(etype, body, mark):
    """body with the frame's mark at its end, inside the IP packet for IPv4
    and IPv6 (lengths and checksum updated): a bridge with br_netfilter
    trims what follows an IP packet."""
    b = bytearray(body + mark)
    if etype == 0x0800:
        struct.pack_into("!H", b, 2, len(b))
        struct.pack_into("!H", b, 10, 0)
        ihl = (b[0] & 15) * 4
        struct.pack_into("!H", b, 10, csum(bytes(b[:ihl])))
        if b[9] == 17 and not struct.unpack_from("!H", b, 6)[0] & 0x1FFF:
            struct.pack_into("!H", b, ihl + 4, len(b) - ihl)
    elif etype == 0x86DD:
        struct.pack_into("!H", b, 4, len(b) - 40)
        udp_at = {17: 40, 0: 48 if b[40] == 17 else None}.get(b[6])
        if udp_at:
            struct.pack_into("!H", b, udp_at + 4, len(b) - udp_at)
    return bytes(b)


def frame(direction, tag, src_kind, dst_kind, l3, ident):
    """One frame, with its unique trailer, and its readable text."""
    etype, body, text = l3
    src, dst = addr_of(src_kind, direction), addr_of(dst_kind, direction)
    name, tags = tag
    hdr = mac(dst) + mac(src)
    for tpid, tci in tags:
        hdr += struct.pack("!HH", tpid, tci)
    hdr += struct.pack("!H", etype)
    body = with_mark(etype, body, MARK + struct.pack("!I", ident))
    desc = "%s %s%s > %s: %s" % (direction, (name + ", ") if name else "", src, dst, text)
    return hdr + body, desc


def corpus(families):
    """Every frame for these families: a list of (direction, bytes, text),
    each frame's index its identifier in the trailer."""
    probes, seen = [], set()
    for fam in sorted(families):
        for p in FAMILIES[fam]():
            if (p[0], p[1], p[2][1], p[2][0]) not in seen:
                seen.add((p[0], p[1], p[2][1], p[2][0]))
                probes.append(p)
    out = []
    for direction in DIRECTIONS:
        for tag in TAGS:
            for src_kind, dst_kind, l3 in probes:
                b, desc = frame(direction, tag, src_kind, dst_kind, l3, len(out))
                out.append((direction, b, desc))
    return out


def ident_of(data):
    """The identifier of a received frame, or None when it is not ours."""
    i = data.rfind(MARK)
    if i < 0 or len(data) < i + len(MARK) + 4:
        return None
    return struct.unpack("!I", data[i + len(MARK):i + len(MARK) + 4])[0]
