"""Imports go one way: cli -> domains -> resources -> streams -> foundation.

The rule is read off the source, not trusted to review: every module of
``sentinel_platform`` and ``workers`` is parsed with :mod:`ast`, each import (at any depth,
``TYPE_CHECKING`` blocks included) becomes an edge, and an edge may only point to the
same or a lower layer. ``workers`` sits beside ``cli``: both are entry points, and the
workers need nothing above the streams. On top of the layers, no two packages may import
each other, even indirectly, and no code imports Dagster's private modules.

A module can also reach another by name, without an import: a string literal that is a
module of the code packages (``"sentinel_platform.definitions"``) or a ``module:attribute``
reference (``"workers.processors.transactions:from_settings"``, loaded later with
:mod:`importlib`). Such a string is an edge like an import, so an upward one fails too,
unless :data:`RUN_TIME_REFERENCES` declares it: a name handed to code of a higher layer,
which resolves it at run time.
"""

from __future__ import annotations

import ast
import graphlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CODE_PACKAGES = ("sentinel_platform", "workers")

#: Layer of each module, by its longest matching name prefix; higher may import lower.
LAYERS: dict[str, int] = {
    "sentinel_platform.cli": 4,
    "sentinel_platform.workers": 4,
    "workers": 4,
    "sentinel_platform.definitions": 3,
    "sentinel_platform.domains": 3,
    "sentinel_platform.resources": 2,
    "sentinel_platform.alerting": 2,
    "sentinel_platform.streams": 1,
    "sentinel_platform.settings": 0,
    "sentinel_platform.schemas": 0,
    "sentinel_platform.redaction": 0,
    "sentinel_platform.storage_uri": 0,
    "sentinel_platform.logs": 0,
    "sentinel_platform.redis_server": 0,
    "sentinel_platform.aml_rules": 0,
    "sentinel_platform": 0,
}
#: What the workers may import besides themselves: they share no code with cli or Dagster.
WORKER_LAYERS = {0, 1}
#: The worker processes' code: their entry point and the domain processors.
WORKER_CODE = ("workers", "sentinel_platform.workers")


#: Upward references by name that the layers allow, each with who resolves it and when.
#: The registry (the bottom layer) names what each stream needs from higher up; it never
#: imports it, and the layer that uses the name imports it at run time.
RUN_TIME_REFERENCES: dict[tuple[str, str], str] = {
    ("sentinel_platform.registry", "workers.processors.transactions"): (
        "StreamSpec.processor: built by the worker process (workers.runtime.load_processor)"
    ),
    ("sentinel_platform.registry", "workers.processors.axioms"): (
        "StreamSpec.processor: built by the worker process (workers.runtime.load_processor)"
    ),
    ("sentinel_platform.registry", "sentinel_platform.resources.wire_columns"): (
        "StreamSpec.spark_frame: built by the publisher resource"
    ),
    ("sentinel_platform.resources.io_manager", "sentinel_platform.definitions"): (
        "the code location named in an operator's command (dagster asset materialize -m)"
    ),
}
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

    @property
    def declared_run_time_reference(self) -> bool:
        return self.by_name and (self.source, self.target) in RUN_TIME_REFERENCES


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


def import_time_edges(root: Path) -> list[Edge]:
    """:func:`internal_edges` but the declared :data:`RUN_TIME_REFERENCES`."""
    return [edge for edge in internal_edges(root) if not edge.declared_run_time_reference]


def layer_of(module: str) -> int:
    prefixes = [p for p in LAYERS if module == p or module.startswith(p + ".")]
    if not prefixes:
        raise LookupError(f"{module} has no layer: add it to LAYERS")
    return LAYERS[max(prefixes, key=len)]


def package_of(module: str, root: Path) -> str:
    """The unit a cycle is judged between: a sub-package for the modules inside it, the
    module itself for one directly in a top-level package (``sentinel_platform.settings``)
    or in the consumer, whose top level is both the ground under its rooms and the loop
    over them (:data:`CONSUMER_ROOMS`)."""
    if root.joinpath(*module.split(".")).is_dir():
        return module
    parent = module.rpartition(".")[0]
    return module if parent in (*CODE_PACKAGES, CONSUMER) else parent


def upward_edges(root: Path) -> list[str]:
    bad = []
    for edge in import_time_edges(root):
        source, target = layer_of(edge.source), layer_of(edge.target)
        is_worker = edge.source.startswith(WORKER_CODE)
        if is_worker and not edge.target.startswith(WORKER_CODE):
            if target not in WORKER_LAYERS:
                bad.append(f"{edge} (workers may import only streams and foundation)")
        elif target > source:
            bad.append(f"{edge} (layer {source} -> {target})")
    return bad


def package_cycle(root: Path) -> list[str]:
    """A cycle of packages importing each other, or an empty list."""
    graph: dict[str, set[str]] = {}
    for edge in import_time_edges(root):
        source, target = package_of(edge.source, root), package_of(edge.target, root)
        if source != target:
            graph.setdefault(source, set()).add(target)
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as error:
        return list(error.args[1])
    return []


def private_dagster_imports(root: Path) -> list[str]:
    found = []
    for folder in (*CODE_PACKAGES, "sentinel_platform_tests", "bench"):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for name, line in imported_names(tree, "", False):
                if name.startswith("dagster._") or name.startswith("dagster_pyspark._"):
                    found.append(f"{path.relative_to(root)}:{line} imports {name}")
    return found


def module_getattr(root: Path) -> list[str]:
    found = []
    for module, path in modules(root).items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                found.append(f"{module}:{node.lineno} defines a module __getattr__")
    return found


