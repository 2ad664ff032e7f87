#!/usr/bin/env python3
"""check_structure.py: the house rules for the product's C code, checked.

  - no include circle among the rooms (a room is x.c with x.h) of daemon/,
    client/ and common/;
  - the daemon's layer folders are ordered: a room includes only rooms of
    its own folder or of folders below it (LAYERS, bottom first); so are
    the client's (CLIENT_LAYERS: libcudackpt, then cudackptctl's shared
    pieces and commands, its CRIU job, its ways in);
  - no call circle among the files of daemon/, of client/ or of common/:
    a file calls functions of files below it only (a function of another
    file of the same tree is known by its name);
  - no product file (daemon/, client/, common/) over PRODUCT_MAX_LINES
    lines, no function over PRODUCT_MAX_FUNCTION lines (from its
    signature's first line to its closing brace);
  - the looser MAX_LINES and MAX_FUNCTION on the C code of tests/
    (test_sizes(); its TEST_SIZE_DEBTS, the breaches it found when it
    came, only shrinks).

The Python package's import order (no circle, none hidden in a function)
is checked in one place, tests/python/test_layers.py.

usage: check_structure.py [REPO_ROOT]   exit 0 when all hold, 1 otherwise,
printing one line per breach.  A room is named by its file's base name:
the daemon includes its headers by path below daemon/ ("run/sched.h"),
the client and common/ by name.
"""
import os
import re
import sys

