"""Consume the axioms stream in its consumer group (see ``--help``).

Each axiom becomes a compliance event in ``sentinel:compliance_events``; readings scoring
strictly above ``SENTINEL_AXIOM_AUDIT_THRESHOLD`` are also put to the analyzer at
``SENTINEL_ANALYZER_URL`` when one is set. Invalid messages go to the DLQ at once, failing
ones after the delivery limit. Run as many as you like: every worker also recovers the
messages of dead ones.
"""

from __future__ import annotations

import sys

from sentinel_platform.streams.keys import axiom_keys
from workers.cli import run_worker

DEFAULT_PROCESSOR = "workers.processors.axioms:from_settings"


def main(argv: list[str] | None = None) -> int:
    return run_worker(
        "python -m workers.watch_axioms", __doc__ or "", axiom_keys, DEFAULT_PROCESSOR, argv
    )


if __name__ == "__main__":
    sys.exit(main())
