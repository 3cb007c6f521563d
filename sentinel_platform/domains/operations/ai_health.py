"""The AI's health on one stream, judged from its figures: who decided the last minutes'
verdicts, the analyzer's holds, and the provisional verdicts waiting for the model.

An operator watching the Dagster UI during an outage must see that the rules, not the
model, are deciding, and what becomes of the messages meanwhile. That depends on
``SENTINEL_ANALYZER_WHEN_DOWN`` and on why the analyzer is not asked: a busy analyzer
(``Retry-After``, an announced budget) always makes the messages wait; a down or
exhausted one hands them to the rules (``rules``: provisional verdicts, re-screened once
it is back) or keeps them waiting (``wait``). :func:`message_fate` words that, so no
text says "the messages wait" while the rules decide them.

Everything here is pure (table-tested): :func:`judge` gives the ``ai_verdicts`` check's
verdict, whose metadata carries every figure, and :func:`health_alerts` the alerts the
sensor sends for the same conditions. The figures are read by
:mod:`~sentinel_platform.domains.operations.ai_health_read`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sentinel_platform.alerting.model import Alert
from sentinel_platform.domains.operations.check_verdict import ERROR, WARN, Verdict
from sentinel_platform.streams.backlog.provisional import (
    BATCH_CAUSE_TEXT,
    BATCH_CAUSES,
    PROVISIONAL_CAUSES,
    ProvisionalBacklog,
)
from sentinel_platform.streams.backlog.verdict_mix import (
    FALLBACK_SHARE_LIMIT,
    MIN_VERDICTS,
    VerdictMix,
)
from sentinel_platform.streams.operators import analyzer_holds as hold_store

CHECK_NAME = "ai_verdicts"
#: A share of fallbacks from this much (of at least ``MIN_VERDICTS``) is a WARN; past
#: ``FALLBACK_SHARE_LIMIT`` ("most verdicts", as ``sentinel status`` says) an ERROR.
FALLBACK_SHARE_WARN = 0.1
#: The oldest provisional verdict older than this is a WARN, and past the ERROR age an
#: ERROR: the re-screening does not keep up, or the analyzer has not been back for long.
PROVISIONAL_WARN_AGE_S = 900.0
PROVISIONAL_ERROR_AGE_S = 3600.0
#: This many provisional verdicts waiting is a WARN whatever their age.
PROVISIONAL_WARN_COUNT = 1000
#: The hold causes of a busy analyzer: its messages wait whatever the setting.
BUSY_CAUSES = frozenset({hold_store.RETRY_AFTER, hold_store.ANNOUNCED_LIMIT})
EXHAUSTED = "exhausted"
#: Fallback causes the setting does not decide: the model refused the message, or its
#: answer was no verdict, or the request was wrong; asking again would not help.
FINAL_FATE = "final: asking the model again would not help (a refusal or an unusable answer)"
#: The batch lane's fallbacks: final too, for the lane's own reason.
BATCH_FATE = (
    "from the batch lane: final, decided by the rules (past data is not asked again in real time)"
)


#: The fate policy of ``SENTINEL_ANALYZER_WHEN_DOWN=rules`` with re-screening off.
RULES_UNQUEUED = "rules_unqueued"


def fate_policy(when_down: str, rescreen: bool) -> str:
    """What becomes of a message the analyzer cannot decide, as :func:`message_fate` reads
    it: ``SENTINEL_ANALYZER_WHEN_DOWN``, told apart under ``rules`` by
    ``SENTINEL_ANALYZER_RESCREEN`` (a provisional verdict is queued for the model or not)."""
    return RULES_UNQUEUED if when_down == "rules" and not rescreen else when_down


def message_fate(cause: str, when_down: str) -> str:
    """What happens to a message the analyzer cannot decide now, for a hold or fallback
    ``cause`` under the :func:`fate_policy` ``when_down``: a sentence that ends a summary."""
    if cause in BUSY_CAUSES:
        return "its messages wait (a busy analyzer always means wait)"
    if when_down == "wait":
        return "its messages wait for the analyzer (`SENTINEL_ANALYZER_WHEN_DOWN=wait`)"
    if when_down == RULES_UNQUEUED:
        return (
            "its messages are decided by the rules and marked provisional; re-screening is "
            "off (`SENTINEL_ANALYZER_RESCREEN=false`): launch a day's `rescreen_<stream>` "
            "job once the analyzer is back"
        )
    return (
        "its messages are decided by the rules and marked provisional; they are "
        "re-screened when the analyzer is back"
    )


@dataclass(frozen=True)
class AiFigures:
    """One stream's AI figures: the verdict mix of the window (demo entries left out),
    its fallbacks by cause, the fleet's analyzer holds and the provisional backlog."""

    stream: str
    mix: VerdictMix
    fallback_causes: dict[str, int]
    holds: Sequence[hold_store.Hold]
    provisional: ProvisionalBacklog
    when_down: str
    #: whether these settings name an analyzer (else the rules decide by design)
    analyzer_configured: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def exhausted(self) -> list[hold_store.Hold]:
        return [hold for hold in self.holds if hold.cause == EXHAUSTED]

    @property
    def standing(self) -> list[hold_store.Hold]:
        """Holds that keep the fleet off its analyzer: not the pacing to a budget."""
        return [hold for hold in self.holds if hold.cause != hold_store.ANNOUNCED_LIMIT]

    def metadata(self) -> dict[str, Any]:
        mix = self.mix
        return {
            "window_s": mix.window_s,
            "covered_s": mix.covered_s,
            "verdicts": mix.verdicts,
            "ai_share": mix.ai_share,
            "fallback_share": mix.fallback_share,
            "by_driver": dict(mix.by_driver),
            "fallback_causes": dict(self.fallback_causes),
            "models": list(mix.models),
            "holds": [hold_store.hold_text(hold) for hold in self.holds],
            "hold_causes": sorted({hold.cause for hold in self.holds}),
            "exhausted": bool(self.exhausted),
            "provisional_waiting": self.provisional.waiting,
            "provisional_oldest_age_s": self.provisional.oldest_age_s,
            "when_down": self.when_down,
            "analyzer_configured": self.analyzer_configured,
        }


