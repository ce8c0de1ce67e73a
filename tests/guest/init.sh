#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# /init of the test guest (tests/guest/README). Loads the drivers, sets eth0
# up from the kernel command line (nbg.ip=ADDR/LEN nbg.peer=ADDR
# nbg.vpeer=ADDR nbg.peermac=MAC nbg.spoofmac=MAC), says
# "NBG ready", then runs the steps the host names on the serial console, one
# a line, each answered with "NBG <step> ..." lines and "NBG done <step>".
# Every line for the host starts with "NBG ". Steps:
#   plain       ping the peer from eth0's own address: "NBG plain answered=N/3"
#   vlan        (once) make eth0.10, VLAN 10 on eth0, with the guest's own
#               MAC and IP, and a route to nbg.vpeer through it: what goes
#               over the tag is from the guest's own addresses
#   send        3 ARP requests and 3 pings to nbg.vpeer over the tag (the
#               peer's MAC a static neighbour: it cannot answer), from
#               eth0.10's MAC and address: "NBG send mac=M tx=N arping_tx=N
#               ping_tx=N" (frames eth0.10 sent)
#   spoof       the same from nbg.spoofmac (eth0.10's MAC changed, then put
#               back): "NBG spoof mac=M tx=N"
#   off         power off
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
exec </dev/console >/dev/console 2>&1
stty -echo 2>/dev/null

say() { echo "NBG $*"; }
arg() { sed -n "s/.*\bnbg\.$1=\([^ ]*\).*/\1/p" /proc/cmdline; }

for m in $(cat /lib/modules/order); do
  insmod "/lib/modules/$m.ko" || say "error insmod $m failed"
done
echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6
echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6
IP=$(arg ip) PEER=$(arg peer) VPEER=$(arg vpeer)
PEERMAC=$(arg peermac) SPOOFMAC=$(arg spoofmac)
ip link set lo up
n=0
while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
if [ ! -e /sys/class/net/eth0 ]; then
  say "error no eth0 (virtio_net did not bind)"
fi
ip link set eth0 up
ip addr add "$IP" dev eth0
MAC=$(cat /sys/class/net/eth0/address)
say "ready kernel=$(uname -r) mac=$MAC ip=$IP"

tx() { cat /sys/class/net/eth0.10/statistics/tx_packets; }

burst() {
  # The peer's MAC as a static neighbour, again: a MAC change on eth0.10
  # flushes its neighbours, permanent ones included.
  arp -i eth0.10 -s "$VPEER" "$PEERMAC"
  a=$(tx)
  arping -c 3 -w 3 -I eth0.10 -s "${IP%/*}" "$VPEER" >/dev/null 2>&1
  b=$(tx)
  ping -c 3 -i 0.3 -W 1 -I eth0.10 "$VPEER" >/dev/null 2>&1
  say "$1 mac=$(cat /sys/class/net/eth0.10/address) tx=$(($(tx) - a)) arping_tx=$((b - a)) ping_tx=$(($(tx) - b))"
}

step() {
  case $1 in
  plain)
    got=$(ping -c 3 -W 2 "$PEER" 2>&1 | sed -n 's/.* \([0-9]*\) packets received.*/\1/p')
    say "plain answered=${got:-0}/3"
    ;;
  vlan)
    if ! ip link add link eth0 name eth0.10 type vlan id 10; then
      say "error vlan: ip link add type vlan failed ($(grep -c 8021q /proc/modules) 8021q loaded)"
      return
    fi
    ip link set eth0.10 up
    ip addr add "${IP%/*}/32" dev eth0.10
    ip route add "$VPEER/32" dev eth0.10 src "${IP%/*}"
    say "vlan dev=eth0.10 id=$(sed -n 's/.*VID: \([0-9]*\).*/\1/p' /proc/net/vlan/eth0.10) mac=$(cat /sys/class/net/eth0.10/address)"
    ;;
  send) burst send ;;
  spoof)
    ip link set eth0.10 address "$SPOOFMAC"
    burst spoof
    ip link set eth0.10 address "$MAC"
    ;;
  off)
    say "off"
    poweroff -f
    ;;
  *) say "error unknown step $1" ;;
  esac
}

while read -r s; do
  s=$(echo "$s" | tr -d '\r')
  [ -n "$s" ] || continue
  step "$s"
  say "done $s"
done
say "error console closed"
poweroff -f
