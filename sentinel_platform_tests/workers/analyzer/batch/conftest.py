"""What the batch lane's tests share: the transactions stream's prompt as the real-time path
builds it."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import load_settings
from workers.analyzer.prompts import Prompt, load_prompt
from workers.processors import transactions


@pytest.fixture(scope="module")
def prompt(tmp_path_factory: pytest.TempPathFactory) -> Prompt:
    return load_prompt(transactions.PROMPT, load_settings(home=tmp_path_factory.mktemp("h")))
