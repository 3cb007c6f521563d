"""The processor calls one worker has in flight: at most ``limit`` at once, on threads.

Every message due for a call goes through :class:`Calls`, whatever the concurrency: one
call at a time is a limit of one, not a second code path. The loop submits what a batch
needs, collects outcomes, and asks how many more messages it may take (:meth:`Calls.room`).

* **Runs.** A job is a *run*: messages called one after another by one thread. At most
  ``limit`` runs are in flight; the rest of what the worker holds waits in a backlog. A
  run hands back what it has not started once it has run for :data:`RUN_TARGET_S`, and new
  runs are cut to about that long from the calls' measured latency (``intake.run_length``):
  a processor that answers in microseconds (the rules, a no-op) has a whole batch called
  in one run, one hand-off per batch; a slow one (an analyzer call) has runs of one, so
  ``limit`` calls run side by side. The limit thus counts calls at once for slow calls.
* **Read-ahead.** A worker with slow calls holds half its limit beyond its runs while
  the stream has more than it reads, and reads again only once that has run out
  (``intake.room_for``): a read and its triage then serve many finished calls, not one
  each. The holding it publishes counts it (:meth:`Calls.capacity`).
* **Copies.** Copies of a natural key wait for the first's outcome: they share its effect
  (the commit acknowledges them as duplicates) or, if it did not commit, get calls of
  their own. One paid call per key on this worker.
* **Busy.** A call that raises :class:`~sentinel_platform.streams.consumer.processor.Busy`
  is *parked*: kept in hand and pending on this worker, with no outcome, no delivery
  counted and no error recorded; it is called again once its delay has passed
  (``Retry-After`` when the downstream said, else a doubling backoff, a guess of ours
  that the next answered call ends: the downstream is back), and the limit is told:
  ``on_drop`` when the downstream refused this call (fewer calls go out), ``on_hold``
  when the fleet is held because it refused another worker's (no more go out). A parked
  message is in no call, so the hang watchdog does not count its wait.
* **Stop.** A run stops between two calls once the worker is asked to stop;
  :meth:`Calls.take_back` returns everything not in a call, :meth:`Calls.settle_running`
  lets the calls in progress finish until a deadline.

Calls that measure under :data:`INLINE_BELOW_S` each (CPU-bound: the rules, a no-op) run
on the consumer's own thread, the same runs without the hand-off. Other threads are
started as the limit first needs them (never more than ``max_threads``) and
are owned here: each catches everything its job raises, so a thread never dies silently.
A call that raises a ``BaseException`` that is not an ``Exception`` (a plug-in calling
``sys.exit``, a stray ``KeyboardInterrupt``) becomes the outcome ``aborted`` gives it (a
failure: logged with its traceback, retried, dead-lettered at the delivery limit), so the
threads never shrink and no message is stranded.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sentinel_platform.streams.consumer.calling.concurrency_limit import ConcurrencyLimit
from sentinel_platform.streams.consumer.calling.intake import (
    RUN_TARGET_S,
    read_ahead,
    room_for,
    run_length,
)
from sentinel_platform.streams.consumer.calling.processor_call import operator_interrupt
from sentinel_platform.streams.consumer.outcomes import Commit, Outcome, Prepared, is_sample
from sentinel_platform.streams.consumer.processor import Busy, take_turn_wait

#: Calls faster than this on average run on the consumer's own thread (``Calls._inline``).
INLINE_BELOW_S = 0.0005
#: Weight of the newest latency in the mean that sizes runs.
LATENCY_WEIGHT = 0.2
#: A busy downstream that gave no delay is asked again after this, doubling to the cap.
BUSY_BACKOFF_START_S = 0.1
BUSY_BACKOFF_CAP_S = 5.0

Call = Callable[[Prepared], Outcome]
Aborted = Callable[[Prepared, BaseException], Outcome]


@dataclass(slots=True)
class Finished:
    """What one message's call came to, with the call's wall time."""

    prepared: Prepared
    outcome: Outcome | None  # None: busy, parked for a later call
    seconds: float
    retry_after_s: float | None = None
    #: a busy answer from the downstream itself (not a hold or a local wait)
    sent: bool = True
    #: not sent because another caller was refused (the fleet's hold)
    shared_refusal: bool = False


@dataclass(slots=True)
class RunResult:
    """A run's calls, and what it handed back unstarted (a stop, or its time was up)."""

    finished: list[Finished] = field(default_factory=list)
    rest: list[Prepared] = field(default_factory=list)
    #: runs in flight when this one started, itself included (the limit's samples)
    in_flight: int = 1


