"""Transaction verdicts: a small, weighted AML rule table, with an optional analyzer.

Each rule is one red flag with a weight; the weights add up to a score and the score
maps to a risk level. A transaction is a threat when its level is ``high``. The weights
are chosen so that each *strong* signal is a threat on its own, each *moderate* one is
worth a second look, and a *weak* one only counts together with others:

=========================  ======  ==============================================================
rule                       weight  fires when
=========================  ======  ==============================================================
above_high_risk_amount     4       amount > ``SENTINEL_HIGH_RISK_AMOUNT`` (strictly above)
suspicious_category        4       category is ``suspicious``
structuring_band           4       USD 495.00-499.99: just under a 500 reporting threshold
large_forex                2       forex amount > half of ``SENTINEL_HIGH_RISK_AMOUNT``
threat_keyword             2       message mentions urgency, wires, gift cards, crypto, ...
round_amount               1       a whole multiple of 100 (100, 200, ...)
=========================  ======  ==============================================================

Score 0-1 is ``low``, 2-3 ``medium``, 4 or more ``high``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sentinel_platform.aml_rules import (
    STRUCTURING_CURRENCY,
    STRUCTURING_HIGH,
    STRUCTURING_LOW,
    THREAT_KEYWORDS_PATTERN,
)
from sentinel_platform.schemas import RiskLevel, Transaction, describe_error
from sentinel_platform.settings import Settings
from sentinel_platform.shown import ShownTransaction, shown, truth_of
from sentinel_platform.streams.backlog.provisional import DAY, day_of
from sentinel_platform.streams.consumer.processor import Busy, Effect, Unprocessable
from sentinel_platform.verdict_quality import RULES_IS_THREAT, RULES_RISK_LEVEL
from workers.analyzer import StreamPrompt, billed_fields
from workers.processors.base import WireProcessor, analyzer_of

log = logging.getLogger(__name__)

THREAT_KEYWORDS = re.compile(THREAT_KEYWORDS_PATTERN, re.IGNORECASE)
HIGH_SCORE, MEDIUM_SCORE = 4, 2


class TransactionVerdict(BaseModel):
    """What a model API must answer about a transaction (its JSON schema is generated from
    this model and sent with every call; a reply that does not validate is "wrong")."""

    model_config = ConfigDict(extra="forbid", strict=True)

    is_threat: bool = Field(description="true when the transaction should be stopped or reported")
    risk_level: RiskLevel = Field(description="low, medium or high")
    narrative: str = Field(description="one to three sentences naming the signals seen")


#: The transactions stream's prompt: packaged instructions, replaceable by a file.
PROMPT = StreamPrompt(
    kind="transaction",
    text_file="transactions.txt",
    setting="analyzer_transactions_prompt_file",
    verdict=TransactionVerdict,
)


@dataclass(frozen=True)
class Rule:
    name: str
    weight: int
    fires: Callable[[ShownTransaction, Settings], bool]


def _above_high_risk_amount(txn: ShownTransaction, settings: Settings) -> bool:
    return txn.amount > settings.high_risk_amount


def _suspicious_category(txn: ShownTransaction, settings: Settings) -> bool:
    return txn.category == "suspicious"


def _structuring_band(txn: ShownTransaction, settings: Settings) -> bool:
    # Many payments just under a reporting threshold is the classic "smurfing" pattern;
    # the generator's structuring typology sits in exactly this band.
    return (
        txn.currency == STRUCTURING_CURRENCY and STRUCTURING_LOW <= txn.amount <= STRUCTURING_HIGH
    )


def _large_forex(txn: ShownTransaction, settings: Settings) -> bool:
    # Currency exchange is a common laundering channel, so it gets a lower bar.
    return txn.category == "forex" and txn.amount > settings.high_risk_amount / 2


def _threat_keyword(txn: ShownTransaction, settings: Settings) -> bool:
    return THREAT_KEYWORDS.search(txn.message) is not None


def _round_amount(txn: ShownTransaction, settings: Settings) -> bool:
    cents = round(txn.amount * 100)
    return cents >= 100_00 and cents % 100_00 == 0


RULES: tuple[Rule, ...] = (
    Rule("above_high_risk_amount", 4, _above_high_risk_amount),
    Rule("suspicious_category", 4, _suspicious_category),
    Rule("structuring_band", 4, _structuring_band),
    Rule("large_forex", 2, _large_forex),
    Rule("threat_keyword", 2, _threat_keyword),
    Rule("round_amount", 1, _round_amount),
)


@dataclass(frozen=True)
class RuleVerdict:
    score: int
    fired: tuple[str, ...]

    @property
    def risk_level(self) -> RiskLevel:
        if self.score >= HIGH_SCORE:
            return "high"
        return "medium" if self.score >= MEDIUM_SCORE else "low"

    @property
    def is_threat(self) -> bool:
        return self.risk_level == "high"

    def recorded(self) -> dict[str, str]:
        """The rules' verdict as every result entry keeps it, beside whoever decided, so
        a model is measured against the rules on the same messages
        (:mod:`sentinel_platform.verdict_quality`)."""
        return {
            RULES_IS_THREAT: "true" if self.is_threat else "false",
            RULES_RISK_LEVEL: self.risk_level,
        }


def evaluate_rules(txn: Transaction, settings: Settings) -> RuleVerdict:
    """The rules' verdict on what they are shown of ``txn`` (:func:`shown`): never its truth."""
    payment = shown(txn)
    fired = tuple(rule for rule in RULES if rule.fires(payment, settings))
    return RuleVerdict(sum(r.weight for r in fired), tuple(r.name for r in fired))


