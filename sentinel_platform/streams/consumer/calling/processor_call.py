"""One processor call and what it comes to; runs on the threads of ``in_flight.py``.

:class:`ProcessorCall` turns a :class:`~sentinel_platform.streams.consumer.outcomes.Prepared`
message into an outcome: the effect to commit, a dead letter (``SchemaError``: the content
does not fit; ``Unprocessable``: no retry can process it), or a failure (any other
exception, an effect that cannot be sent or that was built for another message), to be
retried after ``SENTINEL_RETRY_BACKOFF_MS`` and dead-lettered at the delivery limit.
``Busy`` passes through (the calls park the message). A ``BaseException`` that is not an
``Exception`` is a failure too (:meth:`ProcessorCall.failed`, logged ``processing_aborted``
with its traceback): a plug-in calling ``sys.exit`` must not end a thread, the worker or,
message after message, the fleet. The message in a call is in the hang watchdog's hand
(``watchdog.py``).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from sentinel_platform.logs import BoundLogger
from sentinel_platform.schemas import SchemaError, describe_error
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.healing.watchdog import InHand
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.outcomes import (
    Commit,
    DeadLetterOp,
    Delivery,
    Failure,
    Outcome,
    Prepared,
)
from sentinel_platform.streams.consumer.processor import (
    Busy,
    InvalidEffectError,
    Processor,
    Unprocessable,
    check_effect,
)

log = logging.getLogger(__name__)


def operator_interrupt(exc: BaseException) -> bool:
    """A Ctrl-C that may be the operator's: only the main thread gets one, and only while
    SIGINT has Python's default handler (the worker process installs its own, a stop).
    Any other ``BaseException`` out of a plug-in is a failure of its message."""
    return (
        isinstance(exc, KeyboardInterrupt)
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )


class ProcessorCall:
    """The processor, called for one message at a time on any thread."""

    def __init__(
        self,
        processor: Processor,
        settings: Settings,
        metrics: Metrics,
        in_hand: InHand,
        log_fields: dict[str, str],
    ) -> None:
        self.processor = processor
        self.settings = settings
        self.metrics = metrics
        self.in_hand = in_hand
        self.log = BoundLogger(log, log_fields)
        self.observe = metrics.observer("processing_seconds")

    def __call__(self, prepared: Prepared) -> Outcome:
        delivery = prepared.delivery
        self.in_hand.take(delivery.id)
        started = time.perf_counter()
        try:
            if self.settings.simulate_latency_ms:
                time.sleep(self.settings.simulate_latency_ms / 1000)
            effect = self.processor.process(prepared.message)
            check_effect(effect.result, effect.recent)  # unsendable: a processor failure
            if effect.natural_key != prepared.natural_key:  # meant for another message
                raise InvalidEffectError(
                    f"the effect's natural key {effect.natural_key!r} is not the message's "
                    f"{prepared.natural_key!r}"
                )
        except Busy:
            raise
        except SchemaError as exc:
            return DeadLetterOp(delivery, "invalid_message", describe_error(exc))
        except Unprocessable as exc:
            return DeadLetterOp(delivery, "unprocessable", describe_error(exc))
        except Exception as exc:  # a processor error never kills the worker
            return self.failed(delivery, exc)
        finally:
            self.in_hand.drop()
            self.observe(prepared.parse_s + time.perf_counter() - started)
        return Commit(delivery, prepared.natural_key, effect)

    def aborted(self, prepared: Prepared, exc: BaseException) -> Outcome:
        """A call that raised past :meth:`__call__` (not an ``Exception``): a failure."""
        return self.failed(prepared.delivery, exc)

    def failed(self, delivery: Delivery, exc: BaseException) -> Failure:
        """A failed call or parse: retried after the backoff. An exception that is not
        an ``Exception`` is logged as ``processing_aborted``, with its traceback."""
        error = describe_error(exc)
        self.metrics.inc("retried")
        fields: dict[str, Any] = {
            "message_id": delivery.id,
            "deliveries": delivery.deliveries,
            "error": error,
            "retry_after_ms": self.settings.retry_backoff_ms,
        }
        if isinstance(exc, Exception):
            self.log.warning("processing_failed", extra=fields)
        else:
            self.log.error("processing_aborted", exc_info=exc, extra=fields)
        return Failure(delivery, error)
