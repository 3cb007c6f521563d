"""Imports go one way: cli -> domains -> resources -> streams -> foundation.

The rule is read off the source, not trusted to review: every module of
``sentinel_platform`` and ``workers`` is parsed with :mod:`ast`
(:mod:`~sentinel_platform_tests.harness.import_graph`), each import (at any depth,
``TYPE_CHECKING`` blocks included) becomes an edge, and an edge may only point to the
same or a lower layer. ``workers`` sits beside ``cli``: both are entry points, and the
workers need nothing above the streams. On top of the layers, no two packages may import
each other, even indirectly, and no code imports Dagster's private modules. Inside the
consumer, each room imports only the rooms below it (:data:`CONSUMER_ROOMS`) and no two
modules import each other.

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
from pathlib import Path

import pytest

from sentinel_platform_tests.harness.import_graph import (
    CODE_PACKAGES,
    Edge,
    circles,
    imported_names,
    internal_edges,
    modules,
    named_modules,
)

ROOT = Path(__file__).resolve().parents[1]

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
        "StreamSpec.processor: built by the worker process (workers.startup.load_processor)"
    ),
    ("sentinel_platform.registry", "workers.processors.axioms"): (
        "StreamSpec.processor: built by the worker process (workers.startup.load_processor)"
    ),
    ("sentinel_platform.registry", "sentinel_platform.resources.wire_columns"): (
        "StreamSpec.spark_frame: built by the publisher resource"
    ),
    ("sentinel_platform.resources.io_manager", "sentinel_platform.definitions"): (
        "the code location named in an operator's command (dagster asset materialize -m)"
    ),
}


def declared_run_time_reference(edge: Edge) -> bool:
    return edge.by_name and (edge.source, edge.target) in RUN_TIME_REFERENCES


def import_time_edges(root: Path) -> list[Edge]:
    """:func:`internal_edges` but the declared :data:`RUN_TIME_REFERENCES`."""
    return [edge for edge in internal_edges(root) if not declared_run_time_reference(edge)]


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
#: the backlog's state the plumbing, and each side (workers, producer, operators) those two
#: (the operators also the shards of a stream, to show it as one, the producer to route
#: rows to them);
#: the sharding decisions (placement, routing) are pure, and its keys are the plumbing's.
STREAMS_GROUPS: dict[str, set[str]] = {
    "plumbing": set(),
    "backlog": {"plumbing"},
    "consumer": {"plumbing", "backlog"},
    "producer": {"plumbing", "backlog", "sharding"},
    "operators": {"plumbing", "backlog", "sharding"},
    "sharding": {"plumbing"},
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


#: The consumer's rooms, lowest first: a room may import only the rooms before it and the
#: shared ground (the consumer's own top-level modules but :data:`CONSUMER_TOP`).
CONSUMER_ROOMS = ("healing", "calling", "settling", "reading", "stopping")
#: Above every room: the loop and the building of its parts, which tie the rooms together.
CONSUMER_TOP = ("loop", "parts")


def consumer_rank(module: str) -> int:
    """Where a module of the consumer stands: 0 the shared ground, then each room in
    :data:`CONSUMER_ROOMS` order, then :data:`CONSUMER_TOP`; imports go to a rank no higher."""
    name = module.removeprefix(CONSUMER).removeprefix(".").split(".")[0]
    if name in CONSUMER_TOP:
        return len(CONSUMER_ROOMS) + 1
    return CONSUMER_ROOMS.index(name) + 1 if name in CONSUMER_ROOMS else 0


def consumer_room_edges(root: Path) -> list[str]:
    """Imports and references inside the consumer that go up: to a later room, or to
    the loop and its parts, from below them."""
    inside = [e for e in internal_edges(root) if e.source.startswith(CONSUMER)]
    return [
        f"{edge} (rank {consumer_rank(edge.source)} -> {consumer_rank(edge.target)})"
        for edge in inside
        if edge.target.startswith(CONSUMER)
        and consumer_rank(edge.target) > consumer_rank(edge.source)
    ]


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


@pytest.mark.parametrize(
    ("module", "rank"),
    [
        (CONSUMER, 0),
        (f"{CONSUMER}.processor", 0),
        (f"{CONSUMER}.outcomes", 0),
        (f"{CONSUMER}.healing", 1),
        (f"{CONSUMER}.healing.lease", 1),
        (f"{CONSUMER}.calling.in_flight", 2),
        (f"{CONSUMER}.settling.outbox", 3),
        (f"{CONSUMER}.reading.triage", 4),
        (f"{CONSUMER}.stopping.wind_down", 5),
        (f"{CONSUMER}.loop", 6),
        (f"{CONSUMER}.parts", 6),
    ],
)
def test_each_module_of_the_consumer_has_the_rank_of_its_room(module: str, rank: int) -> None:
    assert consumer_rank(module) == rank


def test_every_sub_package_of_the_consumer_is_a_declared_room() -> None:
    folder = ROOT.joinpath(*CONSUMER.split("."))
    rooms = {p.parent.name for p in folder.glob("*/__init__.py")}
    assert rooms == set(CONSUMER_ROOMS)


def test_rooms_of_the_consumer_import_only_the_rooms_below_them() -> None:
    assert consumer_room_edges(ROOT) == []


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
