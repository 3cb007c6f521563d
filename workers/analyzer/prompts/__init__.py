"""The prompts the model APIs get, declared by each stream with its verdict model.

A stream that asks the analyzer declares a :class:`StreamPrompt`: the text file of its
instructions (packaged beside this module, versioned with the code), the setting that may
name a file replacing it, and the pydantic model of its verdict. :func:`load_prompt` turns
it into a :class:`Prompt` once, at start-up: the instructions, the JSON schema generated
from the verdict model (what the API is told to answer, so the schema and the validation
of the reply can never disagree) and ``version``, a hash of both, recorded with every
verdict so a change of wording is visible in the results.

The instructions are static and come first in every request, the message last: providers
cache the longest identical prefix of a prompt, so every call after the first pays the
instructions at the cached price.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sentinel_platform.settings import Settings, SettingsError

PROMPT_DIR = Path(__file__).resolve().parent
#: Characters of the SHA-256 of instructions and schema kept as the prompt's version.
VERSION_CHARS = 12


@dataclass(frozen=True)
class StreamPrompt:
    """A stream's declaration: ``kind`` is the analyzer call it is for (``transaction``,
    ``axiom``), ``text_file`` its packaged instructions, ``setting`` the settings field
    naming a replacement file, ``verdict`` the model a reply must validate against."""

    kind: str
    text_file: str
    setting: str
    verdict: type[BaseModel]


@dataclass(frozen=True)
class Prompt:
    """A loaded prompt: what a model API module sends and validates against."""

    kind: str
    instructions: str
    verdict: type[BaseModel]
    schema: dict[str, Any] = field(repr=False)
    version: str

    @property
    def schema_name(self) -> str:
        """The schema's (and the Anthropic tool's) name: ``<kind>_verdict``."""
        return f"{self.kind}_verdict"


def load_prompt(declared: StreamPrompt, settings: Settings) -> Prompt:
    """The prompt of ``declared``, from the file its setting names or the packaged one.

    Raises :class:`SettingsError` naming the setting when that file cannot be read or is
    empty: a worker must not start with instructions it cannot send.
    """
    # A stream declared outside the platform may name a setting the model does not have.
    override: Path | None = getattr(settings, declared.setting, None)
    path = override.expanduser() if override is not None else PROMPT_DIR / declared.text_file
    try:
        instructions = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(
            f"SENTINEL_{declared.setting.upper()}: cannot read {str(path)!r} ({type(exc).__name__})"
        ) from None
    if not instructions:
        raise SettingsError(f"SENTINEL_{declared.setting.upper()}: {str(path)!r} is empty")
    schema = strict_schema(declared.verdict)
    return Prompt(
        declared.kind, instructions, declared.verdict, schema, version(instructions, schema)
    )


def strict_schema(verdict: type[BaseModel]) -> dict[str, Any]:
    """The verdict model's JSON schema as strict structured outputs accept it: every
    property required, no other property allowed, no ``title`` keys (noise to a model) and
    no top-level ``description`` (the model's docstring is for readers of the code)."""
    schema = _without_titles(verdict.model_json_schema())
    schema.pop("description", None)
    schema["required"] = sorted(schema.get("properties", {}))
    schema["additionalProperties"] = False
    return schema


def version(instructions: str, schema: dict[str, Any]) -> str:
    """A content hash of what the model is told: the instructions and the schema."""
    digest = hashlib.sha256(instructions.encode())
    digest.update(json.dumps(schema, sort_keys=True).encode())
    return digest.hexdigest()[:VERSION_CHARS]


def _without_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_titles(v) for k, v in node.items() if k != "title"}
    if isinstance(node, list):
        return [_without_titles(item) for item in node]
    return node
