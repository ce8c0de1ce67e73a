#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks that the man pages keep up with the library and the project:
every nb_* function libnetbroker exports is listed in libnetbroker(3)'s
NAME section and described in the page (named again outside NAME and
SYNOPSIS), and every man page's .TH line carries the project's version,
as the top-level CMakeLists.txt's project() call gives it. Prints each
problem on a line of its own and exits 1 when there is any.

Arguments: --symbols FILE, the library's version script
(client/libnetbroker.map: the names under "global:") or its header
(client/netbroker.h: the functions it declares); --page FILE, the man page
(man/libnetbroker.3); --cmake FILE, the top-level CMakeLists.txt; --man-dir
DIR, the man pages (every file named *.N, N a section digit). Each defaults
to its place in the repository holding this script. Run by ctest (label man).
"""

import argparse
import os
import re
import sys

FUNC = re.compile(r"(?<![A-Za-z0-9_])(nb_[a-z0-9_]+)(?![A-Za-z0-9_])")


def read(path):
    with open(path, errors="replace") as fh:
        return fh.read()


def strip_c_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def version_script_names(text):
    """The nb_* names a version script exports: those of its global: parts."""
    names = set()
    glob = False
    for token in re.findall(r"[A-Za-z0-9_.*]+\s*:|[^\s;{}]+\s*;|[{}]",
                            strip_c_comments(re.sub(r"#[^\n]*", " ", text))):
        token = token.strip()
        if token.endswith(":"):
            glob = token[:-1].strip() == "global"
        elif token == "{" or token == "}":
            glob = token == "{" and glob
        elif glob:
            name = token.rstrip(";").strip()
            if FUNC.fullmatch(name):
                names.add(name)
    return names


def header_names(text):
    """The nb_* functions a header declares (not its macros or typedefs)."""
    text = strip_c_comments(text)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    return set(re.findall(r"(?<![A-Za-z0-9_])(nb_[a-z0-9_]+)\s*\(", text))


def exported(path):
    text = read(path)
    if path.endswith(".h"):
        return header_names(text)
    return version_script_names(text)


def man_sections(text):
    """The page as {section name: its text}, comments and escapes dropped."""
    sections = {}
    name = ""
    for line in text.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        line = re.sub(r'\\".*', "", line)
        line = re.sub(r"\\f(\(..|\[[^]]*\]|.)|\\[&%:c]", "", line)
        m = re.match(r'\.SH\s+"?([^"]*)"?\s*$', line)
        if m:
            name = m.group(1).strip().upper()
            continue
        sections.setdefault(name, []).append(line)
    return {k: "\n".join(v) for k, v in sections.items()}


def project_version(path):
    text = re.sub(r"#[^\n]*", " ", read(path))
    m = re.search(r"\bproject\s*\(([^)]*)\)", text, flags=re.I)
    v = m and re.search(r"\bVERSION\s+([0-9][0-9A-Za-z.+-]*)", m.group(1))
    return v.group(1) if v else None


def th_args(line):
    """The arguments of a .TH line, groff's double quotes honoured."""
    return [q.replace('""', '"') if q or not u else u
            for q, u in re.findall(r'"((?:[^"]|"")*)"|(\S+)', line[3:])]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--symbols", default=os.path.join(root, "client", "libnetbroker.map"),
                    help="the version script, or the header (a name ending in .h)")
    ap.add_argument("--page", default=os.path.join(root, "man", "libnetbroker.3"))
    ap.add_argument("--cmake", default=os.path.join(root, "CMakeLists.txt"))
    ap.add_argument("--man-dir", default=os.path.join(root, "man"))
    a = ap.parse_args()
    problems = []

    funcs = exported(a.symbols)
    if not funcs:
        problems.append("%s: no nb_* function found" % a.symbols)
    sections = man_sections(read(a.page))
    listed = set(FUNC.findall(sections.get("NAME", "")))
    described = set()
    for name, text in sections.items():
        if name not in ("NAME", "SYNOPSIS"):
            described.update(FUNC.findall(text))
    for f in sorted(funcs):
        if f not in listed:
            problems.append("%s: %s is exported but not listed in NAME" % (a.page, f))
        if f not in described:
            problems.append("%s: %s is exported but not described (named nowhere outside "
                            "NAME and SYNOPSIS)" % (a.page, f))

    version = project_version(a.cmake)
    pages = sorted(f for f in os.listdir(a.man_dir) if re.search(r"\.[1-9]$", f))
    if not version:
        problems.append("%s: no VERSION in its project() call" % a.cmake)
    if not pages:
        problems.append("%s: no man pages" % a.man_dir)
    for f in pages:
        path = os.path.join(a.man_dir, f)
        th = [line for line in read(path).splitlines() if re.match(r"\.TH\s", line)]
        args = th_args(th[0]) if th else []
        if len(args) < 4:
            problems.append("%s: no .TH line with a source (\"netbroker VERSION\")" % path)
        elif version and args[3].split()[-1:] != [version]:
            problems.append("%s: .TH says \"%s\", the project is %s (%s)"
                            % (path, args[3], version, a.cmake))

    for p in problems:
        print(p)
    print("man-api: %d exported functions, %d man pages, version %s: %d problems"
          % (len(funcs), len(pages), version, len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
