"""The batch lane's protocol: what every provider's batch API does, in the platform's words.

A provider's batch API takes many requests at once, answers them within a completion
window and bills them at a lower price. Each provider is one module behind
:class:`BatchApi` (:mod:`~workers.analyzer.batch.openai_batch`,
:mod:`~workers.analyzer.batch.anthropic_batch`): :meth:`BatchApi.submit` sends the
requests, :meth:`BatchApi.poll` reads how far the provider is (:class:`BatchState`, its
own status text kept for operators), :meth:`BatchApi.results` reads each request's
outcome by its ``custom_id``: the :class:`~workers.analyzer.answers.replies.Assessment`
the real-time path's own reading makes of the answer, or a :class:`LineError` (one
request ``errored``, ``expired`` or ``canceled``, with why). A batch that failed as a
whole raises :class:`BatchFailed` instead, so one bad line and a refused batch are told
apart. A request's body is byte for byte what the real-time call sends
(:meth:`~workers.analyzer.apis.model_api.ModelApi.request`): the verdicts of both lanes
compare.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from sentinel_platform.redaction import scrub
from workers.analyzer.answers.billed import UnusableAnswer
from workers.analyzer.answers.refusals import ApiKind, cleaned
from workers.analyzer.answers.replies import AnalyzerError, Assessment, Usage
from workers.analyzer.apis.model_api import ModelApi
from workers.analyzer.batch.cutting import BatchLimits
from workers.analyzer.prompts import Prompt

#: Where a batch is, in the platform's words: still at the provider, ended (results to
#: read), or failed as a whole (nothing to read).
BatchStatus = Literal["in_progress", "ended", "failed"]
#: Why one request of a batch has no verdict.
LineErrorKind = Literal["errored", "expired", "canceled"]


@dataclass(frozen=True)
class BatchRequest:
    """One message's request: its ``custom_id`` (unique in its batch, the key its
    result comes back under) and the exact body of the real-time call."""

    custom_id: str
    body: bytes


@dataclass(frozen=True)
class BatchRef:
    """A batch at a provider: the API's kind and the provider's own batch id."""

    kind: ApiKind
    batch_id: str


@dataclass(frozen=True)
class BatchCounts:
    """The provider's request counts: all of them, answered with a verdict's reply,
    answered otherwise (errored, expired, canceled) and not answered yet."""

    total: int
    succeeded: int
    failed: int
    processing: int


@dataclass(frozen=True)
class BatchState:
    """One look at a batch: :data:`BatchStatus`, the provider's own status word
    (``finalizing``, ``canceling``, ...), its counts, and a failed batch's reason.
    ``held``: it failed for the provider's limit of work queued at once (OpenAI's
    enqueued tokens), not for its requests; further submissions wait until an
    outstanding batch ends, and the real-time lane is not concerned."""

    ref: BatchRef
    status: BatchStatus
    provider_status: str
    counts: BatchCounts
    reason: str = ""
    held: bool = False

    @property
    def done(self) -> bool:
        """Whether polling may stop (ended or failed)."""
        return self.status != "in_progress"


@dataclass(frozen=True)
class LineError:
    """One request without a verdict: its :data:`LineErrorKind` and the reason (never
    the key, never the model's text); ``usage`` when the provider billed an answer that
    did not validate (counted as the real-time path counts it)."""

    kind: LineErrorKind
    reason: str
    usage: Usage | None = None


#: What one request of a batch came to.
Outcome = Assessment | LineError


class BatchFailed(AnalyzerError):
    """The whole batch failed at the provider (refused its input, for one): no request
    of it has a result, every message is still to decide."""


class BatchApi(Protocol):
    """A provider's batch API, in front of one real-time
    :class:`~workers.analyzer.apis.model_api.ModelApi` whose bodies it sends."""

    @property
    def kind(self) -> ApiKind: ...

    @property
    def limits(self) -> BatchLimits:
        """The provider's request-count and byte limits of one batch."""
        ...

    def size(self, request: BatchRequest) -> int:
        """The bytes ``request`` adds to a batch (what :func:`~workers.analyzer.batch.cutting.cut`
        counts against :attr:`limits`)."""
        ...

    def submit(self, requests: Sequence[BatchRequest], label: str) -> BatchRef:
        """Send one batch (cut to :attr:`limits` beforehand); ``label`` is the ledger's
        own id of it, attached where the provider keeps metadata."""
        ...

    def poll(self, ref: BatchRef) -> BatchState:
        """The batch's state now (one request)."""
        ...

    def find(self, label: str, since_s: float) -> BatchRef | None:
        """The batch submitted as ``label`` no earlier than ``since_s`` (Unix seconds),
        for a submission whose answer never came; None when the provider has none, or
        cannot tell (it keeps no label)."""
        ...

    def results(self, ref: BatchRef, prompt: Prompt | None) -> Iterator[tuple[str, Outcome]]:
        """Each answered request's outcome by ``custom_id``, read as it streams in;
        :class:`BatchFailed` for a batch that failed as a whole."""
        ...


def unanswered(sent: Collection[str], answered: Iterable[str]) -> list[str]:
    """The ``custom_id`` s of ``sent`` with no result among ``answered``, in ``sent``'s
    order: a provider that ends a batch early (cancelled, expired) may leave a request
    out of its results, and such a message is still to decide."""
    seen = set(answered)
    return [custom_id for custom_id in sent if custom_id not in seen]


def assessed(api: ModelApi, body: bytes, prompt: Prompt | None) -> Outcome:
    """The verdict of one answered request, read by ``api.read`` as the real-time reply
    is; an answer without one is ``errored``, what it billed kept."""
    try:
        return api.read(body, prompt)
    except UnusableAnswer as exc:
        return LineError("errored", str(exc), exc.usage)
    except AnalyzerError as exc:
        return LineError("errored", str(exc))


def line_reason(label: str, message: object) -> str:
    """Why a request has no verdict, as ``label: message``: the provider's message on
    one line, key-shaped tokens masked, cut short and scrubbed, as a refusal's is."""
    text = cleaned(message if isinstance(message, str) else "")
    return scrub(f"{label}: {text}" if text else label)
