"""Reading the import graph of the code packages off their source, for the layer tests.

Every module of ``sentinel_platform`` and ``workers`` is parsed with :mod:`ast`; each import
(at any depth, ``TYPE_CHECKING`` blocks included) and each string literal that names a
module becomes an :class:`Edge`. What the edges may be is for the tests to say
(``sentinel_platform_tests/test_layers.py``); this module only reads them, and finds the
circles of a graph.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CODE_PACKAGES = ("sentinel_platform", "workers")

#: A string literal naming a module (``a.b``) or an attribute of one (``a.b:c``).
DOTTED_NAME = re.compile(
    r"^(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?::[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)?$"
)


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    #: named in a string literal rather than imported
    by_name: bool = False

    def __str__(self) -> str:
        verb = "names" if self.by_name else "imports"
        return f"{self.source}:{self.line} {verb} {self.target}"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the code packages under ``root``, by dotted name."""
    found: dict[str, Path] = {}
    for package in CODE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            found[module_name(path, root)] = path
    return found


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imported_names(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """Every module name an import statement names (``from a import b`` names ``a`` and,
    when ``b`` is a submodule, ``a.b``), with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            yield base, node.lineno
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def named_modules(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Every module a string literal names (``"a.b"`` or ``"a.b:attr"``), with its line.

    Only whole strings count, so prose (a docstring, a message) never does; whether the
    name is a module of the project is for the caller to judge."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = DOTTED_NAME.match(node.value)
            if match:
                yield match["module"], node.lineno


def internal_edges(root: Path) -> list[Edge]:
    """Imports and references by name from one module of the code packages to another
    (itself excluded)."""
    known = modules(root)
    edges = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        for name, line in imported_names(tree, module, is_package):
            if name in known and name != module:
                edges.append(Edge(module, name, line))
        for name, line in named_modules(tree):
            if name in known and name != module:
                edges.append(Edge(module, name, line, by_name=True))
    return edges


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of ``graph``: its strongly connected parts of more than one node, each
    sorted (Tarjan's algorithm), so a report names all of them, not the first found."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = [stack.pop()]
            while part[-1] != node:
                part.append(stack.pop())
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)
