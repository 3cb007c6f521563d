"""Worker metrics: Prometheus text format parsed back, thread safety, served over HTTP,
latency histograms, process metrics and a bind address other hosts can reach."""

from __future__ import annotations

import re
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import psutil
import pytest
from prometheus_client import generate_latest

from sentinel_platform.streams.consumer.analyzer_metrics import ANALYZER_OUTCOMES, CIRCUIT_STATES
from sentinel_platform.streams.consumer.metrics import (
    BUCKETS,
    COUNTERS,
    GAUGES,
    HISTOGRAMS,
    LABELLED_COUNTERS,
    Metrics,
    observe_many,
)

#: The analyzers' families (their ``role`` label: :mod:`..analyzer_metrics`).
ANALYZER_FAMILIES = (
    "analyzer_calls_total",
    "analyzer_circuit_changes_total",
    "analyzer_circuit_state",
    "analyzer_exhausted",
    "shadow_dropped_total",
)
LABELS = {"stream": "transactions", "group": "sentinel-consumers", "consumer": 'h"o\\st\n-1'}
SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?P<labels>.*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"(,|$)')


def unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], value)


def parse_exposition(text: str) -> dict[str, dict[str, object]]:
    """An independent reader of text format 0.0.4: family -> help, type, labels, value."""
    assert text.endswith("\n")
    families: dict[str, dict[str, object]] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, help_text = line[7:].split(" ", 1)
            families.setdefault(name, {})["help"] = help_text
        elif line.startswith("# TYPE "):
            name, kind = line[7:].split(" ")
            assert kind in ("counter", "gauge", "histogram")
            families.setdefault(name, {})["type"] = kind
        else:
            match = SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            name = match["name"]
            if name not in families:  # a histogram's _bucket, _sum or _count sample
                name = re.sub(r"_(bucket|sum|count)$", "", name)
                assert families[name]["type"] == "histogram", f"sample of no family: {line!r}"
            family = families[name]
            assert "type" in family, "sample before its # TYPE line"
            raw = match["labels"] or ""
            pairs = list(LABEL.finditer(raw))
            assert "".join(p[0] for p in pairs) == raw, f"bad label set {raw!r}"
            family["labels"] = {p["key"]: unescape(p["value"]) for p in pairs}
            family["value"] = float(match["value"])
            samples = family.setdefault("samples", {})
            assert isinstance(samples, dict)
            samples[(match["name"], family["labels"].get("le"))] = family["value"]
    return families


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    instance = Metrics(labels=LABELS)
    yield instance
    instance.close()


def test_render_is_valid_prometheus_text_with_help_type_and_labels(metrics: Metrics) -> None:
    metrics.inc("processed", 3)
    metrics.inc("dead_lettered")
    metrics.set_gauge("pel_depth", 7)
    metrics.set_gauge("lag", 12.5)
    families = parse_exposition(metrics.render())
    assert {name for name in families if name.startswith("sentinel_worker_")} == {
        f"sentinel_worker_{n}_total" for n in COUNTERS
    } | {f"sentinel_worker_{n}" for n in GAUGES} | {f"sentinel_worker_{n}" for n in HISTOGRAMS} | {
        f"sentinel_worker_{n}_total" for n in LABELLED_COUNTERS
    } | {"sentinel_worker_analyzer_tokens_total", "sentinel_worker_verdict_outcomes_total"} | {
        f"sentinel_worker_{n}" for n in ANALYZER_FAMILIES
    }
    processed = families["sentinel_worker_processed_total"]
    assert (processed["type"], processed["value"]) == ("counter", 3.0)
    assert processed["help"] == COUNTERS["processed"]
    assert processed["labels"] == LABELS
    assert families["sentinel_worker_dead_lettered_total"]["value"] == 1.0
    assert families["sentinel_worker_recovered_total"]["value"] == 0.0
    assert families["sentinel_worker_pel_depth"]["type"] == "gauge"
    assert families["sentinel_worker_pel_depth"]["value"] == 7.0
    assert families["sentinel_worker_lag"]["value"] == 12.5


