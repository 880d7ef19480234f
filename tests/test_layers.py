"""No import cycle between mqtool's packages, nor between its modules (issue #30, "Layers without cycles").

Every module's imports are read with `ast`: top-level and function-local ones alike (a function-local import
still ties the packages together, it only hides the cycle from Python's import machinery), except those under
`if TYPE_CHECKING:` (never run). Each edge "package A imports package B" (or module A imports module B) is kept
with the lines that make it, so a failure names the import to move.
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "mqtool"
PACKAGES = ("formats", "store", "rules", "inspect", "simulate", "audit", "trace", "spark", "builder", "cli")

# Package edges still part of a cycle, each with why it stays: none today. An entry is ("a", "b") for a -> b.
ALLOWED: set[tuple[str, str]] = set()

# Module cycles still there, each with why it stays (names relative to mqtool): none today.
ALLOWED_MODULE_CYCLES: set[frozenset[str]] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(path: Path) -> list[tuple[str, tuple[str, ...], int]]:
    """The imports of `path` as it is now (parsed once per content: five tests read the whole tree)."""
    return _parsed_statements(path, path.read_text(encoding="utf-8"))


@functools.cache
def _parsed_statements(path: Path, text: str) -> list[tuple[str, tuple[str, ...], int]]:
    """(absolute module name, names taken from it, line) of every import in `path` that runs: also inside
    functions, not under `if TYPE_CHECKING:` (its `else:` branch does run). `import a.b` takes no names."""
    module = _module_name(path)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[str, tuple[str, ...], int]] = []

    def visit(nodes: list[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.extend((alias.name, (), node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                name = ".".join([*base, *([node.module] if node.module else [])])
                found.append((name, tuple(alias.name for alias in node.names), node.lineno))
            visit(list(ast.iter_child_nodes(node)))

    visit(ast.parse(text, str(path)).body)
    return found


def _imported(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in `path` that runs; `from pkg import x` gives both `pkg` and
    `pkg.x` (x may be a module)."""
    found: list[tuple[str, int]] = []
    for name, names, line in _statements(path):
        found.append((name, line))
        found.extend((f"{name}.{alias}", line) for alias in names)
    return found