# The tests' limits (the product's are below).
MAX_LINES = 600
MAX_FUNCTION = 80
TREES = ("daemon", "client", "common")
# The daemon's folders, bottom first; the top level (main, server, the
# method table) is above them all.
LAYERS = ("varlink", "base", "host", "auth", "net", "run", "jobs", "saves", "")
# The client's folders, bottom first (client/lib is libcudackpt, which
# knows nothing of cudackptctl above it).
CLIENT_LAYERS = ("lib", "ctl", "ctl/nodes", "ctl/job", "ctl/saves", "ctl/main")
# The product's limits (issue 31), the same for every tree of it.
PRODUCT_MAX_LINES = 500
PRODUCT_MAX_FUNCTION = 60
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(root):
    for tree in TREES:
        for d, _, files in os.walk(os.path.join(root, tree)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.join(d, f)


def room(path):
    base = os.path.basename(path)
    return base[: -len(".bpf.c")] + ".bpf" if base.endswith(".bpf.c") else base[:-2]


def tree_of(root, path):
    return os.path.relpath(path, root).split(os.sep)[0]


def layer_of(root, path):
    parts = os.path.relpath(path, root).split(os.sep)
    if parts[0] == "client":
        return "/".join(parts[1:-1])
    return parts[1] if len(parts) > 2 else ""


def layer_breaches(root, graph, where):
    """A room that includes a room of a layer folder above its own."""
    order = {"daemon": LAYERS, "client": CLIENT_LAYERS}
    out = []
    for me, others in sorted(graph.items()):
        layers = order.get(me[0])
        if not layers:
            continue
        mine = layer_of(root, where[me])
        for other in sorted(others):
            if other[0] != me[0]:
                continue
            theirs = layer_of(root, where[other])
            if mine not in layers or theirs not in layers:
                out.append("layer: %s or %s is in no known layer folder" % (where[me], where[other]))
            elif layers.index(theirs) > layers.index(mine):
                out.append("layer: %s (%s) includes %s (%s), a layer above it" % (
                    os.path.relpath(where[me], root), mine or "top", os.path.relpath(where[other], root),
                    theirs or "top"))
    return out


# A call by name (not through a member: "c->main(" calls no function main).
CALL = re.compile(r"(?<![.>\w])([A-Za-z_][A-Za-z_0-9]*)\s*\(")
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", re.S)


def call_graph(root, paths):
    """{file: set of files} for every tree: a file calls a function that
    another file of its tree defines (not static).  The trees are apart
    (the daemon and the client are two programs), so a name is looked up
    in the caller's tree only."""
    defined, bodies = {}, {}
    for p in paths:
        if not p.endswith(".c"):
            continue
        text = COMMENT.sub(" ", open(p, encoding="utf-8").read())
        bodies[p] = text
        for name, line, _ in functions(text):
            sig = text.split("\n")[line - 1]
            if not sig.startswith("static"):
                defined.setdefault((tree_of(root, p), name), p)
    graph = {}
    for p, text in bodies.items():
        me = os.path.relpath(p, root)
        graph.setdefault(me, set())
        for name in set(CALL.findall(text)):
            other = defined.get((tree_of(root, p), name))
            if other and other != p:
                graph[me].add(os.path.relpath(other, root))
    return graph


def include_graph(root, paths):
    """{(tree, room): set of (tree, room)} for includes within the trees."""
    by_name = {}
    for p in paths:
        by_name.setdefault((tree_of(root, p), os.path.basename(p)), p)
        by_name.setdefault(("*", os.path.basename(p)), p)
    graph, where = {}, {}
    for p in paths:
        tree = tree_of(root, p)
        me = (tree, room(p))
        where[me] = p
        graph.setdefault(me, set())
        for inc in INCLUDE.findall(open(p, encoding="utf-8").read()):
            name = os.path.basename(inc)
            target = by_name.get((tree, name)) or (by_name.get(("*", name)) if tree != "common" else None)
            if target and os.path.basename(target) == name:
                other = (tree_of(root, target), room(target))
                if other != me:
                    graph[me].add(other)
                    where.setdefault(other, target)
    return graph, where


def cycles(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def functions(text):
    """(name, first line, length) of each function defined at file level:
    its body opens with "{" alone at the start of a line, below the
    signature, or at the end of a signature that starts a line."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line == "{":
            start = i - 1
            while start > 0 and lines[start - 1].strip() and not lines[start - 1].startswith("#") \
                    and not lines[start - 1].rstrip().endswith((";", "}", "*/")):
                start -= 1
            sig = " ".join(lines[start:i])
        elif re.match(r"^[A-Za-z_].*\)\s*\{$", line):
            start, sig = i, line
        else:
            continue
        m = re.search(r"([A-Za-z_][A-Za-z_0-9]*)\s*\(", sig)
        if not m or "=" in sig.split("(")[0] or sig.startswith(("struct ", "enum ", "union ", "typedef ")) and "(" not in sig:
            continue
        end = i + 1
        while end < len(lines) and lines[end] != "}":
            end += 1
        yield m.group(1), start + 1, end - start + 1


def size_breaches(root, paths):
    """One line per file over MAX_LINES lines and per function over
    MAX_FUNCTION lines among paths (in the product's trees,
    PRODUCT_MAX_LINES and PRODUCT_MAX_FUNCTION)."""
    for p in paths:
        text = open(p, encoding="utf-8").read()
        n = text.count("\n")
        rel = os.path.relpath(p, root)
        max_lines, max_function = MAX_LINES, MAX_FUNCTION
        if tree_of(root, p) in TREES:
            max_lines, max_function = PRODUCT_MAX_LINES, PRODUCT_MAX_FUNCTION
        if n > max_lines:
            yield "file: %s has %d lines (at most %d)" % (rel, n, max_lines)
        for name, line, length in functions(text):
            if length > max_function:
                yield "function: %s:%d %s() has %d lines (at most %d)" % (rel, line, name, length, max_function)


# The tests' files and functions over the limits when the limits came to
# tests/ (issue 31), each to be split: the list only shrinks.  A breach not
# listed fails, and so does a listed one that is gone (take it off).
TEST_SIZE_DEBTS = set()


def test_sizes(root):
    """The size limits on the tests' own C code (every .c and .h under
    tests/): a test is read as often as the code it holds to account.
    Breaches in TEST_SIZE_DEBTS pass."""
    paths = [os.path.join(d, f) for d, _, files in os.walk(os.path.join(root, "tests"))
             for f in sorted(files) if f.endswith((".c", ".h"))]
    found = {}
    for b in size_breaches(root, sorted(paths)):
        m = re.match(r"(?:file: (\S+) has|function: (\S+):\d+ (\S+) has)", b)
        found[m.group(1) or "%s %s" % (m.group(2), m.group(3))] = b
    out = [b for key, b in sorted(found.items()) if key not in TEST_SIZE_DEBTS]
    out += ["debt paid: %s is within the limits now, take it off TEST_SIZE_DEBTS" % key
            for key in sorted(TEST_SIZE_DEBTS - set(found))]
    return out


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../.."))
    paths = list(sources(root))
    breaches = []
    graph, where = include_graph(root, paths)
    for comp in cycles(graph):
        breaches.append("include circle: " + " -> ".join("%s/%s" % r for r in comp))
    breaches += layer_breaches(root, graph, where)
    for comp in cycles(call_graph(root, paths)):
        breaches.append("call circle: " + " -> ".join(comp))
    breaches.extend(size_breaches(root, paths))
    breaches.extend(test_sizes(root))
    for b in breaches:
        print(b)
    rooms = len(graph)
    print("check_structure: %d rooms in %s, %d breaches" % (rooms, ", ".join(TREES), len(breaches)))
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
