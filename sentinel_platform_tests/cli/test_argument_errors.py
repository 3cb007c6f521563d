"""A value of the wrong type is refused naming the option and what it takes, never an
internal function name (argparse's ``invalid _positive value``), by ``sentinel`` and by the
worker entry point alike."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from sentinel_platform.exit_codes import EXIT_USAGE
from sentinel_platform_tests.harness.cli import run_sentinel

SENTINEL_CASES = [
    (["up", "--worker-concurrency", "abc"], "--worker-concurrency", "auto or a whole number >= 1"),
    (["up", "--worker-concurrency", "0"], "--worker-concurrency", "auto or a whole number >= 1"),
    (["up", "--transaction-workers", "x"], "--transaction-workers", "a whole number >= 0"),
    (["up", "--axiom-workers", "-1"], "--axiom-workers", "a whole number >= 0"),
    (["up", "--port", "http"], "--port", "a whole number from 1 to 65535"),
    (["up", "--code-port", "4k"], "--code-port", "a whole number from 1 to 65535"),
    (["up", "--stop-timeout", "soon"], "--stop-timeout", "a number of seconds >= 0"),
    (["status", "--alerts", "many"], "--alerts", "a whole number >= 0"),
    (["dlq", "list", "--limit", "ten"], "--limit", "a whole number >= 1"),
    (["dlq", "replay", "--all", "--limit", "0"], "--limit", "a whole number >= 1"),
    (["dlq", "purge", "--limit", "1.5"], "--limit", "a whole number >= 1"),
]


@pytest.mark.parametrize(("argv", "option", "expected"), SENTINEL_CASES)
def test_sentinel_names_the_option_and_what_it_expects(
    settings_env: dict[str, str], argv: list[str], option: str, expected: str
) -> None:
    result = run_sentinel(settings_env, *argv)
    assert result.code == EXIT_USAGE
    assert f"{option}: expected {expected}, got {argv[-1]!r}" in result.err
    assert not re.search(r"invalid \S+ value", result.err)  # "invalid _positive value"


WORKER_CASES = [
    ("--count", "abc", "a whole number >= 1"),
    ("--concurrency", "0", "auto or a whole number >= 1"),
    ("--block-ms", "-5", "a whole number >= 0"),
    ("--simulate-latency-ms", "fast", "a whole number >= 0"),
    ("--metrics-port", "p", "a whole number >= 0"),
]


@pytest.mark.parametrize(("option", "value", "expected"), WORKER_CASES)
def test_the_worker_entry_point_names_the_option_and_what_it_expects(
    settings_env: dict[str, str], option: str, value: str, expected: str
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sentinel_platform.workers", "transactions", option, value],
        env=settings_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == EXIT_USAGE
    assert f"{option}: expected {expected}, got {value!r}" in proc.stderr
    assert not re.search(r"invalid \S+ value", proc.stderr)
