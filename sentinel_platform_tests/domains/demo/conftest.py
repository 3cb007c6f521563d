"""The demo tests drive the same Redis state as the CLI tests: their fixtures, shared."""

from sentinel_platform_tests.cli.conftest import live_worker, tx_keys

__all__ = ["live_worker", "tx_keys"]
