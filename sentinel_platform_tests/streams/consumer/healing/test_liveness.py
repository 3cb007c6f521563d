"""The connection-liveness verdict: dead only when the same current registration is
missing twice, ``CONFIRM_S`` apart; anything uncertain falls back to the lease."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.healing.liveness import (
    Observation,
    Registration,
    Sighting,
    Verdict,
    judge,
)

LEASE = "host:42:abc"
REG = Registration(LEASE, 7, "")
NEWER = Registration(LEASE, 8, "")
CONFIRM = 0.25


def seen(
    registration: Registration | None = REG,
    live: frozenset[int] | None = frozenset(),
    lease: str | None = LEASE,
    node: str = "",
) -> Observation:
    return Observation(lease, registration, live, node)


CASES: list[tuple[str, Observation, Sighting | None, float, Verdict, Sighting | None]] = [
    # name, observation, sighting kept from before, now, verdict, sighting kept after
    ("connected", seen(live=frozenset({7, 9})), None, 10.0, "alive", None),
    (
        "connected again clears a sighting",
        seen(live=frozenset({7})),
        Sighting(REG, 9.0),
        10.0,
        "alive",
        None,
    ),
    ("first time missing: look again", seen(), None, 10.0, "unknown", Sighting(REG, 10.0)),
    ("missing again too soon", seen(), Sighting(REG, 9.9), 10.0, "unknown", Sighting(REG, 9.9)),
    (
        "missing again after the confirm time",
        seen(),
        Sighting(REG, 9.75),
        10.0,
        "dead",
        Sighting(REG, 9.75),
    ),
    ("stays dead on later looks", seen(), Sighting(REG, 1.0), 10.0, "dead", Sighting(REG, 1.0)),
    (
        "re-registered after a blip: a new sighting",
        seen(NEWER),
        Sighting(REG, 1.0),
        10.0,
        "unknown",
        Sighting(NEWER, 10.0),
    ),
    ("no registration: the lease decides", seen(None), Sighting(REG, 1.0), 10.0, "unknown", None),
    (
        "no lease: the lease rule applies",
        seen(lease=None),
        Sighting(REG, 1.0),
        10.0,
        "unknown",
        None,
    ),
    (
        "registration of another lease (name taken, or stale)",
        seen(lease="host:43:def"),
        Sighting(REG, 1.0),
        10.0,
        "unknown",
        None,
    ),
    (
        "registered on another node (slot moved, failover)",
        seen(node="10.0.0.2:7001"),
        Sighting(REG, 1.0),
        10.0,
        "unknown",
        None,
    ),
    ("ids unreadable (NOPERM, error)", seen(live=None), None, 10.0, "unknown", None),
    (
        "ids unreadable keeps the sighting",
        seen(live=None),
        Sighting(REG, 1.0),
        10.0,
        "unknown",
        Sighting(REG, 1.0),
    ),
]


@pytest.mark.parametrize(
    ("observation", "before", "now", "verdict", "after"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_holder_verdict_from_its_registered_connection(
    observation: Observation,
    before: Sighting | None,
    now: float,
    verdict: Verdict,
    after: Sighting | None,
) -> None:
    assert judge(observation, before, now, CONFIRM) == (verdict, after)


@pytest.mark.parametrize(
    "raw", [None, "", "not json", '{"lease": "x"}', '{"lease": "x", "id": "seven", "node": ""}']
)
def test_unreadable_registration_counts_as_none(raw: str | None) -> None:
    assert Registration.decode(raw) is None


def test_registration_round_trips() -> None:
    reg = Registration("h:1:tok", 12345, "10.0.0.1:7000")
    assert Registration.decode(reg.encode()) == reg
