"""Storage roots are URIs: accepted, normalised and joined without losing the scheme."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_platform.settings import SettingsError, load_settings
from sentinel_platform.storage_uri import as_uri, join, registered_schemes, storage_problem


@pytest.mark.parametrize(
    ("value", "uri"),
    [
        ("s3a://bucket/sentinel/data", "s3a://bucket/sentinel/data"),
        ("s3a://bucket/sentinel/data/", "s3a://bucket/sentinel/data"),
        ("hdfs://namenode:8020/sentinel", "hdfs://namenode:8020/sentinel"),
        ("abfss://c@account.dfs.core.windows.net/d", "abfss://c@account.dfs.core.windows.net/d"),
        ("file:///srv/data", "file:///srv/data"),
        ("/srv/data", "file:///srv/data"),
        ("/srv/data/", "file:///srv/data"),
    ],
)
def test_roots_become_uris_and_keep_their_scheme(value: str, uri: str) -> None:
    assert as_uri(value) == uri


def test_a_relative_local_path_is_resolved_to_an_absolute_file_uri() -> None:
    assert as_uri("rel/data") == (Path.cwd() / "rel" / "data").as_uri()


@pytest.mark.parametrize(
    ("base", "parts", "joined"),
    [
        ("s3a://b/data", ("axioms", "2026-11-20"), "s3a://b/data/axioms/2026-11-20"),
        ("s3a://b/data/", ("/axioms/",), "s3a://b/data/axioms"),
        ("file:///srv", (), "file:///srv"),
    ],
)
def test_join_appends_segments(base: str, parts: tuple[str, ...], joined: str) -> None:
    assert join(base, *parts) == joined


@pytest.mark.parametrize(
    ("value", "extra", "problem"),
    [
        ("s3a://bucket/data", (), None),
        ("viewfs://cluster/data", (), None),
        ("/local/data", (), None),
        ("s3://bucket/data", (), "scheme 's3' is not one of"),
        ("memfs://x/data", (), "spark.hadoop.fs.memfs.impl"),
        ("memfs://x/data", ("memfs",), None),
        ("c:data", (), "neither a URI"),
        ("  ", (), "must not be empty"),
    ],
)
def test_storage_problems_are_named(
    value: str, extra: tuple[str, ...], problem: str | None
) -> None:
    found = storage_problem(value, extra)
    assert found is None if problem is None else problem in (found or "")


def test_schemes_registered_in_the_spark_conf_are_recognised() -> None:
    conf = {"spark.hadoop.fs.memfs.impl": "x.MemFs", "spark.executor.memory": "1g"}
    assert registered_schemes(conf) == {"memfs"}


def test_an_unknown_scheme_fails_at_start_up_naming_the_variable() -> None:
    with pytest.raises(SettingsError, match=r"SENTINEL_DATA_DIR='s3://b/d'.*s3a://"):
        load_settings(data_dir="s3://b/d")
    with pytest.raises(SettingsError, match="SENTINEL_LANDING_DIR"):
        load_settings(landing_dir="memfs://x/landing")


def test_a_scheme_registered_through_the_spark_conf_is_accepted() -> None:
    settings = load_settings(
        landing_dir="memfs://x/landing",
        spark_conf="spark.hadoop.fs.memfs.impl=org.apache.hadoop.fs.RawLocalFileSystem",
    )
    assert settings.landing_uri == "memfs://x/landing"


def test_the_roots_default_to_the_home(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path)
    assert settings.data_uri == (tmp_path / "data").resolve().as_uri()
    assert settings.landing_uri == (tmp_path / "landing").resolve().as_uri()
