"""The lane's process ends itself once its parent is gone
(:func:`workers.batchlane.child.parent_gone`, :func:`~workers.batchlane.child.watch_parent`)."""

from __future__ import annotations

import logging
import os
import threading

import pytest

from sentinel_platform.logs import BoundLogger
from workers.batchlane.child import PARENT_LOOK_S, parent_gone, watch_parent


@pytest.mark.parametrize(
    ("parent", "current", "gone"),
    [(100, 100, False), (100, 1, True), (100, 57, True)],  # re-parented to init or a reaper
)
def test_parent_gone(parent: int, current: int, gone: bool) -> None:
    assert parent_gone(parent, current) is gone


def test_the_watcher_stops_the_lane_for_another_parent_and_not_for_its_own() -> None:
    lane_log = BoundLogger(logging.getLogger(__name__), {})
    mine, other = threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=watch_parent, args=(os.getppid(), mine, lane_log)),
        threading.Thread(target=watch_parent, args=(os.getppid() + 1, other, lane_log)),
    ]
    for thread in threads:
        thread.start()
    try:
        assert other.wait(PARENT_LOOK_S * 10)
        assert not mine.is_set()
    finally:
        mine.set()
        for thread in threads:
            thread.join(PARENT_LOOK_S * 4)
