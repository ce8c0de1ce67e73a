#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Installs a configured build tree with DESTDIR and checks the tree as a
distribution's packaging checks would (lintian's, in the main):

* netbroker.pc: prefix, libdir, includedir and helper are the configured
  install paths (an absolute CMAKE_INSTALL_LIBDIR included), and each names
  what is installed there;
* the systemd units are in systemd's systemdsystemunitdir (pkg-config
  systemd) for its own prefix, under ours for any other, and nowhere else;
  the tmpfiles.d snippet likewise in its tmpfilesdir;
  the service starts the installed helper;
* every installed program has its man page (netbroker-bench only when
  NB_INSTALL_BENCH is on, and then it must have one);
* no ELF file carries an RPATH or RUNPATH; modes: programs 0755, the shared
  library and every other file 0644, directories 0755, nothing setuid;
* libnetbroker.so -> SONAME -> the real file, relative links in libdir,
  the real file's name beginning with the SONAME;
* tests/consumer/consumer.c compiles and links against the DESTDIR tree with
  pkg-config alone (PKG_CONFIG_SYSROOT_DIR), and, as root, runs against the
  installed helper and library in a private network namespace.

Arguments: --build DIR (the cmake build tree), --source DIR (the source tree,
for tests/consumer), --keep (leave the DESTDIR tree). Run by ctest (label
install) in each build scripts/test.sh makes, which between them use the
prefixes /usr/local, /usr and /opt/nb with an absolute libdir.
"""

import argparse
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile

problems = []


def bad(msg):
    """Records one problem and prints it."""
    problems.append(msg)
    print("install-check: FAIL: " + msg)


def run(*cmd, env=None, check=True):
    """Runs cmd, returns the completed process (text output)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if check and p.returncode:
        raise SystemExit("install-check: %s: exit %d\n%s%s" % (" ".join(cmd), p.returncode,
                                                               p.stdout, p.stderr))
    return p


def cache(build):
    """The build tree's CMakeCache.txt as a dict of name -> value."""
    out = {}
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_]+):[A-Z]+=(.*)$", line.rstrip("\n"))
            if m:
                out[m.group(1)] = m.group(2)
    return out


def full(prefix, d):
    """CMAKE_INSTALL_FULL_<dir> as GNUInstallDirs makes it."""
    return os.path.normpath(d if os.path.isabs(d) else os.path.join(prefix, d))


def is_elf(path):
    """True when path is an ELF file."""
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def check_pc(root, c, prefix, libdir, incdir, libexecdir):
    """netbroker.pc: its paths are the configured ones and hold the files."""
    pcdir = os.path.join(libdir, "pkgconfig")
    if not os.path.exists(root + pcdir + "/netbroker.pc"):
        bad("netbroker.pc is not in %s" % pcdir)
        return None
    env = dict(os.environ, PKG_CONFIG_LIBDIR=root + pcdir, PKG_CONFIG_PATH="")
    want = {"prefix": prefix, "libdir": libdir, "includedir": incdir,
            "helper": libexecdir + "/netbrokerd"}
    for var, path in want.items():
        got = run("pkg-config", "--variable=" + var, "netbroker", env=env).stdout.strip()
        print("netbroker.pc: %s=%s" % (var, got))
        if got != path:
            bad("netbroker.pc: %s is %r, installed at %r" % (var, got, path))
    for path in (libdir + "/libnetbroker.so", incdir + "/netbroker.h", want["helper"]):
        if not os.path.exists(root + path):
            bad("%s (named by netbroker.pc) is not installed" % path)
    return pcdir


def systemd_dir(c, prefix, pcvar, cachevar, fallback):
    """Where CMakeLists.txt installs into systemd's PCVAR directory: its own
    for systemd's prefix, the same path under ours for any other."""
    sd = run("pkg-config", "--variable=" + pcvar, "systemd", check=False).stdout.strip()
    sd_prefix = run("pkg-config", "--variable=prefix", "systemd", check=False).stdout.strip()
    if c.get(cachevar):
        want = full(prefix, c[cachevar])
    elif not sd:
        want = prefix + "/" + fallback
    elif prefix == sd_prefix:
        want = sd
    else:
        want = full(prefix, re.sub(r"^(/usr)?/+", "", sd))
    print("%s: expected %s (systemd.pc: %s, prefix %s)" % (pcvar, want, sd, sd_prefix))
    return want


