"""What an alert is, independent of where it is delivered.

The fingerprint names the *condition* (not the occurrence), so the cool-down can tell
"the same thing again" from "something new" and a worsening severity can break through.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Severity = Literal["info", "warning", "error", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2, "critical": 3}
SUMMARY_MAX_CHARS = 300


class Alert(BaseModel):
    """One alert: who raised it, about which stream, how bad, and a one-line summary."""

    model_config = ConfigDict(frozen=True)

    severity: Severity
    source: str = Field(min_length=1, max_length=200)
    summary: str = Field(min_length=1)
    condition: str = Field(min_length=1, max_length=300)
    stream: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    raised_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat())

    @field_validator("summary")
    @classmethod
    def _one_line(cls, value: str) -> str:
        line = " ".join(value.split())
        if len(line) > SUMMARY_MAX_CHARS:
            line = line[: SUMMARY_MAX_CHARS - 3] + "..."
        return line

    @property
    def fingerprint(self) -> str:
        """The condition this alert is about, across occurrences."""
        return f"{self.source}:{self.stream or '-'}:{self.condition}"

    @property
    def rank(self) -> int:
        return SEVERITY_RANK[self.severity]

    def text(self) -> str:
        """The human line used by the log and the webhook."""
        where = f" [{self.stream}]" if self.stream else ""
        return f"[{self.severity.upper()}] {self.source}{where}: {self.summary}"

    def to_fields(self) -> dict[str, str]:
        """Flat string fields for the Redis alert stream (read by the CLI)."""
        return {
            "severity": self.severity,
            "source": self.source,
            "stream": self.stream or "",
            "summary": self.summary,
            "condition": self.condition,
            "fingerprint": self.fingerprint,
            "details": json.dumps(self.details, default=str, sort_keys=True),
            "raised_at": self.raised_at,
        }

    @classmethod
    def from_fields(cls, fields: dict[str, str]) -> Alert:
        return cls(
            severity=fields["severity"],
            source=fields["source"],
            stream=fields.get("stream") or None,
            summary=fields["summary"],
            condition=fields["condition"],
            details=json.loads(fields.get("details") or "{}"),
            raised_at=fields.get("raised_at") or datetime.now(UTC).isoformat(),
        )
