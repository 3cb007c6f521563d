"""One request of a worker on one of its own connections, and what its answer tells the fleet.

:class:`~workers.analyzer.client.HttpAnalyzer` decides whether a call may go (the fleet's
hold, the breaker, the rate and token budgets) and what its outcome means to the message;
:class:`Exchange` makes the call. It owns the worker's pool of kept-alive connections
and the semaphore in front of it, sends the body with the key in use
(:class:`~workers.analyzer.keys.key_source.KeySource`), reads the answer's announced limits
into the fleet's pace (:meth:`~workers.analyzer.limits.token_budget.TokenBudget.learn`), and
turns a refusal into its meaning (the API's ``misconfigured``, then
:func:`~workers.analyzer.answers.refusals.refusal`). What an answer asks of the fleet is set here,
before the connection goes to the next call, so no call of this worker slips out after
it: a busy answer's wait (or the backoff of one that gave none,
:class:`~workers.analyzer.answers.busy_spell.BusySpell`, which also turns a long spell of nothing
but busy into *down*), an exhaustion's hold, a rejected key's own hold.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from datetime import datetime, timezone

import urllib3

from sentinel_platform.streams.operators.analyzer_holds import ANNOUNCED_LIMIT
from workers.analyzer.answers.busy_spell import BusySpell
from workers.analyzer.answers.refusals import refusal
from workers.analyzer.answers.replies import (
    AnalyzerBusy,
    AnalyzerError,
    AnalyzerExhausted,
    Assessment,
    NoFreeConnection,
    unreachable,
)
from workers.analyzer.apis.model_api import ModelApi
from workers.analyzer.keys.key_source import KeySource
from workers.analyzer.limits.fleet_limits import EXHAUSTED, FleetLimits
from workers.analyzer.limits.token_budget import TokenBudget
from workers.analyzer.prompts import Prompt
from workers.analyzer.transport import read_refusal, read_reply, split_credentials

JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


class Exchange:
    """The calls of one worker to ``url`` in ``api``'s shape, at most ``max_connections``
    at once, each bounded by ``timeout_s`` (connecting, waiting, reading). Credentials in
    the URL go as HTTP Basic auth, never in the request line; the key's headers come from
    ``keys`` per call, so a re-read key is used at once. Thread-safe."""

    def __init__(
        self,
        url: str,
        api: ModelApi,
        timeout_s: float,
        max_connections: int,
        limits: FleetLimits,
        budget: TokenBudget,
        keys: KeySource,
    ) -> None:
        target, credentials = split_credentials(url)
        self.api, self.timeout_s = api, timeout_s
        self.limits, self.budget, self.keys = limits, budget, keys
        self.target = api.endpoint(target)
        self.headers = {**JSON_HEADERS, **credentials}
        self.busy_spell = BusySpell()
        #: One permit per pooled connection: the local wait, bounded and apart from the call.
        self.connections = threading.BoundedSemaphore(max_connections)
        self._pool = urllib3.PoolManager(
            num_pools=1,
            maxsize=max_connections,
            block=True,
            timeout=urllib3.Timeout(total=timeout_s, connect=timeout_s, read=timeout_s),
            retries=False,
        )

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._pool.clear()

    def call(self, body: bytes, prompt: Prompt | None, headers: dict[str, str]) -> Assessment:
        """One request on one of the worker's own connections. The wait for a free one is
        taken here, before the call's timeout starts, so it never eats into the time the
        analyzer is given; a wait longer than ``timeout_s`` is :class:`NoFreeConnection`."""
        if not self.connections.acquire(timeout=self.timeout_s):
            raise NoFreeConnection(
                None, f"no free analyzer connection within {self.timeout_s:g}s (local pool)"
            )
        sent_at = self.busy_spell.clock()
        try:
            self.limits.check_remembered()  # refused while this call waited for a connection
            key = self.keys.current()  # a changed key file re-read; raises if it is held
            sent = time.monotonic()
            assessment = self._send(body, prompt, {**key.headers, **headers})
            took_ms = round((time.monotonic() - sent) * 1000)
            assessment = dataclasses.replace(assessment, latency_ms=took_ms)
        except AnalyzerBusy as answered:  # no wait given: a backoff; down past the bound
            busy = self.busy_spell.busy(answered, sent_at)
            if isinstance(busy, AnalyzerBusy) and busy.retry_after_s:
                self.limits.hold(busy.retry_after_s, busy.reason)
            raise busy from None
        except AnalyzerError as exc:
            self.busy_spell.ended()
            # Held before the connection is freed; a rejected key holds only that key.
            if isinstance(exc, AnalyzerExhausted) and not self.keys.refused(key, exc):
                self.limits.hold(exc.until_s, f"{exc.cause}: {exc}", cause=EXHAUSTED)
            raise
        finally:
            self.connections.release()
        self.busy_spell.ended()
        return assessment

    def _send(self, body: bytes, prompt: Prompt | None, headers: dict[str, str]) -> Assessment:
        deadline = time.monotonic() + self.timeout_s
        try:
            response = self._pool.request(
                "POST",
                self.target,
                body=body,
                headers={**self.headers, **headers},
                preload_content=False,
                pool_timeout=self.timeout_s,
            )
        except urllib3.exceptions.EmptyPoolError:  # not expected: the semaphore is the pool
            raise NoFreeConnection(None, "no free analyzer connection (local pool)") from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # Refused, reset, timed out, TLS failures: all mean "no answer".
            raise unreachable(exc) from None
        kept = False
        # Announced limits pace the fleet; a budget with no room for a while holds it.
        pause = self.budget.learn(response.headers)
        self.limits.hold(pause, "announced budget refilling", cause=ANNOUNCED_LIMIT)
        try:
            if not 200 <= response.status < 300:
                refused = read_refusal(response, deadline)
                now = datetime.now(timezone.utc)
                raise self.api.misconfigured(response.status, refused) or refusal(
                    self.api.kind, response.status, response.headers, refused, now
                )
            reply = read_reply(response, deadline)
            kept = True
        finally:
            if not kept:
                response.close()  # an unread or half-read body: do not reuse the connection
            response.release_conn()
        return self.api.read(reply, prompt)
