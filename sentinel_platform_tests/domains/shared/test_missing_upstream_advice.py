"""A stream asset materialised alone on a fresh partition fails with advice that works as
written: the test runs the real ``dagster asset materialize`` on the real code location,
reads the command out of the failure, runs it in a shell with no ``DAGSTER_HOME`` from
another directory, and finds the partition built in the instance the failed run belongs
to (the one the UI shows)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from sentinel_platform.resources.io_manager import rebuild_command
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform_tests.harness.dagster_cli import materialize

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]
DAY = "2026-11-21"
#: The advice as the failure quotes it, between backticks.
ADVICE = re.compile(r"build \S+ with its upstream: `([^`]+)`")


@pytest.fixture
def publishing_env(
    settings: Settings, settings_env: dict[str, str], redis_client: RedisClient
) -> dict[str, str]:
    """The platform's settings; an idle consumer and roomy limits, so a default-size day
    publishes without waiting for a worker."""
    for keys in (transaction_keys(settings), axiom_keys(settings)):
        redis_client.set(keys.lag, 0)
    return {**settings_env, "SENTINEL_LAG_WARN": "500000", "SENTINEL_LAG_PAUSE": "1000000"}


def _materialised(home: Path, asset: str) -> set[str]:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return set(instance.get_materialized_partitions(dg.AssetKey(asset)))


# The transactions' advice is followed as written in ``cli/test_first_hour.py`` (refused
# from the UI, a default-size day of 20,000 rows: ten minutes here on a loaded machine);
# this test proves the same for the axioms, refused through the CLI.
@pytest.mark.parametrize(
    ("stream_asset", "missing", "upstream"),
    [("axiom_stream", "axioms", ("telemetry_readings",))],
)
def test_advice_of_a_missing_upstream_builds_the_partition_when_run_as_written(
    stream_asset: str,
    missing: str,
    upstream: tuple[str, ...],
    publishing_env: dict[str, str],
    redis_client: RedisClient,
    tmp_path: Path,
) -> None:
    home = tmp_path / "dagster"
    failed = materialize(stream_asset, DAY, publishing_env, home, timeout_s=300)
    assert failed.returncode != 0, failed.stdout[-3000:]
    assert f"partition {DAY} of asset {missing!r} was never materialised" in failed.stdout
    (command,) = set(ADVICE.findall(failed.stdout))
    assert f"--select '*{stream_asset}'" in command and f"DAGSTER_HOME={home}" in command

    elsewhere = tmp_path / "another-shell"
    elsewhere.mkdir()
    shell_env = {k: v for k, v in publishing_env.items() if k != "DAGSTER_HOME"}
    done = subprocess.run(
        ["bash", "-c", command],
        env=shell_env,
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    for asset in (*upstream, missing, stream_asset):
        assert DAY in _materialised(home, asset), asset
    assert not (elsewhere / "history").exists()  # nothing recorded into a stray instance


@pytest.mark.parametrize(
    ("homes", "expected"),
    [
        (("/srv/dagster", "/srv/sentinel"),
         "DAGSTER_HOME=/srv/dagster SENTINEL_HOME=/srv/sentinel /v/bin/dagster asset "
         "materialize -m sentinel_platform.definitions --select '*transaction_stream' "
         "--partition 2026-11-21"),
        (("/a dir/dagster", None),
         "DAGSTER_HOME='/a dir/dagster' /v/bin/dagster asset materialize -m "
         "sentinel_platform.definitions --select '*transaction_stream' --partition 2026-11-21"),
    ],
)  # fmt: skip
def test_rebuild_command_names_the_instance_and_the_whole_upstream(
    homes: tuple[str, str | None], expected: str
) -> None:
    assert rebuild_command("transaction_stream", DAY, *homes, "/v/bin/dagster") == expected
