"""The key a worker calls its analyzer with, re-read when its file changes, and its hold.

Keys are rotated while the fleet runs: the new key is written to the mounted key file
(``SENTINEL_ANALYZER_API_KEY_FILE``) and the old one revoked. A worker that read its key
only at start-up would call with the revoked key until restarted; so :class:`KeySource`
looks at the file (one ``stat``) at most every ``CHECK_EVERY_S``, and at every message
while its key is held (after a rejected-key answer), re-reads it when it changed, and
from then on every call carries the new key's headers (built by the API module:
:meth:`~workers.analyzer.apis.model_api.ModelApi.auth_headers`). A key given directly
(``SENTINEL_ANALYZER_API_KEY``) never changes.

A rejected key holds only the workers calling with it
(:class:`~workers.analyzer.keys.key_holds.KeyHolds`): a worker whose key file then changes
calls again with the new key, with no release. A worker without a key has nothing to tell
apart: its rejection holds the analyzer as before.

Nothing of the key is logged or stored beyond its fingerprint and digest
(:mod:`workers.analyzer.keys.key_fingerprint`); a file that cannot be read keeps the key in use
and is logged once per change without its content.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sentinel_platform.settings.analyzer import read_key_file
from workers.analyzer.answers.replies import AnalyzerExhausted
from workers.analyzer.apis.model_api import ModelApi
from workers.analyzer.keys.key_fingerprint import fingerprint, key_digest
from workers.analyzer.keys.key_holds import KeyHolds
from workers.analyzer.limits.fleet_limits import EXHAUSTED, HOLD_RECHECK_S, FleetExhausted

__all__ = ["CHECK_EVERY_S", "REJECTED_KEY", "Key", "KeySource", "Render", "api_render"]

log = logging.getLogger(__name__)

#: The longest a changed key file goes unnoticed (one ``stat`` per this, per worker).
CHECK_EVERY_S = 1.0
#: The cause of an exhaustion that is the key's, not the analyzer's.
REJECTED_KEY = "rejected_key"

#: A key's headers (the API's: ``Authorization``, ``x-api-key``, ``anthropic-version``...).
Render = Callable[[str], dict[str, str]]
#: What identifies a version of the key file: device, inode, size, modification time.
Signature = tuple[int, int, int, int]


@dataclass(frozen=True)
class Key:
    """One key as a call uses it: its headers, and what may be shown of it."""

    digest: str
    fingerprint: str
    headers: dict[str, str] = field(repr=False, compare=False)


def api_render(api: ModelApi, url: str) -> Render:
    """The headers ``api`` sends to ``url`` with a given key: an API module that keeps
    its key as a ``key`` field (a frozen dataclass) is copied with the new one."""

    def render(key: str) -> dict[str, str]:
        if dataclasses.is_dataclass(api) and hasattr(api, "key"):
            return dataclasses.replace(api, key=key).auth_headers(url)
        return api.auth_headers(url)

    return render


def signature(path: Path) -> Signature | None:
    """The file's identity and version now (None: it cannot be looked at). A mounted
    secret is replaced through a symlink, a new inode; an edit changes size or time."""
    try:
        st = path.expanduser().stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class KeySource:
    """The key of one worker's calls: :meth:`current` before each call, :meth:`refused`
    after a rejection. Thread-safe; the file is looked at by one thread at a time and the
    others go on with the key in use (never a wait)."""

    def __init__(
        self,
        key: str,
        render: Render,
        holds: KeyHolds,
        path: Path | None = None,
        *,
        check_every_s: float = CHECK_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.holds = holds
        self.path = path
        self._render = render
        self._check_every_s = check_every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._looking = threading.Lock()  # one look at the file at a time
        self._key = self._make(key)
        self._seen = signature(path) if path is not None else None
        self._next_look = clock() + check_every_s

    @classmethod
    def for_api(
        cls, api: ModelApi, url: str, analyzer_id: str, analyzer_url: str, path: Path | None
    ) -> KeySource:
        """The key ``api`` was built with (its ``key`` field; "" for none), its headers to
        ``url`` rebuilt by ``api`` for each new key, re-read from ``path`` when given, its
        holds those of the analyzer ``analyzer_id`` (``analyzer_url`` shown redacted)."""
        key = str(getattr(api, "key", "") or "")
        return cls(key, api_render(api, url), KeyHolds(analyzer_id, analyzer_url), path)

    @property
    def fingerprint(self) -> str:
        with self._lock:
            return self._key.fingerprint

    def current(self) -> Key:
        """The key to call with now (the file re-read if it changed); raises
        :class:`FleetExhausted` while this worker knows that key to be held."""
        key = self._looked_at()
        self._raise_if_held(key, self.holds.remembered(key.digest))
        return key

    def check_hold(self) -> None:
        """Raise :class:`FleetExhausted` while the fleet holds the key in use (the shared
        hold re-read within its refresh, so a release is seen)."""
        key = self._looked_at()
        self._raise_if_held(key, self.holds.held(key.digest))

    def refused(self, key: Key, exc: AnalyzerExhausted) -> bool:
        """Hold ``key`` if ``exc`` rejected it, and look at the key file at the next call
        (it may hold the new key already); False when the hold is not the key's (another
        cause, or no key to tell apart): the analyzer's hold is the caller's."""
        if exc.cause != REJECTED_KEY or not key.digest:
            return False
        self.holds.hold(key.digest, key.fingerprint, f"{exc.cause}: {exc} (key {key.fingerprint})")
        with self._lock:
            self._next_look = 0.0
        return True

    def _raise_if_held(self, key: Key, reason: str) -> None:
        if reason:
            raise FleetExhausted(HOLD_RECHECK_S, reason, EXHAUSTED, None)

    def _looked_at(self) -> Key:
        """The key in use, after a look at the file when one is due: every
        ``check_every_s``, and at every call while the key in use is held (a held worker
        makes no call, so that is one ``stat`` per held message)."""
        with self._lock:
            key, due = self._key, self._clock() >= self._next_look
        due = due or bool(self.holds.remembered(key.digest))
        if self.path is None or not due or not self._looking.acquire(blocking=False):
            return key
        try:
            with self._lock:
                self._next_look = self._clock() + self._check_every_s
            return self._reread(self.path)
        finally:
            self._looking.release()

    def _reread(self, path: Path) -> Key:
        seen = signature(path)
        with self._lock:
            if seen is None or seen == self._seen:
                return self._key
            self._seen, previous = seen, self._key
        try:
            new = self._make(read_key_file(path))
        except ValueError as exc:  # the message names the setting, never the content
            log.warning("analyzer_key_unreadable", extra={**self._fields, "error": str(exc)})
            return previous
        if new.digest == previous.digest:
            return previous
        with self._lock:
            self._key = new
        moved = {"key": new.fingerprint, "previous": previous.fingerprint}
        log.info("analyzer_key_changed", extra={**self._fields, **moved})
        return new

    def _make(self, key: str) -> Key:
        return Key(key_digest(key), fingerprint(key), self._render(key))

    @property
    def _fields(self) -> dict[str, str]:
        return {"analyzer_id": self.holds.analyzer_id, "setting": "SENTINEL_ANALYZER_API_KEY_FILE"}
