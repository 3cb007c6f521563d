"""A worker restarted under its killed predecessor's name takes the lease at once.

Real ``python -m workers.watch_transactions`` processes on a real server, with a lease TTL
of a minute: a SIGKILLed predecessor's lease lives on for that minute, but its registered
connection closed with the process, so the restart takes the name over at once. A live
holder (its connection open) is never taken over; a holder whose connection tells nothing
(no registration) is waited for, as before: those cases are in
``workers/test_startup_waits.py``.
"""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.healing.liveness import Registration, registration_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.waits import WaitTimeout, wait_until

#: A lease that outlives the test by far: without the takeover the restart waits it out.
LONG_LEASE = {"SENTINEL_LEASE_TTL_MS": "60000"}
#: A restart's start-up on a loaded 2-core machine, far below the minute of the lease.
START_DEADLINE_S = 25.0


def test_a_restart_takes_its_sigkilled_predecessors_lease_at_once(
    start_worker: StartWorker, redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    lease_key = tx_keys.lease("slot-1")

    def registered(lease: object) -> bool:
        raw = redis_client.get(registration_key(tx_keys, "slot-1"))
        found = Registration.decode(None if raw is None else str(raw))
        return found is not None and found.lease == lease

    predecessor = start_worker(consumer="slot-1", env=LONG_LEASE).wait_ready(redis_client)
    old = redis_client.get(lease_key)
    # Its link registers on a thread of its own, maybe after "started": killed before
    # that, nothing would tell it is dead.
    wait_until(lambda: registered(old), 15, what="the predecessor's connection registered")
    predecessor.kill()  # SIGKILL: its lease lives on for up to a minute, its socket not
    assert old is not None and redis_client.pttl(lease_key) > 30_000

    restarted = start_worker(consumer="slot-1", env=LONG_LEASE)
    try:
        restarted.wait_ready(redis_client, START_DEADLINE_S)
    except WaitTimeout:
        pytest.fail(f"the restart did not start in {START_DEADLINE_S}s:\n{restarted.tail(40)}")

    new = redis_client.get(lease_key)
    assert new is not None and new != old
    assert f":{restarted.proc.pid}:" in new  # host:pid:token, the restart's own
    assert [e["holder"] for e in restarted.events("lease_taken_over")] == [old]
    # The dead holder's registration went with its lease; the restart registers its own.
    wait_until(lambda: registered(new), 15, what="the restart's connection registered")
