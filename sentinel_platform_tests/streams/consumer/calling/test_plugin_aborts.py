"""Which ``BaseException`` out of a processor call is the operator's Ctrl-C (raised) and
which is a failure of its message (retried, dead-lettered at the delivery limit)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

from sentinel_platform.streams.consumer.calling.processor_call import operator_interrupt


@pytest.fixture
def sigint_handled() -> Iterator[None]:
    """SIGINT handled as the worker process does (a stop), restored afterwards."""
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: None)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _in_a_thread(exc: BaseException) -> bool:
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(operator_interrupt(exc)))
    thread.start()
    thread.join(5)
    return seen[0]


def test_ctrl_c_on_the_main_thread_with_pythons_handler_is_the_operators() -> None:
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("this runner handles SIGINT itself")
    assert operator_interrupt(KeyboardInterrupt())
    assert not _in_a_thread(KeyboardInterrupt())  # a pool thread never gets a real one


def test_a_process_that_handles_sigint_gets_no_interrupt_from_the_operator(
    sigint_handled: None,
) -> None:
    assert not operator_interrupt(KeyboardInterrupt())


@pytest.mark.parametrize("exc", [SystemExit(7), SystemExit(0), GeneratorExit(), ValueError()])
def test_anything_else_is_a_failure_of_its_message(exc: BaseException) -> None:
    assert not operator_interrupt(exc)
    assert not _in_a_thread(exc)
