"""Consume the axioms stream in its consumer group (see ``--help``).

Each axiom becomes a compliance event in ``sentinel:compliance_events``; readings scoring
strictly above ``SENTINEL_AXIOM_AUDIT_THRESHOLD`` are also put to the analyzer at
``SENTINEL_ANALYZER_URL`` when one is set. Invalid messages go to the DLQ at once, failing
ones after the delivery limit. Run as many as you like: every worker also recovers the
messages of dead ones.
"""

from __future__ import annotations

import sys

from workers.cli import run_worker


def main(argv: list[str] | None = None) -> int:
    """The same worker as ``python -m sentinel_platform.workers axioms``."""
    return run_worker("axioms", argv, prog="python -m workers.watch_axioms")


if __name__ == "__main__":
    sys.exit(main())
