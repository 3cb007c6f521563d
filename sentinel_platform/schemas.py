"""Wire schemas of the streams, compatible with the Sentinel-L7 / Synapse-L4 producers.

Parsing is strict on purpose: a message that does not fit is not "fixed up" but rejected
with :class:`SchemaError`, which names the offending field. The workers turn that error
into a dead letter carrying the original payload, so nothing is lost and nothing wrong
is processed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictStr,
    ValidationError,
    field_validator,
)
from typing_extensions import Self

Category = Literal["grocery", "forex", "retail", "suspicious", "other"]
AxiomStatus = Literal["nominal", "degraded", "critical"]
RiskLevel = Literal["low", "medium", "high"]
DeadLetterReason = Literal[
    "invalid_message", "max_deliveries_exceeded", "expired_marker", "unprocessable"
]

#: ISO-4217 codes the platform knows. Unknown codes are rejected rather than guessed.
CURRENCIES = frozenset(
    (
        "USD EUR GBP JPY CHF CAD AUD NZD CNY HKD SGD KRW INR MXN BRL ZAR SEK NOK DKK PLN "
        "CZK HUF TRY AED SAR ILS THB MYR IDR PHP VND TWD"
    ).split()
)
CATEGORIES: tuple[str, ...] = ("grocery", "forex", "retail", "suspicious", "other")
STATUSES: tuple[str, ...] = ("nominal", "degraded", "critical")
ERROR_MAX_CHARS = 1000
#: The extra field (and its value) that marks an entry as the demo's synthetic traffic.
#: An extra field, because Sentinel-L7's readers ignore fields they do not know and every
#: existing field keeps its meaning; the workers answer a marked entry by the rules only
#: (the demo never spends a paid call), copy the mark onto its result, and the reports
#: leave marked results out of a user's figures.
DEMO_FIELD = "demo"
DEMO_VALUE = "1"

NonEmptyStr = Annotated[StrictStr, Field(min_length=1, max_length=1024)]


class SchemaError(ValueError):
    """A payload does not match its wire schema. ``field`` names the first bad field."""

    def __init__(self, model: str, field: str, message: str) -> None:
        self.model = model
        self.field = field
        super().__init__(f"{model}.{field}: {message}")


def _schema_error(model: type[BaseModel], error: ValidationError) -> SchemaError:
    first = error.errors()[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or "(payload)"
    return SchemaError(model.__name__, field, first["msg"].removeprefix("Value error, "))


def is_demo(fields: Mapping[str, str]) -> bool:
    """Whether a stream entry (or a result entry) carries the demo's mark."""
    return fields.get(DEMO_FIELD) == DEMO_VALUE


def _parse_iso(value: str) -> str:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value[:64]!r} is not an ISO-8601 timestamp") from None
    return value


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    # Not a field: read from the entry's own ``DEMO_FIELD``, never from a payload's keys,
    # and never written back by ``to_fields`` (the publisher adds the mark itself).
    _demo: bool = PrivateAttr(default=False)

    @property
    def demo(self) -> bool:
        """True when the entry it was parsed from carries the demo's mark (:func:`is_demo`)."""
        return self._demo

    def _marked(self, fields: Mapping[str, str]) -> Self:
        self._demo = is_demo(fields)
        return self


