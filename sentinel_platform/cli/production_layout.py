"""Dagster in ``sentinel up --production``: a code server, the webserver and the daemon apart.

Each is a child of its own, so one that crashes is restarted alone while the others keep
serving; the webserver and the daemon reach the code location over gRPC through a
workspace file written under the home folder. The code server starts first and must
listen before the others start: they would otherwise show a location that failed to
load. Its start is bounded (:data:`CODE_SERVER_START_TIMEOUT_S`) and cut short by a stop.
"""

from __future__ import annotations

import logging
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sentinel_platform.cli.common import CliError
from sentinel_platform.cli.supervisor import ChildSpec, Supervisor
from sentinel_platform.cli.up_children import repo_root, venv_script
from sentinel_platform.cli.up_options import UpOptions
from sentinel_platform.cli.up_report import tail
from sentinel_platform.settings import Settings

log = logging.getLogger("sentinel.up")

POLL_S = 0.5
CODE_HOST = "127.0.0.1"
CODE_LOCATION = "sentinel_platform"
CODE_MODULE = "sentinel_platform.definitions"
#: Loading the code location imports Spark and Great Expectations: give it time.
CODE_SERVER_START_TIMEOUT_S = 180.0


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
            venv_script("dagster-webserver"),
            "-w",
            str(workspace),
            "-h",
            options.host,
            "-p",
            str(options.port),
        ],
        "dagster-daemon": [venv_script("dagster-daemon"), "run", "-w", str(workspace)],
    }


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((host, port)) == 0


def start_production(
    supervisor: Supervisor,
    settings: Settings,
    options: UpOptions,
    env: dict[str, str],
    stopping: Callable[[], bool],
) -> None:
    """The code server first; once it listens (its code is loaded by then), the webserver
    and the daemon. Each is supervised on its own: one that crashes is restarted alone.
    ``stopping`` says a stop was asked for: the wait for the code server ends then."""
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
                    f"last lines of {spec.log_path}:\n{tail(spec.log_path)}"
                )
            if stopping() or time.monotonic() > deadline:
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
