"""The ``payments`` stream: its wire model, its processor and its registry entry.

Naming this module in ``SENTINEL_STREAM_MODULES`` is all a deployment does to add the
stream: the workers (``python -m sentinel_platform.workers payments``), ``sentinel up``
(``--payments-workers``), ``sentinel status``, the publisher resource and the operations
sensors and checks all read the spec registered here. The module imports neither Dagster
nor Spark, because every one of those processes imports it, the workers and Spark's
executors included (they unpickle the spec with the publisher); the stream's Dagster
source asset and publish job live beside it, in :mod:`.location`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from sentinel_platform.registry import StreamSpec, register
from sentinel_platform.schemas import CURRENCIES, NonEmptyStr, SchemaError
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.processor import Effect

#: The wire fields, in the order the Spark frame produces them.
COLUMNS = ("id", "payer", "amount", "currency")
#: Payments above this amount are held for review; the others are approved.
REVIEW_ABOVE = 1000.0
DECISIONS = ("approved", "review")


def schema_error(model: type[BaseModel], error: ValidationError) -> SchemaError:
    """The first validation error as a :class:`SchemaError` naming its field."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first.get("loc", ())) or "(payload)"
    return SchemaError(model.__name__, field, first["msg"].removeprefix("Value error, "))


class Payment(BaseModel):
    """One entry of stream ``payments``: flat string fields, like the axioms."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: NonEmptyStr
    payer: NonEmptyStr
    amount: float = Field(gt=0, allow_inf_nan=False)
    currency: StrictStr

    @field_validator("amount", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                raise ValueError(f"{value[:32]!r} is not a number") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("must be a number")
        return value

    @field_validator("currency")
    @classmethod
    def _known_currency(cls, value: str) -> str:
        if value not in CURRENCIES:
            raise ValueError(f"{value[:16]!r} is not a known ISO-4217 currency")
        return value

    @property
    def natural_key(self) -> str:
        return self.id

    @classmethod
    def from_fields(cls, fields: Mapping[str, str]) -> Payment:
        """Parse a stream entry: every wire field present and a string, nothing coerced."""
        for name in COLUMNS:
            if name not in fields:
                raise SchemaError(cls.__name__, name, "field is missing")
            if not isinstance(fields[name], str):
                raise SchemaError(cls.__name__, name, "must be a string")
        try:
            return cls.model_validate(dict(fields))
        except ValidationError as exc:
            raise schema_error(cls, exc) from None

    def to_fields(self) -> dict[str, str]:
        return {
            "id": self.id,
            "payer": self.payer,
            "amount": repr(self.amount),
            "currency": self.currency,
        }


class PaymentProcessor:
    """Turns a payment into one ``sentinel:payment_decisions`` entry: approved, or held for
    review above ``review_above``."""

    name = "payments"

    def __init__(self, review_above: float = REVIEW_ABOVE) -> None:
        if not math.isfinite(review_above) or review_above <= 0:
            raise ValueError(f"review_above must be a positive number, not {review_above}")
        self.review_above = review_above

    def parse(self, fields: Mapping[str, str]) -> Payment:
        return Payment.from_fields(fields)

    def natural_key(self, message: Payment) -> str:
        return message.natural_key

    def process(self, message: Payment) -> Effect:
        decision = "review" if message.amount > self.review_above else "approved"
        result = {
            "payment_id": message.id,
            "payer": message.payer,
            "amount": repr(message.amount),
            "currency": message.currency,
            "decision": decision,
        }
        return Effect(message.natural_key, result, None, {"payment_id": message.id})


def from_settings(settings: Settings) -> PaymentProcessor:
    """The processor a worker runs (the spec's ``processor``); it needs no setting."""
    return PaymentProcessor()


PAYMENTS = register(
    StreamSpec(
        name="payments",
        stream="payments",
        group="payment-workers",
        results="sentinel:payment_decisions",
        wire_model=Payment,
        columns=COLUMNS,
        processor="sentinel_platform_tests.harness.third_stream.payments:from_settings",
        asset="payment_stream",
        publish_job="publish_payments",
        worker_prefix="pay",
        definitions="sentinel_platform_tests.harness.third_stream.assets:defs",
        description="payments to settle: one decision each, approved or held for review",
    )
)
