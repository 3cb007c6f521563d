"""Worker counters, gauges and latency histograms, served to Prometheus by prometheus-client.

An operator needs to see, per worker, how much it processed, recovered, retried and
dead-lettered, how deep its pending list is, how long a message takes and how long a
commit pipeline takes, and how its analyzer calls end and its circuit breaker moves
(``docs/analyzer.md``; each analyzer role apart, in
:mod:`~sentinel_platform.streams.consumer.analyzer_metrics`), without reading logs. Each
:class:`Metrics` has its own registry (with the ``process_*`` metrics of this process), so
several workers in one interpreter (tests) never share series. Names are fixed up front:
a typo raises instead of silently creating a series nobody scrapes.
"""

from __future__ import annotations

import bisect
import copy
import re
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from sentinel_platform.metrics_server import serve_registry
from sentinel_platform.streams.backlog.entry_ages import age_s
from sentinel_platform.streams.consumer.analyzer_metrics import (
    PRIMARY,
    AnalyzerMeter,
    AnalyzerMetrics,
)
from sentinel_platform.streams.consumer.outcome_metrics import OutcomeCounter

# ``*_created`` series double every counter for no use here.
disable_created_metrics()

CONTENT_TYPE = CONTENT_TYPE_LATEST

COUNTERS: dict[str, str] = {
    "processed": "Messages processed and acknowledged with their effect.",
    "recovered": "Messages claimed from consumers whose lease had expired.",
    "dead_lettered": "Messages moved to the dead-letter stream.",
    "retried": "Processing attempts that failed and were left pending for a retry.",
    "skipped_alive": "Pending messages not claimed because their consumer's lease is alive.",
    "duplicate_acks": "Redelivered messages acknowledged without a second effect.",
    "trimmed": "Pending ids whose entry had been trimmed or deleted from the stream.",
    "busy": "Processor calls refused as busy (the downstream at capacity): each message "
    "waits, pending on this worker, and is called again; never a failure.",
}
GAUGES: dict[str, str] = {
    "pel_depth": "Messages delivered to the group but not yet acknowledged.",
    "lag": "Backlog not yet delivered to the group plus pending messages.",
    "in_flight": "Processor calls running or queued on this worker's threads now.",
    "oldest_pending_age_seconds": "Age of the group's oldest pending message (now minus the "
    "time in its stream entry id), whichever consumer holds it; 0 when nothing is pending.",
    "in_flight_limit": "Messages this worker may hold in flight now: the limit in force, "
    "adaptive limits included.",
}
#: Who decided a committed verdict (the effect's ``driver_used``): the analyzer, the rules
#: because no analyzer is configured, or the rules because the analyzer was down.
VERDICT_DRIVERS = ("analyzer", "rules", "fallback")
#: Counters split by one label with values fixed up front: name -> (help, label, values).
#: Every series exists from the start at 0, so a ``rate()`` never meets a missing one.
LABELLED_COUNTERS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "verdicts": (
        "Verdicts committed, by who decided (the effect's driver_used): analyzer; rules (no "
        "analyzer configured); fallback (the analyzer was down and the rules decided).",
        "driver",
        VERDICT_DRIVERS,
    ),
}
HISTOGRAMS: dict[str, str] = {
    "processing_seconds": "Time to parse and process one message (processor call included).",
    "commit_seconds": "Time of one commit pipeline (effects, markers and acks) to Redis.",
    "commit_age_seconds": "Age of a message when its effect is committed: now minus the time "
    "in its stream entry id (end-to-end, from publish to commit, queueing included).",
}
#: Histograms that also carry a ``processor`` label (the processor's ``name``) when the
#: worker passes one: a dashboard can then compare processors across workers.
PROCESSOR_HISTOGRAMS = frozenset({"processing_seconds"})
#: Sub-millisecond no-op processors up to slow analyzers and commits under load.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
#: A message's age spans a fast fleet's milliseconds up to a backlog left by an outage.
AGE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600, 21600)
#: Histograms whose buckets are not :data:`BUCKETS`.
HISTOGRAM_BUCKETS: dict[str, tuple[float, ...]] = {"commit_age_seconds": AGE_BUCKETS}
#: Default bind address of the metrics endpoint (``SENTINEL_METRICS_HOST`` changes it).
DEFAULT_HOST = "127.0.0.1"

_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_Metric = TypeVar("_Metric", Counter, Gauge, Histogram)


