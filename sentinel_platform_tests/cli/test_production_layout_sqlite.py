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

from sentinel_platform_tests.harness import production_layout as layout
from sentinel_platform_tests.harness.production_layout import Platform

# Three Spark runs, two of them one after the other in the transactions pool.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

platform = layout.production_platform("sqlite")


def test_pools_and_restarts_hold_on_sqlite(platform: Platform) -> None:
    up = platform
    with layout.instance_of(up) as instance:
        _pools, gate_by_stream, ui_run = layout.gate_then_a_ui_run(up, instance)
        layout.queued_while(instance, ui_run, gate_by_stream["transactions"])
        cursor_before = layout.gate_cursor(instance)
        assert cursor_before, "the lag gate has ticked: it has a cursor"

        layout.restart_webserver_and_daemon(up)

        layout.wait_success(up, [*gate_by_stream.values(), ui_run], timeout_s=900)
        assert layout.UI_PARTITION in instance.get_materialized_partitions(
            dg.AssetKey("transaction_stream")
        )
        layout.assert_gate_kept_its_cursor(instance, cursor_before)
