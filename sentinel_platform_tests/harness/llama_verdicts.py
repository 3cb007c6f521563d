"""What the real-model tests require of a transactions worker on docs/analyzer.md's
llama.cpp recipe, whoever started it (``python -m workers.watch_transactions`` alone, or
``sentinel up``): the recipe itself, and the judgement of its verdicts and its log.

Every verdict is the model's (``driver_used=analyzer``), validates against the stream's
verdict model, and records the model, the prompt's version and the tokens; the server's
queue (capacity 1, seconds a call) is met by the adaptive limit under the model APIs'
default timeout (no ``SENTINEL_ANALYZER_TIMEOUT_S``): no rules fallback, no timeout, no
breaker, no refused recipe. Shared so both tests promise exactly the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sentinel_platform.settings import load_settings
from sentinel_platform_tests.harness.llama_server import LlamaServer
from workers.analyzer.prompts import load_prompt
from workers.processors import transactions

#: docs/analyzer.md's llama.cpp recipe, as a user sets it (field names). No timeout: the
#: openai API's default (60 s) covers the adaptive limit's first probe (3 calls) queued on
#: a capacity-1 server, ~13 s a call measured on a loaded 2-core machine.
RECIPE: dict[str, Any] = {"analyzer_api": "openai", "analyzer_response_format": "json_object"}
#: What would show the queue met by fallbacks, timeouts or the breaker instead of the limit,
#: or the recipe refused by the server.
TROUBLE = ("analyzer_unavailable", "analyzer_circuit", "analyzer_exhausted")
#: A call takes ~2.5 s on an idle core and several times that on a loaded machine.
RESULTS_TIMEOUT_S = 600.0


def recipe_settings(server: LlamaServer, **overrides: Any) -> dict[str, Any]:
    """The recipe against ``server`` (field names): its URL and model, then ``overrides``."""
    return {"analyzer_url": server.url, "analyzer_model": server.model, **RECIPE, **overrides}


def recipe_env(server: LlamaServer, **overrides: Any) -> dict[str, str]:
    """:func:`recipe_settings` as the environment a user exports (``SENTINEL_ANALYZER_*``)."""
    return {
        f"SENTINEL_{k.upper()}": str(v) for k, v in recipe_settings(server, **overrides).items()
    }


def trouble(log_text: str) -> list[str]:
    """The worker's log lines that show a fallback, a timeout, the breaker or a refusal."""
    return [
        line
        for line in log_text.splitlines()
        if any(f'"event": "{event}"' in line for event in TROUBLE)
    ]


def assert_the_models_verdicts(
    results: Sequence[Mapping[str, str]], server: LlamaServer, home: Path, context: str = ""
) -> None:
    """Every result is the model's, schema-valid, with model, prompt version and tokens
    recorded; ``context`` (log tails) goes into the failure message."""
    prompt = load_prompt(transactions.PROMPT, load_settings(home=home))
    for result in results:
        assert result["driver_used"] == "analyzer", (result, context)
        prompt.verdict.model_validate(
            {
                "is_threat": result["is_threat"] == "true",
                "risk_level": result["risk_level"],
                "narrative": result["narrative"],
            }
        )
        assert (result["model"], result["prompt_version"]) == (server.model, prompt.version)
        assert int(result["input_tokens"]) > 0 and int(result["output_tokens"]) > 0, result
