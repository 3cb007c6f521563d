"""``sentinel up`` as a real process: workers hold leases, a crashed worker comes back,
and SIGTERM leaves no process behind (workers, their supervisor, the embedded Redis)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sentinel_platform.cli import proctree
from sentinel_platform.redis_server import (
    binary_identity,
    find_redis_server,
    running_embedded_url,
)
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import connect
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform_tests.harness.sentinel_up import seen_processes
from sentinel_platform_tests.harness.waits import wait_until


def _state(home: Path) -> dict:
    path = home / "run" / "up.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _child_pid(home: Path, name: str) -> int | None:
    return _state(home).get("children", {}).get(name, {}).get("pid")


@pytest.mark.slow
def test_up_supervises_workers_and_sigterm_leaves_no_process(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}  # embedded Redis
    env.update({"SENTINEL_HOME": str(home), "PYTHONUNBUFFERED": "1"})
    sentinel = Path(sys.executable).parent / "sentinel"
    argv = [str(sentinel), "up", "--no-dagster", "--transaction-workers", "2"]
    argv += ["--worker-concurrency", "3"]
    up = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        settings = load_settings(home=home)
        url = wait_until(lambda: running_embedded_url(settings), timeout_s=30)
        client = connect(settings, url=url)
        tx, ax = transaction_keys(settings), axiom_keys(settings)

        def leases_held() -> bool:
            names = {keys: client.hkeys(keys.consumers) for keys in (tx, ax)}
            return [len(names[tx]), len(names[ax])] == [2, 1] and all(
                client.exists(keys.lease(str(name))) for keys, ns in names.items() for name in ns
            )

        wait_until(leases_held, timeout_s=60, interval_s=0.2)
        # "started" is logged just after the lease is taken: wait for the line too.
        started = wait_until(
            lambda: [
                json.loads(line)
                for line in (home / "logs" / "worker-tx-2.log").read_text().splitlines()
                if '"started"' in line
            ],
            timeout_s=15,
        )
        assert [event["concurrency"] for event in started] == [3]
        redis_pid = int(json.loads((home / "redis" / "server.json").read_text())["pid"])
        redis_process = proctree.identify({redis_pid})

        # A worker crash: the supervisor restarts it and the new process takes the lease.
        crashed = _child_pid(home, "tx-1")
        assert crashed is not None
        os.kill(crashed, signal.SIGKILL)
        restarted = wait_until(
            lambda: (pid := _child_pid(home, "tx-1")) not in (None, crashed) and pid,
            timeout_s=30,
            interval_s=0.1,
        )
        assert _state(home)["children"]["tx-1"]["restarts"] == 1

        def lease_retaken() -> bool:
            # The lease value is "host:pid:token"; the crashed worker's lease lingers until
            # its TTL ends, so only the new pid in it shows the restarted worker took over.
            holders = [client.get(tx.lease(str(name))) for name in client.hkeys(tx.consumers)]
            pids = {str(holder).rsplit(":", 2)[1] for holder in holders if holder}
            return str(restarted) in pids and leases_held()

        wait_until(lease_retaken, timeout_s=30, interval_s=0.2)
        assert "restarting in" in (home / "logs" / "sentinel-up.log").read_text()

        seen = seen_processes(_state(home))
        client.close()
    finally:
        up.send_signal(signal.SIGTERM)
        output = up.communicate(timeout=90)[0].decode()
    assert up.returncode == 0, output
    served_by = binary_identity(find_redis_server(load_settings(home=home)))
    assert f"redis server: {served_by}" in output  # e.g. "Valkey 8.1.8"
    assert "stopping workers" in output
    assert output.index("stopping workers") < output.index("stopping the embedded Redis")
    assert len(seen) >= 4  # 3 workers + the crashed one
    assert not proctree.still_running({**seen, **redis_process}), output
    assert _state(home)["running"] is False


def test_up_refuses_a_taken_port_before_starting_anything(
    settings_env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    from sentinel_platform.cli.main import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["up", "--port", str(port)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"port {port} on 127.0.0.1 is taken" in err
    assert not (Path(settings_env["SENTINEL_HOME"]) / "run" / "up.json").exists()