class Metrics:
    """Counters, gauges and histograms of one worker, each with the same constant labels.

    ``processor`` (the processor's ``name``) adds a ``processor`` label to the histograms
    of :data:`PROCESSOR_HISTOGRAMS`; one worker runs one processor, so the value is fixed
    here and a caller of :meth:`observer` needs no change.
    """

    def __init__(
        self,
        prefix: str = "sentinel_worker",
        labels: Mapping[str, str] | None = None,
        counters: Mapping[str, str] = COUNTERS,
        gauges: Mapping[str, str] = GAUGES,
        histograms: Mapping[str, str] = HISTOGRAMS,
        labelled_counters: Mapping[str, tuple[str, str, tuple[str, ...]]] = LABELLED_COUNTERS,
        processor: str | None = None,
    ) -> None:
        split_by = {name: label for name, (_, label, _) in labelled_counters.items()}
        every = (prefix, *(labels or {}), *counters, *gauges, *histograms, *labelled_counters)
        for name in (*every, *split_by.values()):
            if not _NAME.match(name):  # the classic charset every scraper understands
                raise ValueError(f"{name!r} is not a valid Prometheus metric or label name")
        for label in split_by.values():
            if label in (labels or {}):
                raise ValueError(f"label {label!r} is already a constant label")
        self._split_by = split_by
        self.prefix = prefix
        self.labels = dict(labels or {})
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        names = tuple(self.labels)
        self._counters = {
            name: self._child(Counter, name, text, names) for name, text in counters.items()
        }
        self._gauges = {
            name: self._child(Gauge, name, text, names) for name, text in gauges.items()
        }
        self._labelled: dict[str, dict[str, Counter]] = {}
        for name, (text, label, values) in labelled_counters.items():
            family = Counter(f"{self.prefix}_{name}", text, (*names, label), registry=self.registry)
            self._labelled[name] = {
                value: family.labels(**self.labels, **{label: value}) for value in values
            }
        self._histograms = {
            name: self._histogram(name, text, names, processor) for name, text in histograms.items()
        }
        #: the analyzers' series by role, the primary's from the start (:meth:`analyzer`)
        self.analyzers = AnalyzerMetrics(self.registry, prefix, self.labels)
        self.analyzers.role(PRIMARY)
        #: the tokens the analyzers' model calls reported, by role and model
        self.tokens = self.analyzers.tokens
        #: model verdicts of labelled messages by outcome (``count(result)``)
        self.outcomes = OutcomeCounter(self.registry, prefix, self.labels)
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    def _child(
        self,
        kind: type[_Metric],
        name: str,
        text: str,
        label_names: tuple[str, ...],
        **extra: Any,
    ) -> _Metric:
        metric = kind(f"{self.prefix}_{name}", text, label_names, registry=self.registry, **extra)
        return metric.labels(**self.labels) if label_names else metric

    def _histogram(
        self, name: str, text: str, names: tuple[str, ...], processor: str | None
    ) -> Histogram:
        buckets = HISTOGRAM_BUCKETS.get(name, BUCKETS)
        if processor is None or name not in PROCESSOR_HISTOGRAMS:
            return self._child(Histogram, name, text, names, buckets=buckets)
        family = Histogram(
            f"{self.prefix}_{name}",
            text,
            (*names, "processor"),
            registry=self.registry,
            buckets=buckets,
        )
        return family.labels(**self.labels, processor=processor)

    def count(self, name: str, value: str, amount: float = 1) -> None:
        """Add ``amount`` to the series ``value`` of labelled counter ``name``
        (``count("verdicts", "fallback")``); unknown names and values raise."""
        series = self._labelled.get(name)
        if series is None:
            raise KeyError(
                f"{name!r} is not a labelled counter (known: {', '.join(sorted(self._labelled))})"
            )
        if value not in series:
            raise KeyError(f"{value!r} is not a value of {name} (known: {', '.join(series)})")
        if amount < 0:
            raise ValueError(f"counter {name} cannot decrease (amount {amount})")
        series[value].inc(amount)

    def inc(self, name: str, amount: float = 1) -> None:
        if name not in self._counters:
            raise KeyError(
                f"{name!r} is not a counter (known: {', '.join(sorted(self._counters))})"
            )
        if amount < 0:
            raise ValueError(f"counter {name} cannot decrease (amount {amount})")
        self._counters[name].inc(amount)

    def set_gauge(self, name: str, value: float) -> None:
        if name not in self._gauges:
            raise KeyError(f"{name!r} is not a gauge")
        self._gauges[name].set(value)

    def gauge_from(self, name: str, read: Callable[[], float]) -> None:
        """Gauge ``name`` reads ``read()`` whenever it is collected (a scrape, a
        :meth:`snapshot`) instead of a value set: for a state that changes with time
        alone, with no event to set it (a breaker's cool-down ending). ``read`` runs on
        the scraping thread, so it must be thread-safe and quick."""
        if name not in self._gauges:
            raise KeyError(f"{name!r} is not a gauge")
        self._gauges[name].set_function(read)

    def observe(self, name: str, seconds: float) -> None:
        """Record one duration in histogram ``name`` (``processing_seconds``, ...)."""
        self.observer(name)(seconds)

    def observer(self, name: str) -> Callable[[float], None]:
        """The function that records one duration in histogram ``name``.

        The name is checked once, here: a loop that observes every message keeps the
        function and pays only for the observation itself.
        """
        if name not in self._histograms:
            raise KeyError(
                f"{name!r} is not a histogram (known: {', '.join(sorted(self._histograms))})"
            )
        return self._histograms[name].observe

    def observe_processing(self, seconds: float) -> None:
        self.observe("processing_seconds", seconds)

    def observe_commit(self, seconds: float) -> None:
        self.observe("commit_seconds", seconds)

    def observe_commit_age(self, seconds: float) -> None:
        """One committed message's age (``age_s`` of its entry id at commit)."""
        self.observe("commit_age_seconds", max(0.0, seconds))

    def observe_commit_ages(self, message_ids: Iterable[str], now_s: float | None = None) -> None:
        """The age at commit of each of ``message_ids`` (stream entry ids), at ``now_s``
        (epoch seconds; default: now, read once for the whole batch)."""
        now = time.time() if now_s is None else now_s
        observe_many(self._histograms["commit_age_seconds"], [age_s(m, now) for m in message_ids])

    def set_oldest_pending_age(self, seconds: float) -> None:
        """The group's oldest pending message's age (0 when nothing is pending)."""
        self.set_gauge("oldest_pending_age_seconds", max(0.0, seconds))

    def set_in_flight_limit(self, limit: int) -> None:
        """The in-flight limit in force now (set at start and at every change)."""
        self.set_gauge("in_flight_limit", limit)

    def count_verdict(self, driver: str, amount: int = 1) -> None:
        """``amount`` committed verdicts decided by ``driver`` (:data:`VERDICT_DRIVERS`); an
        unknown driver raises rather than creating a series no rule reads."""
        self.count("verdicts", driver, amount)

    def analyzer(self, role: str = PRIMARY) -> AnalyzerMeter:
        """What the analyzer of ``role`` (``primary``, ``fallback``, ``shadow``) counts its
        calls, breaker, exhaustion and tokens in; a role's series appear at its first call."""
        return self.analyzers.role(role)

    def _value(self, sample: str) -> float:
        return self.registry.get_sample_value(f"{self.prefix}_{sample}", self.labels) or 0.0

    def snapshot(self) -> dict[str, float]:
        """Counter and gauge values by short name (``processed``, ``pel_depth``, ...); a
        labelled counter's series as ``<name>_<value>`` (``verdicts_analyzer``); the
        analyzers' as :meth:`AnalyzerMetrics.snapshot` names them
        (``analyzer_calls_timeout``, ``fallback_analyzer_calls_ok``)."""
        values = {name: self._value(f"{name}_total") for name in self._counters}
        values.update({name: self._value(name) for name in self._gauges})
        for name, series in self._labelled.items():
            for value in series:
                labels = {**self.labels, self._split_by[name]: value}
                sample = self.registry.get_sample_value(f"{self.prefix}_{name}_total", labels)
                values[f"{name}_{value}"] = sample or 0.0
        values.update(self.analyzers.snapshot())
        return values

    def render(self) -> str:
        """The registry in Prometheus' text exposition format."""
        return generate_latest(self.registry).decode()

    def serve(self, port: int = 0, host: str = DEFAULT_HOST, also: Sequence[Metrics] = ()) -> int:
        """Serve the metrics over HTTP on ``host:port`` from a daemon thread; return the
        bound port (``port`` 0 picks a free one). With ``also`` (the other shards of a
        worker), their series are served beside these (:func:`merged_registry`)."""
        if self._server is not None:
            raise RuntimeError("metrics server already running")
        registry = merged_registry([self, *also]) if also else self.registry
        self._server, self._thread = serve_registry(registry, port, host)
        return int(self._server.server_address[1])

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(5)
            self._server = self._thread = None