def test_snapshot_reports_every_known_metric_by_short_name(metrics: Metrics) -> None:
    metrics.inc("duplicate_acks", 2)
    metrics.set_gauge("pel_depth", 4)
    metrics.set_gauge("pel_depth", 1)
    snapshot = metrics.snapshot()
    labelled = {f"{n}_{v}" for n, (_, _, values) in LABELLED_COUNTERS.items() for v in values}
    primary = {f"analyzer_calls_{o}" for o in ANALYZER_OUTCOMES} | {
        f"analyzer_circuit_changes_{s}" for s in CIRCUIT_STATES
    }
    primary |= {"analyzer_circuit_state", "analyzer_exhausted"}
    assert set(snapshot) == set(COUNTERS) | set(GAUGES) | labelled | primary
    assert (snapshot["duplicate_acks"], snapshot["pel_depth"], snapshot["retried"]) == (2, 1, 0)


def test_unknown_names_and_decreasing_counters_are_rejected(metrics: Metrics) -> None:
    with pytest.raises(KeyError, match="procesed"):
        metrics.inc("procesed")
    with pytest.raises(KeyError):
        metrics.inc("pel_depth")
    with pytest.raises(KeyError):
        metrics.set_gauge("processed", 1)
    with pytest.raises(ValueError):
        metrics.inc("processed", -1)
    with pytest.raises(ValueError, match="bad-label"):
        Metrics(labels={"bad-label": "x"})
    assert metrics.snapshot()["processed"] == 0


def test_a_gauge_read_at_collection_shows_its_value_then(metrics: Metrics) -> None:
    """A state that changes with time alone (a breaker's cool-down ending) is read at each
    scrape, not as of the last event that set it."""
    state = [2.0]
    metrics.gauge_from("in_flight_limit", lambda: state[0])
    assert metrics.snapshot()["in_flight_limit"] == 2
    state[0] = 0.0
    assert metrics.snapshot()["in_flight_limit"] == 0
    assert "sentinel_worker_in_flight_limit{" in metrics.render()
    with pytest.raises(KeyError):
        metrics.gauge_from("no_such_gauge", lambda: 1.0)


