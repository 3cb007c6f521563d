"""Consume the transactions stream in its consumer group (see ``--help``).

Each transaction gets a verdict in ``sentinel:verdicts`` and the recent feed, from the
rules or, when ``SENTINEL_ANALYZER_URL`` is set, from the analyzer (the rules decide when it
fails). Invalid messages go to the DLQ at once, failing ones after the delivery limit.
Run as many as you like: every worker also recovers the messages of dead ones.
"""

from __future__ import annotations

import sys

from workers.cli import run_worker


def main(argv: list[str] | None = None) -> int:
    """The same worker as ``python -m sentinel_platform.workers transactions``."""
    return run_worker("transactions", argv, prog="python -m workers.watch_transactions")


if __name__ == "__main__":
    sys.exit(main())
