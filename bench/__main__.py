"""``python -m bench <scenario> [options]``: run one scenario, a module ``bench.<scenario>``
(``python -m bench.<scenario>`` runs the same ``main``); ``--help`` lists them."""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

#: The package's modules that are not scenarios: what the scenarios share.
SHARED = {"__init__", "__main__", "cells", "fleet", "timing"}


def scenarios() -> dict[str, str]:
    """Each scenario and the first line of its docstring (read, not imported: fast)."""
    paths = sorted(p for p in Path(__file__).parent.glob("*.py") if p.stem not in SHARED)
    firsts = {p.stem: str(ast.get_docstring(ast.parse(p.read_text()))) for p in paths}
    return {name: doc.split("\n")[0].split(": ", 1)[-1].rstrip(".") for name, doc in firsts.items()}


def main(argv: list[str]) -> int:
    known = scenarios()
    if not argv or argv[0] not in known:
        lines = [f"  {name:<20} {what}" for name, what in known.items()]
        print("usage: python -m bench <scenario> [--quick] [--help] [options]\n", *lines, sep="\n")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    return int(importlib.import_module(f"bench.{argv[0]}").main(argv[1:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
