"""``sentinel up``: the whole platform in one command, and nothing left behind after it.

Order matters both ways. Starting: Redis first (everything needs it), then the workers
(so published data is consumed at once), then Dagster. Stopping: the workers first (they
drain and ack what they hold), then Dagster (its webserver, daemon, code servers and any
run in progress), then the embedded Redis, and only if this command started it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import secrets
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import sentinel_platform
from sentinel_platform.cli import proctree
from sentinel_platform.cli.common import EXIT_ERROR, EXIT_OK, CliError, settings_from_env
from sentinel_platform.cli.dagster_home import ensure_dagster_home
from sentinel_platform.cli.supervisor import Backoff, ChildSpec, Supervisor
from sentinel_platform.redis_server import (
    RedisServerError,
    ensure_embedded,
    server_identity,
    stop_embedded,
)
from sentinel_platform.settings import Settings, redact_url
from sentinel_platform.streams.connection import RedisConnectError, connect

log = logging.getLogger("sentinel.up")

POLL_S = 0.5
UI_PROBE_EVERY_S = 1.0
DAGSTER_STOP_TIMEOUT_S = 30.0
WORKER_MODULES = {"tx": "workers.watch_transactions", "ax": "workers.watch_axioms"}


@dataclass(frozen=True)
class UpOptions:
    transaction_workers: int
    axiom_workers: int
    host: str
    port: int
    dagster: bool
    demo: bool | None
    stop_timeout_s: float


def _count(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return number


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "up",
        help="start Redis (embedded unless REDIS_URL), the workers and the Dagster UI",
        description="Runs until Ctrl-C or SIGTERM, then stops workers, Dagster and the "
        "embedded Redis in that order. Logs go to $SENTINEL_HOME/logs.",
    )
    parser.add_argument("--transaction-workers", type=_count, default=1, metavar="N")
    parser.add_argument("--axiom-workers", type=_count, default=1, metavar="N")
    parser.add_argument("--host", default="127.0.0.1", help="Dagster webserver host")
    parser.add_argument("--port", type=int, default=3000, help="Dagster webserver port")
    parser.add_argument("--no-dagster", action="store_true", help="workers (and Redis) only")
    demo = parser.add_mutually_exclusive_group()
    demo.add_argument(
        "--demo",
        dest="demo",
        action="store_true",
        default=None,
        help="turn the demo schedule on (default: on with the embedded Redis)",
    )
    demo.add_argument("--no-demo", dest="demo", action="store_false")
    parser.add_argument(
        "--stop-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long workers may take to drain before SIGKILL",
    )
    parser.set_defaults(handler=run)


def repo_root() -> Path:
    return Path(sentinel_platform.__file__).resolve().parent.parent


def dagster_argv(options: UpOptions) -> list[str]:
    workspace = repo_root() / "workspace.yaml"
    target = (
        ["-w", str(workspace)] if workspace.exists() else ["-m", "sentinel_platform.definitions"]
    )
    return [
        sys.executable,
        "-m",
        "dagster",
        "dev",
        *target,
        "-h",
        options.host,
        "-p",
        str(options.port),
    ]


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
    counts = {"tx": options.transaction_workers, "ax": options.axiom_workers}
    specs = []
    for kind, module in WORKER_MODULES.items():
        for slot in range(1, counts[kind] + 1):
            name = f"{kind}-{slot}"
            consumer = consumer_name(host, run_id, name)
            specs.append(
                ChildSpec(
                    name=name,
                    argv=[sys.executable, "-m", module, "--consumer", consumer],
                    env=env,
                    log_path=settings.home_dir / "logs" / f"worker-{name}.log",
                    cwd=repo_root(),
                )
            )
    return specs


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _ui_url(options: UpOptions) -> str:
    host = "127.0.0.1" if options.host in ("0.0.0.0", "::", "") else options.host
    return f"http://{host}:{options.port}"


def _ui_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=1) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _configure_logging(log_dir: Path) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    formatter = logging.Formatter("%(asctime)s sentinel up: %(message)s", "%H:%M:%S")
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(formatter)
    file_handler = logging.FileHandler(log_dir / "sentinel-up.log")
    file_handler.setFormatter(formatter)
    log.handlers[:] = [console, file_handler]
    log.setLevel(logging.INFO)
    log.propagate = False


def _already_running(state_path: Path) -> int | None:
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        return None
    pid = int(state.get("supervisor_pid") or 0)
    if state.get("running") and pid and pid != os.getpid() and proctree.alive(pid):
        return pid
    return None


class _StopFlag:
    """Set by SIGINT/SIGTERM; the main loop notices within ``POLL_S``."""

    def __init__(self) -> None:
        self.signal: int | None = None

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        if self.signal is None:
            log.info("received %s, shutting down", signal.Signals(signum).name)
        self.signal = signum


def _start_redis(settings: Settings) -> bool:
    """Make sure Redis answers; True if this call started the embedded server."""
    started = False
    try:
        if not settings.redis_url_value:
            url, started = ensure_embedded(settings)
            where = f"embedded, data in {settings.home_dir / 'redis'}"
            log.info("redis %s (%s%s)", url, where, "" if started else ", already running")
        else:
            log.info("redis %s (REDIS_URL)", redact_url(settings.redis_url_value))
        with connect(settings) as client:
            log.info("redis server: %s", server_identity(client.info("server")))
    except (RedisServerError, RedisConnectError) as exc:
        if started:
            stop_embedded(settings)
        raise CliError(str(exc)) from None
    return started


def options_from(args: argparse.Namespace) -> UpOptions:
    return UpOptions(
        transaction_workers=args.transaction_workers,
        axiom_workers=args.axiom_workers,
        host=args.host,
        port=args.port,
        dagster=not args.no_dagster,
        demo=args.demo,
        stop_timeout_s=args.stop_timeout,
    )


def run(args: argparse.Namespace) -> int:
    options = options_from(args)
    settings = settings_from_env()
    _configure_logging(settings.home_dir / "logs")
    state_path = settings.home_dir / "run" / "up.json"
    other = _already_running(state_path)
    if other:
        raise CliError(f"already running for {settings.home_dir} (supervisor pid {other})")
    if options.dagster and not _port_free(options.host, options.port):
        raise CliError(
            f"port {options.port} on {options.host} is taken (another `dagster dev`?); "
            "stop it or pass --port"
        )
    embedded = not settings.redis_url_value
    demo = options.demo if options.demo is not None else embedded
    stop = _StopFlag()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    supervisor = Supervisor(state_path, Backoff())
    redis_started = False
    try:
        redis_started = _start_redis(settings)
        supervisor.extra_state = {"running": True, "redis_started": redis_started}
        ensure_dagster_home(settings.dagster_home)
        env = child_env(settings, demo)
        return _supervise(supervisor, settings, options, env, stop)
    finally:
        _shutdown(supervisor, settings, options, redis_started)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _supervise(
    supervisor: Supervisor,
    settings: Settings,
    options: UpOptions,
    env: dict[str, str],
    stop: _StopFlag,
) -> int:
    run_id = new_run_id()
    supervisor.extra_state["run_id"] = run_id
    for spec in worker_specs(settings, options, env, run_id):
        supervisor.add(spec)
    ui = _ui_url(options)
    dagster_log = settings.home_dir / "logs" / "dagster.log"
    if options.dagster:
        supervisor.add(
            ChildSpec("dagster", dagster_argv(options), env, dagster_log, repo_root(), False)
        )
        log.info("Dagster starting (DAGSTER_HOME=%s, log %s)", settings.dagster_home, dagster_log)
    supervisor.extra_state["ui_url"] = ui if options.dagster else None
    supervisor.write_state()
    ui_ready = not options.dagster
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
                _tail(child.spec.log_path),
            )
            return EXIT_ERROR
        if not ui_ready and time.monotonic() >= next_probe:
            next_probe = time.monotonic() + UI_PROBE_EVERY_S
            if _ui_ready(ui):
                ui_ready = True
                supervisor.extra_state["ui_ready"] = True
                supervisor.write_state()
                log.info("Dagster UI ready at %s  (Ctrl-C stops everything)", ui)
        time.sleep(POLL_S)
    return EXIT_OK


def _shutdown(
    supervisor: Supervisor, settings: Settings, options: UpOptions, redis_started: bool
) -> None:
    workers = [name for name in supervisor.children if name != "dagster"]
    if workers:
        log.info("stopping workers (they drain first)")
        supervisor.stop(workers, options.stop_timeout_s)
    if "dagster" in supervisor.children:
        log.info("stopping Dagster")
        supervisor.stop(["dagster"], DAGSTER_STOP_TIMEOUT_S, group=True)
    if redis_started:
        log.info("stopping the embedded Redis")
        with contextlib.suppress(RedisServerError, OSError):
            stop_embedded(settings)
    supervisor.extra_state["running"] = False
    supervisor.write_state()
    log.info("stopped")