class Transaction(_Wire):
    """One entry of stream ``transactions``: a single field ``data`` holding this JSON object."""

    id: NonEmptyStr
    merchant: NonEmptyStr
    category: Category
    currency: StrictStr
    amount: float = Field(gt=0, allow_inf_nan=False)
    message: StrictStr = Field(max_length=4096)
    is_threat: StrictBool | None = None
    source: NonEmptyStr
    timestamp: StrictStr

    @field_validator("currency")
    @classmethod
    def _known_currency(cls, value: str) -> str:
        if value not in CURRENCIES:
            raise ValueError(f"{value[:16]!r} is not a known ISO-4217 currency")
        return value

    @field_validator("amount", mode="before")
    @classmethod
    def _two_decimals(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("must be a number")
        exponent = Decimal(str(value)).as_tuple().exponent
        if not isinstance(exponent, int):  # "n", "N" or "F": NaN or infinity
            raise ValueError("must be a finite number")
        if exponent < -2:
            raise ValueError(f"{value} has more than 2 decimal places")
        return value

    @field_validator("timestamp")
    @classmethod
    def _iso(cls, value: str) -> str:
        return _parse_iso(value)

    @property
    def natural_key(self) -> str:
        return self.id

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> Transaction:
        """Parse a stream entry (``{"data": "<json>"}``)."""
        if "data" not in fields:
            raise SchemaError(cls.__name__, "data", "field is missing")
        try:
            obj = json.loads(fields["data"])
        except (TypeError, ValueError) as exc:
            raise SchemaError(cls.__name__, "data", f"not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise SchemaError(cls.__name__, "data", "JSON is not an object")
        try:
            return cls.model_validate(obj)._marked(fields)
        except ValidationError as exc:
            raise _schema_error(cls, exc) from None

    def to_fields(self) -> dict[str, str]:
        return {"data": self.model_dump_json(exclude_none=True)}


class Axiom(_Wire):
    """One entry of stream ``synapse:axioms``: flat string fields."""

    status: AxiomStatus
    metric_value: float = Field(allow_inf_nan=False)
    anomaly_score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    source_id: NonEmptyStr
    emitted_at: StrictStr
    domain: NonEmptyStr | None = None
    # W3C trace context: carried through to logs, never persisted in results.
    traceparent: StrictStr | None = Field(default=None, max_length=512)
    tracestate: StrictStr | None = Field(default=None, max_length=512)

    @field_validator("emitted_at")
    @classmethod
    def _iso(cls, value: str) -> str:
        return _parse_iso(value)

    @field_validator("metric_value", "anomaly_score", mode="before")
    @classmethod
    def _numeric_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise ValueError(f"{value[:32]!r} is not a number") from None
        if isinstance(value, bool):
            raise ValueError("must be a number")
        return value

    @property
    def natural_key(self) -> str:
        # (source_id, emitted_at): keyed on source_id alone, every later reading of the
        # same sensor would be dropped as a duplicate.
        return f"{self.source_id}|{self.emitted_at}"

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> Axiom:
        try:
            return cls.model_validate(dict(fields))._marked(fields)
        except ValidationError as exc:
            raise _schema_error(cls, exc) from None

    def to_fields(self) -> dict[str, str]:
        out = {
            "status": self.status,
            "metric_value": repr(self.metric_value),
            "anomaly_score": repr(self.anomaly_score),
            "source_id": self.source_id,
            "emitted_at": self.emitted_at,
        }
        for name in ("domain", "traceparent", "tracestate"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


class DeadLetter(_Wire):
    """One entry of the DLQ stream: the original message, why it died, and where from."""

    stream: NonEmptyStr
    group: NonEmptyStr
    message_id: NonEmptyStr
    #: A JSON object of the original fields: ``{name: value}`` as text when
    #: ``payload_encoding`` is absent (Sentinel-L7's format) or ``json``; with ``base64``
    #: (an entry whose bytes are not UTF-8) ``{base64(name): base64(value)}``, exact bytes.
    payload: StrictStr
    reason: DeadLetterReason
    error: StrictStr = Field(max_length=ERROR_MAX_CHARS)
    deliveries: int = Field(ge=0)
    consumer: NonEmptyStr
    dead_lettered_at: StrictStr
    payload_encoding: Literal["json", "base64"] | None = None

    @field_validator("deliveries", mode="before")
    @classmethod
    def _int_string(cls, value: Any) -> Any:
        return int(value) if isinstance(value, str) and value.isdigit() else value

    @property
    def original_fields(self) -> dict[str, str]:
        """The original fields as text (undecodable bytes shown as ``\\xNN`` escapes)."""
        return {
            name.decode("utf-8", "backslashreplace"): value.decode("utf-8", "backslashreplace")
            for name, value in self.original_bytes().items()
        }

    def original_bytes(self) -> dict[bytes, bytes]:
        """The original fields as the exact bytes the producer wrote."""
        pairs: dict[str, Any] = json.loads(self.payload)
        if self.payload_encoding == "base64":
            return {base64.b64decode(k): base64.b64decode(v) for k, v in pairs.items()}
        # Sentinel-L7 wrote some values as JSON numbers or objects: they were sent as text.
        return {
            str(k).encode(): (v if isinstance(v, str) else json.dumps(v)).encode()
            for k, v in pairs.items()
        }

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> DeadLetter:
        try:
            return cls.model_validate(dict(fields))
        except ValidationError as exc:
            raise _schema_error(cls, exc) from None

    def to_fields(self) -> dict[str, str]:
        """The DLQ entry's fields; ``payload_encoding`` only when set (L7's format stays)."""
        return {k: str(v) for k, v in self.model_dump(exclude_none=True).items()}


def describe_error(exc: BaseException) -> str:
    """``Type: message``, bounded so a huge exception cannot bloat the DLQ."""
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= ERROR_MAX_CHARS else text[: ERROR_MAX_CHARS - 3] + "..."
