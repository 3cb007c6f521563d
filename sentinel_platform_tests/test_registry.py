"""The stream registry: one declaration per stream, clashes refused, names resolved.

The end-to-end proof that everything derives from it (a third stream published by Spark,
consumed by a registry-started worker, watched by the sensors, listed by ``sentinel
status``) is ``sentinel_platform_tests/test_third_stream.py``.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator

import pytest

from sentinel_platform import registry
from sentinel_platform.registry import (
    AXIOMS,
    TRANSACTIONS,
    Setting,
    StreamSpec,
    UnknownStreamError,
    register,
    spec_for,
    stream_specs,
    unregister,
)
from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.keys import all_stream_keys, keys_for

EXTRA = StreamSpec(
    name="extra",
    stream="extra",
    group="extra-workers",
    results="extra:results",
    wire_model=Transaction,
    columns=TRANSACTIONS.columns,
    payload_field="data",
    processor="workers.processors.transactions:from_settings",
    asset="extra_stream",
    publish_job="publish_extra",
    worker_prefix="ex",
)


@pytest.fixture
def extra() -> Iterator[StreamSpec]:
    yield register(EXTRA)
    unregister(EXTRA.name)


def test_the_built_in_streams_keep_sentinel_l7_names_and_settings() -> None:
    settings = load_settings(transactions_stream="tx-renamed")
    assert [spec.name for spec in stream_specs()][:2] == ["transactions", "axioms"]
    assert keys_for(settings, TRANSACTIONS).stream == "tx-renamed"
    assert keys_for(settings, "axioms").stream == "synapse:axioms"
    assert keys_for(settings, AXIOMS).results == "sentinel:compliance_events"
    assert keys_for(settings, TRANSACTIONS).recent == "sentinel:recent_transactions"


def test_a_registered_stream_is_in_every_derived_list(extra: StreamSpec) -> None:
    settings = load_settings()
    assert spec_for("extra") is extra
    assert [keys.stream for keys in all_stream_keys(settings)] == [
        "transactions",
        "synapse:axioms",
        "extra",
    ]
    assert keys_for(settings, extra).lag == "sentinel:consumer_lag:extra"


@pytest.mark.parametrize("field", ["name", "asset", "publish_job", "worker_prefix"])
def test_a_second_stream_may_not_reuse_a_name_asset_job_or_worker_prefix(field: str) -> None:
    clash = dataclasses.replace(
        EXTRA,
        **{f: f"other-{f}" for f in ("name", "asset", "publish_job", "worker_prefix")},
    )
    clash = dataclasses.replace(clash, **{field: getattr(TRANSACTIONS, field)})
    with pytest.raises(ValueError, match=f"{field} .* already declared by stream transactions"):
        register(clash)
    assert clash not in stream_specs()


def test_declaring_the_same_spec_twice_is_harmless(extra: StreamSpec) -> None:
    assert register(dataclasses.replace(EXTRA)) == extra
    assert [spec.name for spec in stream_specs()].count("extra") == 1


def test_an_unknown_stream_names_the_declared_ones() -> None:
    with pytest.raises(UnknownStreamError, match="no stream named 'payments'; declared: axioms"):
        spec_for("payments")


@pytest.mark.parametrize(
    ("field", "value"),
    [("processor", "workers.processors.transactions"), ("spark_frame", "no_colon")],
)
def test_an_import_path_without_an_attribute_is_refused(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"{field} '{value}' is not module:attribute"):
        dataclasses.replace(EXTRA, **{field: value})


def test_a_setting_name_is_read_from_the_settings_at_run_time() -> None:
    assert Setting("dlq_stream").resolve(load_settings(dlq_stream="my:dlq")) == "my:dlq"


def test_stream_modules_are_imported_when_the_settings_name_them() -> None:
    module = "sentinel_platform_tests.extra_stream"
    sys.modules.pop(module, None)  # imported afresh: its register() call runs now
    settings = load_settings(stream_modules=module)
    try:
        assert "extra-module" in [spec.name for spec in stream_specs(settings)]
    finally:
        unregister("extra-module")


def test_a_stream_module_that_cannot_be_imported_names_the_setting() -> None:
    settings = load_settings(stream_modules="no_such_module_here")
    with pytest.raises(ValueError, match="SENTINEL_STREAM_MODULES: cannot import 'no_such_module"):
        registry.load_stream_modules(settings)


def test_the_worker_entry_point_refuses_an_unknown_stream_naming_the_declared_ones() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sentinel_platform.workers", "payments"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "no stream named 'payments'; declared: axioms, transactions" in result.stderr


@pytest.mark.parametrize("shards", [0, -1, True, 2.0])
def test_a_shard_count_that_is_not_a_whole_number_above_zero_is_refused(shards: object) -> None:
    with pytest.raises(ValueError, match="stream transactions: shards must be a whole number"):
        dataclasses.replace(TRANSACTIONS, shards=shards)
