"""What a decider is shown of a transaction: the payment, never the truth it was made with.

A generated transaction carries its ground truth (``is_threat``) so that verdicts can be
measured against it; a model shown that field, or a rule reading it, would be measured
against its own answer. So the rules and every analyzer API get a :class:`ShownTransaction`,
built by :func:`shown` from the fields it names and from nothing else: a field added to
:class:`~sentinel_platform.schemas.Transaction` stays hidden from every decider until it is
named here. The truth goes beside the verdict instead (:func:`truth_of`), where it can be
measured and cannot be read.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sentinel_platform.schemas import Transaction

#: The wire fields that are ground truth: never shown to a decider, kept beside its verdict.
TRUTH_FIELDS: tuple[str, ...] = ("is_threat",)


@dataclass(frozen=True)
class ShownTransaction:
    """The payment as a decider sees it: what a bank's screening would have at hand."""

    id: str
    merchant: str
    category: str
    currency: str
    amount: float
    message: str
    source: str
    timestamp: str

    def payload(self) -> dict[str, Any]:
        """The JSON object an analyzer is sent about this payment (the fields above only)."""
        return dataclasses.asdict(self)


#: The wire fields a decider may read (every other field of the wire model is hidden).
SHOWN_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ShownTransaction))


def shown(txn: Transaction) -> ShownTransaction:
    """The fields of ``txn`` that :data:`SHOWN_FIELDS` names, and nothing else."""
    return ShownTransaction(**{name: getattr(txn, name) for name in SHOWN_FIELDS})


def truth_of(txn: Transaction) -> dict[str, str]:
    """The truth to keep beside the verdict: ``label`` (``"true"``/``"false"``) when the
    message carries one; nothing from a source without truth, so an unlabelled message is
    never counted as a harmless one."""
    if txn.is_threat is None:
        return {}
    return {"label": "true" if txn.is_threat else "false"}
