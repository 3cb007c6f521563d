"""Exit statuses are defined once (:mod:`sentinel_platform.exit_codes`) and the guides
that write them out agree with it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from sentinel_platform import exit_codes

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| (\d+) \|", re.M)


def documented_codes(doc: str, heading: str) -> set[int]:
    """The codes of the first table after the line starting with ``heading``."""
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    after = text[text.index(heading) :]
    table = after[after.index("\n|") : after.index("\n\n", after.index("\n|"))]
    return {int(code) for code in ROW.findall(table)}


def test_the_sentinel_command_codes_are_the_ones_documented() -> None:
    codes = {
        exit_codes.EXIT_OK,
        exit_codes.EXIT_ERROR,
        exit_codes.EXIT_USAGE,
        exit_codes.EXIT_ELEVATED,
        exit_codes.EXIT_BACKPRESSURE,
        exit_codes.EXIT_WORKER_OFF,
    }
    assert documented_codes("cli.md", "Exit codes (usable as a health probe") == codes


def test_the_worker_codes_are_the_ones_documented() -> None:
    codes = {
        exit_codes.EXIT_OK,
        exit_codes.EXIT_USAGE,
        exit_codes.EXIT_NAME_IN_USE,
        exit_codes.EXIT_UNCOMMITTED,
        exit_codes.EXIT_HUNG,
    }
    assert documented_codes("workers.md", "Worker exit status") == codes


def test_no_other_module_defines_an_exit_code() -> None:
    defined = []
    for package in ("sentinel_platform", "workers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.resolve() == Path(exit_codes.__file__).resolve():
                continue
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.Assign):
                    targets = node.targets
                elif isinstance(node, ast.AnnAssign):
                    targets = [node.target]
                else:
                    targets = []
                for target in targets:
                    if isinstance(target, ast.Name) and target.id.startswith("EXIT_"):
                        defined.append(f"{path.relative_to(ROOT)}:{node.lineno} {target.id}")
    assert defined == []
