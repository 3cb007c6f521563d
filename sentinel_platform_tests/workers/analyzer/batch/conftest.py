"""What the batch lane's tests share: the transactions stream's prompt and real-time
request bodies, as the real-time path builds them."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import load_settings
from workers.analyzer.prompts import Prompt, load_prompt
from workers.processors import transactions

KEY = "sk-proj-B4tch-K3y-0123456789abcdef"


@pytest.fixture(scope="module")
def prompt(tmp_path_factory: pytest.TempPathFactory) -> Prompt:
    return load_prompt(transactions.PROMPT, load_settings(home=tmp_path_factory.mktemp("h")))


def payloads(count: int) -> list[dict[str, object]]:
    """Transactions as the model is shown them, one with text that is not ASCII."""
    return [
        {"id": f"t-{n}", "amount": 100.0 + n, "currency": "EUR", "memo": f"loyer café n°{n}"}
        for n in range(count)
    ]