#: The Dagster code: it reads settings only through the settings resource.
DAGSTER_CODE = (
    "sentinel_platform.definitions",
    "sentinel_platform.domains",
    "sentinel_platform.resources",
    "sentinel_platform.alerting",
)
SETTINGS_RESOURCE = "sentinel_platform.resources.settings"
LOADERS = {"sentinel_platform.settings.load_settings", "sentinel_platform.settings.get_settings"}


def settings_loaders(root: Path) -> list[str]:
    """Dagster-code modules other than the settings resource that load settings themselves."""
    found = []
    for module, path in modules(root).items():
        if module == SETTINGS_RESOURCE or not module.startswith(DAGSTER_CODE):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for name, line in imported_names(tree, module, path.name == "__init__.py"):
            if name in LOADERS:
                found.append(f"{module}:{line} imports {name}")
    return found


STREAMS = "sentinel_platform.streams"
#: What each group of the streams core may import from the others: the plumbing nothing,
#: the backlog's state the plumbing, and each side (workers, producer, operators) those two.
STREAMS_GROUPS: dict[str, set[str]] = {
    "plumbing": set(),
    "backlog": {"plumbing"},
    "consumer": {"plumbing", "backlog"},
    "producer": {"plumbing", "backlog"},
    "operators": {"plumbing", "backlog"},
}
CONSUMER = f"{STREAMS}.consumer"


def streams_group(module: str) -> str | None:
    """The group of a module of the streams core (``None`` outside it)."""
    if not module.startswith(STREAMS + "."):
        return None
    return module[len(STREAMS) + 1 :].split(".")[0]


def streams_group_edges(root: Path) -> list[str]:
    """Imports between groups of the streams core that :data:`STREAMS_GROUPS` forbids."""
    bad = []
    for edge in internal_edges(root):
        source, target = streams_group(edge.source), streams_group(edge.target)
        if source is None or target is None or source == target:
            continue
        if target not in STREAMS_GROUPS.get(source, set()):
            bad.append(f"{edge} ({source} may import only {sorted(STREAMS_GROUPS[source])})")
    return bad


def consumer_reached_from_outside(root: Path) -> list[str]:
    """Imports of the consumer's internals by anything but the worker processes."""
    return [
        str(edge)
        for edge in internal_edges(root)
        if (edge.target == CONSUMER or edge.target.startswith(CONSUMER + "."))
        and not edge.source.startswith((CONSUMER, *WORKER_CODE))
    ]


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


def consumer_circles(root: Path) -> list[list[str]]:
    """Circles of imports between modules of the consumer (``TYPE_CHECKING`` ones too)."""
    graph: dict[str, set[str]] = {}
    for edge in import_time_edges(root):
        if edge.source.startswith(CONSUMER) and edge.target.startswith(CONSUMER):
            graph.setdefault(edge.source, set()).add(edge.target)
    return circles(graph)


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        (
            {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}},
            [["a", "b", "c"], ["d", "e"]],
        ),
    ],
)
def test_every_circle_of_a_graph_is_found(
    graph: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert circles(graph) == expected


def test_no_two_modules_of_the_consumer_import_each_other() -> None:
    assert consumer_circles(ROOT) == []


def test_every_module_of_the_streams_core_is_in_a_declared_group() -> None:
    groups = {streams_group(m) for m in modules(ROOT)} - {None}
    assert groups == set(STREAMS_GROUPS)


def test_groups_of_the_streams_core_import_one_way() -> None:
    assert streams_group_edges(ROOT) == []


def test_only_the_worker_processes_reach_the_consumer() -> None:
    assert consumer_reached_from_outside(ROOT) == []


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in modules(ROOT):
        try:
            layer_of(module)
        except LookupError as error:
            unplaced.append(str(error))
    assert not unplaced


def test_no_module_imports_a_higher_layer() -> None:
    assert internal_edges(ROOT), "no imports found: the parser is looking at the wrong tree"
    assert upward_edges(ROOT) == []


def test_references_by_name_are_edges_too() -> None:
    named = {(e.source, e.target) for e in internal_edges(ROOT) if e.by_name}
    assert ("sentinel_platform.registry", "workers.processors.transactions") in named


def test_every_declared_run_time_reference_is_still_made() -> None:
    named = {(e.source, e.target) for e in internal_edges(ROOT) if e.by_name}
    assert set(RUN_TIME_REFERENCES) <= named


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('X = "pkg.mod:factory"', {"pkg.mod"}),
        ('X = "pkg.mod"', {"pkg.mod"}),
        ('X = "pkg.mod:Class.method"', {"pkg.mod"}),
        ('X = "see pkg.mod for details"', set()),
        ('X = "plain"', set()),
        ('X = "sentinel/publish/pkg"', set()),
    ],
)
def test_module_names_are_read_off_whole_string_literals(source: str, expected: set[str]) -> None:
    assert {name for name, _ in named_modules(ast.parse(source))} == expected


def test_no_two_packages_import_each_other() -> None:
    assert package_cycle(ROOT) == []


def test_dagster_code_reads_settings_only_through_the_settings_resource() -> None:
    assert settings_loaders(ROOT) == []


def test_no_private_dagster_imports() -> None:
    assert private_dagster_imports(ROOT) == []


def test_no_module_hides_names_behind_a_module_getattr() -> None:
    assert module_getattr(ROOT) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from . import b", "pkg.b"),
        ("from .b import c", "pkg.b.c"),
        ("from ..x import y", "x.y"),
    ],
)
def test_relative_imports_are_resolved_against_the_importing_module(
    source: str, expected: str
) -> None:
    names = {n for n, _ in imported_names(ast.parse(source), "pkg.a", is_package=False)}
    assert expected in names
