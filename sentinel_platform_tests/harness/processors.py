"""The processors tests and benchmarks plug into a worker with ``--processor module:factory``
(``sentinel_platform_tests.harness.processors:counting`` or ``:noop``).

A message is flat fields: ``key`` (required: the natural key), and optional behaviour
switches: ``invalid=1`` fails validation (dead-lettered at once), ``poison=1`` raises on
every call (dead-lettered after the delivery limit), ``fail_times=N`` raises on the first
N calls, ``sleep_ms=N`` takes that long, ``hang_once=1`` never returns from the first
call, ``parse_bug=1`` raises a non-schema error in ``parse``, ``key_bug=1`` makes
``natural_key`` return None, ``bad_effect=none|bool|dict|empty`` returns an effect the
client cannot send (on the first ``bad_times`` calls, default every call),
``abort=exit|interrupt`` calls ``sys.exit(ABORT_EXIT_CODE)`` or raises
``KeyboardInterrupt`` on every call (exceptions that are not ``Exception``). ``counting``
counts every call of ``process`` in the Redis hash :data:`CALLS_KEY` (field = key), so a
test or a drill sees exactly how often the processor ran, across processes and kills,
and can tell a duplicate *processing* from a duplicate *effect*. ``noop`` makes no Redis
call and does no work: it measures the consumer machinery alone. ``busy_counting`` is
``counting`` behind a downstream that answers "busy" part of the time; ``paid_counting``
is ``counting`` with paid calls (claimed per key across the fleet), naming each call's
process.
"""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Mapping
from typing import Any

from sentinel_platform.schemas import SchemaError, Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.processor import Busy, Effect
from sentinel_platform.streams.plumbing.connection import RedisClient, connect

CALLS_KEY = "test:processor_calls"
#: ``paid_counting``: one ``<key>:<pid>`` entry per call, in call order.
CALLERS_KEY = "test:processor_callers"
#: Calls of messages with ``sleep_ms`` running now, and the most ever running at once.
#: One hash tag: the script that updates both runs on a Redis Cluster too.
IN_FLIGHT_KEY = "test:{processor}:in_flight"
PEAK_KEY = "test:{processor}:peak"
MODEL = "TestMessage"
#: The status an ``abort=exit`` message passes to ``sys.exit``.
ABORT_EXIT_CODE = 7
_ENTER = """
local now = redis.call('INCR', KEYS[1])
if now > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], now) end
return now
"""
#: Results a buggy plug-in might return: values redis-py refuses to encode, or no fields.
BAD_RESULTS: dict[str, Any] = {
    "none": {"key": "k", "score": None},
    "bool": {"key": "k", "flagged": True},
    "dict": {"key": "k", "details": {"nested": "1"}},
    "empty": {},
}


def _validated(fields: Mapping[str, str]) -> dict[str, str]:
    if not fields.get("key"):
        raise SchemaError(MODEL, "key", "field is missing")
    if fields.get("invalid") == "1":
        raise SchemaError(MODEL, "invalid", "message marked invalid")
    return dict(fields)


class NoopProcessor:
    """No Redis calls, no work: a one-field result per message."""

    name = "noop"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def parse(self, fields: Mapping[str, str]) -> dict[str, str]:
        return _validated(fields)

    def natural_key(self, message: Mapping[str, str]) -> str:
        return message["key"]

    def process(self, message: Mapping[str, str]) -> Effect:
        return Effect(message["key"], {"key": message["key"]})


class NoopTransactionProcessor:
    """No work on transactions as the Spark publish step writes them: parsed by their wire
    model, one ``key`` (the transaction's id) result each; the shard bench's drain."""

    name = "noop-transactions"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def parse(self, fields: Mapping[str, str]) -> Transaction:
        return Transaction.from_fields(fields)

    def natural_key(self, message: Transaction) -> str:
        return message.id

    def process(self, message: Transaction) -> Effect:
        return Effect(message.id, {"key": message.id})