def check_units(root, c, prefix, helper, files):
    """The units are in systemd's unit directory (ours under a foreign prefix),
    the tmpfiles.d snippet in its tmpfiles directory."""
    want = systemd_dir(c, prefix, "systemdsystemunitdir", "NB_SYSTEMD_UNITDIR",
                       "lib/systemd/system")
    for u in ("netbrokerd.socket", "netbrokerd.service"):
        found = [f for f in files if os.path.basename(f) == u]
        if found != [want + "/" + u]:
            bad("%s installed as %s, expected %s/%s" % (u, found, want, u))
    svc = root + want + "/netbrokerd.service"
    if os.path.exists(svc):
        with open(svc) as f:
            if "ExecStart=%s\n" % helper not in f.read():
                bad("netbrokerd.service does not start %s" % helper)
    tmp = systemd_dir(c, prefix, "tmpfilesdir", "NB_TMPFILESDIR", "lib/tmpfiles.d")
    found = [f for f in files if f.endswith("/tmpfiles.d/netbrokerd.conf")]
    if found != [tmp + "/netbrokerd.conf"]:
        bad("tmpfiles snippet installed as %s, expected %s/netbrokerd.conf" % (found, tmp))


def check_man(root, c, bindir, libexecdir, mandir, files):
    """Every installed program has its man page; the bench only on request."""
    progs = [(os.path.basename(f), "1") for f in files if os.path.dirname(f) == bindir]
    progs += [(os.path.basename(f), "8") for f in files
              if os.path.dirname(f) == libexecdir and os.path.basename(f) == "netbrokerd"]
    names = [p for p, _ in progs]
    if "netbrokerd" not in names or "netbrokerctl" not in names:
        bad("programs installed: %s (netbrokerd and netbrokerctl expected)" % names)
    bench = c.get("NB_INSTALL_BENCH", "OFF").upper() in ("ON", "1", "YES", "TRUE")
    if ("netbroker-bench" in names) != bench:
        bad("netbroker-bench installed: %s, NB_INSTALL_BENCH is %s"
            % ("netbroker-bench" in names, c.get("NB_INSTALL_BENCH")))
    for prog, sec in progs:
        page = "%s/man%s/%s.%s" % (mandir, sec, prog, sec)
        if page not in files or os.path.getsize(root + page) == 0:
            bad("%s has no man page %s" % (prog, page))
        else:
            print("man: %s -> %s" % (prog, page))


def check_elf_and_modes(root, files, dirs):
    """No RPATH/RUNPATH; programs 0755, the rest 0644, dirs 0755, no setuid."""
    for f in files:
        st = os.lstat(root + f)
        if stat.S_ISLNK(st.st_mode):
            continue
        mode = stat.S_IMODE(st.st_mode)
        elf = is_elf(root + f)
        prog = elf and ".so" not in os.path.basename(f)
        want = 0o755 if prog else 0o644
        if mode != want:
            bad("%s has mode %04o, expected %04o" % (f, mode, want))
        if elf:
            dyn = run("readelf", "-d", root + f).stdout
            if re.search(r"\((RPATH|RUNPATH)\)", dyn):
                bad("%s carries an RPATH/RUNPATH: %s" % (f, re.findall(r"\[(.*)\]", dyn)))
    for d in dirs:
        mode = stat.S_IMODE(os.lstat(root + d).st_mode)
        if mode != 0o755:
            bad("directory %s has mode %04o" % (d, mode))
    print("modes and RPATH: %d files, %d directories checked" % (len(files), len(dirs)))


