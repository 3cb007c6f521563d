"""Is the model right, as Prometheus counters: each committed model verdict of a labelled
message counted in its cell of the confusion matrix, per role, model and prompt version.

``sentinel_worker_verdict_outcomes_total{role, model, prompt_version, outcome}``
(besides the worker's constant labels ``stream``, ``group``, ``consumer``): ``role`` is
the analyzer that made the verdict (the entry's ``analyzer_role``: ``primary``, absent
too, or ``fallback``; ``shadow`` for a shadow's verdict, counted by the shadow lane as
it writes it to the shadow result stream; any other ``other``), ``outcome`` is ``tp``,
``fp``, ``tn`` or ``fn`` of the verdict (``is_threat``) against the message's truth
(``label``), as :func:`~sentinel_platform.verdict_quality.outcome` says, the same cell
the ``verdict_quality`` asset and ``sentinel status`` count. Only a model's verdicts
count (not the rules', nor a rules fallback's), and only those whose message carries
its truth; counted at commit, once per committed verdict, so a re-screen counts the
model's verdict the provisional fallback lacked. Precision over five minutes is
``sum by (role, model, prompt_version) (rate(...{outcome="tp"}[5m])) / sum by (role,
model, prompt_version) (rate(...{outcome=~"tp|fp"}[5m]))``.

Model names and prompt versions come from the result entry, so their number is bounded
as the tokens counter bounds models
(:func:`~sentinel_platform.streams.consumer.token_metrics.model_label`): the first
:data:`~sentinel_platform.streams.consumer.token_metrics.MAX_MODELS` of each get their
own series, later ones count as ``other``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter

from sentinel_platform.streams.consumer.token_metrics import model_label
from sentinel_platform.verdict_quality import LABEL, flag, outcome

RULES_DRIVERS = ("rules", "fallback")
#: Result field: which analyzer made the verdict; and the roles it may name.
ANALYZER_ROLE = "analyzer_role"
ROLES = ("primary", "fallback", "shadow")
HELP = (
    "Committed model verdicts of labelled messages by role (primary, fallback, shadow), "
    "model, prompt version and outcome: tp, fp, tn, fn of the verdict against the "
    "message's truth (label). At most 8 models and 8 prompt versions per worker; later "
    'ones count as "other".'
)


def role_label(result: Mapping[str, str]) -> str:
    """The ``role`` label of a verdict: its ``analyzer_role`` (absent: ``primary``), one
    of :data:`ROLES`, else ``other``."""
    role = result.get(ANALYZER_ROLE) or ROLES[0]
    return role if role in ROLES else "other"


class OutcomeCounter:
    """The confusion-matrix counter of one worker (its constant ``labels``), safe to call
    from every thread at once."""

    def __init__(self, registry: CollectorRegistry, prefix: str, labels: Mapping[str, str]):
        self._labels = dict(labels)
        names = (*labels, "role", "model", "prompt_version", "outcome")
        self._family = Counter(f"{prefix}_verdict_outcomes", HELP, names, registry=registry)
        self._models: set[str] = set()
        self._prompts: set[str] = set()
        self._lock = threading.Lock()

    def count(self, result: Mapping[str, str]) -> None:
        """Count ``result`` (a result entry's fields, or a shadow entry's) when it is a
        model's verdict of a labelled message; anything else is left alone."""
        if LABEL not in result or result.get("driver_used") in RULES_DRIVERS:
            return
        model = result.get("model")
        cell = outcome(flag(result.get(LABEL)), flag(result.get("is_threat")))
        if not model or cell is None:
            return
        with self._lock:
            name = model_label(model, self._models)
            prompt = model_label(result.get("prompt_version"), self._prompts)
        role = role_label(result)
        self._family.labels(
            **self._labels, role=role, model=name, prompt_version=prompt, outcome=cell
        ).inc()
