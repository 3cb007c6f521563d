"""Processors the worker tests (and benchmarks) plug in with ``--processor module:factory``.

Messages are flat fields: ``key`` (required: the natural key), and optional behaviour
switches: ``poison=1`` raises on every call, ``fail_times=N`` raises on the first N
calls, ``sleep_ms=N`` takes that long, ``key_bug=1`` makes ``natural_key`` return None,
``bad_effect=none|bool|dict|empty`` returns an effect the client cannot send (on the
first ``bad_times`` calls, default every call). Every call of ``process`` is counted in the Redis
hash :data:`CALLS_KEY` (field = key), so tests see exactly how often the processor ran,
across processes and kills.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from sentinel_platform.schemas import SchemaError
from sentinel_platform.settings import Settings
from sentinel_platform.streams.connection import connect
from sentinel_platform.streams.processor import Effect

CALLS_KEY = "test:processor_calls"
#: Calls of messages with ``sleep_ms`` running now, and the most ever running at once.
#: One hash tag: the script that updates both runs on a Redis Cluster too.
IN_FLIGHT_KEY = "test:{processor}:in_flight"
PEAK_KEY = "test:{processor}:peak"
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


class CountingProcessor:
    name = "counting"

    def __init__(self, settings: Settings) -> None:
        self.client = connect(settings)

    def parse(self, fields: Mapping[str, str]) -> dict[str, str]:
        if not fields.get("key"):
            raise SchemaError("TestMessage", "key", "field is missing")
        if fields.get("parse_bug") == "1":
            raise ValueError("a bug in the parser, not a bad message")
        if "sleep_ms" in fields and not fields["sleep_ms"].isdigit():
            raise SchemaError("TestMessage", "sleep_ms", "must be a non-negative integer")
        return dict(fields)

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
        if message.get("poison") == "1":
            raise RuntimeError(f"poison message {key} (call {calls})")
        if calls <= int(message.get("fail_times", "0")):
            raise RuntimeError(f"transient failure of {key} (call {calls})")
        if message.get("bad_effect") and calls <= int(message.get("bad_times", "1000000")):
            return Effect(key, BAD_RESULTS[message["bad_effect"]], recent=key)
        return Effect(key, {"key": key, "call": str(calls)}, recent=key)


class NoopProcessor:
    """No Redis calls, no work: measures the loop's own cost."""

    name = "noop"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def parse(self, fields: Mapping[str, str]) -> Mapping[str, str]:
        if not fields.get("key"):
            raise SchemaError("TestMessage", "key", "field is missing")
        return fields

    def natural_key(self, message: Mapping[str, str]) -> str:
        return message["key"]

    def process(self, message: Mapping[str, str]) -> Effect:
        return Effect(message["key"], {"key": message["key"]})


def counting(settings: Settings) -> CountingProcessor:
    return CountingProcessor(settings)


def noop(settings: Settings) -> NoopProcessor:
    return NoopProcessor(settings)