def package_edges() -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) -> the "module:line -> name" imports that make the edge."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        source = module.split(".")[1] if module.count(".") else None
        if source not in PACKAGES:
            continue
        for name, line in _imported(path):
            parts = name.split(".")
            if parts[0] == "mqtool" and len(parts) > 1 and parts[1] in PACKAGES and parts[1] != source:
                edges.setdefault((source, parts[1]), []).append(f"{module}:{line} -> {name}")
    return edges


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def cycle_edges(edges: dict[tuple[str, str], list[str]]) -> dict[tuple[str, str], list[str]]:
    """The edges a -> b where b leads back to a: every edge of a package cycle."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    return {(a, b): where for (a, b), where in edges.items() if a in _reachable(graph, b)}


def module_edges() -> dict[tuple[str, str], list[str]]:
    """(importing module, imported module) -> the "line -> name" imports that make the edge, for mqtool's modules.

    `from pkg import mod` is an edge to `mod` only; `from pkg import name` (a name `pkg/__init__.py` defines) an
    edge to `pkg`. A submodule's import does not count as an import of its parent packages (Python runs their
    `__init__` first, but that is no cycle between the modules' own code).
    """
    paths = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}

    def resolve(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[tuple[str, str], list[str]] = {}
    for module, path in paths.items():
        for name, names, line in _statements(path):
            if not name.startswith("mqtool"):
                continue
            targets = [f"{name}.{a}" if f"{name}.{a}" in paths else resolve(name) for a in names] or [resolve(name)]
            for target in dict.fromkeys(targets):
                if target is not None and target != module:
                    edges.setdefault((module, target), []).append(f"{line} -> {name}")
    return edges


def module_cycles(edges: dict[tuple[str, str], list[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module: each is one or more import cycles."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    reach = {m: _reachable(graph, m) for m in graph}
    out: list[frozenset[str]] = []
    for m in sorted(graph):
        if m in reach[m] and not any(m in c for c in out):
            out.append(frozenset({m} | {n for n in reach[m] if m in reach.get(n, ())}))
    return out


def _short(cycle: frozenset[str]) -> frozenset[str]:
    return frozenset(m.removeprefix("mqtool.") for m in cycle)


def test_the_parser_sees_local_relative_and_type_checking_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "mqtool" / "inspect"
    pkg.mkdir(parents=True)
    (pkg / "view.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from mqtool.store import recovery\n"
        "from . import delay\n"
        "if TYPE_CHECKING:\n"
        "    from mqtool.simulate import model\n"
        "else:\n"
        "    import mqtool.rules.schedule\n"
        "def f():\n"
        "    from ..trace import core\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / "mqtool")
    names = {name for name, _ in _imported(pkg / "view.py")}
    assert {"mqtool.store.recovery", "mqtool.inspect.delay", "mqtool.rules.schedule", "mqtool.trace.core"} <= names
    assert not any(n.startswith("mqtool.simulate") for n in names)


def test_a_cycle_is_found_and_an_acyclic_graph_passes():
    edges = {
        ("builder", "inspect"): ["x"],
        ("inspect", "simulate"): ["y"],
        ("simulate", "builder"): ["z"],
        ("trace", "store"): ["w"],
    }
    assert set(cycle_edges(edges)) == {("builder", "inspect"), ("inspect", "simulate"), ("simulate", "builder")}
    del edges[("builder", "inspect")]
    assert cycle_edges(edges) == {}


def test_no_import_cycle_between_packages():
    edges = package_edges()
    assert ("cli", "inspect") in edges and ("store", "formats") in edges  # the walk really reads the imports
    cycles = {edge: where for edge, where in cycle_edges(edges).items() if edge not in ALLOWED}
    assert not cycles, "\n".join(f"{a} -> {b}: {'; '.join(where[:3])}" for (a, b), where in sorted(cycles.items()))


def test_the_module_graph_takes_submodules_and_package_names_apart(tmp_path, monkeypatch):
    pkg = tmp_path / "mqtool" / "simulate"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from mqtool.simulate.runner import simulate\nVERSION = 1\n")
    (pkg / "runner.py").write_text("from mqtool.simulate.timer import T\ndef simulate(): pass\n")
    (pkg / "timer.py").write_text("from mqtool.simulate import plainscan\nT = 1\n")
    (pkg / "plainscan.py").write_text("def f():\n    from mqtool.simulate import VERSION\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path / "mqtool")
    edges = module_edges()
    assert ("mqtool.simulate.timer", "mqtool.simulate.plainscan") in edges
    assert ("mqtool.simulate.timer", "mqtool.simulate") not in edges  # `from pkg import mod` is no edge to pkg
    assert ("mqtool.simulate.plainscan", "mqtool.simulate") in edges  # a name from pkg/__init__.py is
    assert module_cycles(edges) == [
        frozenset({"mqtool.simulate", "mqtool.simulate.runner", "mqtool.simulate.timer", "mqtool.simulate.plainscan"})
    ]
    (pkg / "plainscan.py").write_text("VERSION = 1\n")
    assert module_cycles(module_edges()) == []


def test_no_import_cycle_between_modules():
    edges = module_edges()
    assert ("mqtool.audit.tasks", "mqtool.audit.storetask") in edges  # the walk really reads the imports
    found = {_short(c): c for c in module_cycles(edges)}
    cycles = {short: c for short, c in found.items() if short not in ALLOWED_MODULE_CYCLES}
    assert not cycles, "\n".join(
        f"{sorted(short)}: "
        + "; ".join(f"{a} {w}" for (a, b), where in sorted(edges.items()) if a in c and b in c for w in where[:2])
        for short, c in cycles.items()
    )


def test_every_allowed_module_cycle_still_exists():
    """An ALLOWED_MODULE_CYCLES entry that is no longer a cycle (exactly those modules) is removed from the list."""
    assert ALLOWED_MODULE_CYCLES <= {_short(c) for c in module_cycles(module_edges())}


def test_every_allowed_edge_still_closes_a_cycle():
    """An ALLOWED entry that no longer closes a cycle is removed from the list."""
    assert ALLOWED <= set(cycle_edges(package_edges()))
