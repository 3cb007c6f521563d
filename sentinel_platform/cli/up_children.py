"""What ``sentinel up``'s children are: where they run, what they share, one worker per slot.

Every child runs from the repository root (``workspace.yaml`` is found there) with this
environment's interpreter and console scripts, so a child never picks up another
installation from PATH. A worker slot's consumer name is fixed for the whole run and
differs from every other run's (:func:`consumer_name`): a restarted worker takes over its
own pending entries, and two runs never act as one consumer. :func:`limits_problem` refuses,
before anything starts, a worker count whose in-flight calls would fill the pause limit by
design.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
from collections.abc import Mapping
from pathlib import Path

import sentinel_platform
from sentinel_platform.cli.supervisor import ChildSpec
from sentinel_platform.cli.up_options import UpOptions
from sentinel_platform.registry import stream_specs
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.backlog.zones import in_flight_problem

#: The one worker entry point; its first argument names the stream (the registry).
WORKER_ENTRY = "sentinel_platform.workers"


def repo_root() -> Path:
    return Path(sentinel_platform.__file__).resolve().parent.parent


def venv_script(name: str) -> str:
    """A console script of this environment (``dagster-webserver``, ``dagster-daemon``)."""
    return str(Path(sys.executable).parent / name)


def child_env(settings: Settings, demo: bool) -> dict[str, str]:
    """The environment of every child: the same settings, with absolute paths."""
    env = dict(os.environ)
    env["SENTINEL_HOME"] = str(settings.home_dir)
    env["DAGSTER_HOME"] = str(settings.dagster_home)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
    env.setdefault("GX_ANALYTICS_ENABLED", "false")
    if "SENTINEL_DEMO" not in os.environ:
        env["SENTINEL_DEMO"] = "1" if demo else "0"
    return env


def new_run_id() -> str:
    """A random id drawn once per ``sentinel up`` run.

    Host and pid do not tell runs apart: containers sharing a hostname are all pid 1.
    Eight hex digits make two live runs drawing the same id practically impossible.
    """
    return secrets.token_hex(4)


def consumer_name(host: str, run_id: str, slot: str) -> str:
    """``host-runid-slot``: readable in XINFO CONSUMERS, unique per run, stable per slot."""
    return f"{host}-{run_id}-{slot}"


def worker_specs(
    settings: Settings, options: UpOptions, env: Mapping[str, str], run_id: str
) -> list[ChildSpec]:
    """One spec per worker. A slot's consumer name is fixed for the whole run (a restarted
    worker takes over its own pending entries instead of orphaning them) and differs from
    every other run's, so two runs never act as one consumer."""
    host = socket.gethostname()
    specs = []
    for spec in stream_specs(settings):
        for slot in range(1, options.workers.get(spec.name, 0) + 1):
            name = f"{spec.worker_prefix}-{slot}"
            consumer = consumer_name(host, run_id, name)
            argv = [sys.executable, "-m", WORKER_ENTRY, spec.name, "--consumer", consumer]
            if options.worker_concurrency is not None:
                argv += ["--concurrency", str(options.worker_concurrency)]
            specs.append(
                ChildSpec(
                    name=name,
                    argv=argv,
                    env=env,
                    log_path=settings.home_dir / "logs" / f"worker-{name}.log",
                    cwd=repo_root(),
                )
            )
    return specs


def limits_problem(settings: Settings, options: UpOptions) -> str | None:
    """A count pause limit the pool of a stream fills by design (refused, never changed)."""
    if options.worker_concurrency is not None:
        settings = load_settings(
            **{**settings.model_dump(), "worker_concurrency": options.worker_concurrency}
        )
    for spec in stream_specs(settings):
        workers = options.workers.get(spec.name, 0)
        if workers:
            problem = in_flight_problem(settings, workers, f"the {workers} {spec.name} worker(s)")
            if problem:
                return f"{problem}; {spec.workers_flag} and --worker-concurrency count too"
    return None
