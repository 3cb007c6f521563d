"""What ``sentinel up`` writes for Prometheus' file-based discovery: a free port per
worker and one for the exporter, target labels that never clash with the metrics' own,
the workers' argv serving on their port, and an atomic write."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from sentinel_platform.cli.scrape_targets import (
    advertised,
    document,
    free_ports,
    metrics_children,
    targets_path,
    write_targets,
)
from sentinel_platform.cli.supervisor import ChildSpec

#: Labels the scraped series carry: a target label of the same name would rename them.
METRIC_LABELS = {"stream", "group", "consumer", "driver", "outcome", "state", "zone", "dlq"}


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("127.0.0.1", 9100, "127.0.0.1:9100"),
        ("10.0.0.5", 1, "10.0.0.5:1"),
        ("::1", 9100, "[::1]:9100"),
        ("0.0.0.0", 9100, f"{socket.gethostname()}:9100"),
    ],
)
def test_a_target_address_names_a_host_prometheus_can_reach(
    host: str, port: int, expected: str
) -> None:
    assert advertised(host, port) == expected


def test_the_document_lists_the_exporter_then_each_worker_slot() -> None:
    groups = document("127.0.0.1", 9000, {"tx-2": 9002, "ax-1": 9003, "tx-1": 9001})
    assert groups == [
        {"targets": ["127.0.0.1:9000"], "labels": {"component": "exporter"}},
        {"targets": ["127.0.0.1:9003"], "labels": {"component": "worker", "worker": "ax-1"}},
        {"targets": ["127.0.0.1:9001"], "labels": {"component": "worker", "worker": "tx-1"}},
        {"targets": ["127.0.0.1:9002"], "labels": {"component": "worker", "worker": "tx-2"}},
    ]
    for group in groups:
        assert not set(group["labels"]) & METRIC_LABELS


def test_free_ports_are_distinct_and_bindable() -> None:
    ports = free_ports("127.0.0.1", 20)
    assert len(set(ports)) == 20
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


def test_each_worker_serves_on_its_own_port_and_the_exporter_comes_first(tmp_path: Path) -> None:
    workers = [
        ChildSpec(name, ["python", "-m", "sentinel_platform.workers", stream], {}, tmp_path / name)
        for name, stream in (("tx-1", "transactions"), ("ax-1", "axioms"))
    ]
    children, groups = metrics_children(workers, "127.0.0.1", {"A": "1"}, tmp_path / "logs")
    exporter, *served = children
    assert exporter.name == "exporter" and exporter.argv[-5:-2] == [
        "exporter",
        "--host",
        "127.0.0.1",
    ]
    assert exporter.log_path == tmp_path / "logs" / "exporter.log" and exporter.env == {"A": "1"}
    ports = {spec.name: int(spec.argv[spec.argv.index("--metrics-port") + 1]) for spec in served}
    assert [spec.name for spec in served] == ["tx-1", "ax-1"]
    assert served[0].argv[:4] == workers[0].argv
    by_slot = {g["labels"].get("worker", "exporter"): g["targets"][0] for g in groups}
    assert by_slot == {
        "exporter": f"127.0.0.1:{exporter.argv[-1]}",
        "tx-1": f"127.0.0.1:{ports['tx-1']}",
        "ax-1": f"127.0.0.1:{ports['ax-1']}",
    }
    assert len(set(by_slot.values())) == 3


def test_the_targets_file_is_replaced_whole(tmp_path: Path) -> None:
    path = targets_path(tmp_path)
    write_targets(path, document("127.0.0.1", 1, {}))
    write_targets(path, document("127.0.0.1", 2, {"tx-1": 3}))
    assert json.loads(path.read_text())[0]["targets"] == ["127.0.0.1:2"]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
