"""Who decided the last minutes' verdicts, and what the model calls cost, per stream.

``sentinel status`` must not say ``nominal`` while the analyzer is down and the rules
decide every message (``driver_used=fallback``), and an operator paying for a model wants
its tokens per minute where they look. Both are read from the stream's own results:
one ``XREVRANGE`` of the results stream from now (the server's clock, which stamps the
entry ids) back ``window_s`` seconds, at most ``MAX_ENTRIES`` entries (``sentinel
status`` shares one wider read with its quality line:
:mod:`~sentinel_platform.streams.backlog.recent_results`). That is cheap and
needs nothing new written by the workers: the results already carry ``driver_used`` and,
for a model API's verdict, ``input_tokens``, ``output_tokens`` and ``cached_input_tokens``
(extra fields of the entry), and for a fallback its ``fallback_cause``, so the status can
name why the rules decided rather than guess. Counters kept by the workers in Redis would
add a write to every commit for a figure read once per status call; the bounded read costs at most
``MAX_ENTRIES`` entries (a few hundred KiB) per stream and per call. When the cap cuts
the window short, the figures cover the span the entries cover (``covered_s``), so a rate
stays a rate. The demo's results (its mark, :func:`~sentinel_platform.schemas.is_demo`)
are left out, as the reports leave them out: they are the rules' verdicts of synthetic
traffic, and would hide the user's own mix.

:func:`mostly_fallback` is the pure decision the overall status follows (table-tested).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sentinel_platform.schemas import is_demo
from sentinel_platform.streams.backlog.provisional import FALLBACK_CAUSE
from sentinel_platform.streams.backlog.recent_results import RecentResults, entry_ms

#: How far back the status looks: the span of the fallback alert's ``rate(...[5m])``, so
#: the command and the alert judge the same minutes.
WINDOW_S = 300
#: At most this many results are read per stream and per call (the newest ones).
MAX_ENTRIES = 2000
#: Fewer verdicts than this in the window say nothing either way: one failed call among
#: two verdicts would otherwise turn a quiet stream's status to ``elevated``.
MIN_VERDICTS = 5
#: "Most" verdicts: more than this share of the window's verdicts are fallbacks.
FALLBACK_SHARE_LIMIT = 0.5
DRIVERS = ("analyzer", "fallback", "rules")
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens")


@dataclass(frozen=True)
class VerdictMix:
    """The verdicts of one stream over the last ``covered_s`` seconds."""

    window_s: int
    covered_s: float
    verdicts: int
    by_driver: dict[str, int]
    #: shares of ``verdicts`` (0..1, rounded); None when there were none
    ai_share: float | None
    fallback_share: float | None
    #: tokens per minute the model calls reported (summed over the covered span)
    input_tokens_per_min: float
    output_tokens_per_min: float
    cached_input_tokens_per_min: float
    #: the model names the verdicts recorded, sorted
    models: list[str] = field(default_factory=list)
    mostly_fallback: bool = False
    #: the fallbacks by their ``fallback_cause`` (``unknown``: a result without one)
    fallback_causes: dict[str, int] = field(default_factory=dict)


def _count(value: str | None) -> int:
    """A token count as a stream field holds it (text); anything else counts 0."""
    try:
        number = int(value or 0)
    except ValueError:
        return 0
    return max(0, number)


def _share(part: int, whole: int) -> float | None:
    return None if whole == 0 else round(part / whole, 3)


def mostly_fallback(by_driver: Mapping[str, int]) -> bool:
    """True when at least ``MIN_VERDICTS`` verdicts were committed and more than
    ``FALLBACK_SHARE_LIMIT`` of them were rules fallbacks (the analyzer failed)."""
    total = sum(by_driver.values())
    if total < MIN_VERDICTS:
        return False
    return by_driver.get("fallback", 0) / total > FALLBACK_SHARE_LIMIT


def summarise(rows: Iterable[Mapping[str, str]], window_s: int, covered_s: float) -> VerdictMix:
    """The mix of ``rows`` (result entries' fields) over ``covered_s`` seconds, but the
    demo's (:func:`~sentinel_platform.schemas.is_demo`)."""
    drivers: Counter[str] = Counter()
    tokens: Counter[str] = Counter()
    models: set[str] = set()
    causes: Counter[str] = Counter()
    for fields in rows:
        if is_demo(fields):
            continue
        driver = fields.get("driver_used") or "unknown"
        drivers[driver] += 1
        if driver == "fallback":
            causes[fields.get(FALLBACK_CAUSE) or "unknown"] += 1
        for name in TOKEN_FIELDS:
            tokens[name] += _count(fields.get(name))
        if fields.get("model"):
            models.add(fields["model"])
    total = sum(drivers.values())
    minutes = max(covered_s, 1.0) / 60
    by_driver = {driver: drivers.get(driver, 0) for driver in DRIVERS}
    by_driver.update({d: n for d, n in drivers.items() if d not in by_driver})
    return VerdictMix(
        window_s=window_s,
        covered_s=round(covered_s, 1),
        verdicts=total,
        by_driver=by_driver,
        ai_share=_share(drivers["analyzer"], total),
        fallback_share=_share(drivers["fallback"], total),
        input_tokens_per_min=round(tokens["input_tokens"] / minutes, 1),
        output_tokens_per_min=round(tokens["output_tokens"] / minutes, 1),
        cached_input_tokens_per_min=round(tokens["cached_input_tokens"] / minutes, 1),
        models=sorted(models),
        mostly_fallback=mostly_fallback(by_driver),
        fallback_causes=dict(causes.most_common()),
    )


def mix_of(recent: RecentResults, window_s: int = WINDOW_S, cap: int = MAX_ENTRIES) -> VerdictMix:
    """The verdict mix of the last ``window_s`` seconds among ``recent`` (a read at least
    as wide), at most ``cap`` entries per results key. When the cap cuts a key's window
    short, its oldest entry bounds the span covered."""
    covered_ms = window_s * 1000
    rows: list[Mapping[str, str]] = []
    for read in recent.within(window_s, cap):
        if read and len(read) >= cap:  # cut short: the oldest entry read bounds the span
            covered_ms = min(covered_ms, max(recent.now_ms - entry_ms(read[-1][0]), 1000))
        rows += [fields for _, fields in read]
    return summarise(rows, window_s, covered_ms / 1000)
