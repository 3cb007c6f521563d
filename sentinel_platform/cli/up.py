"""``sentinel up``: the whole platform in one command, and nothing left behind after it.

Order matters both ways. Starting: Redis first (everything needs it), then the exporter
and the workers, each serving Prometheus metrics on a port listed in the file_sd targets
file (``scrape_targets``), so published data is consumed at once and watched even when
no worker runs, then Dagster. Stopping: the workers and the exporter first (workers
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import redis

import sentinel_platform
from sentinel_platform import argtypes
from sentinel_platform.cli import proctree, scrape_targets
from sentinel_platform.cli.common import CliError, settings_from_env
from sentinel_platform.cli.dagster_home import POSTGRES_ENV, DagsterHomeError, ensure_dagster_home
from sentinel_platform.cli.pools import ensure_pool_limits, publish_pool_limits
from sentinel_platform.cli.supervisor import Backoff, ChildSpec, Supervisor
from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK
from sentinel_platform.redaction import scrub
from sentinel_platform.redis_server import (
    RedisServerError,
    ensure_embedded,
    server_identity,
    stop_embedded,
)
from sentinel_platform.registry import StreamSpec, stream_specs
from sentinel_platform.settings import Settings, load_settings, redact_url
from sentinel_platform.streams.backlog.zones import in_flight_problem
from sentinel_platform.streams.plumbing.connection import (
    RedisClient,
    RedisConnectError,
    connect,
)
from sentinel_platform.streams.plumbing.eviction_policy import server_verdict

log = logging.getLogger("sentinel.up")

POLL_S = 0.5
UI_PROBE_EVERY_S = 1.0
DAGSTER_STOP_TIMEOUT_S = 30.0
#: The one worker entry point; its first argument names the stream (the registry).
WORKER_ENTRY = "sentinel_platform.workers"


@dataclass(frozen=True)
class UpOptions:
    #: stream name (registry) -> how many workers to start for it
    workers: Mapping[str, int]
    host: str
    port: int
    dagster: bool
    demo: bool | None
    stop_timeout_s: float
    production: bool = False
    code_port: int = 4000
    #: --worker-concurrency (a number, or "auto"); None keeps SENTINEL_WORKER_CONCURRENCY
    worker_concurrency: int | str | None = None


_positive = argtypes.positive
_count = argtypes.non_negative


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "up",
        help="start Redis (embedded unless REDIS_URL), the workers and the Dagster UI",
        description="Runs until Ctrl-C or SIGTERM, then stops workers, Dagster and the "
        "embedded Redis in that order. Logs go to $SENTINEL_HOME/logs.",
    )
    for spec in _declared_streams():
        parser.add_argument(
            spec.workers_flag,
            dest=_workers_dest(spec),
            type=_count,
            default=1,
            metavar="N",
            help=f"workers of stream {spec.name} (default 1)",
        )
    parser.add_argument(
        "--worker-concurrency",
        type=argtypes.concurrency,
        default=None,
        metavar="C",
        help="processor calls each worker makes at once: auto finds the limit, a number pins "
        "it (SENTINEL_WORKER_CONCURRENCY; default auto)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="Dagster webserver host")
    parser.add_argument("--port", type=argtypes.port, default=3000, help="Dagster webserver port")
    parser.add_argument("--no-dagster", action="store_true", help="workers (and Redis) only")
    parser.add_argument(
        "--production",
        action="store_true",
        help="Dagster as separate processes (a gRPC code server, the webserver, the daemon), "
        "each restarted alone, instead of `dagster dev`; see docs/deploy.md",
    )
    parser.add_argument(
        "--code-port",
        type=argtypes.port,
        default=4000,
        metavar="PORT",
        help="port of the code server (127.0.0.1) with --production",
    )
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
        type=argtypes.seconds(),
        default=30.0,
        metavar="SECONDS",
        help="how long workers may take to drain before SIGKILL",
    )
    parser.set_defaults(handler=run)


def _declared_streams() -> tuple[StreamSpec, ...]:
    """The streams to offer options for, SENTINEL_STREAM_MODULES' included when the
    settings load (a bad setting is reported by ``run``, not while building the parser)."""
    try:
        return stream_specs(settings_from_env())
    except (CliError, ValueError):
        return stream_specs()


def _workers_dest(spec: StreamSpec) -> str:
    return f"workers_{spec.name}".replace("-", "_").replace(":", "_")


def repo_root() -> Path:
    return Path(sentinel_platform.__file__).resolve().parent.parent


def dagster_argv(options: UpOptions) -> list[str]:
    workspace = repo_root() / "workspace.yaml"
    target = (
        ["-w", str(workspace)] if workspace.exists() else ["-m", "sentinel_platform.definitions"]
    )
    # `dg dev` with an explicit target runs Dagster's own dev server (webserver + daemon);
    # `dagster dev` is the same server but warns on every start that it is superseded.
    return [_venv_script("dg"), "dev", *target, "-h", options.host, "-p", str(options.port)]


#: The Dagster children, in the order they are stopped (``dagster`` is ``dagster dev``).
DAGSTER_CHILDREN = ("dagster", "dagster-daemon", "dagster-webserver", "dagster-code-server")
CODE_HOST = "127.0.0.1"
CODE_LOCATION = "sentinel_platform"
CODE_MODULE = "sentinel_platform.definitions"
#: Loading the code location imports Spark and Great Expectations: give it time.
CODE_SERVER_START_TIMEOUT_S = 180.0
POSTGRES_CONNECT_TIMEOUT_S = 10


def _venv_script(name: str) -> str:
    """A console script of this environment (``dagster-webserver``, ``dagster-daemon``)."""
    return str(Path(sys.executable).parent / name)


def production_workspace(settings: Settings, options: UpOptions) -> Path:
    """The workspace of the webserver and the daemon: the code server, over gRPC."""
    path = settings.home_dir / "run" / "workspace.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "# Written by `sentinel up --production`: the code location is a separate gRPC server.\n"
        "load_from:\n"
        "  - grpc_server:\n"
        f"      host: {CODE_HOST}\n"
        f"      port: {options.code_port}\n"
        f"      location_name: {CODE_LOCATION}\n"
    )
    return path


def production_argvs(workspace: Path, options: UpOptions) -> dict[str, list[str]]:
    """The three Dagster processes of the production layout, by child name, in start order."""
    return {
        "dagster-code-server": [
            sys.executable,
            "-m",
            "dagster",
            "code-server",
            "start",
            "-m",
            CODE_MODULE,
            "--location-name",
            CODE_LOCATION,
            "-h",
            CODE_HOST,
            "-p",
            str(options.code_port),
            # Runs are launched with this interpreter (`python -m dagster`), not whatever
            # `dagster` is first on PATH.
            "--use-python-environment-entry-point",
        ],
        "dagster-webserver": [
            _venv_script("dagster-webserver"),
            "-w",
            str(workspace),
            "-h",
            options.host,
            "-p",
            str(options.port),
        ],
        "dagster-daemon": [_venv_script("dagster-daemon"), "run", "-w", str(workspace)],
    }


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0


def _start_production(
    supervisor: Supervisor,
    settings: Settings,
    options: UpOptions,
    env: dict[str, str],
    stop: _StopFlag,
) -> None:
    """The code server first; once it listens (its code is loaded by then), the webserver
    and the daemon. Each is supervised on its own: one that crashes is restarted alone."""
    argvs = production_argvs(production_workspace(settings, options), options)
    logs = settings.home_dir / "logs"
    for name, argv in argvs.items():
        log.info("%s: %s", name, " ".join(argv))
        spec = ChildSpec(name, argv, env, logs / f"{name}.log", repo_root())
        child = supervisor.add(spec)
        if name != "dagster-code-server":
            continue
        deadline = time.monotonic() + CODE_SERVER_START_TIMEOUT_S
        while not _port_open(CODE_HOST, options.code_port):
            process = child.process
            if process is not None and process.poll() is not None:
                raise CliError(
                    f"the code server exited with code {process.returncode} while loading; "
                    f"last lines of {spec.log_path}:\n{_tail(spec.log_path)}"
                )
            if stop.signal is not None or time.monotonic() > deadline:
                raise CliError(
                    f"the code server did not listen on {CODE_HOST}:{options.code_port} within "
                    f"{CODE_SERVER_START_TIMEOUT_S:.0f}s; see {spec.log_path}"
                )
            time.sleep(POLL_S)
        log.info("code server ready on %s:%s", CODE_HOST, options.code_port)
    log.info(
        "Dagster starting (DAGSTER_HOME=%s, production layout, logs in %s)",
        settings.dagster_home,
        logs,
    )


def check_postgres(settings: Settings) -> str | None:
    """Why the Dagster instance's PostgreSQL cannot be used, or None (also when unset). The
    reason names the setting and shows the URL redacted, never any part of its password.

    The URL is read as Dagster reads it: dagster-postgres hands it to SQLAlchemy, whose
    ``make_url`` parses it (a ``%`` that starts no %-escape stays a ``%``) and whose psycopg2
    dialect passes the parts to ``psycopg2.connect`` as keyword arguments. Giving libpq the
    URL itself would refuse what Dagster accepts, and libpq's error quotes the password.
    """
    url = settings.dagster_postgres_url_value
    if not url:
        return None
    import psycopg2

    shown = f"{POSTGRES_ENV}={redact_url(url)}"
    try:
        connect_args = postgres_connect_args(url)
    except Exception:  # SQLAlchemy's parse errors may quote the URL: never shown
        return f"{shown}: SQLAlchemy cannot read it as a URL (percent-encode ':', '@', '/')"
    connect_args.setdefault("connect_timeout", POSTGRES_CONNECT_TIMEOUT_S)
    try:
        connection = psycopg2.connect(**connect_args)
    except psycopg2.Error as exc:
        reason = " ".join(str(exc).split())
        return scrub(f"{shown}: cannot connect to PostgreSQL ({reason or type(exc).__name__})")
    connection.close()
    return None


def postgres_connect_args(url: str) -> dict[str, object]:
    """The keyword arguments SQLAlchemy's psycopg2 dialect gives ``psycopg2.connect`` for
    ``url`` (user, password decoded, host, port, dbname, query parameters), as Dagster's
    storage connects."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    args, kwargs = parsed.get_dialect()().create_connect_args(parsed)
    if any(args):
        raise ValueError("a DSN string instead of keyword arguments")
    return dict(kwargs)


