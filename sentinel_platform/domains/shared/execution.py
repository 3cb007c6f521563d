"""How the Spark jobs' steps are executed: all steps of a run in one process by default.

Every step of a run that touches Spark needs a SparkSession. Under Dagster's default
multiprocess executor each step is its own process and so starts its own driver JVM and,
on a cluster, its own Spark application; a publish run of four steps then pays four JVM
start-ups and four executor launches, which on a small host costs more than the work
itself. In-process execution runs the steps one after another in the run's own process
(still isolated from the webserver and the daemon) with one session and one application
for the whole run. Measured figures are in ``bench/RESULTS.md``.

The executor keeps the config schema of Dagster's default one, so
``execution: {config: {multiprocess: {}}}`` still selects one process per step for a run
that wants the isolation; the IO manager gives every step the configured session either
way.
"""

from __future__ import annotations

import dagster as dg

#: The run config that selects each executor mode (e.g. for ``--config-json``).
IN_PROCESS: dict[str, dict[str, dict[str, dict]]] = {"execution": {"config": {"in_process": {}}}}
MULTIPROCESS: dict[str, dict[str, dict[str, dict]]] = {
    "execution": {"config": {"multiprocess": {}}}
}

spark_executor = dg.multi_or_in_process_executor.configured(
    lambda config: config,
    name="spark_executor",
    config_schema=dg.Field(
        dg.multi_or_in_process_executor.config_schema.config_type,
        default_value={"in_process": {}},
        description="in_process (default: one Spark session per run) or multiprocess",
    ),
)
