"""Consume the transactions stream in its consumer group (see ``--help``).

Each transaction gets a verdict in ``sentinel:verdicts`` and the recent feed, from the
rules or, when ``SENTINEL_ANALYZER_URL`` is set, from the analyzer (the rules decide when it
fails). Invalid messages go to the DLQ at once, failing ones after the delivery limit.
Run as many as you like: every worker also recovers the messages of dead ones.
"""

from __future__ import annotations

import sys

from sentinel_platform.streams.keys import transaction_keys
from workers.cli import run_worker

DEFAULT_PROCESSOR = "workers.processors.transactions:from_settings"


def main(argv: list[str] | None = None) -> int:
    return run_worker(
        "python -m workers.watch_transactions",
        __doc__ or "",
        transaction_keys,
        DEFAULT_PROCESSOR,
        argv,
    )


if __name__ == "__main__":
    sys.exit(main())
