"""The Dagster code location: every domain's definitions, merged.

Each domain (``sentinel_platform.domains.*``) owns its assets, checks, jobs, schedules
and sensors. The data domains (transactions, axioms, reporting) publish and read the
declared streams, and rescreening queues a day's provisional verdicts again; the
operations domain watches every stream of the registry
(``sentinel_platform.registry``) and is handed the publish jobs it gates from here, so
it never imports a data domain. The demo and reporting domains do read the data
domains' assets: they are built on them. One settings resource is the only way any of
them reads the settings.

A deployment with more streams declares each one's spec in a module named by
``SENTINEL_STREAM_MODULES``; the spec's ``definitions`` (its publish asset and job) are
merged here, and the lag gate, checks and sensors cover the stream like the others.
"""

from __future__ import annotations

import importlib

import dagster as dg

from sentinel_platform.domains import (
    axioms,
    demo,
    operations,
    reporting,
    rescreening,
    shared,
    transactions,
)
from sentinel_platform.registry import stream_specs
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.settings import SettingsError

settings = SettingsResource()


def build_definitions(*extra: dg.Definitions) -> dg.Definitions:
    """The code location: the built-in domains, every declared stream's ``definitions``,
    ``extra`` definitions, and the operations domain over every declared stream."""
    _import_stream_modules()
    data = dg.Definitions.merge(
        shared.defs(settings),  # Spark resources and the one-session-per-run executor
        transactions.defs(),
        axioms.defs(),
        reporting.defs(),
        rescreening.defs(),  # a day's provisional verdicts queued again from the UI
        *_declared_stream_definitions(),
        *extra,
    )
    return dg.Definitions.merge(
        data,
        operations.defs(settings, publish=operations.publish_targets(data)),
        demo.defs(settings),
    )


def _declared_stream_definitions() -> list[dg.Definitions]:
    """The ``definitions`` each declared stream names (``module:attribute``)."""
    found = []
    for spec in stream_specs():
        if spec.definitions is None:
            continue
        module, _, name = spec.definitions.partition(":")
        value = getattr(importlib.import_module(module), name)
        if not isinstance(value, dg.Definitions):
            raise TypeError(f"stream {spec.name}: {spec.definitions} is not a dg.Definitions")
        found.append(value)
    return found


def _import_stream_modules() -> None:
    """Import ``SENTINEL_STREAM_MODULES`` so their specs register before anything is built."""
    try:
        current = settings.load()
    except SettingsError:
        return  # every run, sensor and check that reads the settings names the bad one
    stream_specs(current)


defs = build_definitions()
