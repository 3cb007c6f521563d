"""Prompts declared with the streams: the packaged file or the one a setting names, the
version a content hash, and a file that cannot be read a start-up error naming the
setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_platform.settings import SettingsError, load_settings
from workers.analyzer.prompts import load_prompt
from workers.processors import axioms, transactions


def test_a_setting_naming_a_file_replaces_the_packaged_prompt(tmp_path: Path) -> None:
    packaged = load_prompt(transactions.PROMPT, load_settings(home=tmp_path))
    own = tmp_path / "mine.txt"
    own.write_text("Judge the payment.\n")
    settings = load_settings(home=tmp_path, analyzer_transactions_prompt_file=str(own))
    replaced = load_prompt(transactions.PROMPT, settings)
    assert replaced.instructions == "Judge the payment."
    assert replaced.version != packaged.version, "another wording is another version"
    assert load_prompt(transactions.PROMPT, settings).version == replaced.version, "stable"
    assert len(replaced.version) == 12
    assert (
        load_prompt(axioms.PROMPT, settings).instructions
        == load_prompt(axioms.PROMPT, load_settings(home=tmp_path)).instructions
    ), "the other stream keeps its own"


@pytest.mark.parametrize("content", [None, "  \n"])
def test_a_prompt_file_that_cannot_be_used_fails_naming_the_setting(
    tmp_path: Path, content: str | None
) -> None:
    path = tmp_path / "prompt.txt"
    if content is not None:
        path.write_text(content)
    settings = load_settings(home=tmp_path, analyzer_axioms_prompt_file=str(path))
    with pytest.raises(SettingsError, match="SENTINEL_ANALYZER_AXIOMS_PROMPT_FILE"):
        load_prompt(axioms.PROMPT, settings)
