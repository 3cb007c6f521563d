"""The typology table: a 2% base rate of threats, and cases both ways for the rules (they
catch structuring, miss the scam told without their keywords and the impossible pair, and
flag the harmless keyword and payroll rows), at every amount and message a profile draws."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sentinel_platform.aml_rules import THREAT_KEYWORDS_PATTERN
from sentinel_platform.domains.shared.typologies import (
    ORDINARY,
    ORDINARY_PROFILES,
    PROFILES,
    TYPOLOGIES,
    Profile,
    base_rate,
)
from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import Settings
from workers.processors.transactions import THREAT_KEYWORDS, evaluate_rules

#: typology -> (the truth, the rules' verdict with default settings, a threat keyword in it)
EXPECTED: dict[str, tuple[bool, bool, bool]] = {
    "structuring": (True, True, False),
    "scam_story": (True, False, False),
    "impossible_pair": (True, False, False),
    "keyword_harmless": (False, True, True),
    "round_payroll": (False, True, False),
}


def drawn(profile: Profile) -> Iterator[Transaction]:
    """Every message and currency at the amounts the profile can draw (its ends, every step)."""
    amounts = (
        [profile.low, profile.high]
        if profile.step is None
        else [round(profile.low + i * profile.step, 2) for i in range(profile.amounts())]
    )
    for message in profile.messages:
        for currency in profile.currencies:
            for amount in amounts:
                row = {
                    "id": "t",
                    "merchant": profile.merchant,
                    "category": profile.category,
                    "currency": currency,
                    "amount": amount,
                    "message": message,
                    "is_threat": profile.is_threat,
                    "source": "simulator",
                    "timestamp": "2026-11-21T10:00:00Z",
                }
                yield Transaction.from_fields({"data": json.dumps(row)})


def test_threats_are_two_percent_of_a_day() -> None:
    assert sum(p.weight for p in PROFILES) == 1000
    assert base_rate() == pytest.approx(0.02)


def test_every_typology_is_named_once_and_ordinary_rows_are_harmless() -> None:
    assert sorted(p.typology for p in TYPOLOGIES) == sorted(EXPECTED)
    assert {(p.typology, p.is_threat) for p in ORDINARY_PROFILES} == {(ORDINARY, False)}


@pytest.mark.parametrize("profile", TYPOLOGIES, ids=lambda p: p.typology)
def test_each_typology_meets_the_rules_as_declared(
    profile: Profile, rules_settings: Settings
) -> None:
    truth, rules_say, keyword = EXPECTED[profile.typology]
    assert profile.is_threat is truth
    for txn in drawn(profile):
        assert evaluate_rules(txn, rules_settings).is_threat is rules_say, txn
        assert (THREAT_KEYWORDS.search(txn.message) is not None) is keyword, txn.message


@pytest.mark.parametrize(
    ("profile", "count", "last"),
    [
        (Profile("m", 1, "other", ("USD",), 1000.0, 5000.0, ("x",), step=250.0), 17, 5000.0),
        (Profile("m", 1, "other", ("USD",), 100.0, 100.0, ("x",), step=50.0), 1, 100.0),
    ],
)
def test_a_stepped_profile_draws_every_step_up_to_its_high(
    profile: Profile, count: int, last: float
) -> None:
    assert profile.amounts() == count
    assert profile.low + (count - 1) * (profile.step or 0) == last


def test_a_profile_to_the_cent_has_no_steps() -> None:
    with pytest.raises(ValueError, match="to the cent"):
        ORDINARY_PROFILES[0].amounts()


def test_the_keyword_pattern_is_the_rules_one() -> None:
    assert THREAT_KEYWORDS.pattern == THREAT_KEYWORDS_PATTERN
