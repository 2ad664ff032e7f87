"""The package's module order (docs/design.md, "The Python package"):
every module of python/cudackpt imports only modules of layers below its
own, so that there is no import circle, and none hides one by importing a
module of the package inside a function.

Read from the sources (ast), not from what importing them did: an import
inside a function that would close a circle runs only when the function is
called.  Imports under ``if TYPE_CHECKING:`` are for annotations and never
run, so they may name any module.  Also: no file over MAX_LINES lines, and
no name of a package's namespace is both a module and something else (a
function, say), which would make ``from cudackpt import X`` depend on
import order.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

PACKAGE_NAME = "cudackpt"
PACKAGE = Path(__file__).resolve().parents[2] / "python" / PACKAGE_NAME
MAX_LINES = 500

LAYERS: List[Tuple[str, ...]] = [
    # Bottom first; "" is the package itself (cudackpt/__init__.py).
    ("errors",),  # the exceptions, and the records GroupFailed carries
    ("types",),  # the typed replies
    ("_config", "_codec"),  # environment and deadlines; messages and framing
    ("_requests",),  # each call's parameters, checked
    ("_calls", "_hold", "_jobs", "_default", "_connection"),  # sans-I/O logic shared by both flavours; the socket
    ("lease", "watcher"),  # objects handed their client
    ("job",),
    ("client",),
    ("aio._connection",),  # the asyncio twins, in the same order
    ("aio.lease", "aio.watcher"),
    ("aio.job",),
    ("aio.client",),
    ("aio",),
    ("checkpoint",),  # the drop-in for cuda.core.checkpoint
    ("",),
]
LAYER_OF: Dict[str, int] = {name: i for i, names in enumerate(LAYERS) for name in names}


def _modules() -> Dict[str, Path]:
    """Every module of the package by its dotted name below the package
    ("" for the package, "aio" for a subpackage's __init__)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _join(base: str, name: str) -> str:
    return "%s.%s" % (base, name) if base else name


def _targets(module: str, node: ast.AST) -> List[str]:
    """The modules of the package an import statement of ``module`` loads."""
    if isinstance(node, ast.Import):
        return [n.name[len(PACKAGE_NAME) + 1:] if n.name != PACKAGE_NAME else ""
                for n in node.names if n.name.split(".")[0] == PACKAGE_NAME]
    assert isinstance(node, ast.ImportFrom)
    if node.level == 0:
        if not node.module or node.module.split(".")[0] != PACKAGE_NAME:
            return []
        base = node.module[len(PACKAGE_NAME) + 1:]
    else:
        parts = module.split(".") if module else []
        if not _is_package(module):
            parts = parts[:-1]
        parts = parts[:len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    # "from BASE import x, y": the submodules x and y where they are ones
    # (BASE, a package, is imported already, as every module's parents
    # are), else what BASE itself binds.
    out = [_join(base, n.name) for n in node.names if _join(base, n.name) in MODULES]
    if len(out) < len(node.names):
        out.append(base)
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, in_function: bool = False) -> Iterator[Tuple[ast.AST, bool]]:
    """Every import statement, with whether it runs inside a function;
    those under ``if TYPE_CHECKING:`` left out."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        elif isinstance(node, ast.If) and _is_type_checking(node):
            for other in node.orelse:
                yield from _imports(ast.Module(body=[other], type_ignores=[]), in_function)
        else:
            inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from _imports(node, inside)


def _graph() -> Tuple[Dict[str, Set[str]], List[str]]:
    """The package's import graph (module-level imports), and the imports
    of the package made inside functions."""
    edges: Dict[str, Set[str]] = {}
    hidden: List[str] = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        edges[name] = set()
        for node, in_function in _imports(tree):
            targets = [t for t in _targets(name, node) if t != name]
            if in_function and targets:
                hidden.append("%s:%d imports %s inside a function" % (path.name, node.lineno, ", ".join(targets)))
            elif not in_function:
                edges[name].update(t for t in targets if t in MODULES)
    return edges, hidden


def _circle(edges: Dict[str, Set[str]]) -> Optional[List[str]]:
    """An import circle, as the modules along it, or None."""
    state: Dict[str, int] = {}  # 1: on the path, 2: done
    path: List[str] = []

    def visit(name: str) -> Optional[List[str]]:
        state[name] = 1
        path.append(name)
        for target in sorted(edges.get(name, ())):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[name] = 2
        return None

    for name in sorted(edges):
        if name not in state:
            found = visit(name)
            if found:
                return found
    return None


def _shown(name: str) -> str:
    return _join(PACKAGE_NAME, name) if name else PACKAGE_NAME


def test_no_circle() -> None:
    edges, _ = _graph()
    circle = _circle(edges)
    assert circle is None, "import circle: " + " -> ".join(_shown(n) for n in circle)


def test_no_import_inside_a_function() -> None:
    _, hidden = _graph()
    assert not hidden, "imports of the package inside functions (hiding a circle?):\n" + "\n".join(hidden)


def test_every_module_has_a_layer() -> None:
    missing = sorted(set(MODULES) - set(LAYER_OF))
    assert not missing, "modules in no layer of LAYERS: %s" % ", ".join(_shown(n) for n in missing)
    gone = sorted(set(LAYER_OF) - set(MODULES))
    assert not gone, "LAYERS names modules that do not exist: %s" % ", ".join(_shown(n) for n in gone)


def test_imports_go_down() -> None:
    edges, _ = _graph()
    up = ["%s imports %s (layer %d, not below its own %d)" % (_shown(a), _shown(b), LAYER_OF[b], LAYER_OF[a])
          for a in sorted(edges) for b in sorted(edges[a])
          if a in LAYER_OF and b in LAYER_OF and LAYER_OF[b] >= LAYER_OF[a]]
    assert not up, "imports that climb (see LAYERS):\n" + "\n".join(up)


def test_file_sizes() -> None:
    long = ["%s: %d lines" % (path.relative_to(PACKAGE.parent), n) for path in MODULES.values()
            for n in [len(path.read_text().splitlines())] if n > MAX_LINES]
    assert not long, "files over %d lines:\n%s" % (MAX_LINES, "\n".join(long))


def _bound_names(tree: ast.Module) -> Dict[str, int]:
    """Names a module binds at its top level other than by importing a
    submodule under its own name, with their line."""
    out: Dict[str, int] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node.lineno
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    out[target.id] = node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level and node.module:
            for n in node.names:  # from .x import y: y, not the module y
                out[n.asname or n.name] = node.lineno
    return out


@pytest.mark.parametrize("package", sorted(n for n in MODULES if _is_package(n)))
def test_module_and_other_never_share_a_name(package: str) -> None:
    """Read from the source: the package binds no submodule's name to
    anything else; then imported: each submodule's name is that module."""
    children = {n.rsplit(".", 1)[-1]: n for n in MODULES if n and (n.rsplit(".", 1)[0] if "." in n else "") == package}
    bound = _bound_names(ast.parse(MODULES[package].read_text()))
    clash = ["%s binds %s (line %d), the name of module %s" % (_shown(package), name, bound[name], _shown(child))
             for name, child in sorted(children.items()) if name in bound]
    assert not clash, "\n".join(clash)
    pkg = importlib.import_module(_shown(package))
    for name, child in sorted(children.items()):
        module = importlib.import_module(_shown(child))
        assert getattr(pkg, name) is module, "%s.%s is %r, not the module" % (_shown(package), name, getattr(pkg, name))
    assert sys.modules[_shown(package)] is pkg
