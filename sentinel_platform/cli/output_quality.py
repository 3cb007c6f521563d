"""``sentinel status --json``: who decided a stream's recent verdicts (``streams[].verdicts``),
its provisional verdicts (``streams[].provisional``) and the recent quality per model
(``streams[].quality``)."""

from __future__ import annotations

from pydantic import Field

from sentinel_platform.cli.document import Document


class VerdictMix(Document):
    window_s: int = Field(description="how far back the verdicts were read, seconds")
    covered_s: float = Field(description="the span the figures cover (shorter when capped)")
    verdicts: int = Field(description="verdicts committed in that span")
    by_driver: dict[str, int] = Field(description="verdicts by `driver_used`")
    ai_share: float | None = Field(description="share decided by the analyzer (0-1)")
    fallback_share: float | None = Field(description="share of rules fallbacks (0-1)")
    input_tokens_per_min: float = Field(description="prompt tokens per minute")
    output_tokens_per_min: float = Field(description="completion tokens per minute")
    cached_input_tokens_per_min: float = Field(description="cached prompt tokens per minute")
    models: list[str] = Field(description="the models that answered")
    mostly_fallback: bool = Field(description="most verdicts were fallbacks (a warning)")
    fallback_causes: dict[str, int] = Field(
        {},
        description="the fallbacks by `fallback_cause` (`down`, `breaker_open`, `held`, "
        "`exhausted`, `over_budget`, `refused`, `unusable`, and the batch lane's `batch_errored`, "
        "`batch_expired`, `batch_canceled`, `batch_unanswered`, `batch_failed`, "
        "`batch_refused`; `unknown`: none recorded)",
    )


class Provisional(Document):
    waiting: int = Field(
        description="provisional verdicts (rules fallbacks made because the analyzer could "
        "not be asked) waiting in the re-screen queue for the model"
    )
    oldest_age_s: float | None = Field(description="the oldest one's age; null: none waits")


_LIVE = "a shadow's row: the live decisions' on the same messages; null otherwise"


class ModelQuality(Document):
    role: str = Field(
        description="which analyzer: `primary`, `fallback` (the second model before the "
        "rules) or `shadow` (a model on trial, deciding nothing)"
    )
    model: str = Field(description="the model that answered")
    prompt_version: str = Field(description="its prompt's version (`-`: none recorded)")
    verdicts: int = Field(description="its verdicts (a superseded one left out)")
    labelled: int = Field(description="those whose message carried its truth (`label`)")
    tp: int = Field(description="threats it flagged")
    fp: int = Field(description="harmless messages it flagged")
    tn: int = Field(description="harmless messages it passed")
    fn: int = Field(description="threats it missed")
    precision: float | None = Field(description="tp / (tp + fp); null: it flagged none")
    recall: float | None = Field(description="tp / (tp + fn); null: no labelled threat")
    f1: float | None = Field(description="the harmonic mean of the two")
    rules_precision: float | None = Field(description="the rules' on the same messages")
    rules_recall: float | None = Field(description="the rules' on the same messages")
    rules_f1: float | None = Field(description="the rules' on the same messages")
    agreement: float | None = Field(description="share of its verdicts the rules shared")
    live_precision: float | None = Field(default=None, description=_LIVE)
    live_recall: float | None = Field(default=None, description=_LIVE)
    live_f1: float | None = Field(default=None, description=_LIVE)


class RecentQuality(Document):
    window_s: int = Field(description="how far back the verdicts were read, seconds")
    models: list[ModelQuality] = Field(
        description="one per role, model and prompt version (primary, fallback, then shadow)"
    )
