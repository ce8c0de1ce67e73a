#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Install what netbroker needs to build, test and demo, from Debian 12's
# packages. Safe to run again.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  dpkg-dev     # dpkg-buildflags: scripts/test.sh's build-deb, a Debian package's flags
  protobuf-c-compiler libprotobuf-c-dev
  libnl-3-dev libnl-route-3-dev libnftnl-dev libmnl-dev libcap-ng-dev
  libsystemd-dev   # netbrokerd: sd_notify, sd_listen_fds, the journal's priorities
  check libsubunit-dev
  iproute2 nftables iptables
  systemd      # systemd-socket-activate, for the socket-activation test
  man-db groff-base
  clang-format python3
  python3-pyflakes # lints the tests' Python (tests/py, ctest -L lint)
  clang libclang-rt-14-dev  # libFuzzer (clang_rt.fuzzer) for tests/fuzz
  qemu-system-x86  # the link tests start QEMU on a tap fd from TapCreate
  busybox-static   # the guest VLAN test's initramfs (tests/guest/build.sh; the
                   # guest's kernel is downloaded there, never installed);
                   # netbroker-demo's guest: udhcpc (its DHCP client), ping, nc
  iperf3           # the bandwidth conformance test measures TCP between namespaces
  dnsmasq-base     # the supervised-program test, netbroker-demo and bench network:
                   # dnsmasq under the helper gives a DHCP lease
  valgrind         # memcheck over the unit, protocol and limits tests
  gnuplot-nox      # netbroker-bench --png draws its chart (no X11 needed)
  abigail-tools    # abidw/abidiff: the ABI check against abi/ (ctest -L abi)
  # the nwfilter differential test runs libvirt's own nwfilter driver (its
  # ebtables are iptables' ebtables-nft, listed above)
  libvirt-daemon libvirt-daemon-config-nwfilter libvirt-clients
)

if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: run as root (it installs packages)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
echo "deps: ${#packages[@]} packages present"
