"""A second worker's analyzer client, in its own process, for the fleet-hold test.

Run as ``python -m sentinel_platform_tests.workers.analyzer.analyzer_caller`` with the worker's
environment (``SENTINEL_ANALYZER_URL``, ``REDIS_URL``, ``SENTINEL_HOME``). It builds the
analyzer exactly as a worker does (``analyzer_from_settings``, then ``bind_redis`` with
its own client), prints ``ready``, waits for one line on stdin, then calls until the
analyzer answers or ``DEADLINE_S`` passes, printing one JSON line per attempt:
``{"outcome": "busy", "retry_after_s": 1.93}`` ... ``{"outcome": "ok"}``.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform.streams.plumbing.connection import connect
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer import analyzer_from_settings

DEADLINE_S = 30.0
#: Between two attempts while busy: the client's own hold answers from memory, so this
#: only paces the output.
PAUSE_S = 0.05


def main() -> int:
    settings = load_settings()
    analyzer = analyzer_from_settings(settings)
    assert analyzer is not None, "SENTINEL_ANALYZER_URL is not set"
    client = connect(settings)
    analyzer.bind_redis(client)
    print("ready", flush=True)
    sys.stdin.readline()
    txn = Transaction.from_fields({"data": json.dumps({**BASE, "id": "t-caller"})})
    deadline = time.monotonic() + DEADLINE_S
    pause = threading.Event()
    try:
        while time.monotonic() < deadline:
            try:
                analyzer.assess_transaction(txn)
            except Busy as busy:
                print(json.dumps({"outcome": "busy", "retry_after_s": busy.retry_after_s}))
                sys.stdout.flush()
                pause.wait(PAUSE_S)
                continue
            print(json.dumps({"outcome": "ok"}), flush=True)
            return 0
        return 1
    finally:
        analyzer.close()
        client.close()


if __name__ == "__main__":
    sys.exit(main())
