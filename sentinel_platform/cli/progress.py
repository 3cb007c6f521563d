"""Progress for long operations: a redrawn bar on a terminal, plain lines in logs and pipes.

A bar full of carriage returns is noise in a CI log or a file, and a silent long loop on a
terminal looks hung; so the output adapts to whether the stream is a TTY. Standard
library only.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

BAR_WIDTH = 30
#: Plain mode prints a line at most this often (and at the end).
PLAIN_EVERY_S = 2.0


class Progress:
    """Call ``update(done)`` as work advances and ``finish()`` at the end."""

    def __init__(
        self, total: int, label: str, stream: TextIO | None = None, tty: bool | None = None
    ) -> None:
        self.total = max(total, 0)
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.done = 0
        self._last_plain = 0.0
        self._finished = False

    def _bar(self) -> str:
        fraction = self.done / self.total if self.total else 1.0
        filled = int(BAR_WIDTH * fraction)
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return f"\r{self.label} [{bar}] {self.done}/{self.total} ({fraction:4.0%})"

    def update(self, done: int) -> None:
        self.done = min(done, self.total) if self.total else done
        if self.tty:
            self.stream.write(self._bar())
            self.stream.flush()
            return
        now = time.monotonic()
        if now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            self.stream.write(f"{self.label}: {self.done}/{self.total}\n")
            self.stream.flush()

    def finish(self) -> None:
        if self._finished:
            return
        self._finished = True
        if self.tty:
            self.stream.write(self._bar() + "\n")
        else:
            self.stream.write(f"{self.label}: {self.done}/{self.total} done\n")
        self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()
