"""The trial's stub models: each cue picks out exactly the typology it is named after, over
every kind of row the generator draws, so a stub's verdicts can be expected from the rows'
typologies alone; and the expected matrices count each verdict in its group's cell."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sentinel_platform.domains.shared.typologies import PROFILES, Profile
from sentinel_platform_tests.harness.trial_models import (
    CUES,
    FALLBACK,
    PRIMARY,
    SHADOW,
    expected_by_typology,
    expected_live_on,
    expected_matrices,
)


def _amounts(profile: Profile) -> list[float]:
    """The lowest, highest and a middle amount the profile draws."""
    if profile.step is not None:
        return [profile.low, profile.low + profile.step, profile.high]
    return [profile.low, round((profile.low + profile.high) / 2, 2), profile.high]


def _shown(profile: Profile) -> list[dict[str, Any]]:
    """Payments as a decider is shown them, for every message, currency and end amount."""
    return [
        {
            "id": "t-1",
            "merchant": profile.merchant,
            "category": profile.category,
            "currency": currency,
            "amount": amount,
            "message": message,
            "source": "simulator",
            "timestamp": "2026-03-02T12:00:00.000Z",
        }
        for message in profile.messages
        for currency in profile.currencies
        for amount in _amounts(profile)
    ]


@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: f"{p.typology}-{p.merchant}")
def test_each_cue_fires_on_its_typology_only(profile: Profile) -> None:
    for shown in _shown(profile):
        fired = {name for name, cue in CUES.items() if cue(shown)}
        assert fired == ({profile.typology} & set(CUES)), shown


@pytest.mark.parametrize(
    ("stub", "flagged"),
    [
        (PRIMARY, {"scam_story", "impossible_pair"}),
        (FALLBACK, {"scam_story", "round_payroll"}),
        (SHADOW, {"scam_story", "impossible_pair", "structuring"}),
    ],
)
def test_a_stub_decides_from_the_request_body_as_its_cues_say(stub: Any, flagged: set[str]) -> None:
    for profile in PROFILES:
        for shown in _shown(profile):
            body = {
                "model": "m",
                "messages": [
                    {"role": "system", "content": "instructions"},
                    {"role": "user", "content": json.dumps(shown)},
                ],
            }
            verdict = stub.decide(body)
            assert verdict["is_threat"] is (profile.typology in flagged), shown
            assert verdict["is_threat"] is stub.expects(profile.typology)


def test_a_request_without_a_message_is_not_flagged() -> None:
    assert SHADOW.decide({"messages": [{"role": "user", "content": "not json"}]}) == {
        "is_threat": False,
        "risk_level": "low",
        "narrative": "Nothing of note.",
    }


def test_expected_matrices_count_each_verdict_in_its_groups_cell() -> None:
    truth = {
        "a": (True, "scam_story"),
        "b": (True, "structuring"),
        "c": (False, "round_payroll"),
        "d": (False, "ordinary"),
    }
    primary, fallback = ("primary", "gpt", "v1"), ("fallback", "claude", "v1")
    decided = [("a", primary), ("b", primary), ("c", fallback), ("d", fallback)]
    assert expected_matrices(decided, truth) == {
        primary: {"tp": 1, "fp": 0, "tn": 0, "fn": 1},
        fallback: {"tp": 0, "fp": 1, "tn": 1, "fn": 0},
    }


def test_the_live_decisions_on_a_shadows_messages_are_each_by_its_deciders_stub() -> None:
    truth = {"a": (True, "impossible_pair"), "b": (False, "round_payroll"), "c": (True, "x")}
    role_of = {"a": "primary", "b": "fallback", "c": "primary"}
    assert expected_live_on(["a", "b", "c"], role_of, truth) == {"tp": 1, "fp": 1, "tn": 0, "fn": 1}


def test_by_typology_counts_each_groups_messages_and_what_its_stub_flagged() -> None:
    truth = {"a": (True, "scam_story"), "b": (True, "scam_story"), "c": (True, "structuring")}
    shadow, primary = ("shadow", "gpt", "v2"), ("primary", "gpt", "v1")
    decided = [("a", shadow), ("b", shadow), ("c", shadow), ("c", primary)]
    assert expected_by_typology(decided, truth) == {
        (*shadow, "scam_story"): (2, 2),
        (*shadow, "structuring"): (1, 1),
        (*primary, "structuring"): (1, 0),
    }
