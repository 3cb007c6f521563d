"""``sentinel up``: the whole platform in one command, and nothing left behind after it.

Order matters both ways. Starting: Redis first (everything needs it), then the exporter
and the workers, each serving Prometheus metrics on a port listed in the file_sd targets
file (``scrape_targets``), so published data is consumed at once and watched even when
no worker runs, then Dagster. Stopping: the workers and the exporter first (workers
drain and ack what they hold), then Dagster (its webserver, daemon, code servers and any
run in progress), then the embedded Redis, and only if this command started it.

This module holds that order and the checks made before anything starts; the parts live
beside it: the options (:mod:`~sentinel_platform.cli.up_options`), the children
(:mod:`~sentinel_platform.cli.up_children`), Redis (:mod:`~sentinel_platform.cli.up_redis`),
the Dagster instance (:mod:`~sentinel_platform.cli.up_instance`), Dagster's two layouts
(:mod:`~sentinel_platform.cli.development_layout`,
:mod:`~sentinel_platform.cli.production_layout`) and what the operator is told
(:mod:`~sentinel_platform.cli.up_report`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from sentinel_platform.cli import proctree, scrape_targets
from sentinel_platform.cli.common import CliError, settings_from_env
from sentinel_platform.cli.development_layout import start_development
from sentinel_platform.cli.production_layout import CODE_HOST, start_production
from sentinel_platform.cli.supervisor import Backoff, Supervisor
from sentinel_platform.cli.up_children import (
    child_env,
    limits_problem,
    new_run_id,
    repo_root,
    worker_specs,
)
from sentinel_platform.cli.up_instance import prepare_instance
from sentinel_platform.cli.up_options import UpOptions, add_arguments, options_from
from sentinel_platform.cli.up_redis import start_redis, stop_started_redis
from sentinel_platform.cli.up_report import (
    TRUE_WORDS,
    configure_logging,
    tail,
    ui_ready,
    ui_url,
    unasked_runs,
)
from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK
from sentinel_platform.settings import Settings

log = logging.getLogger("sentinel.up")

POLL_S = 0.5
UI_PROBE_EVERY_S = 1.0
DAGSTER_STOP_TIMEOUT_S = 30.0
#: The Dagster children, in the order they are stopped (``dagster`` is ``dagster dev``).
DAGSTER_CHILDREN = ("dagster", "dagster-daemon", "dagster-webserver", "dagster-code-server")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "up",
        help="start Redis (embedded unless REDIS_URL), the workers and the Dagster UI",
        description="Runs until Ctrl-C or SIGTERM, then stops workers, Dagster and the "
        "embedded Redis in that order. Logs go to $SENTINEL_HOME/logs.",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _already_running(state_path: Path) -> int | None:
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        return None
    pid = int(state.get("supervisor_pid") or 0)
    if state.get("running") and pid and pid != os.getpid() and proctree.alive(pid):
        return pid
    return None


#: A signal handler as ``signal.signal`` returns it.
Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


class _StopFlag:
    """Set by SIGINT/SIGTERM; the main loop notices within ``POLL_S``."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        if self.signal is None:
            log.info("received %s, shutting down", signal.Signals(signum).name)
        self.signal = signum


def _refuse_before_start(settings: Settings, options: UpOptions, state_path: Path) -> None:
    """What would fail later, refused before anything starts: a second ``sentinel up`` on
    this home, a taken port, worker counts that fill the pause limit by design."""
    other = _already_running(state_path)
    if other:
        raise CliError(f"already running for {settings.home_dir} (supervisor pid {other})")
    if options.dagster and not _port_free(options.host, options.port):
        raise CliError(
            f"port {options.port} on {options.host} is taken (another `dagster dev`?); "
            "stop it or pass --port"
        )
    if options.dagster and options.production and not _port_free(CODE_HOST, options.code_port):
        raise CliError(
            f"port {options.code_port} on {CODE_HOST} (the code server) is taken; stop what "
            "listens there or pass --code-port"
        )
    problem = limits_problem(settings, options)
    if problem:
        raise CliError(problem)


