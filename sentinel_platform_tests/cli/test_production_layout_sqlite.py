"""``sentinel up --production`` on SQLite, the storage a home has when no PostgreSQL URL is
set: the same three supervised Dagster processes, the same pools and the same restarts as
on PostgreSQL (``test_production_layout.py``), with three Spark runs rather than six.

The lag gate launches nothing on a fresh start and today's partition of both streams when
seeded as a restart on a later day; a partition of transactions materialised as the UI's
*Materialize* does waits queued while the gate's run publishing transactions is in
progress (the pool's one slot, held in the SQLite event log); the webserver and the daemon
are SIGKILLed while the runs go on, come back alone, and every run succeeds; the gate keeps
its cursor and launches nothing twice.
"""

from __future__ import annotations

import dagster as dg
import pytest

from sentinel_platform_tests.harness.production_layout import (
    UI_PARTITION,
    Platform,
    assert_gate_kept_its_cursor,
    assert_the_layout,
    gate_cursor,
    gate_launches_a_later_day,
    instance_of,
    materialize_like_the_ui,
    pools_of,
    production_platform,
    queued_while,
    restart_webserver_and_daemon,
    wait_success,
)

# Three Spark runs, two of them one after the other in the transactions pool.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

platform = production_platform("sqlite")


def test_pools_and_restarts_hold_on_sqlite(platform: Platform) -> None:
    up = platform
    with instance_of(up) as instance:
        pools = assert_the_layout(up, instance)
        gate_by_stream = gate_launches_a_later_day(up, instance, pools)
        ui_run = materialize_like_the_ui(up)
        assert pools_of(instance.get_run_by_id(ui_run)) == {pools["transactions"]}
        queued_while(instance, ui_run, gate_by_stream["transactions"])
        cursor_before = gate_cursor(instance)
        assert cursor_before, "the lag gate has ticked: it has a cursor"

        restart_webserver_and_daemon(up)

        wait_success(up, [*gate_by_stream.values(), ui_run], timeout_s=900)
        assert UI_PARTITION in instance.get_materialized_partitions(
            dg.AssetKey("transaction_stream")
        )
        assert_gate_kept_its_cursor(instance, cursor_before)
