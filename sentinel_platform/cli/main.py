"""``sentinel``: argument parsing and dispatch to one module per subcommand.

Every handler returns an exit code; :class:`CliError` becomes one line on stderr and its
code, so an operator never sees a traceback for an expected failure (Redis down, bad
setting, unknown id).
"""

from __future__ import annotations

import argparse
import sys

from sentinel_platform.cli import analyzer, dlq, exporter, migrate, shards, status, up, verdict
from sentinel_platform.cli.common import CliError
from sentinel_platform.exit_codes import EXIT_ERROR


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sentinel",
        description="Run and operate Sentinel Platform (settings come from SENTINEL_* and "
        "REDIS_URL environment variables; see README.md).",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    up.add_parser(commands)
    status.add_parser(commands)
    verdict.add_parser(commands)
    dlq.add_parser(commands)
    migrate.add_parser(commands)
    exporter.add_parser(commands)
    analyzer.add_parser(commands)
    shards.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except CliError as exc:
        print(f"sentinel {args.command}: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"sentinel {args.command}: interrupted", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
