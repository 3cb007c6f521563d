"""The workers suite's core cases, unchanged, against a real 3-primary Redis Cluster.

Each test below *is* a test function of the workers suite (real worker processes) or of
the in-process consumer suite (imported, not copied); only the fixtures differ: this module's
``make_settings`` (imported below) points ``settings`` and everything built on it at the
cluster. Consume, recover a SIGKILLed worker's messages (at connection close
and at lease expiry), never rob a live one or take a reconnect for a death, dead-letter
(exact delivery limit, invalid at once, atomic with the XACK), lag, idempotent effects,
clean SIGTERM.
"""

from __future__ import annotations

import pytest

from sentinel_platform_tests.harness.suite_on_cluster import make_settings
from sentinel_platform_tests.streams.backlog.test_consumption import (
    test_lag_key_counts_backlog_plus_pending_and_survives_a_slow_message,
)
from sentinel_platform_tests.streams.consumer.healing.test_recovery import (
    test_a_live_worker_with_a_slow_message_is_never_robbed,
    test_dead_worker_messages_are_recovered_by_a_survivor_within_lease_ttl,
)
from sentinel_platform_tests.streams.consumer.healing.test_recovery_liveness import (
    test_a_connection_that_drops_and_reconnects_is_not_taken_as_death,
    test_a_killed_workers_messages_are_claimed_at_connection_close_before_its_lease_expires,
)
from sentinel_platform_tests.streams.consumer.settling.test_dead_letters import (
    test_dead_letter_and_ack_are_one_atomic_step,
)
from sentinel_platform_tests.streams.consumer.settling.test_idempotent_effects import (
    test_a_redelivered_message_is_acknowledged_without_a_second_effect,
    test_a_settled_delivery_never_gets_an_effect_later,
)
from sentinel_platform_tests.streams.consumer.test_consumer import (
    test_the_same_record_published_twice_has_one_effect,
)
from sentinel_platform_tests.streams.consumer.test_consumer_dead_letters import (
    test_invalid_message_is_dead_lettered_at_once_and_the_worker_keeps_going,
    test_poison_message_is_processed_exactly_limit_times_then_dead_lettered,
)
from sentinel_platform_tests.streams.consumer.test_consumer_domains import (
    test_axiom_worker_writes_one_compliance_event_per_reading,
    test_messages_published_before_the_group_exists_are_consumed,
)
from sentinel_platform_tests.workers.test_process import (
    test_sigterm_finishes_the_message_in_hand_and_exits_zero_holding_nothing,
)

pytestmark = pytest.mark.cluster

__all__ = [
    "make_settings",
    "test_a_connection_that_drops_and_reconnects_is_not_taken_as_death",
    "test_a_killed_workers_messages_are_claimed_at_connection_close_before_its_lease_expires",
    "test_a_live_worker_with_a_slow_message_is_never_robbed",
    "test_a_redelivered_message_is_acknowledged_without_a_second_effect",
    "test_a_settled_delivery_never_gets_an_effect_later",
    "test_axiom_worker_writes_one_compliance_event_per_reading",
    "test_dead_letter_and_ack_are_one_atomic_step",
    "test_dead_worker_messages_are_recovered_by_a_survivor_within_lease_ttl",
    "test_invalid_message_is_dead_lettered_at_once_and_the_worker_keeps_going",
    "test_lag_key_counts_backlog_plus_pending_and_survives_a_slow_message",
    "test_messages_published_before_the_group_exists_are_consumed",
    "test_poison_message_is_processed_exactly_limit_times_then_dead_lettered",
    "test_sigterm_finishes_the_message_in_hand_and_exits_zero_holding_nothing",
    "test_the_same_record_published_twice_has_one_effect",
]
