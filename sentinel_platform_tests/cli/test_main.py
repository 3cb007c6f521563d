"""The ``sentinel`` command starts quickly: what every command imports is light.

Operators run ``sentinel status`` in loops and scripts, and the suite runs the CLI hundreds
of times; Dagster alone costs a second to import. Only the commands that use it
(``migrate-storage``, ``up``'s children) import it, when they run.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Imported only by the commands that need them.
HEAVY = ("dagster", "pyspark", "great_expectations")


@pytest.mark.parametrize("module", HEAVY)
def test_the_command_line_imports_no_heavy_library_before_a_command_needs_it(module: str) -> None:
    probe = f"import sys, sentinel_platform.cli.main as m; print({module!r} in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False", f"importing the CLI imported {module}"
