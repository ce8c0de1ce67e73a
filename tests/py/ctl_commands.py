#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Every netbrokerctl command as a script meets it, from the program's own
list (netbrokerctl --list-commands), so a new command cannot be missed:

* CMD --help: exit 0, its usage on stdout, nothing on stderr;
* CMD with an unknown option (a group: an unknown subcommand): exit 2, a
  message and the usage on stderr; with --json, one failure object on
  stdout ({"ok":false,"error":{"errno":22,"name":"EINVAL","message":...}});
* CMD with arguments it accepts (the list's example) and NETBROKER_SOCKET
  naming a missing socket: exit 3, no private helper, the text error
  "netbrokerctl: CMD: ... (ENOENT)" on stderr, and with --json the failure
  object with errno 2;
* the top-level --help names every listed command; --version.

Needs no root and no helper. Arguments: --ctl PATH (the netbrokerctl under
test). Exit status 0 when every check passed, 1 otherwise.
"""

import argparse
import json
import os
import subprocess
import sys

# What fw apply's example ("-") reads on stdin: a file that parses.
STDIN = "owner nbctl0\n"
MISSING = "/nonexistent/netbrokerd.sock"


class Checker:
    """Runs netbrokerctl and counts failed checks, saying each."""

    def __init__(self, ctl):
        self.ctl = ctl
        self.failed = 0
        self.checks = 0

    def run(self, args, env=None):
        """netbrokerctl ARGS; returns the CompletedProcess."""
        e = dict(os.environ)
        e.pop("NETBROKER_SOCKET", None)
        # A private helper would be this: if it ran, the command would
        # not fail as the checks expect.
        e["NETBROKERD"] = "/bin/true"
        e.update(env or {})
        return subprocess.run([self.ctl] + args, input=STDIN, capture_output=True, text=True,
                              env=e, timeout=60)

    def check(self, ok, what, p):
        """One check; on failure say what and show the run."""
        self.checks += 1
        if not ok:
            self.failed += 1
            print("FAIL %s: %r exit %d\n  stdout: %r\n  stderr: %r"
                  % (what, p.args[1:], p.returncode, p.stdout, p.stderr))

    def json_failure(self, p, errno, what):
        """stdout is one JSON failure object with the common keys."""
        try:
            doc = json.loads(p.stdout)
        except ValueError as ex:
            self.check(False, "%s: stdout is not JSON (%s)" % (what, ex), p)
            return
        err = doc.get("error") if isinstance(doc, dict) else None
        self.check(isinstance(err, dict) and doc.get("ok") is False
                   and err.get("errno") == errno and isinstance(err.get("name"), str)
                   and err["name"].startswith("E") and isinstance(err.get("message"), str)
                   and err["message"] != "", what + ": the common failure keys", p)


def commands(c):
    """(words, example args or None for a group) from --list-commands."""
    p = c.run(["--list-commands"])
    c.check(p.returncode == 0 and p.stdout, "--list-commands", p)
    out = []
    for line in p.stdout.splitlines():
        words, _, example = line.partition("\t")
        out.append((words.split(), example.split() if example else []))
    groups = {w[0] for w, _ in out if len(w) > 1}
    return [(w, None if len(w) == 1 and w[0] in groups else ex) for w, ex in out]


def check_command(c, words, example):
    """The --help, usage-error and unreachable checks of one command."""
    name = " ".join(words)
    p = c.run(words + ["--help"])
    c.check(p.returncode == 0 and p.stdout.startswith("usage:") and name in p.stdout
            and p.stderr == "", name + " --help", p)
    bad = words + (["no-such-subcommand"] if example is None else ["--no-such-option"])
    p = c.run(bad)
    c.check(p.returncode == 2 and p.stdout == "" and "usage:" in p.stderr
            and p.stderr.startswith("netbrokerctl: %s: " % name), name + " usage error", p)
    p = c.run(["--json"] + bad)
    c.check(p.returncode == 2, name + " --json usage error: exit 2", p)
    c.json_failure(p, 22, name + " --json usage error")
    if example is None:
        return
    env = {"NETBROKER_SOCKET": MISSING}
    p = c.run(words + example, env)
    c.check(p.returncode == 3 and p.stdout == ""
            and p.stderr.startswith("netbrokerctl: %s: cannot reach netbrokerd at %s "
                                    "(from NETBROKER_SOCKET)" % (name, MISSING))
            and p.stderr.endswith(" (ENOENT)\n"), name + " unreachable", p)
    p = c.run(["-j"] + words + example, env)
    c.check(p.returncode == 3 and p.stderr == "", name + " -j unreachable: exit 3", p)
    c.json_failure(p, 2, name + " -j unreachable")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ctl", required=True, help="the netbrokerctl under test")
    a = ap.parse_args()
    c = Checker(a.ctl)
    cmds = commands(c)
    top = c.run(["--help"])
    c.check(top.returncode == 0 and top.stdout.startswith("usage:"), "--help", top)
    for words, example in cmds:
        if example is not None:
            c.check("  %s" % " ".join(words) in top.stdout,
                    "--help names %s" % " ".join(words), top)
        check_command(c, words, example)
    for bad in (["--no-such-option", "ping"], ["no-such-command"], []):
        p = c.run(bad)
        c.check(p.returncode == 2 and p.stdout == "" and p.stderr.startswith("netbrokerctl: ")
                and "usage:" in p.stderr, "top-level usage error %r" % bad, p)
        p = c.run(["--json"] + bad)
        c.check(p.returncode == 2, "--json top-level usage error %r: exit 2" % bad, p)
        c.json_failure(p, 22, "--json top-level usage error %r" % bad)
    p = c.run(["--version"])
    c.check(p.returncode == 0 and p.stdout.startswith("netbrokerctl ")
            and p.stdout.strip().split()[1][0].isdigit(), "--version", p)
    p = c.run(["--json", "--version"])
    c.check(p.returncode == 0 and json.loads(p.stdout or "{}").get("ok") is True,
            "--json --version", p)
    print("%d commands, %d checks, %d failed" % (len(cmds), c.checks, c.failed))
    return 1 if c.failed or len(cmds) < 2 else 0


if __name__ == "__main__":
    sys.exit(main())
