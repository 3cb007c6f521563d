"""The backpressure-aware Redis resource the Spark assets publish and read back through.

Every field defaults to ``None`` meaning "take it from settings" (``REDIS_URL`` and the
``SENTINEL_*`` variables), so the code location needs no config and a run can still
override a threshold in the launchpad. Resource config is shown in the UI and run config
is stored with every run, so ``redis_url`` may name a server but never carry its
password (refused with :class:`PasswordInConfigError`): the password comes only from
``REDIS_URL`` in the environment, which the settings keep as a secret.

Publishing happens on the executors (:class:`PartitionPublisher` inside ``mapInArrow``);
the driver only ships plain config and sums the per-partition stats. For a sharded stream
the driver names its shards (``sharding.shards.keys_of_shards``, which records the
shards' placement on the first publish or worker) and the executors send each row to its
natural key's shard, pacing on the whole stream.

Stopping: when the step is interrupted (a Dagster run termination raises
``DagsterExecutionInterruptedError`` in the step, a ``KeyboardInterrupt`` in plain
Python) the driver sets the run's stop key and cancels its Spark job group. Executors
that are waiting on backpressure poll the stop key between wait slices of at most
0.25 s, so they give up within about a second even where Spark does not kill the
Python worker. An executor that times out sets the same key, so sibling partitions and
task retries stop too instead of each waiting ``max_pause_s`` again.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid
from typing import Any

import dagster as dg
from pydantic import field_validator

from sentinel_platform.registry import spec_for
from sentinel_platform.resources.config_secrets import (
    PasswordInConfigError as PasswordInConfigError,  # re-exported: raised by this resource
)
from sentinel_platform.resources.config_secrets import refuse_password
from sentinel_platform.resources.settings import SettingsResource, settings_or_environment
from sentinel_platform.resources.wire_columns import wire_frame
from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE
from sentinel_platform.settings import Settings
from sentinel_platform.settings.batch import Lane
from sentinel_platform.streams.backlog.progress import record_publish
from sentinel_platform.streams.plumbing.connection import RedisClient, connect, resolve_url
from sentinel_platform.streams.plumbing.eviction_policy import server_verdict
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform.streams.producer.lanes import lane_keys
from sentinel_platform.streams.producer.pacing_limits import BackpressureConfig
from sentinel_platform.streams.producer.partition_publisher import (
    STATS_SCHEMA,
    PartitionPublisher,
)
from sentinel_platform.streams.producer.publish import STOP_KEY_TTL_S, PublishStats, stop_key
from sentinel_platform.streams.producer.range_read import (
    ENTRY_SCHEMA,
    RANGE_SCHEMA,
    RangeReader,
    id_slices,
)
from sentinel_platform.streams.sharding.shards import keys_of_shards

_EXECUTOR_ERROR = re.compile(
    r"(BackpressureTimeout|PublishInterrupted|SchemaError|ValidationError)"
    r": (.+)"
)


class PublishError(RuntimeError):
    """A publish failed on the executors; the message is the executor's own error."""


def executor_error(exc: BaseException) -> str | None:
    """The first of our errors named in a Spark exception's (long, Java-wrapped) text."""
    match = _EXECUTOR_ERROR.search(str(exc))
    return f"{match.group(1)}: {match.group(2).strip()}" if match else None


