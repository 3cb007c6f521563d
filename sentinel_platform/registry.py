"""The stream registry: every stream the platform carries, each declared once.

A :class:`StreamSpec` holds every fact about one stream that more than one part of the
platform needs: its Redis names (stream, group, results), its wire model (the Sentinel-L7
entry format), the Spark columns it is published from, the processor its workers run,
the Dagster asset and job that publish it, and the name prefix of its workers under
``sentinel up``. Key names, publishing, the operations sensors and checks, ``sentinel up``,
``sentinel status``, ``sentinel dlq``, the worker entry point
(``python -m sentinel_platform.workers <name>``), the tests and the benchmarks all read
the registry; none of them names a stream.

The module sits at the bottom of the import graph (it needs only the settings and the
wire models), so the streams core can read it. What lives higher up is named here by
string and resolved where it is used: the processor factory (``module:factory``, built by
the worker process, :func:`workers.startup.load_processor`), the Spark frame builder
(built by the publisher resource) and the Dagster definitions of the stream's publish
asset and job (merged by the code location).

Those names are edges of the import graph all the same, and the layer test reads them as
such (a string literal naming a module of the project); the ones made here are declared
there as run-time references (``RUN_TIME_REFERENCES`` of
:mod:`sentinel_platform_tests.test_layers`), each with the layer that resolves it, so a
new upward name fails until someone says who loads it. Registering the processors from
the worker package instead would keep the name out of this module, but every other reader
of a spec (``sentinel up``, ``sentinel status``, the publisher) would then see a stream
without its processor unless it imported the worker's code, and a stream a deployment
declares would name its processor differently from the built-in ones. A name, checked for
its ``module:attribute`` form at declaration and imported only by the worker, keeps one
spelling for every stream and the bottom layer free of imports from above.

A deployment adds a stream by putting its :func:`register` call in a module and naming
that module in ``SENTINEL_STREAM_MODULES``; every process imports those modules when it
reads the registry through :func:`stream_specs`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.settings import Settings

__all__ = [
    "AXIOMS",
    "TRANSACTIONS",
    "Setting",
    "StreamSpec",
    "UnknownStreamError",
    "WireModel",
    "publish_pool",
    "register",
    "resolve_stream",
    "spec_for",
    "stream_of_pool",
    "stream_specs",
]

W = TypeVar("W", bound="WireModel")


class WireModel(Protocol):
    """What a stream's wire model offers: parse an entry, write it back, name its key."""

    @classmethod
    def from_fields(cls: type[W], fields: Mapping[str, str]) -> W: ...

    @classmethod
    def model_validate(cls: type[W], obj: Any) -> W: ...

    def to_fields(self) -> dict[str, str]: ...

    @property
    def natural_key(self) -> str: ...


@dataclass(frozen=True)
class Setting:
    """A name read from a :class:`~sentinel_platform.settings.Settings` field at run time.

    The built-in streams keep their ``SENTINEL_*`` variables this way
    (``Setting("transactions_stream")`` is ``SENTINEL_TRANSACTIONS_STREAM``); a stream
    declared by a deployment may give plain strings instead.
    """

    field: str

    def resolve(self, settings: Settings) -> str:
        value = getattr(settings, self.field)
        if not isinstance(value, str):
            raise TypeError(f"setting {self.field} is not a string")
        return value


Name = str | Setting


def _resolve(name: Name, settings: Settings) -> str:
    return name.resolve(settings) if isinstance(name, Setting) else name


