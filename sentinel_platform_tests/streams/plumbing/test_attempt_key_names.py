"""Names of the per-message attempt records, on one server and on a cluster.

A worker upgraded in place must find the records its predecessor wrote, and a cluster
needs every record in its stream's slot, so the names are pinned here from a table.
"""

from __future__ import annotations

import pytest

from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.keys import (
    attempt_key,
    attempt_key_prefix,
    axiom_keys,
    transaction_keys,
)

SINGLE = "redis://127.0.0.1:6399/0"
CLUSTER = "redis+cluster://127.0.0.1:7000"


@pytest.mark.parametrize(
    ("url", "stream", "prefix"),
    [
        (SINGLE, "transactions", "sentinel:attempts:transactions:"),
        (SINGLE, "axioms", "sentinel:attempts:synapse:axioms:"),
        (CLUSTER, "transactions", "{transactions}:attempts:"),
        (CLUSTER, "axioms", "{synapse:axioms}:attempts:"),
    ],
)
def test_every_attempt_record_of_a_stream_shares_one_prefix(
    url: str, stream: str, prefix: str
) -> None:
    settings = load_settings(redis_url=url)
    keys = transaction_keys(settings) if stream == "transactions" else axiom_keys(settings)
    assert attempt_key_prefix(keys) == prefix
    assert attempt_key(keys, "1732280000000-7") == f"{prefix}1732280000000-7"
    assert attempt_key(keys, "1-0") != attempt_key(keys, "1-1")
