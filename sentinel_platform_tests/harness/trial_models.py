"""Stub models for a trial of models and prompts: each decides a transaction by a simple
rule over what it is shown, right on some typologies and wrong on others, and the
confusion matrices a measurement of their verdicts must find.

A stub model reads only the message its request carries (the payment a decider is shown:
merchant, category, currency, amount, message; never the label) and flags it when one of
its *cues* fires. Each cue is named after the one generated typology it picks out
(:data:`CUES`), so what a stub flags is also a set of typologies, and a test can expect
its verdicts from the generated rows' typologies alone, independently of the verdicts the
platform recorded (:func:`expected_matrices`). That the cues pick out exactly their
typologies, over every profile the generator draws from, is table-tested.

The stubs of the journey (:data:`PRIMARY`, :data:`FALLBACK`, :data:`SHADOW`):

========  ============================================  ========================================
stub      flags                                         so it is
========  ============================================  ========================================
primary   scam_story, impossible_pair                   blind to structuring
fallback  scam_story, round_payroll                     blind to structuring and impossible
                                                        pairs, wrong on payroll (false alarms)
shadow    scam_story, impossible_pair, structuring      right on every typology (a new prompt)
========  ============================================  ========================================
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sentinel_platform_tests.harness.model_api_bodies import shown_message

Shown = Mapping[str, Any]
#: A group of verdicts as the quality asset keys them: role, model, prompt version.
Group = tuple[str, str, str]
OUTCOMES = ("tp", "fp", "tn", "fn")
_SCAM_WORDS = re.compile(r"\b(fee|prize|online|arrested)\b", re.IGNORECASE)


def _scam_story(shown: Shown) -> bool:
    """A scam told in words the rules do not know: a fee, a prize, a stranger met online,
    an arrest threatened."""
    return bool(_SCAM_WORDS.search(str(shown.get("message", ""))))


def _impossible_pair(shown: Shown) -> bool:
    """Currency exchange booked by a merchant that is no exchange office."""
    merchant = str(shown.get("merchant", "")).lower()
    return shown.get("category") == "forex" and "forex" not in merchant


def _structuring(shown: Shown) -> bool:
    """A USD payment kept just under the USD 500 reporting threshold."""
    amount = float(shown.get("amount") or 0)
    return shown.get("currency") == "USD" and 495.0 <= amount < 500.0


def _round_payroll(shown: Shown) -> bool:
    """A payroll house's payment (a false alarm: payroll is harmless)."""
    return "payroll" in str(shown.get("merchant", "")).lower()


#: Each cue by the typology it picks out of a generated day.
CUES: dict[str, Callable[[Shown], bool]] = {
    "scam_story": _scam_story,
    "impossible_pair": _impossible_pair,
    "structuring": _structuring,
    "round_payroll": _round_payroll,
}


@dataclass(frozen=True)
class StubModel:
    """A model that flags a message when one of its cues (typology names) fires."""

    cues: frozenset[str]

    def says(self, shown: Shown) -> bool:
        """Its verdict on the payment ``shown``."""
        return any(CUES[name](shown) for name in self.cues)

    def decide(self, body: dict[str, Any]) -> dict[str, Any]:
        """The verdict answered to a request ``body`` (a ``ModelApiServer.decide`` hook)."""
        threat = self.says(shown_message(body))
        return {
            "is_threat": threat,
            "risk_level": "high" if threat else "low",
            "narrative": "Flagged by its cues." if threat else "Nothing of note.",
        }

    def expects(self, typology: str) -> bool:
        """Its verdict on a message of ``typology``, as the cues' table says."""
        return typology in self.cues


PRIMARY = StubModel(frozenset({"scam_story", "impossible_pair"}))
FALLBACK = StubModel(frozenset({"scam_story", "round_payroll"}))
SHADOW = StubModel(frozenset({"scam_story", "impossible_pair", "structuring"}))
STUBS: dict[str, StubModel] = {"primary": PRIMARY, "fallback": FALLBACK, "shadow": SHADOW}


def outcome(label: bool, said: bool) -> str:
    """The confusion cell of a verdict ``said`` on a message whose truth is ``label``."""
    return ("tp" if label else "fp") if said else ("fn" if label else "tn")


def expected_matrices(
    decided: Iterable[tuple[str, Group]],
    truth: Mapping[str, tuple[bool, str]],
    stubs: Mapping[str, StubModel] = STUBS,
) -> dict[Group, dict[str, int]]:
    """The confusion matrix of each group of verdicts: ``decided`` pairs a transaction id
    with the group (role, model, prompt version) whose stub decided it, ``truth`` gives each
    id's label and typology (from the generated rows). Each verdict is the one the role's
    stub gives its typology (:meth:`StubModel.expects`)."""
    found: dict[Group, dict[str, int]] = {}
    for txn_id, group in decided:
        label, typology = truth[txn_id]
        cells = found.setdefault(group, dict.fromkeys(OUTCOMES, 0))
        cells[outcome(label, stubs[group[0]].expects(typology))] += 1
    return found


def expected_live_on(
    ids: Iterable[str],
    role_of: Mapping[str, str],
    truth: Mapping[str, tuple[bool, str]],
    stubs: Mapping[str, StubModel] = STUBS,
) -> dict[str, int]:
    """The one confusion matrix of the live decisions on the messages ``ids`` (a shadow's),
    each decided by the stub of its role in ``role_of``."""
    cells = dict.fromkeys(OUTCOMES, 0)
    for txn_id in ids:
        label, typology = truth[txn_id]
        cells[outcome(label, stubs[role_of[txn_id]].expects(typology))] += 1
    return cells


def expected_by_typology(
    decided: Iterable[tuple[str, Group]],
    truth: Mapping[str, tuple[bool, str]],
    stubs: Mapping[str, StubModel] = STUBS,
) -> dict[tuple[str, str, str, str], tuple[int, int]]:
    """Per group and typology: how many messages the group decided and how many of them
    its stub flagged (all of them or none: a stub flags a typology or it does not)."""
    found: dict[tuple[str, str, str, str], tuple[int, int]] = {}
    for txn_id, group in decided:
        typology = truth[txn_id][1]
        messages, flagged = found.get((*group, typology), (0, 0))
        said = stubs[group[0]].expects(typology)
        found[(*group, typology)] = (messages + 1, flagged + int(said))
    return found