def utc_now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TransactionProcessor(WireProcessor[Transaction]):
    """Turns a transaction into a verdict for ``sentinel:verdicts`` and the recent feed.

    The result carries every verdict field except ``source_message_id``: only the
    consumer loop knows the stream id, so the loop adds it when it writes the entry.
    ``driver_used`` says who decided: ``rules`` (no analyzer configured), ``analyzer``,
    or ``fallback`` (the analyzer failed and the rules decided, saying why:
    ``fallback_cause``, and ``provisional`` when the model is to be asked again,
    :meth:`~workers.processors.base.WireProcessor.fallback_of`). Every verdict has the
    transaction's ``day``, its truth when it has one (``label``,
    :func:`~sentinel_platform.shown.truth_of`), which neither the rules nor the analyzer
    are shown, and the rules' verdict (``rules_is_threat``, ``rules_risk_level``,
    :meth:`RuleVerdict.recorded`) whoever decided. An analyzer's verdict
    also keeps its ``narrative`` and, from a model API, ``model``, ``prompt_version`` and
    the tokens (``Assessment.recorded``): extra fields, which Sentinel-L7's readers
    ignore. A busy analyzer is
    not a failure: its :class:`Busy` goes up to the consumer loop, which calls again
    later, so no message gets a rules verdict because the analyzer was busy.
    """

    stream = "transactions"
    name = "transactions"

    def process(self, message: Transaction, model_only: bool = False) -> Effect:
        rules = evaluate_rules(message, self.settings)
        day = day_of(message.timestamp)
        provisional = None
        is_threat, risk_level, driver = rules.is_threat, rules.risk_level, "rules"
        log_fields: dict[str, Any] = {"txn_id": message.id, "rules_fired": list(rules.fired)}
        said: dict[str, str] = {}
        analyzer = self.analyzer_for(message)
        if analyzer is not None:
            try:
                assessment = analyzer.assess_transaction(message)
                is_threat, risk_level, driver = (
                    assessment.is_threat,
                    assessment.risk_level,
                    "analyzer",
                )
                said = {"narrative": assessment.narrative, **assessment.recorded()}
            except Busy:  # at capacity: the message waits for its AI verdict
                raise
            except Unprocessable:  # no verdict may be made without the analyzer: DLQ
                raise
            except Exception as exc:  # any analyzer failure means: trust the rules
                fell = self.fallback_of(message, exc, day, model_only)
                driver, provisional = "fallback", fell.queue
                log_fields["analyzer_error"] = describe_error(exc)
                said = {**billed_fields(exc), **fell.fields}  # billed: an answer, no verdict
        result = {
            "txn_id": message.id,
            "merchant": message.merchant,
            "amount": f"{message.amount:.2f}",
            "currency": message.currency,
            "is_threat": "true" if is_threat else "false",
            "risk_level": risk_level,
            "driver_used": driver,
            "processed_at": utc_now_iso(),
            DAY: day,
            **truth_of(message),
            **rules.recorded(),
            **said,
        }
        result = self.marked(message, result)
        recent = json.dumps(result, separators=(",", ":"))
        fields = self.marked(message, {**log_fields, "driver_used": driver})
        sample = self.is_sample(driver)
        return Effect(message.natural_key, result, recent, fields, sample, provisional)


def from_settings(settings: Settings) -> TransactionProcessor:
    """The processor a worker runs: with the analyzer of ``SENTINEL_ANALYZER_URL`` if set.

    Called once per worker process, so the worker keeps one analyzer, and with it one
    pool of kept-alive connections, for all its messages.
    """
    return TransactionProcessor(settings, analyzer_of(settings, PROMPT))