@dataclass(frozen=True)
class StreamSpec:
    """One stream, as every part of the platform sees it.

    ``name`` is the registry key: the argument of ``python -m sentinel_platform.workers``,
    the ``kind`` the publisher resource is called with, and the label in metrics and
    run keys. ``payload_field`` chooses the entry layout: one field holding the row as a
    JSON object (Sentinel-L7's transactions, ``data``), or, when ``None``, one string
    field per column (the axioms).
    """

    name: str
    stream: Name
    group: Name
    results: Name
    wire_model: type[WireModel]
    columns: tuple[str, ...]
    processor: str
    asset: str
    publish_job: str
    worker_prefix: str
    payload_field: str | None = None
    recent: Name | None = None
    #: ``module:function`` building the wire frame in the JVM (fast path); ``None``
    #: sends every row through the wire model on the executors.
    spark_frame: str | None = None
    description: str = ""
    #: ``sentinel up``'s option for this stream's worker count (default ``<name>-workers``).
    workers_option: str | None = None
    #: ``module:attribute`` of a ``dg.Definitions`` holding the stream's publish asset and
    #: job, merged into the code location; ``None`` for the built-in streams, whose
    #: assets live in the location's own domains.
    definitions: str | None = None
    #: Redis streams the stream is spread over (``sentinel_platform.streams.sharding``):
    #: 1 is today's single key, byte for byte; N > 1 spreads it over a cluster's masters.
    shards: int = 1
    #: ``module:function`` giving the natural key as a Spark column of the wire frame,
    #: so a sharded stream's rows are routed in the JVM; ``None`` routes every row on the
    #: executors through the wire model's ``natural_key``.
    spark_key: str | None = None

    def __post_init__(self) -> None:
        paths = (
            ("processor", self.processor),
            ("spark_frame", self.spark_frame),
            ("spark_key", self.spark_key),
            ("definitions", self.definitions),
        )
        for label, value in paths:
            if value is not None and not _is_import_path(value):
                raise ValueError(f"stream {self.name}: {label} {value!r} is not module:attribute")
        if not self.columns:
            raise ValueError(f"stream {self.name}: columns must not be empty")
        if isinstance(self.shards, bool) or not isinstance(self.shards, int) or self.shards < 1:
            raise ValueError(f"stream {self.name}: shards must be a whole number >= 1")

    @property
    def pool(self) -> str:
        """The Dagster concurrency pool of this stream's publish step.

        The publish asset declares it (``pool=``) and ``sentinel up`` limits it to one
        slot in the instance's database, so two runs publishing the stream never run at
        once, whoever launched them (the lag gate, a click on *Materialize*, a backfill).
        """
        return publish_pool(self.name)

    @property
    def workers_flag(self) -> str:
        """``sentinel up``'s ``--<...>-workers`` option for this stream."""
        return f"--{self.workers_option or f'{self.name}-workers'}"

    @property
    def wire_fields(self) -> tuple[str, ...]:
        """The entry's field names, in the order the Spark frame produces them."""
        return (self.payload_field,) if self.payload_field else self.columns

    def stream_key(self, settings: Settings) -> str:
        return _resolve(self.stream, settings)

    def group_name(self, settings: Settings) -> str:
        return _resolve(self.group, settings)

    def results_key(self, settings: Settings) -> str:
        return _resolve(self.results, settings)

    def recent_key(self, settings: Settings) -> str | None:
        return None if self.recent is None else _resolve(self.recent, settings)

    def row_to_fields(self, row: Mapping[str, Any]) -> dict[str, str]:
        """The entry of one row, validated and written by the wire model."""
        return self.wire_model.model_validate(dict(row)).to_fields()

    def reserialised(self, fields: Mapping[str, str]) -> dict[str, str]:
        """``fields`` parsed as the workers parse them and written back in exact bytes.

        Raises :class:`~sentinel_platform.schemas.SchemaError` naming the field when the
        workers would reject the entry.
        """
        return self.wire_model.from_fields(fields).to_fields()


#: Prefix of every publish pool: ``sentinel/publish/<stream name>``.
POOL_PREFIX = "sentinel/publish/"


def publish_pool(name: str) -> str:
    """The concurrency pool of stream ``name``'s publish step (see :attr:`StreamSpec.pool`)."""
    return f"{POOL_PREFIX}{name}"


def stream_of_pool(pool: str, specs: tuple[StreamSpec, ...] | None = None) -> str | None:
    """The declared stream whose publish pool is ``pool``, or ``None``."""
    for spec in stream_specs() if specs is None else specs:
        if spec.pool == pool:
            return spec.name
    return None


class UnknownStreamError(LookupError):
    """A stream name that no spec declares; the message lists the declared ones."""


_REGISTRY: dict[str, StreamSpec] = {}


def _is_import_path(value: str) -> bool:
    module, sep, attr = value.partition(":")
    return bool(module and sep and attr)