class RedisPublisherResource(dg.ConfigurableResource):
    """Publish Spark DataFrames to the streams with backpressure; read result streams back."""

    redis_url: str | None = None
    lag_warn: int | None = None
    lag_pause: int | None = None
    lag_warn_sleep_ms: int | None = None
    lag_pause_poll_ms: int | None = None
    max_pause_s: float | None = None
    resume_lag: int | None = None
    batch_size: int | None = None
    settings: SettingsResource | None = None

    @field_validator("redis_url")
    @classmethod
    def _no_password(cls, value: str | None) -> str | None:
        """Refuse a URL carrying a password (user-info or ``?password=``), never quoting it."""
        refuse_password(value, "RedisPublisherResource.redis_url", "redis_url", "REDIS_URL")
        return value

    def _settings(self) -> Settings:
        """The settings resource's settings with this resource's non-empty fields on top."""
        names = ("redis_url", "lag_warn", "lag_pause", "lag_warn_sleep_ms", "lag_pause_poll_ms")
        overrides: dict[str, Any] = {n: getattr(self, n) for n in names if getattr(self, n)}
        if self.max_pause_s is not None:
            overrides["max_pause_s"] = self.max_pause_s
        if self.batch_size is not None:
            overrides["publish_batch_size"] = self.batch_size
        return settings_or_environment(self.settings).load(**overrides)

    def backpressure_config(self, settings: Settings) -> BackpressureConfig:
        return BackpressureConfig.from_settings(settings, resume_lag=self.resume_lag)

    def stream_keys(self, kind: str, settings: Settings | None = None) -> StreamKeys:
        """The keys of the declared stream named ``kind`` (see ``sentinel_platform.registry``)."""
        return keys_for(settings or self._settings(), kind)

    def connect(self, settings: Settings | None = None) -> RedisClient:
        return connect(settings or self._settings())

    def publish_client(self, kind: str, settings: Settings | None = None) -> RedisClient:
        """A client to publish ``kind`` through, on a server that keeps what is published.

        A server whose ``maxmemory-policy`` may evict any key (the stream, with entries no
        worker has read yet) is refused with a :class:`PublishError` naming the policy and
        ``SENTINEL_ALLOW_EVICTING_SERVER``, before anything is published; one that may evict
        keys with a TTL (or an accepted one) is published to with a warning in the run log.
        """
        settings = settings or self._settings()
        stream = self.stream_keys(kind, settings).stream
        client = connect(settings)
        try:
            verdict = server_verdict(client, settings.allow_evicting_server)
        except BaseException:
            client.close()
            raise
        if verdict.refused:
            client.close()
            raise PublishError(f"publish to {stream!r} refused: {verdict.message}")
        if verdict.level in ("warn", "unknown"):
            dg.get_dagster_logger().warning("publish to %r: %s", stream, verdict.message)
        return client

    # --- publish --------------------------------------------------------------------------
    def current_settings(self) -> Settings:
        """The settings this resource publishes with, read now (its fields on top)."""
        return self._settings()

    def publish_dataframe(
        self,
        df: Any,
        kind: str,
        run_id: str | None = None,
        demo: bool = False,
        lane: Lane = "realtime",
    ) -> PublishStats:
        """Publish ``df``'s wire columns from the executors; return the summed stats.

        The entries' strings are built by Spark (:func:`wire_frame`), so the executors'
        Python only pipelines them; a column missing or of the wrong type fails here with
        a :class:`~sentinel_platform.schemas.SchemaError` naming it.

        ``demo``: every entry carries the demo's mark (``DEMO_FIELD``), which the workers
        and the reports honour, and the stream's last-publish record (``sentinel status``)
        is left as it is: it answers for the user's own runs, never for the demo's.

        ``lane``: ``batch`` writes the same entries to the stream's batch lane
        (:func:`~sentinel_platform.streams.producer.lanes.lane_keys`; a sharded stream's
        to each shard's), unpaced: the batch lane is never the live stream's lag.
        """
        settings = self._settings()
        spec = spec_for(kind, settings)  # the one look-up: everything below uses the spec
        keys = keys_for(settings, spec)
        client = self.publish_client(spec.name, settings)
        shards = keys_of_shards(client, settings, spec) if spec.shards > 1 else ()
        run_id = run_id or uuid.uuid4().hex
        stop = stop_key(keys, run_id)
        client.delete(stop)
        publisher = PartitionPublisher(
            url=resolve_url(settings),
            cluster=settings.is_cluster,
            keys=lane_keys(keys, lane),
            spec=spec,
            config=self.backpressure_config(settings),
            batch_size=settings.publish_batch_size,
            stop_key=stop,
            marker=((DEMO_FIELD, DEMO_VALUE),) if demo else (),
            shards=tuple(lane_keys(shard, lane) for shard in shards),
            paced=lane == "realtime",
        )
        spark = df.sparkSession
        tag = f"sentinel-publish-{run_id}"
        _tag_jobs(spark, tag)
        started = time.monotonic()
        try:
            rows = wire_frame(df, spec).mapInArrow(publisher, STATS_SCHEMA).collect()
        except BaseException as exc:
            # An executor's reason, set first, is kept; else the run's own.
            client.set(stop, f"the run ended: {type(exc).__name__}", ex=STOP_KEY_TTL_S, nx=True)
            _cancel_jobs(spark, tag)
            reason = executor_error(exc)
            if not demo:
                error = reason or f"{type(exc).__name__}: {exc}"
                _record_outcome(client, keys, run_id, None, error, lane)
            if reason and isinstance(exc, Exception):
                target = lane_keys(keys, lane).stream
                raise PublishError(f"publish to {target!r} failed: {reason}") from None
            raise
        finally:
            _untag_jobs(spark, tag)
        client.delete(stop)
        total = PublishStats.combine(PublishStats(**row.asDict()) for row in rows)
        total.wall_s = time.monotonic() - started
        if not demo:
            _record_outcome(client, keys, run_id, total.rows, None, lane)
        with contextlib.suppress(Exception):
            client.close()
        return total

    # --- read back ------------------------------------------------------------------------
    def read_stream(self, spark: Any, stream: str) -> Any:
        """The whole ``stream`` as a DataFrame ``(stream_id, fields map)``, read by executors."""
        settings = self._settings()
        client = connect(settings)
        try:
            slices = id_slices(client, stream)
        finally:
            client.close()
        ranges = spark.createDataFrame(slices, RANGE_SCHEMA)
        if slices:
            ranges = ranges.repartition(len(slices))
        reader = RangeReader(resolve_url(settings), settings.is_cluster, stream)
        return ranges.mapInArrow(reader, ENTRY_SCHEMA)


def _current_partition() -> str | None:
    """The partition of the asset being materialised, when called from one."""
    with contextlib.suppress(Exception):
        context = dg.AssetExecutionContext.get()
        return context.partition_key if context.has_partition_key else None
    return None


def _record_outcome(
    client: RedisClient,
    keys: StreamKeys,
    run_id: str,
    rows: int | None,
    error: str | None,
    lane: Lane = "realtime",
) -> None:
    """Keep the stream's last publish (and its lane) for ``sentinel status``; never fails
    the publish."""
    fields = {
        "run_id": run_id,
        "lane": lane,
        "partition": _current_partition(),
        "rows": rows,
        "at": time.time(),
        "outcome": "failed" if error else "success",
        "error": next((ln.strip()[:300] for ln in (error or "").splitlines() if ln.strip()), None),
    }
    with contextlib.suppress(Exception):
        record_publish(client, keys, fields)


def _tag_jobs(spark: Any, tag: str) -> None:
    # Spark 3.5+ job tags work on classic and Connect sessions; cancellation uses them.
    add = getattr(spark, "addTag", None)
    if add is not None:
        add(tag)


def _untag_jobs(spark: Any, tag: str) -> None:
    remove = getattr(spark, "removeTag", None)
    if remove is not None:
        remove(tag)


def _cancel_jobs(spark: Any, tag: str) -> None:
    cancel = getattr(spark, "interruptTag", None)
    if cancel is not None:
        # Best effort: the stop key already tells the executors to stop.
        with contextlib.suppress(Exception):
            cancel(tag)
