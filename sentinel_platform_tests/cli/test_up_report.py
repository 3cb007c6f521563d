"""The lines ``sentinel up`` tells its operator: what runs without a click, and its cost."""

from __future__ import annotations

import pytest

from sentinel_platform.cli.up_report import unasked_runs

DEMO_LINES = [
    # (demo on, analyzer configured, what the start-up line must say)
    (True, True, "never sent to the analyzer"),
    (True, False, "decided by the rules"),
    (False, True, "no demo"),
    (False, False, "no demo"),
]


@pytest.mark.parametrize(("demo", "analyzer", "says"), DEMO_LINES)
def test_the_runs_by_itself_line_says_what_the_demo_costs(
    demo: bool, analyzer: bool, says: str
) -> None:
    line = unasked_runs(demo, analyzer=analyzer)
    assert line.startswith("runs by itself: ") and says in line, line
    assert ("left out of the reports" in line) == demo, line
