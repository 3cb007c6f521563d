"""The shipped Prometheus rules (deploy/prometheus/sentinel-rules.yml) are valid, pass
their unit tests (sentinel-rules.test.yml) with Debian's ``promtool``, the unit tests
catch a changed threshold or duration, every series the rules read is one the platform
serves (a renamed metric fails here, not silently in production), and docs/metrics.md
lists exactly the served metrics and the rules."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sentinel_platform.cli.stream_signals import StreamCollector
from sentinel_platform.registry import stream_specs
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.drain import write_drain_rate
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.operators import analyzer_holds
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.keys import keys_for
from sentinel_platform_tests.harness import prometheus as prometheus_harness
from sentinel_platform_tests.harness.prometheus import promtool

ROOT = Path(__file__).resolve().parents[2]
RULES_DIR = ROOT / "deploy" / "prometheus"
RULES = RULES_DIR / "sentinel-rules.yml"
RULE_TESTS = RULES_DIR / "sentinel-rules.test.yml"
DOC = ROOT / "docs" / "metrics.md"
#: Series a rule may read that no Sentinel process serves (Prometheus' own).
PROMETHEUS_SERIES = {"up"}


def test_the_rules_pass_promtool_check() -> None:
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_rules_pass_their_unit_tests() -> None:
    result = promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


#: A change to the rules that their unit tests must reject: (what, old text, new text).
NO_WORKER = "== 0 and sentinel:stream_lag_messages:max > 0\n        for: "
LIVE = "(stream, group) (sentinel_stream_live_workers)"
FALLBACK = "sentinel:verdicts_fallback:ratio5m > "
STUCK = "sentinel:stream_oldest_pending:leases > "
HELD = '(sentinel_analyzer_hold_seconds{cause!="announced_limit"}) > 0\n        for: '
MUTATIONS = [
    ("no-worker alert waits longer", f"{NO_WORKER}1m", f"{NO_WORKER}3m"),
    ("no-worker alert on any exporter", f"max by {LIVE}", f"min by {LIVE}"),
    ("fallback threshold raised", f"{FALLBACK}0.2", f"{FALLBACK}0.6"),
    ("stuck threshold raised", f"{STUCK}10", f"{STUCK}20"),
    ("eviction warn ignored", 'verdict=~"warn|refuse"', 'verdict=~"refuse"'),
    ("breaker window shortened", 'shadow"}[5m]) >= bool', 'shadow"}[1m]) >= bool'),
    ("shadow's breaker alerted", 'circuit_state{role!="shadow"}[5m]', "circuit_state[5m]"),
    ("hold alert waits longer", f"{HELD}1m", f"{HELD}3m"),
    ("announced pacing alerted", '{cause!="announced_limit"}', ""),
    (
        "exhausted alert on the least-told worker",
        "max by (stream, group, role) (sentinel_worker_analyzer_exhausted",
        "min by (stream, group, role) (sentinel_worker_analyzer_exhausted",
    ),
    (
        "exhausted alert waits",
        '(sentinel_worker_analyzer_exhausted{role!="shadow"}) == 1\n',
        '(sentinel_worker_analyzer_exhausted{role!="shadow"}) == 1\n        for: 5m\n',
    ),
    (
        "shadow's exhaustion alerted",
        'sentinel_worker_analyzer_exhausted{role!="shadow"}',
        "sentinel_worker_analyzer_exhausted",
    ),
    (
        "batch window lengthened",
        "(sentinel_batch_oldest_age_seconds) > 86400",
        "(sentinel_batch_oldest_age_seconds) > 172800",
    ),
    ("batch alert waits longer", "> 86400\n        for: 15m", "> 86400\n        for: 30m"),
    (
        "dead letters by length",
        "increase(sentinel_dlq_added_total[10m])",
        "delta(sentinel_dlq_entries[10m])",
    ),
]


@pytest.mark.parametrize(("what", "old", "new"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_the_unit_tests_reject_a_changed_rule(
    tmp_path: Path, what: str, old: str, new: str
) -> None:
    text = RULES.read_text()
    assert text.count(old) == 1, f"{what}: {old!r} is not in the rules once"
    (tmp_path / RULES.name).write_text(text.replace(old, new))
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    result = promtool("test", "rules", RULE_TESTS.name, cwd=tmp_path)
    assert result.returncode != 0, f"{what}: the unit tests still pass\n{result.stdout}"
    assert "FAILED" in result.stdout + result.stderr


def _rule_series() -> set[str]:
    """Every ``sentinel_*`` series name read by an expression of the rules."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    exprs = [str(rule["expr"]) for group in groups for rule in group["rules"]]
    return {name for expr in exprs for name in re.findall(r"\bsentinel_[a-z_]+\b", expr)}


