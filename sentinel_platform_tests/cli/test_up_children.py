"""Consumer names of the workers ``sentinel up`` supervises: unique per run, stable per slot.

Two ``sentinel up`` containers sharing a hostname are both pid 1, so names built from host
and pid alone collide and the second run's workers are refused. The real-run test gives
each supervisor its own PID namespace, exactly that situation, on one real server.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from sentinel_platform.cli.supervisor import ChildSpec
from sentinel_platform.cli.up_children import consumer_name, new_run_id, worker_specs
from sentinel_platform.cli.up_options import UpOptions
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.waits import wait_until

OPTIONS = UpOptions(
    workers={"transactions": 2, "axioms": 1},
    host="127.0.0.1",
    port=3000,
    dagster=False,
    demo=False,
    stop_timeout_s=10.0,
)


@pytest.mark.parametrize(
    ("host", "run_id", "slot", "expected"),
    [
        ("box", "0a1b2c3d", "tx-1", "box-0a1b2c3d-tx-1"),
        ("box", "0a1b2c3d", "ax-1", "box-0a1b2c3d-ax-1"),
        ("box", "ffffffff", "tx-1", "box-ffffffff-tx-1"),
        ("web.internal", "0a1b2c3d", "tx-12", "web.internal-0a1b2c3d-tx-12"),
    ],
)
def test_a_consumer_name_is_host_run_and_slot(
    host: str, run_id: str, slot: str, expected: str
) -> None:
    assert consumer_name(host, run_id, slot) == expected


def test_every_run_draws_a_fresh_run_id() -> None:
    ids = [new_run_id() for _ in range(50)]
    assert len(set(ids)) == len(ids)
    assert all(run_id.isalnum() and len(run_id) >= 8 for run_id in ids)


def _consumers(specs: list[ChildSpec]) -> dict[str, str]:
    return {spec.name: spec.argv[spec.argv.index("--consumer") + 1] for spec in specs}


def test_two_runs_on_one_host_and_pid_name_their_workers_apart(settings: Settings) -> None:
    first = _consumers(worker_specs(settings, OPTIONS, {}, new_run_id()))
    second = _consumers(worker_specs(settings, OPTIONS, {}, new_run_id()))
    assert sorted(first) == sorted(second) == ["ax-1", "tx-1", "tx-2"]
    assert not set(first.values()) & set(second.values())
    assert len(set(first.values())) == len(first)


def test_one_run_names_each_slot_the_same_every_time(settings: Settings) -> None:
    run_id = new_run_id()
    assert _consumers(worker_specs(settings, OPTIONS, {}, run_id)) == _consumers(
        worker_specs(settings, OPTIONS, {}, run_id)
    )


def _pid_namespaces_available() -> bool:
    try:
        probe = subprocess.run(
            ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _only_child(pid: int) -> psutil.Process | None:
    try:
        children = psutil.Process(pid).children()
    except psutil.NoSuchProcess:
        return None
    return children[0] if children else None


class UpInOwnPidNamespace:
    """``sentinel up --no-dagster`` as pid 1 of a fresh PID namespace, same hostname."""

    def __init__(self, env: dict[str, str], home: Path) -> None:
        self.home = home
        sentinel = str(Path(sys.executable).parent / "sentinel")
        argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
        argv += [sentinel, "up", "--no-dagster", "--transaction-workers", "1"]
        argv += ["--axiom-workers", "0"]
        self.log = (home.parent / f"{home.name}.out").open("wb")
        self.proc = subprocess.Popen(
            argv, env={**env, "SENTINEL_HOME": str(home)}, stdout=self.log, stderr=subprocess.STDOUT
        )

    def supervisor(self) -> psutil.Process | None:
        return _only_child(self.proc.pid)

    def worker(self) -> psutil.Process | None:
        """The worker child (the supervisor also runs the exporter)."""
        supervisor = self.supervisor()
        if supervisor is None:
            return None
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in supervisor.children():
                if "sentinel_platform.workers" in child.cmdline():
                    return child
        return None

    def state(self) -> dict:
        try:
            return json.loads((self.home / "run" / "up.json").read_text())
        except (OSError, ValueError):
            return {}

    def restarts(self, child: str) -> int:
        return self.state().get("children", {}).get(child, {}).get("restarts", 0)

    def output(self) -> str:
        return (self.home.parent / f"{self.home.name}.out").read_text(errors="replace")

    def alive(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"sentinel up exited {self.proc.returncode}:\n{self.output()}")
        return True

    def stop(self) -> int:
        supervisor = self.supervisor()
        if supervisor is not None:
            supervisor.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.log.close()


@pytest.mark.slow
@pytest.mark.skipif(not _pid_namespaces_available(), reason="no PID namespaces (unshare)")
def test_two_ups_as_pid_1_on_one_hostname_run_side_by_side_and_keep_names_on_restart(
    worker_env: dict[str, str],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    tmp_path: Path,
) -> None:
    def live_consumers() -> set[str]:
        names = set(redis_client.hkeys(tx_keys.consumers))
        return {name for name in names if redis_client.exists(tx_keys.lease(name))}

    first = UpInOwnPidNamespace(worker_env, tmp_path / "first")
    second = None
    try:
        (name_a,) = wait_until(lambda: first.alive() and live_consumers(), 60, 0.2)
        second = UpInOwnPidNamespace(worker_env, tmp_path / "second")
        wait_until(lambda: second.alive() and len(live_consumers()) == 2, 60, 0.2)
        both = live_consumers()
        assert first.alive() and name_a in both
        assert first.state()["supervisor_pid"] == second.state()["supervisor_pid"] == 1

        # A crashed worker comes back under the same name: its pending entries stay its own.
        (name_b,) = both - {name_a}
        lease_before = redis_client.get(tx_keys.lease(name_b))
        worker = wait_until(second.worker, 10, 0.1)
        worker.send_signal(signal.SIGKILL)
        wait_until(lambda: second.restarts("tx-1") == 1, 30, 0.1)
        retaken = wait_until(
            lambda: redis_client.get(tx_keys.lease(name_b)) not in (None, lease_before), 30, 0.1
        )
        assert retaken and second.worker() is not None and second.worker().pid != worker.pid
        assert set(redis_client.hkeys(tx_keys.consumers)) == both
        assert first.alive() and second.alive()
        assert first.state()["run_id"] != second.state()["run_id"]
    finally:
        codes = [first.stop(), second.stop() if second else 0]
    assert codes == [0, 0], first.output() + (second.output() if second else "")