def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    settings = settings_from_env()
    configure_logging(settings.home_dir / "logs")
    state_path = settings.home_dir / "run" / "up.json"
    _refuse_before_start(settings, options, state_path)
    stop = _StopFlag()  # before the instance is prepared: a stop meanwhile is a clean one
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if options.dagster:  # a bad instance config fails before anything starts
            prepare_instance(settings)
    except BaseException:
        _restore(previous)
        raise
    if stop.signal is not None:  # stopped while the instance was prepared: nothing started
        _restore(previous)
        return EXIT_OK
    embedded = not settings.redis_url_value
    demo = options.demo if options.demo is not None else embedded
    supervisor = Supervisor(state_path, Backoff())
    redis_started = False
    try:
        redis_started = start_redis(settings)
        supervisor.extra_state = {"running": True, "redis_started": redis_started}
        env = child_env(settings, demo)
        return _supervise(supervisor, settings, options, env, stop)
    finally:
        _shutdown(supervisor, settings, options, redis_started)
        _restore(previous)


def _restore(previous: Mapping[signal.Signals, Handler]) -> None:
    """Put back the signal handlers ``run`` replaced."""
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _start_children(
    supervisor: Supervisor,
    settings: Settings,
    options: UpOptions,
    env: dict[str, str],
    stop: _StopFlag,
) -> None:
    """The exporter and the workers, then Dagster in the layout asked for."""
    run_id = new_run_id()
    supervisor.extra_state["run_id"] = run_id
    # Prometheus: the exporter (it runs while every worker is down), then each worker on a
    # metrics port of its own; the file_sd document lists them (``scrape_targets``).
    children, targets = scrape_targets.metrics_children(
        worker_specs(settings, options, env, run_id),
        settings.metrics_host,
        env,
        settings.home_dir / "logs",
        repo_root(),
    )
    targets_file = scrape_targets.targets_path(settings.home_dir)
    scrape_targets.write_targets(targets_file, targets)
    supervisor.extra_state["scrape_targets"] = str(targets_file)
    log.info("Prometheus scrape targets (file_sd): %s", targets_file)
    for spec in children:
        supervisor.add(spec)
    if options.dagster and options.production:
        start_production(supervisor, settings, options, env, lambda: stop.signal is not None)
    elif options.dagster:
        start_development(supervisor, settings, options, env)
    if options.dagster:
        demo = env.get("SENTINEL_DEMO", "0").lower() in TRUE_WORDS
        log.info("%s", unasked_runs(demo, analyzer=settings.analyzer_url is not None))


def _supervise(
    supervisor: Supervisor,
    settings: Settings,
    options: UpOptions,
    env: dict[str, str],
    stop: _StopFlag,
) -> int:
    """Start the children, then watch them until a stop; a child that gives up ends it all."""
    _start_children(supervisor, settings, options, env, stop)
    ui = ui_url(options)
    supervisor.extra_state["ui_url"] = ui if options.dagster else None
    supervisor.write_state()
    ui_is_ready = not options.dagster
    next_probe = 0.0
    while stop.signal is None:
        finished = supervisor.poll()
        if finished:
            child = finished[0]
            code = child.process.returncode if child.process else None
            log.error(
                "%s exited with code %s; last lines of %s:\n%s",
                child.spec.name,
                code,
                child.spec.log_path,
                tail(child.spec.log_path),
            )
            return EXIT_ERROR
        if not ui_is_ready and time.monotonic() >= next_probe:
            next_probe = time.monotonic() + UI_PROBE_EVERY_S
            if ui_ready(ui):
                ui_is_ready = True
                supervisor.extra_state["ui_ready"] = True
                supervisor.write_state()
                log.info("Dagster UI ready at %s  (Ctrl-C stops everything)", ui)
        time.sleep(POLL_S)
    return EXIT_OK


def _shutdown(
    supervisor: Supervisor, settings: Settings, options: UpOptions, redis_started: bool
) -> None:
    workers = [name for name in supervisor.children if name not in DAGSTER_CHILDREN]
    if workers:
        log.info("stopping workers (they drain first)")
        supervisor.stop(workers, options.stop_timeout_s)
    dagster = [name for name in DAGSTER_CHILDREN if name in supervisor.children]
    if dagster:
        log.info("stopping Dagster")
        # In order: nothing new is launched (daemon), then the UI, then the code server
        # with the runs it started.
        for name in dagster:
            supervisor.stop([name], DAGSTER_STOP_TIMEOUT_S, group=True)
    if redis_started:
        stop_started_redis(settings)
    supervisor.extra_state["running"] = False
    supervisor.write_state()
    log.info("stopped")