def fallback_severity(mix: VerdictMix) -> Any:
    """ERROR when most verdicts were fallbacks, WARN from ``FALLBACK_SHARE_WARN``, else
    None (too few verdicts say nothing either way)."""
    if mix.verdicts < MIN_VERDICTS or mix.fallback_share is None:
        return None
    if mix.fallback_share > FALLBACK_SHARE_LIMIT:
        return ERROR
    return WARN if mix.fallback_share >= FALLBACK_SHARE_WARN else None


def provisional_severity(backlog: ProvisionalBacklog) -> Any:
    age = backlog.oldest_age_s or 0.0
    if backlog.waiting and age > PROVISIONAL_ERROR_AGE_S:
        return ERROR
    if backlog.waiting and (
        age > PROVISIONAL_WARN_AGE_S or backlog.waiting >= PROVISIONAL_WARN_COUNT
    ):
        return WARN
    return None


def cause_name(cause: str) -> str:
    """How a fallback cause is named: a batch-lane cause by what the provider did
    (``expired at the provider``), any other by its recorded name."""
    return BATCH_CAUSE_TEXT.get(cause, cause)


def _causes_text(causes: Mapping[str, int]) -> str:
    ranked = sorted(causes.items(), key=lambda c: -c[1])
    return ", ".join(f"{cause_name(cause)} {n}" for cause, n in ranked)


def fallback_fate(causes: Mapping[str, int]) -> str:
    """What became of the window's fallbacks: provisional ones are re-screened (their
    fate under the setting), final ones stay (the batch lane's told apart from a
    refusal's); unrecorded causes are the rules' verdicts."""
    provisional = sum(n for c, n in causes.items() if c in PROVISIONAL_CAUSES)
    batch = sum(n for c, n in causes.items() if c in BATCH_CAUSES)
    ruled = PROVISIONAL_CAUSES | BATCH_CAUSES | {"unknown"}
    final = sum(n for c, n in causes.items() if c not in ruled)
    parts = []
    if provisional:
        parts.append(
            f"{provisional} provisional: decided by the rules and re-screened when the "
            "analyzer is back"
        )
    if final:
        parts.append(f"{final} {FINAL_FATE}")
    if batch:
        parts.append(f"{batch} {BATCH_FATE}")
    if not parts:
        parts.append("decided by the rules")
    return "; ".join(parts)