def test_concurrent_increments_are_never_lost(metrics: Metrics) -> None:
    def bump() -> None:
        for _ in range(5000):
            metrics.inc("processed")

    threads = [threading.Thread(target=bump) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert metrics.snapshot()["processed"] == 40_000


def scrape(port: int, path: str = "/metrics") -> tuple[str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        return response.headers["Content-Type"], response.read().decode()


def test_metrics_are_served_over_http_on_a_picked_port(metrics: Metrics) -> None:
    port = metrics.serve(0)
    assert port > 0
    content_type, body = scrape(port)
    assert content_type.startswith("text/plain; version=")
    assert parse_exposition(body)["sentinel_worker_recovered_total"]["value"] == 0.0
    metrics.inc("recovered", 5)
    assert parse_exposition(scrape(port)[1])["sentinel_worker_recovered_total"]["value"] == 5.0
    with pytest.raises(RuntimeError):
        metrics.serve(0)
    metrics.close()
    with pytest.raises(urllib.error.URLError):
        scrape(port)


def test_histograms_record_processing_time_and_commit_latency(metrics: Metrics) -> None:
    for seconds in (0.0002, 0.003, 0.003, 0.7):
        metrics.observe_processing(seconds)
    metrics.observe_commit(0.004)
    with pytest.raises(KeyError, match="not a histogram"):
        metrics.observe("commit", 1.0)
    families = parse_exposition(metrics.render())
    processing = families["sentinel_worker_processing_seconds"]
    assert processing["type"] == "histogram"
    samples = processing["samples"]
    assert isinstance(samples, dict)
    name = "sentinel_worker_processing_seconds"
    assert samples[(f"{name}_count", None)] == 4
    assert samples[(f"{name}_sum", None)] == pytest.approx(0.7062)
    assert samples[(f"{name}_bucket", "0.0005")] == 1
    assert samples[(f"{name}_bucket", "0.005")] == 3
    assert samples[(f"{name}_bucket", "+Inf")] == 4
    assert len([key for key in samples if key[0] == f"{name}_bucket"]) == len(BUCKETS) + 1
    commit = families["sentinel_worker_commit_seconds"]["samples"]
    assert isinstance(commit, dict)
    assert commit[("sentinel_worker_commit_seconds_count", None)] == 1


def test_process_metrics_describe_the_worker_process(metrics: Metrics) -> None:
    families = parse_exposition(metrics.render())
    assert families["process_resident_memory_bytes"]["value"] > 0
    assert families["process_cpu_seconds_total"]["type"] == "counter"
    assert families["process_start_time_seconds"]["value"] > 0


def _external_ipv4() -> str | None:
    """An address of this machine other than loopback, as another host would reach it."""
    for addresses in psutil.net_if_addrs().values():
        for address in addresses:
            if address.family == socket.AF_INET and not address.address.startswith("127."):
                return address.address
    return None


def test_a_configured_bind_address_lets_another_host_scrape(metrics: Metrics) -> None:
    external = _external_ipv4()
    if external is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    loopback_only = Metrics(labels=LABELS)
    try:
        port = loopback_only.serve(0)
        with pytest.raises(urllib.error.URLError):
            urllib.request.urlopen(f"http://{external}:{port}/metrics", timeout=5)
    finally:
        loopback_only.close()
    port = metrics.serve(0, host="0.0.0.0")
    metrics.inc("processed", 2)
    with urllib.request.urlopen(f"http://{external}:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    assert parse_exposition(body)["sentinel_worker_processed_total"]["value"] == 2.0


def test_labelled_counters_have_every_series_from_the_start(metrics: Metrics) -> None:
    metrics.count("verdicts", "fallback", 2)
    metrics.count("verdicts", "rules")
    for driver, value in (("analyzer", 0), ("fallback", 2), ("rules", 1)):
        labels = {**LABELS, "driver": driver}
        sample = metrics.registry.get_sample_value("sentinel_worker_verdicts_total", labels)
        assert sample == value, driver  # None if the series were missing
    assert parse_exposition(metrics.render())["sentinel_worker_verdicts_total"]["help"]
    snapshot = metrics.snapshot()
    assert (snapshot["verdicts_fallback"], snapshot["verdicts_analyzer"]) == (2, 0)
    with pytest.raises(KeyError, match="not a value"):
        metrics.count("verdicts", "model")
    with pytest.raises(KeyError, match="not a labelled counter"):
        metrics.count("processed", "ok")
    with pytest.raises(ValueError):
        metrics.count("verdicts", "rules", -1)
    with pytest.raises(ValueError, match="already a constant label"):
        Metrics(labels={"driver": "x"})


def test_processing_time_carries_the_processor_label_when_given() -> None:
    named = Metrics(labels={"stream": "transactions"}, processor="transactions")
    named.observer("processing_seconds")(0.002)
    named.observe_commit(0.001)
    families = parse_exposition(named.render())
    assert families["sentinel_worker_processing_seconds"]["labels"] == {
        "stream": "transactions",
        "processor": "transactions",
    }
    assert families["sentinel_worker_commit_seconds"]["labels"] == {"stream": "transactions"}
    unnamed = parse_exposition(Metrics(labels={"stream": "s"}).render())
    labels = unnamed["sentinel_worker_processing_seconds"]["labels"]
    assert isinstance(labels, dict) and "processor" not in labels


def test_observing_a_batch_gives_the_exposition_of_observing_each_value() -> None:
    """``observe_many`` (a commit's batch of ages at once) fills the same buckets, count
    and sum as ``Histogram.observe`` per value, bounds included (``le`` is inclusive)."""
    values = [0.0, 0.001, 0.005, 0.0051, 0.3, 1.0, 2.5, 7.0, 1e9]
    one_by_one, batched = Metrics(), Metrics()
    for value in values:
        one_by_one.observe("commit_age_seconds", value)
    observe_many(batched._histograms["commit_age_seconds"], values)
    observe_many(batched._histograms["commit_age_seconds"], [])

    def series(metrics: Metrics) -> list[str]:
        text = generate_latest(metrics.registry).decode()
        return [line for line in text.splitlines() if "commit_age_seconds_" in line]

    assert any(line.endswith(f" {len(values)}.0") for line in series(batched))
    assert series(batched) == series(one_by_one)


def test_the_shards_of_a_worker_are_served_on_one_endpoint_each_with_its_label() -> None:
    fields = {"stream": "tx", "group": "g", "consumer": "c"}
    shards = [Metrics(labels={**fields, "shard": str(k)}) for k in range(3)]
    for k, metrics in enumerate(shards):
        metrics.inc("processed", k + 1)
    port = shards[0].serve(0, "127.0.0.1", also=shards[1:])
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
    finally:
        shards[0].close()
    for k in range(3):
        series = (
            f'sentinel_worker_processed_total{{consumer="c",group="g",shard="{k}",stream="tx"}}'
        )
        assert f"{series} {float(k + 1)}" in text
    assert text.count("# TYPE sentinel_worker_processed_total counter") == 1
    assert text.count("# TYPE process_cpu_seconds_total counter") == 1