def _prepare_dagster(settings: Settings, options: UpOptions) -> None:
    """Check the instance's PostgreSQL (if any) and write or check ``dagster.yaml``."""
    if not options.dagster:
        return
    problem = check_postgres(settings)
    if problem:
        raise CliError(problem)
    try:
        ensure_dagster_home(settings.dagster_home, settings)
    except DagsterHomeError as exc:
        raise CliError(str(exc)) from None
    limits = publish_pool_limits(stream_specs(settings))
    try:  # before the daemon starts: no run is dequeued without its pool's limit
        changed = ensure_pool_limits(settings.dagster_home, settings, limits)
    except Exception as exc:  # a database error: say what failed, never the password
        raise CliError(
            f"cannot set the publish pools' limits in the Dagster instance: "
            f"{scrub(f'{type(exc).__name__}: {exc}')}"
        ) from None
    where = "PostgreSQL" if settings.dagster_postgres_url_value else "SQLite"
    log.info(
        "Dagster instance: %s storage, at most %d runs at once, one publish run per stream "
        "(pools %s%s)",
        where,
        settings.max_concurrent_runs,
        ", ".join(sorted(limits)),
        f"; set {', '.join(sorted(changed))}" if changed else "",
    )


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


TRUE_WORDS = ("1", "true", "yes", "on")


