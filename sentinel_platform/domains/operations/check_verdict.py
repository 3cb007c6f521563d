"""A check's outcome, told the same way by a check run and by a sensor.

The stream-health verdicts are plain values (:class:`Verdict`) so one decision serves both
places a check is evaluated: a check run returns it as a ``dg.AssetCheckResult``, and a
sensor records it as a ``dg.AssetCheckEvaluation`` about the materialisation it saw
(:func:`latest_materialization`), which is how the lag gate's blocking check stops publish
runs without one being launched. Severity: WARN or ERROR. What stops publishing is a
failure at ERROR unless the verdict says otherwise (:attr:`Verdict.stops_publishing`):
backpressure stops it at WARN, since it is the platform working as designed (it resumes by
itself) and an ERROR on a blocking check would fail every run that evaluates it.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any

import dagster as dg

WARN = dg.AssetCheckSeverity.WARN
ERROR = dg.AssetCheckSeverity.ERROR


def _target_type() -> type:
    """The type of ``dg.AssetCheckEvaluation``'s documented ``target_materialization_data``
    field. Dagster exports it under no public name, so it is read off the public class's
    field rather than imported from a private module that may move."""
    hint = typing.get_type_hints(dg.AssetCheckEvaluation)["target_materialization_data"]
    return next(arg for arg in typing.get_args(hint) if arg is not type(None))


#: A check evaluation's target: one materialisation (storage id, run id, timestamp).
MaterializationTarget = Any
_TARGET = _target_type()


def latest_materialization(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey
) -> MaterializationTarget:
    """The asset's latest materialisation (any partition), as a check evaluation's target."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key), limit=1
    ).records
    if not records:
        return None
    record = records[0]
    return _TARGET(
        storage_id=record.storage_id,
        run_id=record.run_id,
        timestamp=record.timestamp,
    )


@dataclass(frozen=True)
class Verdict:
    """A check outcome, convertible to a check result (in a run) or evaluation (in a sensor)."""

    passed: bool
    severity: dg.AssetCheckSeverity
    description: str
    metadata: dict[str, Any]
    #: Whether the lag gate launches no publish run on this outcome; ``None``: a failure
    #: at ERROR does (:attr:`blocks`).
    stops_publishing: bool | None = None

    def result(self) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(
            passed=self.passed,
            severity=self.severity,
            description=self.description,
            metadata=self.metadata,
        )

    def evaluation(
        self,
        asset_key: dg.AssetKey,
        check_name: str,
        blocking: bool = False,
        target: MaterializationTarget = None,
    ) -> dg.AssetCheckEvaluation:
        """The verdict as a sensor reports it, about the materialisation ``target``.

        Without a target Dagster falls back to comparing timestamps, the evaluation's
        stored with whole-second precision, and the UI's "latest execution" then reads
        "Not evaluated" whenever the two land in the same second. Naming the target makes
        the latest state exact: it is about the materialisation the sensor saw.
        """
        return dg.AssetCheckEvaluation(
            asset_key=asset_key,
            check_name=check_name,
            passed=self.passed,
            severity=self.severity,
            description=self.description,
            metadata=self.metadata,
            blocking=blocking,
            target_materialization_data=target,
        )

    @property
    def blocks(self) -> bool:
        """Whether the lag gate stops publishing on this outcome: what the verdict says,
        else a failure at ERROR severity (what Dagster's blocking check stops on)."""
        if self.stops_publishing is not None:
            return self.stops_publishing
        return not self.passed and self.severity == ERROR
