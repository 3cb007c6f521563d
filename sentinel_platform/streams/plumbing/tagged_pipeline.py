"""A pipeline that hands each operation exactly the replies of the commands it queued.

Helpers such as ``queue_commits`` or ``queue_error`` queue however many commands they
need; a caller that reads the replies by position would have to know those counts and
would misread every later reply, silently, the day one of them changes. Here each
operation is queued under a tag, the number of commands it added is measured on the
pipeline itself (``len(pipe)``, on plain and cluster pipelines alike), and
:meth:`TaggedPipeline.execute` returns ``(tag, replies)`` per operation, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

Tag = TypeVar("Tag")


class TaggedPipeline(Generic[Tag]):
    """Queue operations under tags; execute once; get each operation's own replies back."""

    def __init__(self, pipe: Any) -> None:
        self.pipe = pipe
        self._queued: list[tuple[Tag, int]] = []

    def queue(self, tag: Tag, enqueue: Callable[[Any], object]) -> None:
        """Run ``enqueue(pipe)`` and remember how many commands it queued, under ``tag``."""
        before = len(self.pipe)
        enqueue(self.pipe)
        self._queued.append((tag, len(self.pipe) - before))

    def __len__(self) -> int:
        return len(self._queued)

    def execute(self) -> list[tuple[Tag, list[Any]]]:
        """Send everything in one round trip; ``(tag, its replies)`` per queued operation."""
        if not self._queued:
            return []
        replies = list(self.pipe.execute())
        expected = sum(n for _tag, n in self._queued)
        if len(replies) != expected:  # the client itself broke the one-reply-per-command rule
            raise RuntimeError(f"pipeline returned {len(replies)} replies for {expected} commands")
        out: list[tuple[Tag, list[Any]]] = []
        start = 0
        for tag, n in self._queued:
            out.append((tag, replies[start : start + n]))
            start += n
        return out