class _Merged:
    """The families of several registries, each once with the samples of all of them."""

    def __init__(self, registries: Sequence[CollectorRegistry]) -> None:
        self._registries = registries

    def collect(self) -> Iterable[Any]:
        families: dict[str, Any] = {}
        for index, registry in enumerate(self._registries):
            for family in registry.collect():
                if index and family.name.startswith("process_"):
                    continue  # one process: its CPU and memory once
                merged = families.get(family.name)
                if merged is None:
                    families[family.name] = merged = copy.copy(family)
                    merged.samples = []
                merged.samples.extend(family.samples)
        return families.values()


def merged_registry(metrics: Sequence[Metrics]) -> CollectorRegistry:
    """One registry serving the series of every one of ``metrics`` (the consumers of a
    worker's shards, told apart by their ``shard`` label): one scrape target per worker,
    as for a stream of one shard."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Merged([m.registry for m in metrics]))
    return registry


def observe_many(histogram: Any, values: Sequence[float]) -> None:
    """``histogram.observe(v)`` for every value, a bucket and the sum added to once per
    call rather than once per value: a commit observes the ages of its whole batch, and a
    histogram observation is a lock and two increments (a fifth of the no-op worker's
    time per message when made one by one).

    It fills ``prometheus_client``'s own bucket and sum values, as ``Histogram.observe``
    does (an upper bound is inclusive); the metrics tests compare the exposition of both.
    """
    if not values:
        return
    bounds = histogram._upper_bounds
    for index, count in Tally(bisect.bisect_left(bounds, v) for v in values).items():
        histogram._buckets[index].inc(count)
    histogram._sum.inc(sum(values))