class CountingProcessor:
    """Counts every call of ``process`` in Redis and obeys the behaviour switches."""

    name = "counting"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: RedisClient | None = None

    @property
    def client(self) -> RedisClient:
        """Connected on first use, so a worker starting while Redis is away still starts."""
        if self._client is None:
            self._client = connect(self._settings)
        return self._client

    def parse(self, fields: Mapping[str, str]) -> dict[str, str]:
        message = _validated(fields)
        if message.get("parse_bug") == "1":
            raise ValueError("a bug in the parser, not a bad message")
        if "sleep_ms" in message and not message["sleep_ms"].isdigit():
            raise SchemaError(MODEL, "sleep_ms", "must be a non-negative integer")
        return message

    def natural_key(self, message: dict[str, str]) -> str:
        if message.get("key_bug") == "1":
            return None  # type: ignore[return-value]  # a plug-in's bug the worker must survive
        return message["key"]

    def process(self, message: dict[str, str]) -> Effect:
        key = message["key"]
        calls = int(self.client.hincrby(CALLS_KEY, key, 1))
        if message.get("sleep_ms"):
            self.client.eval(_ENTER, 2, IN_FLIGHT_KEY, PEAK_KEY)
            try:
                time.sleep(int(message["sleep_ms"]) / 1000)
            finally:
                self.client.decr(IN_FLIGHT_KEY)
        if message.get("hang_once") == "1" and calls == 1:
            time.sleep(3600)  # a call that never returns (the watchdog must act)
        if message.get("abort") == "exit":
            sys.exit(ABORT_EXIT_CODE)  # a plug-in ending "the program" from its call
        if message.get("abort") == "interrupt":
            raise KeyboardInterrupt  # e.g. a library turning a signal into an exception
        if message.get("poison") == "1":
            raise RuntimeError(f"poison message {key} (call {calls})")
        if calls <= int(message.get("fail_times", "0")):
            raise RuntimeError(f"transient failure of {key} (call {calls})")
        if message.get("bad_effect") and calls <= int(message.get("bad_times", "1000000")):
            return Effect(key, BAD_RESULTS[message["bad_effect"]], recent=key)
        return Effect(key, {"key": key, "call": str(calls)}, recent=key)


class BusyCountingProcessor(CountingProcessor):
    """``counting`` behind a downstream that is busy part of the time, as an analyzer
    answering 429 + ``Retry-After`` is: a share of calls (``TEST_BUSY_FRACTION``, default
    0.2) raise :class:`Busy` (retry after 0.2 s) before any work, so they count no call."""

    name = "busy-counting"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._fraction = float(os.environ.get("TEST_BUSY_FRACTION", "0.2"))
        self._random = random.Random()

    def process(self, message: dict[str, str]) -> Effect:
        if self._random.random() < self._fraction:
            raise Busy(0.2, "the test downstream is busy")
        return super().process(message)


class PaidCountingProcessor(CountingProcessor):
    """``counting`` whose calls are *paid* (``paid_calls``: its keys are claimed across
    the fleet before a call), and which also appends ``<key>:<pid>`` to the list
    :data:`CALLERS_KEY` per call, so a test sees which worker process made each call."""

    name = "paid-counting"
    paid_calls = True

    def process(self, message: dict[str, str]) -> Effect:
        self.client.rpush(CALLERS_KEY, f"{message['key']}:{os.getpid()}")
        return super().process(message)


def counting(settings: Settings) -> CountingProcessor:
    return CountingProcessor(settings)


def busy_counting(settings: Settings) -> BusyCountingProcessor:
    return BusyCountingProcessor(settings)


def paid_counting(settings: Settings) -> PaidCountingProcessor:
    return PaidCountingProcessor(settings)


def noop(settings: Settings) -> NoopProcessor:
    return NoopProcessor(settings)


def noop_transactions(settings: Settings) -> NoopTransactionProcessor:
    return NoopTransactionProcessor(settings)