def check_so_chain(root, libdir):
    """libnetbroker.so -> SONAME -> real file, all relative, in libdir."""
    link = root + libdir + "/libnetbroker.so"
    if not os.path.islink(link):
        bad("%s/libnetbroker.so is not a symlink" % libdir)
        return
    real = os.path.realpath(link)
    soname = re.search(r"\(SONAME\).*\[(.*)\]", run("readelf", "-d", real).stdout)
    if not soname:
        bad("%s has no SONAME" % real)
        return
    soname = soname.group(1)
    t1 = os.readlink(link)
    t2 = os.readlink(root + libdir + "/" + soname) if os.path.islink(
        root + libdir + "/" + soname) else None
    print("so chain: libnetbroker.so -> %s; %s -> %s" % (t1, soname, t2))
    if t1 != soname:
        bad("libnetbroker.so points to %r, not the SONAME %r" % (t1, soname))
    if not t2 or "/" in t2 or not os.path.isfile(root + libdir + "/" + t2) or t2 == soname:
        bad("%s should be a relative link to the real file, is %r" % (soname, t2))
    elif not t2.startswith(soname + "."):
        bad("the real file %s does not begin with its SONAME %s (libnetbroker.so.1.2.0 "
            "for libnetbroker.so.1)" % (t2, soname))


def check_consumer(root, source, pcdir, libdir, helper):
    """Builds tests/consumer against the DESTDIR tree; as root, runs it."""
    out = tempfile.mkdtemp(prefix="nb-consumer.")
    try:
        env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=root, PKG_CONFIG_LIBDIR=root + pcdir,
                   PKG_CONFIG_PATH="")
        flags = run("pkg-config", "--cflags", "--libs", "netbroker", env=env).stdout.split()
        print("consumer: cc %s" % " ".join(flags))
        p = run("cc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o", out + "/consumer",
                os.path.join(source, "tests/consumer/consumer.c"), *flags, check=False)
        if p.returncode:
            bad("the consumer does not build against the installed tree:\n" + p.stderr)
            return
        if os.geteuid() != 0:
            print("consumer: built; not run (needs root: it creates a tap)")
            return
        renv = dict(os.environ, NETBROKERD=root + helper, LD_LIBRARY_PATH=root + libdir)
        p = run("unshare", "--net", out + "/consumer", env=renv, check=False)
        print(p.stdout.strip())
        if p.returncode:
            bad("the consumer failed against the installed tree: %s" % p.stderr.strip())
    finally:
        shutil.rmtree(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="the cmake build tree")
    ap.add_argument("--source", required=True, help="the source tree")
    ap.add_argument("--keep", action="store_true", help="keep the DESTDIR tree")
    a = ap.parse_args()
    c = cache(a.build)
    prefix = os.path.normpath(c["CMAKE_INSTALL_PREFIX"])
    d = {k: full(prefix, c.get("CMAKE_INSTALL_" + k.upper()) or dflt) for k, dflt in
         (("libdir", "lib"), ("includedir", "include"), ("libexecdir", "libexec"),
          ("bindir", "bin"), ("mandir", "share/man"))}
    root = tempfile.mkdtemp(prefix="nb-destdir.")
    try:
        # The umask a packager's build may have; modes must not depend on it.
        os.umask(0o022)
        run("cmake", "--install", a.build, env=dict(os.environ, DESTDIR=root))
        files, dirs = [], []
        for top, ds, fs in os.walk(root):
            dirs += [os.path.join(top, x)[len(root):] for x in ds]
            files += [os.path.join(top, x)[len(root):] for x in fs]
        print("installed %d files under DESTDIR, prefix %s, libdir %s (%s)"
              % (len(files), prefix, d["libdir"], c.get("CMAKE_INSTALL_LIBDIR")))
        outside = [f for f in files if not f.startswith(prefix + "/") and "/systemd/" not in f]
        if outside:
            bad("files outside the prefix %s: %s" % (prefix, outside))
        helper = d["libexecdir"] + "/netbrokerd"
        pcdir = check_pc(root, c, prefix, d["libdir"], d["includedir"], d["libexecdir"])
        check_units(root, c, prefix, helper, files)
        check_man(root, c, d["bindir"], d["libexecdir"], d["mandir"], files)
        check_elf_and_modes(root, files, [x for x in dirs if x.startswith(prefix)])
        check_so_chain(root, d["libdir"])
        if pcdir:
            check_consumer(root, a.source, pcdir, d["libdir"], helper)
    finally:
        if a.keep:
            print("DESTDIR tree kept: " + root)
        else:
            shutil.rmtree(root)
    print("install-check: %s, %d problems" % ("FAIL" if problems else "ok", len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
