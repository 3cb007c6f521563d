"""The soak drill, short: restarts, a replica promotion and an outage lose and double nothing.

``python -m bench soak`` runs it for 10 minutes with a 90-second outage; this is the same drill
on a compressed schedule, so the drill itself cannot rot and every incident it stages
(SIGKILL + AOF restart, ``FAILOVER`` behind a relay, a longer outage, entries whose
bytes are not UTF-8, the consumer group deleted) runs in CI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak import Schedule, run_soak, verdict

pytestmark = pytest.mark.slow


def test_short_soak_loses_doubles_and_kills_nothing(tmp_path: Path, redis_binary: str) -> None:
    figures = run_soak(tmp_path, Schedule.scaled(40.0, 6.0), rate_per_s=100, binary=redis_binary)

    assert figures["incidents"] == [
        "restart (down 1s)",
        "3 undecodable entries",
        "restart (down 1s)",
        "replica promoted",
        "3 undecodable entries",
        "restart (down 6s)",
        "consumer group deleted",
        "3 undecodable entries",
        "restart (down 1s)",
    ]
    assert figures["undecodable_planted"] == 9
    assert figures["acknowledged"] == 100 * 32
    assert figures["lost"] == 0
    assert figures["duplicated"] == 0
    assert figures["dead_lettered_valid"] == 0
    assert figures["bad_not_dead_lettered_once"] == 0  # poison and undecodable, once each
    assert figures["dead_lettered"] == figures["poison_planted"] + 9
    assert figures["wrong_reason"] == 0
    assert figures["pending"] == 0
    assert figures["worker_deaths"] == 0
    assert figures["workers_saw_outage"] == 3
    assert verdict(figures)
