"""The base of every ``--json`` document of ``sentinel``: strict, closed, described field
by field (:mod:`~sentinel_platform.cli.output` holds the documents and their tables).

A module of its own so that a command's document can live beside the command's other
modules (:mod:`~sentinel_platform.cli.output_verdict`) and still be listed by
:data:`~sentinel_platform.cli.output.DOCUMENTS` without an import cycle.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Document(BaseModel):
    """A part of a ``--json`` document: strict, closed, described field by field."""

    model_config = ConfigDict(extra="forbid", strict=True)