class Calls:
    """The calls in flight for one consumer. Every method is called from the consumer's
    own thread (one owner, so no lock guards the bookkeeping); only the runs are not."""

    def __init__(
        self,
        call: Call,
        aborted: Aborted,
        limit: ConcurrencyLimit,
        max_threads: int,
        stop: threading.Event,
        on_busy: Callable[[Prepared, float], None],
    ) -> None:
        self._call = call
        self._aborted = aborted
        self.limit = limit
        self._max_threads = max_threads
        self._stop = stop
        self._on_busy = on_busy
        self._jobs: queue.SimpleQueue[tuple[list[Prepared], int] | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[RunResult] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._running = 0  # runs queued for or taken by a thread, not yet collected
        self._in_runs: dict[str, Prepared] = {}  # messages of those runs, by message id
        self._backlog: deque[Prepared] = deque()  # due for a call, waiting for a run
        self._followers: dict[str, list[Prepared]] = {}  # per key in flight: its copies
        self._parked: dict[str, tuple[float, Prepared]] = {}  # busy: (due, prepared)
        self._guessed: set[str] = set()  # parked on our own backoff, not a delay given
        self._mean_latency_s: float | None = None
        self._busy_backoff_s = BUSY_BACKOFF_START_S
        #: :meth:`held` as of the loop's last change, for :meth:`capacity` on any thread
        self._held_now = 0

    # --- what the loop asks -----------------------------------------------------------------
    def room(self, count: int, backlogged: bool) -> int:
        """How many more messages may be taken now (read or recovered), at most ``count``
        (``intake.room_for``; ``backlogged``: the last read got all it asked for)."""
        waiting = len(self._backlog) + len(self._parked)  # each will need a run
        latency = self._mean_latency_s
        return room_for(self.limit.limit, self._running, waiting, count, latency, backlogged)

    @property
    def running(self) -> int:
        """Runs in flight: the loop has something to collect."""
        return self._running

    def held(self) -> int:
        """Messages in hand: in a run, waiting for one, waiting on a copy's call, parked."""
        copies = sum(len(c) for c in self._followers.values())
        return len(self._in_runs) + len(self._backlog) + copies + len(self._parked)

    def keys_in_hand(self) -> set[str]:
        """The natural keys with a call in flight, waiting or parked."""
        return set(self._followers)

    def in_hand_ids(self) -> set[str]:
        ids = set(self._in_runs) | set(self._parked)
        ids |= {p.delivery.id for p in self._backlog}
        ids |= {p.delivery.id for copies in self._followers.values() for p in copies}
        return ids

    def capacity(self, count: int) -> int:
        """What this worker may hold at the limit in force (its steady level, not a probe's
        dip): runs x the current run length, which for slow calls is the limit and its
        read-ahead; a fast processor's runs are batches of up to ``count`` (the read size),
        and it never holds more than the larger of the two. Never less than what it holds
        now: after a cut (a collapse of 32 to 1 on a burst of 429s) the messages it read
        before wait parked in its hand, pending on it, and a figure below them would have
        the fleet's zones read its own hand as pressure. Safe from any thread: it reads
        plain numbers the loop keeps."""
        steady = self.limit.steady_limit
        held = min(steady * run_length(self._mean_latency_s, count), max(steady, count))
        return max(held + read_ahead(steady, count, self._mean_latency_s), self._held_now)

    def next_due_in(self, now: float) -> float | None:
        """Seconds until the first parked message is due again, or None."""
        if not self._parked:
            return None
        return max(0.0, min(due for due, _ in self._parked.values()) - now)

    # --- submitting and collecting ----------------------------------------------------------
    def submit(self, due: Sequence[Prepared]) -> None:
        """Queue calls for ``due``; copies of a key in flight wait for its outcome."""
        for prepared in due:
            key = prepared.natural_key
            if key in self._followers:
                self._followers[key].append(prepared)
            else:
                self._followers[key] = []
                self._backlog.append(prepared)
        self._dispatch()

    def resubmit_due(self, now: float) -> None:
        """Parked messages whose delay has passed get their call again."""
        ready = [p for due, p in self._parked.values() if due <= now]
        for prepared in ready:
            del self._parked[prepared.delivery.id]
            self._guessed.discard(prepared.delivery.id)
        self._backlog.extend(ready)
        self._dispatch()

    def collect(self, wait_s: float = 0.0) -> list[Outcome]:
        """Outcomes of finished calls (and of the copies they settle); waits up to
        ``wait_s`` for a finished run when none is ready. Starts the next runs."""
        outcomes: list[Outcome] = []
        for result in self._finished_runs(wait_s):
            self._running -= 1
            timed: list[float] = []  # every call that was not busy: sizes the runs
            samples: list[float] = []  # those the limit may learn from (``is_sample``)
            for finished in result.finished:
                settled = self._settle(finished, result.in_flight, outcomes)
                if settled is not None:
                    timed.append(finished.seconds)
                    if is_sample(settled):
                        samples.append(finished.seconds)
            if timed:  # one sample per run: its calls' mean (a slow call's run is one)
                self._learn(timed, samples, result.in_flight)
            for prepared in result.rest:
                self._in_runs.pop(prepared.delivery.id, None)
            self._backlog.extendleft(reversed(result.rest))
        if not self._stop.is_set():
            self._start_runs()
        self._held_now = self.held()
        return outcomes

    def collect_until(self, deadline: float) -> list[Outcome]:
        """:meth:`collect` until no run is in flight or ``deadline`` (monotonic) passes."""
        outcomes = self.collect()
        while self._running and (left := deadline - time.monotonic()) > 0:
            outcomes += self.collect(left)
        return outcomes

    def _settle(
        self, finished: Finished, in_flight: int, outcomes: list[Outcome]
    ) -> Outcome | None:
        """One call's outcome to ``outcomes`` (and its copies'), and that outcome; None:
        it was busy."""
        prepared = finished.prepared
        self._in_runs.pop(prepared.delivery.id, None)
        if finished.outcome is None:
            if finished.sent:  # the downstream's own answer: its capacity is below ours
                self.limit.on_drop(in_flight, finished.seconds)
            elif finished.shared_refusal:  # another worker was refused: grow no further
                self.limit.on_hold()
            self._park(prepared, finished.retry_after_s)
            return None
        outcomes.append(finished.outcome)
        copies = self._followers.pop(prepared.natural_key, [])
        if isinstance(finished.outcome, Commit):
            effect = finished.outcome.effect
            outcomes.extend(Commit(c.delivery, c.natural_key, effect) for c in copies)
        elif copies:
            self.submit(copies)
        return finished.outcome

    def _learn(self, timed: list[float], samples: list[float], in_flight: int) -> None:
        """A run's calls came back: their mean sizes the next runs (what the calls take,
        fallbacks included); the mean of its ``samples`` alone is the limit's sample, so
        a run of instant fallbacks teaches the limit nothing (``is_sample``)."""
        seconds = sum(timed) / len(timed)
        mean = self._mean_latency_s
        self._mean_latency_s = seconds if mean is None else mean + LATENCY_WEIGHT * (seconds - mean)
        if samples:
            self.limit.on_sample(sum(samples) / len(samples), in_flight)
            self._wake_guessed()
        self._busy_backoff_s = BUSY_BACKOFF_START_S

    def _wake_guessed(self) -> None:
        """The downstream answered: what waits on our own backoff is called now. Through
        an outage that backoff doubles to :data:`BUSY_BACKOFF_CAP_S`; waited out, a worker
        made no call for seconds after the service was back. A delay the downstream gave
        is kept (it said when)."""
        for message_id in self._guessed:
            _due, prepared = self._parked.pop(message_id)
            self._backlog.append(prepared)
        self._guessed.clear()

    def _park(self, prepared: Prepared, retry_after_s: float | None) -> None:
        """Busy: call again later; the key stays in flight, so its copies keep waiting."""
        if retry_after_s is None:
            retry_after_s = self._busy_backoff_s
            self._busy_backoff_s = min(self._busy_backoff_s * 2, BUSY_BACKOFF_CAP_S)
            self._guessed.add(prepared.delivery.id)
        self._parked[prepared.delivery.id] = (time.monotonic() + retry_after_s, prepared)
        self._on_busy(prepared, retry_after_s)

    def _finished_runs(self, wait_s: float) -> list[RunResult]:
        out: list[RunResult] = []
        try:
            out.append(self._done.get(timeout=wait_s) if wait_s > 0 else self._done.get_nowait())
        except queue.Empty:
            return out
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def _dispatch(self) -> None:
        """Start runs from the backlog while the limit allows, threads as needed; none
        once the worker is asked to stop."""
        self._start_runs()
        self._held_now = self.held()

    def _start_runs(self) -> None:
        while self._backlog and self._running < self.limit.limit and not self._stop.is_set():
            free = self.limit.limit - self._running
            length = run_length(self._mean_latency_s, len(self._backlog), free)
            run = [self._backlog.popleft() for _ in range(length)]
            for prepared in run:
                self._in_runs[prepared.delivery.id] = prepared
            self._running += 1
            if self._inline():
                self._done.put(self._run(run, self._running))
                continue
            self._jobs.put((run, self._running))
            if len(self._threads) < min(self._running, self._max_threads):
                thread = threading.Thread(
                    target=self._serve, name=f"call-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()

    def _inline(self) -> bool:
        """Run on the loop's own thread: the calls are CPU-bound (measured below
        :data:`INLINE_BELOW_S` each), so another thread cannot make them faster, and the
        hand-off to it costs more than the calls (the no-op: 17 us a message instead of
        14). A run is cut at :data:`RUN_TARGET_S`, so the loop is never held much longer."""
        mean = self._mean_latency_s
        return mean is not None and mean < INLINE_BELOW_S

    # --- the threads ----------------------------------------------------------------------
    def _serve(self) -> None:
        """One thread: runs jobs until told to end. Nothing a call raises escapes."""
        while (job := self._jobs.get()) is not None:
            run, in_flight = job
            self._done.put(self._run(run, in_flight))

    def _run(self, run: list[Prepared], in_flight: int) -> RunResult:
        result = RunResult(in_flight=in_flight)
        started = time.perf_counter()
        for index, prepared in enumerate(run):
            # A stop (or a name lost to another process) starts no call, not even a first.
            if self._stop.is_set() or (index and time.perf_counter() - started > RUN_TARGET_S):
                result.rest = run[index:]
                break
            result.finished.append(self._one(prepared))
        return result

    def _one(self, prepared: Prepared) -> Finished:
        """One call, timed without the time it waited for its turn (``waited_for_turn``)."""
        started = time.perf_counter()  # no wait is left over: each call takes its own
        try:
            outcome = self._call(prepared)
        except Busy as busy:
            seconds = time.perf_counter() - started - take_turn_wait()
            return Finished(
                prepared, None, seconds, busy.retry_after_s, busy.sent, busy.shared_refusal
            )
        except BaseException as exc:  # SystemExit, KeyboardInterrupt: never a silent death
            if operator_interrupt(exc):  # an inline call on the main thread: Ctrl-C stops
                raise
            outcome = self._aborted(prepared, exc)
        return Finished(prepared, outcome, time.perf_counter() - started - take_turn_wait())

    # --- stopping -------------------------------------------------------------------------
    def take_back(self) -> list[Prepared]:
        """Everything in hand but the calls in progress: the backlog, the parked messages,
        the copies waiting on a call; to be handed back (a stop)."""
        back = list(self._backlog)
        self._backlog.clear()
        back += [p for _due, p in self._parked.values()]
        self._parked.clear()
        self._guessed.clear()
        back += [p for copies in self._followers.values() for p in copies]
        self._followers = {key: [] for key in self._followers}
        self._held_now = self.held()
        return back

    def settle_running(self, deadline: float) -> tuple[list[Outcome], list[Prepared]]:
        """On stop: the calls in progress may finish until ``deadline``; their outcomes,
        and every message still in hand then (to hand back). The threads then end."""
        outcomes = self.collect_until(deadline)
        back = self.take_back() + list(self._in_runs.values())
        self._in_runs.clear()
        for _ in self._threads:
            self._jobs.put(None)
        return outcomes, back


__all__ = ["Calls", "Finished", "RunResult"]
