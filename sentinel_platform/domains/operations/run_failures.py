"""Alert on every failed run of the code location, whatever job launched it.

A "Materialize" click in the UI launches the implicit asset job (``__ASSET_JOB``), a
schedule or the lag gate launches a publish job, an operator a checks job: all of them
touch the platform's assets, so the sensor watches every job of its code location
(``monitored_jobs`` left unset), not a hand-kept list that misses the UI's runs.

The alert names the failing step(s) and the first line of the error the step's code
raised (e.g. Spark's ``[PATH_NOT_FOUND] Path does not exist: ...``), not Dagster's wrapper
("Error occurred while executing op ...") or a stack trace. The summary is one sentence an
operator reads at a glance: the error's type once (Dagster records the message of a
``Failure`` with the qualified type in front of it), then the message, cut at a word
boundary with an ellipsis when long (:func:`error_sentence`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import dagster as dg

from sentinel_platform.alerting.model import Alert
from sentinel_platform.registry import StreamSpec, stream_specs
from sentinel_platform.resources.alerts import AlertSink

SENSOR_NAME = "run_failure_sensor"
#: Longest error line carried in an alert summary (ellipsis included).
ERROR_LINE_CHARS = 200
ELLIPSIS = "…"
#: ``pkg.module.Type: `` or ``Type: `` at the start of a message: the type, said again.
_TYPE_PREFIX = re.compile(r"^(?:[A-Za-z_][\w]*\.)*(?P<name>[A-Za-z_]\w*):\s*")


@dataclass(frozen=True)
class StepFailure:
    """One failed step and the first line of the error that failed it."""

    step: str
    error: str


def first_line(text: str | None) -> str:
    """The first non-empty line of ``text`` (a message or a rendered exception), whole."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def clip(text: str, limit: int = ERROR_LINE_CHARS) -> str:
    """``text`` within ``limit`` characters: cut at the last word boundary that fits, with
    an ellipsis, never mid-word (a single word longer than the limit is cut hard)."""
    if len(text) <= limit:
        return text
    keep = limit - len(ELLIPSIS)
    head = text[:keep]
    if not text[keep].isspace() and " " in head:  # mid-word: back to the word's start
        head = head[: head.rindex(" ")]
    return head.rstrip(" ,;:.-(") + ELLIPSIS


def error_sentence(cls_name: str | None, message: str | None, limit: int = ERROR_LINE_CHARS) -> str:
    """``Type: message``, the type said once: Dagster records a ``Failure``'s message as
    ``pkg.module.Type: message`` and others as ``Type: message``; every leading copy of
    the type (qualified or not) is dropped before it is put back once. Cut by :func:`clip`."""
    line = first_line(message)
    if cls_name:
        while (match := _TYPE_PREFIX.match(line)) and match["name"] == cls_name:
            line = line[match.end() :]
    text = f"{cls_name}: {line}" if cls_name and line else (cls_name or line)
    return clip(text, limit)


class ErrorInfo(Protocol):
    """What Dagster records of a step's error (``step_failure_data.error``)."""

    @property
    def message(self) -> str: ...

    @property
    def cls_name(self) -> str | None: ...

    @property
    def cause(self) -> ErrorInfo | None: ...


def root_error(error: ErrorInfo | None) -> str:
    """The first line of the error the step's code raised, under Dagster's own wrappers.

    Only Dagster's wrappers are unwrapped: an error the code raised ``from`` another one
    already says what went wrong in its own words.
    """
    if error is None:
        return ""
    while error.cause is not None and (error.cls_name or "").startswith("Dagster"):
        error = error.cause
    return error_sentence(error.cls_name, error.message)


def step_failures(events: Sequence[dg.DagsterEvent]) -> list[StepFailure]:
    """Each failed step with its error line, in the order the steps failed."""
    out: list[StepFailure] = []
    for event in events:
        data = event.step_failure_data
        out.append(StepFailure(event.step_key or "?", root_error(data.error if data else None)))
    return out


def streams_published(run: dg.DagsterRun, specs: Sequence[StreamSpec] | None = None) -> list[str]:
    """The declared streams a run publishes, in declaration order: from the pools of its
    plan (each publish step is in its stream's pool), else from its asset selection or the
    steps it was asked to execute (a run recorded without its plan's pools).

    Whoever launched the run, a click on *Materialize* and an asset backfill included (the
    implicit asset job, no job tags), the run says which streams it publishes.
    """
    specs = stream_specs() if specs is None else specs
    concurrency = run.run_op_concurrency
    if concurrency is not None and concurrency.all_pools:
        return [spec.name for spec in specs if spec.pool in concurrency.all_pools]
    names = {key.to_user_string() for key in run.asset_selection or ()}
    names |= set(run.step_keys_to_execute or ())
    return [spec.name for spec in specs if spec.asset in names]


def run_stream(run: dg.DagsterRun, specs: Sequence[StreamSpec] | None = None) -> str | None:
    """The stream a run's alert is about: its ``sentinel/stream`` tag (the lag gate's runs
    carry it), else the one stream it publishes; ``None`` for a run publishing none or
    several (the demo's)."""
    tagged = run.tags.get("sentinel/stream")
    if tagged:
        return tagged
    streams = streams_published(run, specs)
    return streams[0] if len(streams) == 1 else None


def run_failure_alert(
    run: dg.DagsterRun, run_message: str | None, failures: Sequence[StepFailure]
) -> Alert:
    partition = run.tags.get("dagster/partition")
    where = f" partition {partition}" if partition else ""
    if failures:
        first = failures[0]
        why = f"step {first.step} failed: {first.error or 'no error message'}"
        if len(failures) > 1:
            why += f" (+{len(failures) - 1} more failed step(s))"
    else:  # failed before any step ran (e.g. the run worker could not start)
        why = clip(first_line(run_message)) or "run failed"
    assets = sorted(key.to_user_string() for key in run.asset_selection or ())
    return Alert(
        severity="error",
        source=SENSOR_NAME,
        stream=run_stream(run),
        condition=f"run:{run.run_id}",
        summary=f"run {run.run_id[:8]} of {run.job_name}{where} failed: {why}",
        details={
            "run_id": run.run_id,
            "job": run.job_name,
            "partition": partition,
            "assets": assets,
            "failed_steps": [{"step": f.step, "error": f.error} for f in failures],
            "message": (run_message or "")[:2000],
            "launched_by": run.tags.get("sentinel/launched_by"),
        },
    )


def build_run_failure_sensor(name: str = SENSOR_NAME) -> dg.SensorDefinition:
    """The run-failure sensor for every job of the code location."""

    @dg.run_failure_sensor(
        name=name,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Alerts when any run of this code location fails (publish jobs, the UI's "
        "`Materialize`, schedules), naming the failing step and the first line of its error.",
    )
    def _sensor(context: dg.RunFailureSensorContext, alerts: AlertSink) -> None:
        failures = step_failures(context.get_step_failure_events())
        alerts.send(run_failure_alert(context.dagster_run, context.failure_event.message, failures))

    return _sensor
