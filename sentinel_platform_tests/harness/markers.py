"""One marker per test harness, set at collection (``make test-fast`` deselects by them).

Each test is marked with every harness it reaches:

``spark``      a SparkSession (the ``spark`` fixture) or a Spark standalone cluster
``dagster``    a Dagster instance, a materialisation, or Dagster's CLI / a code location
``processes``  child processes: workers, the ``sentinel`` or ``dagster`` CLI, detached servers
``redis``      a real Redis/Valkey server: the session's (``settings``, ``redis_client``, ...)
               or one the test starts itself

They are found from the fixtures a test uses (``item.fixturenames``: every fixture it
depends on, transitively) and from the code the test and its fixtures run, followed into
this suite's own helpers (``harness/processes.py``, ``harness/sentinel_up.py``,
``harness/dagster_cli.py``, ``bench/timing.py``, ...), so a test that spawns processes
through a helper is found as well. The platform's own code is not followed: what of it
starts a harness is listed in ``_PLATFORM_HARNESSES``. A test no harness reaches is pure.
Markers a module sets itself (``pytestmark = pytest.mark.spark``) are kept.

The suite's plugin (:mod:`.plugin`) calls :func:`mark_harnesses` from
``pytest_collection_modifyitems``; the markers are registered in ``pyproject.toml``.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import multiprocessing
import subprocess
import types

import pytest

#: Fixtures that are (or start) a harness; tests depending on them inherit it.
HARNESS_FIXTURES: dict[str, frozenset[str]] = {
    "spark": frozenset({"spark", "spark_standalone"}),
    # ``platform``/``calm_platform`` (and the modules' own ``platform``): ``sentinel up``
    # with its Dagster webserver, daemon and code server
    "dagster": frozenset({"dagster_instance", "platform", "calm_platform"}),
    "processes": frozenset(
        {"start_worker", "fleet", "platform", "browser", "postgres_server", "llama_server"}
    ),
    "redis": frozenset({"redis_server", "redis_binary", "redis_cluster"}),
}
#: Names in the code a test runs that mean a harness (functions and attributes alike).
_HARNESS_NAMES: dict[str, str] = {
    "SparkSession": "spark",
    "instance_for_test": "dagster",
    "DagsterInstance": "dagster",
    "materialize": "dagster",
    "materialize_to_memory": "dagster",
    "execute_in_process": "dagster",
    "Popen": "processes",
    "fork": "processes",
}
#: The platform's own objects that start a harness (``module:name``); the platform's code is
#: not followed, so what it starts is named here.
_PLATFORM_HARNESSES: dict[str, tuple[str, ...]] = {
    "sentinel_platform.redis_server:RedisServer": ("redis",),
    # the embedded server of ``sentinel up``: a detached server process, outliving its caller
    "sentinel_platform.redis_server:ensure_embedded": ("redis", "processes"),
    "sentinel_platform.cli.supervisor:Supervisor": ("processes",),
}


def _harness_objects() -> dict[int, tuple[str, ...]]:
    """``id(object) -> markers`` of the objects whose use means a harness."""
    found: dict[int, tuple[str, ...]] = {
        id(subprocess): ("processes",),
        id(multiprocessing): ("processes",),
    }
    for spec, markers in _PLATFORM_HARNESSES.items():
        module, _, name = spec.partition(":")
        # renamed or moved: its tests run in `make test-fast` until the entry is updated
        with contextlib.suppress(ImportError, AttributeError):
            found[id(getattr(importlib.import_module(module), name))] = markers
    return found


_HARNESS_OBJECTS = _harness_objects()
#: Where the suite's helpers live: code from here is followed, the platform's is not.
_HELPER_PACKAGES = ("sentinel_platform_tests", "bench")
_following: set[types.CodeType] = set()
_reached_by: dict[types.CodeType, frozenset[str]] = {}


def _is_helper(obj: object) -> bool:
    """Whether ``obj`` is a module, function or class of this suite (not of the platform)."""
    if isinstance(obj, types.ModuleType):
        module = obj.__name__
    elif isinstance(obj, (types.FunctionType, type)):
        module = obj.__module__
    else:
        return False
    return isinstance(module, str) and module.split(".")[0] in _HELPER_PACKAGES


def _functions_of(obj: object) -> list[types.FunctionType]:
    """The functions of a helper object (itself, a class's methods), if it is one."""
    if not _is_helper(obj):
        return []
    if isinstance(obj, types.FunctionType):
        return [obj]
    if isinstance(obj, type):
        found = []
        for member in vars(obj).values():
            member = getattr(member, "__func__", member)  # staticmethod, classmethod
            member = getattr(member, "fget", member)  # property
            if isinstance(member, types.FunctionType):
                found.append(member)
        return found
    return []


def _harnesses_reached(function: object) -> frozenset[str]:
    """The harnesses ``function`` reaches, following the helpers it names."""
    function = inspect.unwrap(getattr(function, "__func__", function))  # type: ignore[arg-type]
    code = getattr(function, "__code__", None)
    if code is None or code in _following:
        return frozenset()
    if code in _reached_by:
        return _reached_by[code]
    _following.add(code)
    found: set[str] = set()
    namespace = getattr(function, "__globals__", {})
    pending = [code]
    while pending:
        current = pending.pop()
        pending.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
        for name in current.co_names:
            if name in _HARNESS_NAMES:
                found.add(_HARNESS_NAMES[name])
            if name not in namespace:
                continue
            obj = namespace[name]
            found.update(_HARNESS_OBJECTS.get(id(obj), ()))
            if isinstance(obj, types.ModuleType) and _is_helper(obj):
                members = [getattr(obj, n) for n in current.co_names if hasattr(obj, n)]
            else:
                members = [obj]
            for member in members:
                for helper in _functions_of(member):
                    found |= _harnesses_reached(helper)
    _following.discard(code)
    # (a helper calling back into one being followed is cut short; none of the suite does)
    _reached_by[code] = frozenset(found)
    return _reached_by[code]


def _harnesses_of(item: pytest.Item) -> set[str]:
    """The harnesses of a test: its fixtures', its own code's and its fixtures' code's."""
    fixtures = set(getattr(item, "fixturenames", ()))
    found = {marker for marker, names in HARNESS_FIXTURES.items() if fixtures & names}
    function = getattr(item, "function", None)
    if function is not None:
        found |= _harnesses_reached(function)
    info = getattr(item, "_fixtureinfo", None)
    for name in fixtures:
        for fixturedef in info.name2fixturedefs.get(name, ()) if info else ():
            if _is_helper(fixturedef.func):
                found |= _harnesses_reached(fixturedef.func)
    return found


def mark_harnesses(items: list[pytest.Item]) -> None:
    """Add the marker of every harness each item reaches (unless it has it already)."""
    for item in items:
        for marker in sorted(_harnesses_of(item)):
            if item.get_closest_marker(marker) is None:
                item.add_marker(marker)
