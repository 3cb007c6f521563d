"""Where Prometheus finds what ``sentinel up`` runs: a port per worker, and a file_sd file.

Each worker serves its metrics on a port of its own (``--metrics-port``), and the
exporter (``sentinel exporter``) on another; all are picked free when ``sentinel up``
starts and kept for the whole run, so a worker the supervisor restarts comes back on the
same address and Prometheus' targets stay valid. The addresses are written as a
Prometheus *file-based service discovery* document (``file_sd_configs``), replaced
atomically, to ``$SENTINEL_HOME/run/prometheus-targets.json``: a JSON list of target
groups, each ``{"targets": ["host:port"], "labels": {...}}``.

Target labels never use a name the metrics themselves carry (``stream``, ``group``,
``consumer``): Prometheus would rename the scraped one to ``exported_<name>`` and every
rule would break. So a target says ``component`` (``worker`` or ``exporter``) and, for a
worker, its ``worker`` slot (``tx-1``), which unlike the consumer name is stable across
restarts. The file is left in place when ``sentinel up`` stops: Prometheus then sees the
targets down (``up == 0``) instead of silently forgetting them.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from sentinel_platform.cli.supervisor import ChildSpec

TARGETS_FILE = "prometheus-targets.json"
EXPORTER_CHILD = "exporter"
#: Bind addresses that mean "every interface": the targets then name this host.
WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def targets_path(home: Path) -> Path:
    """The file_sd file of the ``sentinel up`` whose home is ``home``."""
    return home / "run" / TARGETS_FILE


def free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct ports free on ``host`` now (all held open until all are picked,
    so none is handed out twice). Another process may still take one before its child
    binds it; that child then refuses to start, naming the port."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = stack.enter_context(socket.socket(family, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def advertised(host: str, port: int) -> str:
    """The address Prometheus scrapes for a server bound to ``host:port``: this host's name
    for a wildcard bind, IPv6 literals in brackets."""
    name = socket.gethostname() if host in WILDCARDS else host
    return f"[{name}]:{port}" if ":" in name else f"{name}:{port}"


def with_metrics_port(spec: ChildSpec, port: int) -> ChildSpec:
    """A worker's spec that also serves its metrics on ``port``."""
    return replace(spec, argv=[*spec.argv, "--metrics-port", str(port)])


def target_group(address: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {"targets": [address], "labels": dict(labels)}


def document(
    host: str, exporter_port: int | None, worker_ports: Mapping[str, int]
) -> list[dict[str, Any]]:
    """The file_sd document: the exporter (when it runs) and each worker slot, by port."""
    groups = []
    if exporter_port is not None:
        groups.append(target_group(advertised(host, exporter_port), {"component": EXPORTER_CHILD}))
    for slot, port in sorted(worker_ports.items()):
        groups.append(target_group(advertised(host, port), {"component": "worker", "worker": slot}))
    return groups


def write_targets(path: Path, groups: Sequence[Mapping[str, Any]]) -> None:
    """Replace ``path`` atomically: Prometheus never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(list(groups), indent=2) + "\n")
    tmp.replace(path)


def exporter_spec(
    host: str, port: int, env: Mapping[str, str], log_dir: Path, cwd: Path | None
) -> ChildSpec:
    """``sentinel exporter`` on ``host:port``, run with this interpreter, logging to
    ``exporter.log``."""
    argv = [sys.executable, "-m", "sentinel_platform.cli.main", "exporter"]
    argv += ["--host", host, "--port", str(port)]
    return ChildSpec(EXPORTER_CHILD, argv, env, log_dir / "exporter.log", cwd)


def metrics_children(
    workers: Sequence[ChildSpec],
    host: str,
    env: Mapping[str, str],
    log_dir: Path,
    cwd: Path | None = None,
) -> tuple[list[ChildSpec], list[dict[str, Any]]]:
    """The exporter's spec, then the ``workers``' with a free metrics port each, and the
    file_sd document that lists them all."""
    exporter_port, *ports = free_ports(host, len(workers) + 1)
    served = [with_metrics_port(spec, port) for spec, port in zip(workers, ports, strict=True)]
    by_slot = {spec.name: port for spec, port in zip(workers, ports, strict=True)}
    exporter = exporter_spec(host, exporter_port, env, log_dir, cwd)
    return [exporter, *served], document(host, exporter_port, by_slot)