def unasked_runs(demo: bool, analyzer: bool = False) -> str:
    """The start-up line that says what runs without a click, so nothing surprises; with
    the demo on, also what it costs: its entries are marked, so the workers decide them by
    the rules alone (never a paid analyzer call) and the reports leave them out."""
    rules = "never sent to the analyzer" if analyzer else "decided by the rules"
    demo_part = (
        "the demo (demo_publish_schedule: every 5 min, synthetic rows to the streams through "
        f"its own asset demo_traffic, marked demo=1: {rules}, left out of the reports; "
        "--no-demo turns it off)"
        if demo
        else "no demo (--demo turns it on)"
    )
    return (
        f"runs by itself: the sensors, the stream-health checks every 5 min, {demo_part}; "
        "publish runs only for a new day's partition, once, when it comes due (lag gate): "
        "none for today on a fresh home"
    )


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
    """The last lines of a child's log, scrubbed: they are shown on stderr."""
    try:
        return scrub("\n".join(path.read_text(errors="replace").splitlines()[-lines:]))
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


def _start_redis(settings: Settings) -> bool:
    """Make sure Redis answers; True if this call started the embedded server."""
    started = False
    try:
        if not settings.redis_url_value:
            url, started = ensure_embedded(settings)
            where = f"embedded, data in {settings.home_dir / 'redis'}"
            log.info("redis %s (%s%s)", url, where, "" if started else ", already running")
        else:
            url = settings.redis_url_value
            log.info("redis %s (REDIS_URL)", redact_url(url))
        with connect(settings) as client:
            log.info("redis server: %s", server_identity(client.info("server")))
            _check_eviction_policy(client, settings, redact_url(url))
    except (RedisServerError, RedisConnectError, redis.RedisError, CliError) as exc:
        if started:
            stop_embedded(settings)
        raise CliError(str(exc)) from None
    return started