def fallback_text(figures: AiFigures) -> str:
    mix = figures.mix
    share = round((mix.fallback_share or 0) * 100)
    causes = _causes_text(figures.fallback_causes)
    fate = fallback_fate(figures.fallback_causes)
    return (
        f"{share}% of the {mix.verdicts} verdicts of the last {mix.window_s // 60} min were "
        f"the rules' fallbacks ({causes}): {fate}"
    )


def provisional_text(backlog: ProvisionalBacklog) -> str:
    age = backlog.oldest_age_s or 0.0
    return (
        f"{backlog.waiting} provisional verdict(s) wait for the model, the oldest "
        f"{age / 60:.0f} min old"
    )


def hold_text(hold: hold_store.Hold, when_down: str) -> str:
    """A hold and what it does to the messages: ``gpt-eu: exhausted (...): its messages ...``."""
    return f"analyzer held ({hold_store.hold_text(hold)}): {message_fate(hold.cause, when_down)}"


def _worst(severities: Sequence[Any]) -> Any:
    found = [s for s in severities if s is not None]
    if not found:
        return None
    return ERROR if ERROR in found else WARN


def judge(figures: AiFigures) -> Verdict:
    """The ``ai_verdicts`` check: fails at ERROR when most verdicts were fallbacks, an
    analyzer is exhausted or provisional verdicts have waited past an hour; at WARN on a
    notable share of fallbacks, another standing hold, or provisional verdicts piling up."""
    metadata = figures.metadata()
    if not figures.analyzer_configured:
        return Verdict(True, WARN, "no analyzer configured: the rules decide by design", metadata)
    parts: list[str] = []
    severities: list[Any] = []
    share = fallback_severity(figures.mix)
    if share is not None:
        parts.append(fallback_text(figures))
        severities.append(share)
    for hold in figures.standing:
        parts.append(hold_text(hold, figures.when_down))
        severities.append(ERROR if hold.cause == EXHAUSTED else WARN)
    backlog = provisional_severity(figures.provisional)
    if backlog is not None:
        parts.append(provisional_text(figures.provisional))
        severities.append(backlog)
    worst = _worst(severities)
    if worst is not None:
        return Verdict(False, worst, "; ".join(parts), metadata)
    return Verdict(True, WARN, healthy_text(figures), metadata)


def healthy_text(figures: AiFigures) -> str:
    mix = figures.mix
    if mix.verdicts == 0:
        said = f"no verdicts in the last {mix.window_s // 60} min"
    else:
        said = f"{round((mix.ai_share or 0) * 100)}% of {mix.verdicts} verdicts from the model"
    paced = [h for h in figures.holds if h.cause == hold_store.ANNOUNCED_LIMIT]
    extra = "; the fleet paces to the analyzer's announced budget" if paced else ""
    waiting = figures.provisional.waiting
    backlog = f"; {waiting} provisional verdict(s) being re-screened" if waiting else ""
    return f"{said}{extra}{backlog}"


def health_alerts(figures: AiFigures, source: str) -> list[Alert]:
    """The stream's alerts for a share of fallbacks and for provisional verdicts piling
    up or ageing; holds are alerted once per hold by the sensor, not per stream."""
    if not figures.analyzer_configured:
        return []
    backlog_summary = (
        f"{provisional_text(figures.provisional)}: the re-screening has not caught up "
        "(is the analyzer back? `sentinel status` shows it)"
    )
    found = [
        ("fallback_share", fallback_severity(figures.mix), fallback_text(figures)),
        ("provisional_backlog", provisional_severity(figures.provisional), backlog_summary),
    ]
    details = figures.metadata()
    return [
        Alert(
            severity="error" if severity == ERROR else "warning",
            source=source,
            stream=figures.stream,
            condition=condition,
            summary=summary,
            details=details,
        )
        for condition, severity, summary in found
        if severity is not None
    ]
