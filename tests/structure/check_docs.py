#!/usr/bin/env python3
"""check_docs.py: what the README promises a new user, checked against the tree.

  - every file the README and docs/*.md link to, or name as a path of the
    tree in backquotes, exists (the man pages, the units' templates);
  - `make run` builds only what it runs (the daemon, cudackptctl, the
    simulator: a --target list, not the whole build and its tests), and
    starts the simulator with two GPUs, so that docs/python.md's restore
    onto another GPU works there;
  - cudackptctl(1) has an entry for every command of the command line
    (client/ctl/main/cmdline.c's table) and for `help`, and its ps names every
    column ps prints and every field of the daemon's ProcessInfo.

usage: check_docs.py [REPO_ROOT]   exit 0 when all hold, 1 otherwise, one
line per breach.
"""
import os
import re
import subprocess
import sys

RUN_TARGETS = {"cudackptd", "cudackptctl", "cudackpt-sim"}


DOCS = ["README.md"] + ["docs/" + f for f in sorted(os.listdir(os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs"))) if f.endswith(".md")]


def named_paths(root, doc):
    """The files doc links to (relative links) or names in backquotes as a
    path of the tree ("systemd/...", "docs/...")."""
    text = open(os.path.join(root, doc), encoding="utf-8").read()
    links = [os.path.normpath(os.path.join(os.path.dirname(doc), p))
             for p in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) if "://" not in p]
    tree_path = re.compile(r"^(?:docs|python|systemd|deploy|include|tests|client|daemon)/[^*]*[^*/]$")
    named = [word for span in re.findall(r"`([^`\n]+)`", text) for word in span.split() if tree_path.match(word)]
    return sorted(set(links + named))


def check_named_paths(root):
    for doc in DOCS:
        for path in named_paths(root, doc):
            if not os.path.exists(os.path.join(root, path)):
                yield "%s names %s, which the tree does not have" % (doc, path)


def check_make_run(root):
    out = subprocess.run(["make", "-n", "-C", root, "run", "BUILD=/nonexistent-build", "JOBS=1"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
    builds = [line for line in out.stdout.splitlines() if re.search(r"\bcmake --build\b", line)]
    if not builds:
        yield "make -n run builds nothing:\n%s" % out.stdout
    for line in builds:
        targets = re.search(r"--target\s+(.*)$", line)
        if not targets or set(targets.group(1).split()) != RUN_TARGETS:
            yield "make run builds more than it runs (%s): %s" % (" ".join(sorted(RUN_TARGETS)), line.strip())
    if "CUDACKPT_SIM_DEVICE_COUNT=2" not in out.stdout:
        yield "make run starts the simulator without two GPUs (CUDACKPT_SIM_DEVICE_COUNT=2)"


def check_man_page(root):
    table = open(os.path.join(root, "client", "ctl", "main", "cmdline.c"), encoding="utf-8").read()
    # A hidden row (the cuda-checkpoint alias, the dump's barrier) is no command for people.
    verbs = [m.group(1) for m in re.finditer(r'^\s*\{ "([a-z-]+)", CTL_.*$', table, re.M)
             if "CTL_HIDDEN" not in m.group(0)]
    man = open(os.path.join(root, "docs", "man", "cudackptctl.1"), encoding="utf-8").read()
    for verb in verbs + ["help"]:
        if not re.search(r"^\.TP\n\.B[IR]? %s(\s|$)" % verb.replace("-", r"\\-"), man, re.M):
            yield "cudackptctl(1) has no entry for the command %s" % verb


def roff_text(text):
    """The words of a man page's source, its macros and escapes left out."""
    text = re.sub(r"^\.[A-Z]+ ?", "", text, flags=re.M)
    return re.sub(r"\\f[BIRP]", "", text).replace("\\-", "-").replace('"', "")


def check_man_ps(root):
    """ps's entry names every column ps prints and every field of the
    daemon's ProcessInfo (what --json prints)."""
    man = open(os.path.join(root, "docs", "man", "cudackptctl.1"), encoding="utf-8").read()
    entry = re.search(r"^\.BR ps .*?(?=^\.TP)", man, re.M | re.S)
    words = roff_text(entry.group(0)) if entry else ""
    ps = open(os.path.join(root, "client", "ctl", "ps.c"), encoding="utf-8").read()
    printer = re.search(r"static void ps_print_rows\(.*?\n}", ps, re.S)
    columns = re.findall(r'"\s*([A-Z][A-Z ]*[A-Z])\\?n?"', printer.group(0) if printer else "")
    idl = open(os.path.join(root, "daemon", "io.cudackpt.Process.varlink"), encoding="utf-8").read()
    info = re.search(r"^type ProcessInfo \((.*?)\)", idl, re.M | re.S)
    fields = re.findall(r"^\s*([a-z_]+):", info.group(1) if info else "", re.M)
    if not entry or not columns or not fields:
        yield "cannot find ps's entry, ps's columns or ProcessInfo's fields"
    for name in columns + fields:
        if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(name), words):
            yield "cudackptctl(1)'s ps does not name %s" % name


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    breaches = list(check_named_paths(root)) + list(check_make_run(root)) + list(check_man_page(root)) + list(check_man_ps(root))
    for b in breaches:
        print(b)
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
