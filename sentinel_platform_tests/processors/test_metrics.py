"""Worker metrics: Prometheus text format parsed back, thread safety, served over HTTP."""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from sentinel_platform.streams.metrics import COUNTERS, GAUGES, Metrics

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
            assert kind in ("counter", "gauge")
            families.setdefault(name, {})["type"] = kind
        else:
            match = SAMPLE.match(line)
            assert match, f"not a sample line: {line!r}"
            family = families[match["name"]]
            assert "type" in family, "sample before its # TYPE line"
            raw = match["labels"] or ""
            pairs = list(LABEL.finditer(raw))
            assert "".join(p[0] for p in pairs) == raw, f"bad label set {raw!r}"
            family["labels"] = {p["key"]: unescape(p["value"]) for p in pairs}
            family["value"] = float(match["value"])
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
    assert set(families) == {f"sentinel_worker_{n}_total" for n in COUNTERS} | {
        f"sentinel_worker_{n}" for n in GAUGES
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
    assert set(snapshot) == set(COUNTERS) | set(GAUGES)
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
    assert content_type.startswith("text/plain; version=0.0.4")
    assert parse_exposition(body)["sentinel_worker_recovered_total"]["value"] == 0.0
    metrics.inc("recovered", 5)
    assert parse_exposition(scrape(port)[1])["sentinel_worker_recovered_total"]["value"] == 5.0
    with pytest.raises(urllib.error.HTTPError) as not_found:
        scrape(port, "/other")
    assert not_found.value.code == 404
    with pytest.raises(RuntimeError):
        metrics.serve(0)
    metrics.close()
    with pytest.raises(urllib.error.URLError):
        scrape(port)
