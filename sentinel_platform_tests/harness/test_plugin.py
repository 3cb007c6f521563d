"""The suite's plugin keeps a test process's signal handlers as they were at its start.

Dagster's in-process execution maps SIGTERM to SIGINT's handler and leaves it so; in a
test process started with SIGINT ignored, every later child then inherited an ignored
SIGTERM. The two tests run in order in one process: the second sees what the first left.
"""

from __future__ import annotations

import signal

import dagster as dg


def test_an_in_process_materialisation_succeeds() -> None:
    @dg.asset
    def one() -> int:
        return 1

    assert dg.materialize([one]).success


def test_the_next_test_finds_sigterm_as_the_process_started() -> None:
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