def register(spec: StreamSpec) -> StreamSpec:
    """Declare ``spec``; re-declaring the same spec is a no-op, a clash is an error.

    A name, asset, publish job or worker prefix may belong to one stream only: two
    streams sharing one would share run keys, checks or worker names.
    """
    if _REGISTRY.get(spec.name) == spec:
        return spec
    for other in _REGISTRY.values():
        for label in ("name", "asset", "publish_job", "worker_prefix"):
            if getattr(other, label) == getattr(spec, label):
                raise ValueError(
                    f"stream {spec.name}: {label} {getattr(spec, label)!r} is already "
                    f"declared by stream {other.name}"
                )
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Forget a declared stream (tests that declare one for a while)."""
    _REGISTRY.pop(name, None)


def load_stream_modules(settings: Settings) -> None:
    """Import the modules of ``SENTINEL_STREAM_MODULES`` (they call :func:`register`)."""
    for module in settings.stream_modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(f"SENTINEL_STREAM_MODULES: cannot import {module!r} ({exc})") from None


def stream_specs(settings: Settings | None = None) -> tuple[StreamSpec, ...]:
    """Every declared stream, in declaration order (the built-in ones first).

    With ``settings``, the modules of ``SENTINEL_STREAM_MODULES`` are imported first, so
    a process sees the streams its deployment declares.
    """
    if settings is not None:
        load_stream_modules(settings)
    return tuple(_REGISTRY.values())


def spec_for(name: str, settings: Settings | None = None) -> StreamSpec:
    """The spec named ``name``; :class:`UnknownStreamError` lists the declared names."""
    specs = {spec.name: spec for spec in stream_specs(settings)}
    if name not in specs:
        raise UnknownStreamError(
            f"no stream named {name!r}; declared: {', '.join(sorted(specs)) or '(none)'}"
        )
    return specs[name]


def resolve_stream(name: str, settings: Settings) -> StreamSpec:
    """The stream an operator means by ``name``: its registry name (``axioms``) or its
    Redis key (``synapse:axioms``), whichever one declared stream answers to.

    Every command-line option naming a stream goes through here, so a stream has the
    same names everywhere and a typo is refused instead of matching nothing.
    :class:`UnknownStreamError` lists the declared streams (name and key) when no stream,
    or more than one, answers to ``name``.
    """
    specs = stream_specs(settings)
    matches = [spec for spec in specs if name in (spec.name, spec.stream_key(settings))]
    if len(matches) == 1:
        return matches[0]
    declared = ", ".join(f"{spec.name} ({spec.stream_key(settings)})" for spec in specs)
    problem = "is ambiguous" if matches else "is not a declared stream"
    raise UnknownStreamError(f"{name!r} {problem}; declared streams: {declared or '(none)'}")


TRANSACTIONS = register(
    StreamSpec(
        name="transactions",
        stream=Setting("transactions_stream"),
        group=Setting("transactions_group"),
        results=Setting("verdicts_stream"),
        recent=Setting("recent_transactions_key"),
        wire_model=Transaction,
        payload_field="data",
        columns=(
            "id",
            "merchant",
            "category",
            "currency",
            "amount",
            "message",
            "is_threat",
            "source",
            "timestamp",
        ),
        processor="workers.processors.transactions:from_settings",
        spark_frame="sentinel_platform.resources.wire_columns:transaction_frame",
        spark_key="sentinel_platform.resources.wire_columns:transaction_key",
        asset="transaction_stream",
        publish_job="publish_transactions",
        worker_prefix="tx",
        workers_option="transaction-workers",
        description="payments to screen: one verdict each, from the rules or the analyzer",
    )
)

AXIOMS = register(
    StreamSpec(
        name="axioms",
        stream=Setting("axioms_stream"),
        group=Setting("axioms_group"),
        results=Setting("compliance_stream"),
        wire_model=Axiom,
        columns=("status", "metric_value", "anomaly_score", "source_id", "emitted_at", "domain"),
        processor="workers.processors.axioms:from_settings",
        spark_frame="sentinel_platform.resources.wire_columns:axiom_frame",
        spark_key="sentinel_platform.resources.wire_columns:axiom_key",
        asset="axiom_stream",
        publish_job="publish_axioms",
        worker_prefix="ax",
        workers_option="axiom-workers",
        description="telemetry readings: one compliance event each, audited above a score",
    )
)
