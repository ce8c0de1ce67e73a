#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build the test guest (tests/guest/README): Debian 12's own kernel and a
# busybox initramfs with tests/guest/init.sh as /init, from Debian packages
# only, into OUT (default build/tests/guest): OUT/vmlinuz, OUT/initrd.gz.
# The kernel package is downloaded with apt-get download and unpacked with
# dpkg-deb -x into a scratch directory: it is never installed on the host.
# Reruns are free while OUT/stamp names the same kernel, busybox and init.
# NB_GUEST_REFRESH=1 asks apt even for a guest built within the day.
# Downloads only with NB_GUEST_DOWNLOAD=1 (scripts/test.sh sets it): a
# packager's build has no network. Without it, a guest built before is
# used as it is, and with none the build exits 77 (the tests' "skipped").
set -euo pipefail

out=$(realpath -m "${1:-build/tests/guest}")
here=$(dirname "$(realpath "$0")")
# The guest's drivers and the VLAN stack, in load order (each after what it
# depends on; checked against the modules' own depends= below). Debian's
# config has all of them as modules (virtio, virtio_pci, virtio_net, 8021q,
# ...), none built in.
mods=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
      failover net_failover virtio_net llc stp garp mrp 8021q)

# A guest built from these sources less than a day ago is taken as it is,
# without asking apt (seconds on a loaded machine); then apt's current
# kernel and busybox are compared with the ones it was built from.
src=$(cat "$here/init.sh" "$0" | sha256sum | cut -c1-16)
if [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.gz" ] && [ -f "$out/stamp" ] &&
   [ "$(sed -n 's/.* init //p' "$out/stamp")" = "$src" ] &&
   [ -z "${NB_GUEST_REFRESH:-}" ] && [ -n "$(find "$out/stamp" -mmin -1440)" ]; then
  echo "guest build: $out is up to date ($(cut -d' ' -f1,2 "$out/stamp"), checked $(date -r "$out/stamp" -u +%H:%M) UTC)"
  exit 0
fi

# Debian 12's current kernel: what linux-image-amd64 depends on now.
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
       sed -n 's/^ *Depends: \(linux-image-[0-9.]*-[0-9]*-amd64\)$/\1/p' | head -1)
if [ -z "$kpkg" ]; then
  echo "guest build: apt knows no linux-image-amd64 (run apt-get update?)" >&2
  exit 1
fi
kver=$(apt-cache policy "$kpkg" | sed -n 's/^ *Candidate: //p')
# busybox: the installed busybox-static (scripts/deps.sh), else downloaded.
bbver=$(dpkg-query -W -f '${Status} ${Version}' busybox-static 2>/dev/null |
        sed -n 's/^install ok installed //p' || true)
bbhost=$bbver
[ -n "$bbver" ] || bbver=$(apt-cache policy busybox-static | sed -n 's/^ *Candidate: //p')
stamp="$kpkg $kver busybox-static $bbver init $src"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] &&
   [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.gz" ]; then
  touch "$out/stamp"
  echo "guest build: $out is up to date ($kpkg $kver)"
  exit 0
fi

# The packages stay in OUT/debs: a change to init.sh downloads nothing.
debs="$out/debs"
mkdir -p "$debs"
kdeb="$debs/${kpkg}_${kver//:/%3a}_amd64.deb"
bbdeb="$debs/busybox-static_${bbver//:/%3a}_amd64.deb"
want=("$kpkg=$kver")
[ -f "$kdeb" ] || find "$debs" -name 'linux-image-*.deb' -delete
[ -n "$bbhost" ] || [ -f "$bbdeb" ] || want+=("busybox-static=$bbver")
if { [ ! -f "$kdeb" ] || [ ${#want[@]} -gt 1 ]; } && [ "${NB_GUEST_DOWNLOAD:-}" != 1 ]; then
  if [ -f "$out/vmlinuz" ] && [ -f "$out/initrd.gz" ]; then
    echo "guest build: apt has ${want[*]}, not downloaded (NB_GUEST_DOWNLOAD=1 to): $out as it was built"
    exit 0
  fi
  echo "guest build: skipped: no guest in $out, and downloading ${want[*]} needs NB_GUEST_DOWNLOAD=1" >&2
  exit 77
fi
if [ ! -f "$kdeb" ] || [ ${#want[@]} -gt 1 ]; then
  chmod 755 "$out" "$debs"  # apt-get download drops privileges to _apt where it can
  (cd "$debs" && apt-get download -q "${want[@]}" >/dev/null 2>&1) || {
    echo "guest build: apt-get download ${want[*]} failed" >&2
    exit 1
  }
fi
work=$(mktemp -d "$out/work.XXXXXX")
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$kdeb" "$work/k"
if [ -n "$bbhost" ]; then
  mkdir -p "$work/bb/bin"
  cp "$(dpkg-query -L busybox-static | grep '/bin/busybox$' | head -1)" "$work/bb/bin/busybox"
else
  dpkg-deb -x "$bbdeb" "$work/bb"
fi
krel=$(ls "$work/k/lib/modules")
root="$work/root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,lib/modules}
cp "$work/bb/bin/busybox" "$root/bin/busybox"
cp "$here/init.sh" "$root/init"
chmod 755 "$root/init" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"

loaded=" "
for m in "${mods[@]}"; do
  ko=$(find "$work/k/lib/modules/$krel" -name "$m.ko" -o -name "$m.ko.xz" | head -1)
  if [ -z "$ko" ]; then
    if grep -qx "kernel/.*/$m.ko" "$work/k/lib/modules/$krel/modules.builtin" 2>/dev/null; then
      echo "guest build: $m is built into $krel"
      continue
    fi
    echo "guest build: $krel has no module $m" >&2
    exit 1
  fi
  case $ko in *.xz) xz -dc "$ko" >"$root/lib/modules/$m.ko" ;; *) cp "$ko" "$root/lib/modules/$m.ko" ;; esac
  deps=$(tr '\0' '\n' <"$root/lib/modules/$m.ko" | sed -n 's/^depends=//p' | tr ',' ' ')
  for d in $deps; do
    case $loaded in *" $d "*) ;; *) echo "guest build: $m needs $d first" >&2; exit 1 ;; esac
  done
  loaded="$loaded$m "
  echo "$m" >>"$root/lib/modules/order"
done

cp "$work/k/boot/vmlinuz-$krel" "$work/vmlinuz"
(cd "$root" && find . | "$work/bb/bin/busybox" cpio -o -H newc -R 0:0 2>/dev/null) |
  gzip -9 >"$work/initrd.gz"
mv "$work/vmlinuz" "$out/vmlinuz"
mv "$work/initrd.gz" "$out/initrd.gz"
echo "$krel" >"$out/release"
echo "$stamp" >"$out/stamp"
echo "guest build: $out: $krel, $(du -k "$out/initrd.gz" | cut -f1) kB initramfs"