def _check_eviction_policy(client: RedisClient, settings: Settings, where: str) -> None:
    """Refuse, before any worker or Dagster starts, a server that may evict any key
    (unless ``SENTINEL_ALLOW_EVICTING_SERVER`` accepts it): the workers would refuse it
    one by one. A warning for a server that may evict keys with a TTL."""
    verdict = server_verdict(client, settings.allow_evicting_server)
    if verdict.refused:
        raise CliError(f"Redis at {where}: {verdict.message}")
    if verdict.level == "ok":
        log.info("redis maxmemory-policy: %s", verdict.policy)
    elif verdict.level == "unknown":
        log.info("note: %s", verdict.message)
    else:
        log.warning("warning: %s", verdict.message)


def options_from(args: argparse.Namespace) -> UpOptions:
    return UpOptions(
        workers={
            spec.name: getattr(args, _workers_dest(spec))
            for spec in stream_specs()
            if hasattr(args, _workers_dest(spec))
        },
        host=args.host,
        port=args.port,
        dagster=not args.no_dagster,
        demo=args.demo,
        stop_timeout_s=args.stop_timeout,
        production=args.production,
        code_port=args.code_port,
        worker_concurrency=args.worker_concurrency,
    )


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
    if options.dagster and options.production and not _port_free(CODE_HOST, options.code_port):
        raise CliError(
            f"port {options.code_port} on {CODE_HOST} (the code server) is taken; stop what "
            "listens there or pass --code-port"
        )
    problem = limits_problem(settings, options)
    if problem:
        raise CliError(problem)
    stop = _StopFlag()  # before the instance is prepared: a stop meanwhile is a clean one
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _prepare_dagster(settings, options)  # a bad instance config fails before anything starts
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
        redis_started = _start_redis(settings)
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


def _supervise(
    supervisor: Supervisor,
    settings: Settings,
    options: UpOptions,
    env: dict[str, str],
    stop: _StopFlag,
) -> int:
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
    ui = _ui_url(options)
    dagster_log = settings.home_dir / "logs" / "dagster.log"
    if options.dagster and options.production:
        _start_production(supervisor, settings, options, env, stop)
    elif options.dagster:
        supervisor.add(
            ChildSpec("dagster", dagster_argv(options), env, dagster_log, repo_root(), False)
        )
        log.info("Dagster starting (DAGSTER_HOME=%s, log %s)", settings.dagster_home, dagster_log)
    if options.dagster:
        demo = env.get("SENTINEL_DEMO", "0").lower() in TRUE_WORDS
        log.info("%s", unasked_runs(demo, analyzer=settings.analyzer_url is not None))
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
        log.info("stopping the embedded Redis")
        with contextlib.suppress(RedisServerError, OSError):
            stop_embedded(settings)
    supervisor.extra_state["running"] = False
    supervisor.write_state()
    log.info("stopped")
