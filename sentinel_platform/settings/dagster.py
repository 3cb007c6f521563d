"""The Dagster side's settings: Spark, the home and where data lives under it or beside
it, the demo schedule, and the Dagster instance (see ``cli/dagster_home.py``).

The instance's PostgreSQL URL may carry a password: it is a secret, and its check never
quotes it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, ValidationInfo, field_validator

from sentinel_platform.settings.urls import url_problem
from sentinel_platform.storage_uri import as_uri, registered_schemes, storage_problem

#: The Dagster instance's PostgreSQL URL is a SQLAlchemy URL naming psycopg2: SQLAlchemy
#: 2.1 reads a bare ``postgresql://`` as psycopg 3, which dagster-postgres does not support.
POSTGRES_URL_SCHEMES = ("postgresql+psycopg2",)


class DagsterSettings(BaseModel):
    """Spark, storage and the Dagster instance: a part of
    :class:`~sentinel_platform.settings.Settings`."""

    spark_master: str = Field(
        "local[*]",
        min_length=1,
        description="Spark master URL (spark://host:7077 for a cluster, sc://host:15002 for "
        "Spark Connect)",
    )
    spark_conf: str = Field(
        "",
        description="extra Spark config: a JSON object of strings, or comma-separated "
        "key=value pairs (values without commas)",
    )
    home: Path = Field(
        Path(".sentinel"), description="embedded Redis data, Dagster home, data files, logs"
    )
    data_dir: str | None = Field(
        None,
        description="where the Parquet assets live: a URI (file://, hdfs://, s3a://, abfss://, "
        "...) or a local path; unset means $SENTINEL_HOME/data",
    )
    landing_dir: str | None = Field(
        None,
        description="root of the landing files (<feed>/[<day>/]*.csv|json|parquet), URI or "
        "local path; unset means $SENTINEL_HOME/landing",
    )
    demo: bool = Field(
        False,
        description="start the demo schedule (a small generated batch every few minutes) "
        "switched on; `sentinel up` sets it with the embedded Redis",
    )
    quality_min_recall: float | None = Field(
        None,
        ge=0,
        le=1,
        description="the least recall (share of labelled threats flagged, 0-1) a model's "
        "verdicts may have before the verdict_quality check warns; unset: only the rules' "
        "recall on the same messages is the bar",
    )
    quality_min_precision: float | None = Field(
        None,
        ge=0,
        le=1,
        description="the least precision (share of threat verdicts that were threats, 0-1) a "
        "model's verdicts may have before the verdict_quality check warns; unset: only the "
        "rules' precision on the same messages is the bar",
    )

    # --- the Dagster instance ------------------------------------------------------------
    dagster_postgres_url: SecretStr | None = Field(
        None,
        description="postgresql+psycopg2:// URL of the Dagster instance's run, event and "
        "schedule storage (secret: never shown; read from the environment by dagster.yaml, "
        "never written into it); unset: SQLite under $SENTINEL_HOME/dagster",
    )
    dagster_max_concurrent_runs: int | None = Field(
        None,
        ge=1,
        le=256,
        description="most Dagster runs (each a Spark driver JVM) in progress at once; unset: "
        "half the CPU cores, at least 2; publish runs of one stream run one at a time",
    )

    @field_validator("dagster_postgres_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        problem = url_problem(value.get_secret_value(), POSTGRES_URL_SCHEMES)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("spark_conf")
    @classmethod
    def _pairs(cls, value: str) -> str:
        parse_spark_conf(value)
        return value

    @field_validator("data_dir", "landing_dir")
    @classmethod
    def _storage_root(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            pairs = parse_spark_conf(info.data.get("spark_conf") or "")
        except ValueError:  # reported on SENTINEL_SPARK_CONF itself
            pairs = {}
        problem = storage_problem(value, registered_schemes(pairs))
        if problem:
            raise ValueError(problem)
        return value

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def spark_conf_pairs(self) -> dict[str, str]:
        return parse_spark_conf(self.spark_conf)

    @property
    def dagster_home(self) -> Path:
        return self.home_dir / "dagster"

    @property
    def dagster_postgres_url_value(self) -> str:
        return self.dagster_postgres_url.get_secret_value() if self.dagster_postgres_url else ""

    @property
    def max_concurrent_runs(self) -> int:
        """The run queue's total: the setting, else half the cores (each run is a Spark JVM
        using every core it is given), at least 2."""
        if self.dagster_max_concurrent_runs is not None:
            return self.dagster_max_concurrent_runs
        return max(2, (os.cpu_count() or 2) // 2)

    @property
    def data_uri(self) -> str:
        """URI of the Parquet assets' root (``SENTINEL_DATA_DIR``, else under the home)."""
        return as_uri(self.data_dir or self.home_dir / "data")

    @property
    def landing_uri(self) -> str:
        """URI of the landing files' root (``SENTINEL_LANDING_DIR``, else under the home)."""
        return as_uri(self.landing_dir or self.home_dir / "landing")


def parse_spark_conf(value: str) -> dict[str, str]:
    """``SENTINEL_SPARK_CONF`` as a dict: a JSON object of strings (any value, commas
    included, e.g. ``spark.jars.packages``), or comma-separated ``key=value`` pairs for the
    simple case. Raises ValueError saying which form was expected."""
    text = value.strip()
    if text.startswith(("{", "[")):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"is not valid JSON ({exc.msg} at {exc.pos})") from None
        if not isinstance(loaded, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()
        ):
            raise ValueError('must be a JSON object of strings, e.g. {"spark.x": "1"}')
        return loaded
    pairs = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in pair:
            raise ValueError(f"{pair!r} is not key=value (or give a JSON object of strings)")
        key, item = pair.split("=", 1)
        pairs[key.strip()] = item
    return pairs
