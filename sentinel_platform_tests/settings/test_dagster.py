"""The Dagster side's settings: ``SENTINEL_SPARK_CONF`` as key=value pairs or a JSON object
of strings, and a bad one failing at start-up naming the variable and the forms."""

from __future__ import annotations

import json

import pytest

from sentinel_platform.settings import SettingsError, load_settings


def test_spark_conf_pairs_are_parsed() -> None:
    settings = load_settings(spark_conf="spark.executor.memory=1g, spark.x.y=a=b")
    assert settings.spark_conf_pairs == {"spark.executor.memory": "1g", "spark.x.y": "a=b"}


def test_spark_conf_as_json_keeps_values_with_commas(monkeypatch: pytest.MonkeyPatch) -> None:
    packages = "org.apache.hadoop:hadoop-aws:3.4.1,com.amazonaws:aws-java-sdk-bundle:1.12.782"
    conf = {"spark.jars.packages": packages, "spark.executor.memory": "2g"}
    monkeypatch.setenv("SENTINEL_SPARK_CONF", json.dumps(conf))
    assert load_settings().spark_conf_pairs == conf


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('{"spark.executor.cores": 2}', "JSON object of strings"),
        ('["spark.x=1"]', "JSON object of strings"),
        ('{"spark.x": "1"', "not valid JSON"),
    ],
)
def test_bad_spark_conf_json_names_the_variable_and_the_forms(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: str
) -> None:
    monkeypatch.setenv("SENTINEL_SPARK_CONF", value)
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert "SENTINEL_SPARK_CONF" in str(error.value)
    assert expected in str(error.value)
