"""The shell every operations sensor shares, so each sensor module holds only its decisions.

The operations sensors (the lag gate, dead letters, delivery counts, analyzer holds) run
by default, read Redis through the read-only ``StreamInspector``, alert through the one
``AlertSink``, load the settings once per tick through the settings resource, and keep
their memory in a JSON cursor (:func:`~sentinel_platform.domains.operations.cursor.load_cursor`
starts fresh from an unreadable one). :func:`operations_sensor` builds that ``dg.sensor``
around a body given one :class:`SensorTick`; the body opens its Redis client where it
needs one (:meth:`SensorTick.client`), so a tick holds a connection only while it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import dagster as dg

from sentinel_platform.domains.operations.cursor import load_cursor
from sentinel_platform.resources.alerts import AlertSink
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.resources.stream_inspector import StreamInspector
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient


@dataclass(frozen=True)
class SensorTick:
    """One evaluation of an operations sensor: its context, the cursor it was handed (a
    dict, empty on the first tick), the settings loaded for this tick and the resources."""

    context: dg.SensorEvaluationContext
    cursor: dict[str, Any]
    settings: Settings
    inspector: StreamInspector
    alerts: AlertSink

    def client(self) -> AbstractContextManager[RedisClient]:
        """A Redis client for this tick's reads, closed when its ``with`` block ends."""
        return self.inspector.client(self.settings)


SensorBody = Callable[[SensorTick], dg.SensorResult]


def operations_sensor(
    name: str,
    interval_s: int,
    description: str,
    jobs: Sequence[Any] | None = None,
) -> Callable[[SensorBody], dg.SensorDefinition]:
    """A decorator making ``body`` the sensor ``name``: running by default, evaluated at
    most every ``interval_s`` seconds, launching ``jobs`` (if any), with the ``settings``,
    ``stream_inspector`` and ``alerts`` resources."""

    def build(body: SensorBody) -> dg.SensorDefinition:
        @dg.sensor(
            name=name,
            minimum_interval_seconds=interval_s,
            default_status=dg.DefaultSensorStatus.RUNNING,
            jobs=jobs,
            description=description,
        )
        def _sensor(
            context: dg.SensorEvaluationContext,
            settings: SettingsResource,
            stream_inspector: StreamInspector,
            alerts: AlertSink,
        ) -> dg.SensorResult:
            cursor = load_cursor(context.cursor)
            return body(SensorTick(context, cursor, settings.load(), stream_inspector, alerts))

        return _sensor

    return build
