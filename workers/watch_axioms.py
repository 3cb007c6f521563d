"""Consume the axioms stream in its consumer group (see ``--help``)."""

from __future__ import annotations

import sys

from workers.cli import build_parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser("python -m workers.watch_axioms", __doc__ or "")
    parser.parse_args(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
