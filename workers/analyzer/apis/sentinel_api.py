"""The platform's own analyzer contract, unchanged: ``POST {"kind", "payload"}``, answered
``{"is_threat", "risk_level", "narrative"}``.

It predates the model APIs and stays the default (``SENTINEL_ANALYZER_API`` unset): a
service that speaks it owns its prompt and model, so its verdicts record neither, and its
answers keep their meaning (a 503 without ``Retry-After`` is "down").
"""

from __future__ import annotations

import json
from typing import Any

from workers.analyzer.answers.refusals import ApiKind
from workers.analyzer.answers.replies import AnalyzerExhausted, Assessment, parse_assessment
from workers.analyzer.prompts import Prompt


class SentinelApi:
    """:class:`~workers.analyzer.apis.model_api.ModelApi` of the ``sentinel`` contract."""

    kind: ApiKind = "sentinel"

    def __repr__(self) -> str:
        return "SentinelApi()"

    def endpoint(self, base_url: str) -> str:
        return base_url

    def auth_headers(self, url: str) -> dict[str, str]:
        return {}  # user:password@ in the URL is Basic auth, sent by the client

    def request(self, kind: str, payload: dict[str, Any], prompt: Prompt | None) -> bytes:
        return json.dumps({"kind": kind, "payload": payload}).encode()

    def read(self, body: bytes, prompt: Prompt | None) -> Assessment:
        return parse_assessment(body)

    def misconfigured(self, status: int, body: bytes) -> AnalyzerExhausted | None:
        return None  # today's answers keep today's meaning
