"""What a worker's model calls cost, as Prometheus counters per model.

``sentinel_worker_analyzer_tokens_total{role, model, kind}`` (besides the worker's constant
labels ``stream``, ``group``, ``consumer``) adds the tokens each model call reported in
its ``usage``, a verdict or not (what is billed is counted): ``role`` is the analyzer's
(``primary``, ``fallback``, ``shadow``: each is billed), ``kind`` is ``input`` (the
whole prompt, cached tokens included), ``output`` (the completion) or ``cached_input``
(the part of ``input`` served from the provider's prompt cache, a subset, billed at a
lower price). Counted when the answer arrives, not at commit: a verdict committed twice
is paid once, and a call whose verdict is redelivered is still paid.

Model names are not secret, but they come from the API's reply, so their number is
bounded: the first :data:`MAX_MODELS` names a worker meets get their own series, any
later one is counted under ``model="other"``, and a name is cut to :data:`MAX_NAME`
characters. A worker normally calls one model; a handful covers a provider's dated
aliases (``gpt-4o-mini`` answered as ``gpt-4o-mini-2024-07-18``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, MutableSet

from prometheus_client import CollectorRegistry, Counter

#: Distinct ``model`` label values per worker; later names count as :data:`OTHER`.
MAX_MODELS = 8
MAX_NAME = 100
OTHER = "other"
UNKNOWN = "unknown"
KINDS = ("input", "output", "cached_input")
#: The role of a call whose caller names none: the live analyzer's.
PRIMARY = "primary"
HELP = (
    "Tokens the analyzer's model calls reported (usage), by analyzer role (primary, "
    "fallback, shadow), model and kind: input (the "
    "whole prompt, cached tokens included), output (the completion), cached_input (the "
    "prompt tokens served from the provider's prompt cache). At most 8 models per worker; "
    'later ones count as model="other".'
)


def model_label(model: str | None, seen: MutableSet[str], cap: int = MAX_MODELS) -> str:
    """The ``model`` label for ``model``: itself (cut to :data:`MAX_NAME`) while fewer than
    ``cap`` names are in ``seen`` or it is one of them, else :data:`OTHER`; ``unknown``
    when the reply named none. Adds a new name to ``seen``."""
    name = (model or "").strip()[:MAX_NAME] or UNKNOWN
    if name in seen:
        return name
    if len(seen) >= cap:
        return OTHER
    seen.add(name)
    return name


class TokenCounter:
    """The tokens counter of one worker (its constant ``labels``), safe to call from
    every processing thread at once."""

    def __init__(self, registry: CollectorRegistry, prefix: str, labels: Mapping[str, str]):
        self._labels = dict(labels)
        self._family = Counter(
            f"{prefix}_analyzer_tokens",
            HELP,
            (*labels, "role", "model", "kind"),
            registry=registry,
        )
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def count(
        self,
        model: str | None,
        input_tokens: int,
        output_tokens: int,
        cached: int | None,
        role: str = PRIMARY,
    ) -> None:
        """Add one call's reported tokens (``cached`` None: the answer did not say) under
        the analyzer ``role``."""
        with self._lock:
            label = model_label(model, self._seen)
        amounts = {"input": input_tokens, "output": output_tokens, "cached_input": cached or 0}
        for kind, amount in amounts.items():
            series = self._family.labels(**self._labels, role=role, model=label, kind=kind)
            series.inc(max(0, amount))
