"""``python -m bench <scenario> [options]``: run one scenario (``python -m bench.<scenario>``
runs the same ``main``). ``python -m bench --help`` lists them; ``python -m bench
<scenario> --help`` gives a scenario's options."""

from __future__ import annotations

import importlib
import sys

#: Each scenario, its module ``bench.<name>`` and what it measures.
SCENARIOS = {
    "analyzer_limits": "real workers against an analyzer of capacity K and latency L",
    "backpressure": "lag band, consumer idle time and producer rate of the publish guard",
    "publish_throughput": "the Spark publish step against raw pipelined XADD",
    "recovery_latency": "how long a SIGKILLed worker's messages wait for a survivor",
    "slow_processor": "one worker with in-worker concurrency against a slow analyzer",
    "soak": "3 workers through Redis restarts, a promotion and a long outage",
    "worker_throughput": "msg/s of the worker against the original's loop and two ceilings",
}


def usage() -> str:
    width = max(map(len, SCENARIOS))
    lines = [f"  {name:<{width}}  {what}" for name, what in SCENARIOS.items()]
    return "usage: python -m bench <scenario> [--quick] [options]\n\nscenarios:\n" + "\n".join(
        lines
    )


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SCENARIOS:
        print(f"unknown scenario {name!r}\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"bench.{name}")
    return int(module.main(rest))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