def _served(text: str) -> set[str]:
    return {
        sample.name for family in text_string_to_metric_families(text) for sample in family.samples
    }


def _families(text: str) -> set[str]:
    """Family names as documented: counters with ``_total``, histograms by base name."""
    return {
        f"{family.name}_total" if family.type == "counter" else family.name
        for family in text_string_to_metric_families(text)
        if family.name.startswith("sentinel_")
    }


@pytest.fixture
def served_texts(settings: Settings, redis_client: RedisClient) -> Iterator[list[str]]:
    """The exposition of a worker's metrics and of the exporter on the test Redis, with
    every optional series present (histograms observed, a drain rate published)."""
    worker = Metrics(labels={"stream": "s", "group": "g", "consumer": "c"}, processor="p")
    worker.observe_commit_age(1.0)
    worker.observe_processing(0.1)
    worker.observe_commit(0.01)
    worker.analyzer().count_tokens("gpt-4o-mini", 100, 20, 0)  # the series exist once counted
    labelled = {"driver_used": "analyzer", "model": "m", "label": "true", "is_threat": "true"}
    worker.outcomes.count(labelled)  # as do the outcomes'
    for spec in stream_specs(settings):  # work_seconds and the rate need a drain rate
        write_drain_rate(redis_client, keys_for(settings, spec), 100.0, 0)
    analyzer_holds.register(redis_client, "gpt-eu", "https://api.example.com/v1")
    redis_client.set(analyzer_holds.hold_key("gpt-eu"), "HTTP 429", px=60_000)  # a hold
    collector = StreamCollector(settings, lambda: connect(settings))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        yield [worker.render(), generate_latest(registry).decode()]
    finally:
        collector.close()


def test_every_series_the_rules_read_is_served(served_texts: list[str]) -> None:
    served = set().union(*(_served(text) for text in served_texts))
    missing = sorted(_rule_series() - served - PROMETHEUS_SERIES)
    assert not missing, f"the rules read series nothing serves: {missing}"
    assert "sentinel_stream_live_workers" in _rule_series()


def test_docs_list_every_served_metric_and_every_rule(served_texts: list[str]) -> None:
    doc = DOC.read_text()
    documented = set(re.findall(r"^\| `(sentinel_[a-z_]+)` \|", doc, re.MULTILINE))
    families = set().union(*(_families(text) for text in served_texts))
    assert families - documented == set(), "served but not in docs/metrics.md"
    assert documented - families == set(), "in docs/metrics.md but not served"
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rules = {rule.get("record") or rule["alert"] for g in groups for rule in g["rules"]}
    listed = set(re.findall(r"^\| `((?:sentinel:|Sentinel)[A-Za-z0-9_:]+)` \|", doc, re.MULTILINE))
    assert rules == listed, f"docs/metrics.md rules differ: {sorted(rules ^ listed)}"


@pytest.mark.parametrize(
    ("env", "outcome"),
    [({"CI": "1"}, "failed"), ({"REQUIRE_CLUSTER_TESTS": "1"}, "failed"), ({}, "skipped")],
)
def test_a_missing_promtool_fails_in_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], outcome: str
) -> None:
    for name in ("CI", "REQUIRE_CLUSTER_TESTS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setitem(prometheus_harness.DEBIAN_BINARIES, "promtool", "/nonexistent/promtool")
    expected = pytest.fail.Exception if outcome == "failed" else pytest.skip.Exception
    with pytest.raises(expected, match="promtool is not installed"):
        prometheus_harness.binary("promtool")
