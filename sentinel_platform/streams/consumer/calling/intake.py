"""How much a worker takes: the length of a run of calls, the read-ahead, the room.

Pure decisions, table-tested, that
:class:`~sentinel_platform.streams.consumer.calling.in_flight.Calls` applies to what it
has in flight: a fast processor's calls go in runs of a whole read, a slow one's in runs
of one; a worker of slow calls reads ahead half its limit while the stream is backlogged;
and the room is what the free runs and the read-ahead can take.
"""

from __future__ import annotations

from sentinel_platform.streams.backlog.holdings import read_ahead_size

#: A run hands back what it has not started after this long, and new runs are cut to
#: about this long: a stop or a flush never waits much longer for a run.
RUN_TARGET_S = 0.01


def run_length(mean_latency_s: float | None, available: int, free_runs: int = 1) -> int:
    """How many messages one run takes: about :data:`RUN_TARGET_S` of calls, at least one.

    Before any call was timed, what is available is spread evenly over the ``free_runs``:
    a fast processor then pays few hand-offs from the start, a slow one gets its calls
    side by side, and a run hands back its rest after its time is up (:meth:`Calls._run`),
    by when the latency is known.
    """
    if available <= 0:
        return 0
    if mean_latency_s is None:
        return -(-available // max(free_runs, 1))
    if mean_latency_s <= 0:
        return available
    return max(1, min(available, int(RUN_TARGET_S / mean_latency_s)))


def read_ahead(limit: int, count: int, mean_latency_s: float | None) -> int:
    """Messages held beyond what the runs can take: for slow calls (runs of one)
    :func:`~sentinel_platform.streams.backlog.holdings.read_ahead_size`, none for fast or
    untimed ones (a run takes a whole read).

    Why: each read and its triage cost the server a round trip, and a slow worker without
    it reads once per finished call, about one message at a time (at C = 32 against a
    100 ms analyzer, 0.56 reads a message). Held ahead, the messages wait in the backlog
    for a free run, pending on this worker like every message it holds."""
    if run_length(mean_latency_s, 2) > 1:
        return 0
    return read_ahead_size(limit, count)


def room_for(
    limit: int,
    running: int,
    waiting: int,
    count: int,
    mean_latency_s: float | None,
    backlogged: bool,
) -> int:
    """How many more messages a worker may take now, at most ``count``: what its free
    runs can take and the read-ahead (:func:`read_ahead`), less the ``waiting`` messages
    (each will need a run); 0 until that is at least the read-ahead, so slow calls are
    fed by reads of several messages, not by one read per finished call.

    The read-ahead applies only while the stream is ``backlogged`` (the last read got
    all it asked for): a burst smaller than the fleet's free runs is spread over the
    workers as before, not taken by the first to read.

    Before any call was timed, a limit above one takes a message per free run (a slow
    processor's worker must not take a whole read its neighbours could share), and a
    limit of one takes a whole read, as one run.
    """
    unknown = mean_latency_s is None and limit > 1
    length = 1 if unknown else run_length(mean_latency_s, count)
    ahead = read_ahead(limit, count, mean_latency_s) if backlogged else 0  # 0 untimed
    room = min(count, (limit - running) * length + ahead - waiting)
    return room if room >= max(ahead, 1) else 0


__all__ = ["RUN_TARGET_S", "read_ahead", "room_for", "run_length"]
