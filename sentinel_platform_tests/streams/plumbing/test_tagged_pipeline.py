"""Each operation queued on a tagged pipeline gets exactly the replies of its own commands."""

from __future__ import annotations

from typing import Any

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.tagged_pipeline import TaggedPipeline


def test_operations_get_their_own_replies_however_many_commands_they_queue(
    redis_client: RedisClient,
) -> None:
    pipe: TaggedPipeline[str] = TaggedPipeline(redis_client.pipeline(transaction=False))

    def three(p: Any) -> None:
        p.set("a", "1")
        p.incr("a")
        p.get("a")

    pipe.queue("three", three)
    pipe.queue("none", lambda p: None)
    pipe.queue("one", lambda p: p.rpush("list", "x", "y"))

    assert len(pipe) == 3
    assert pipe.execute() == [("three", [True, 2, "2"]), ("none", []), ("one", [2])]


def test_an_empty_tagged_pipeline_sends_nothing(redis_client: RedisClient) -> None:
    pipe: TaggedPipeline[str] = TaggedPipeline(redis_client.pipeline(transaction=False))
    assert pipe.execute() == []
