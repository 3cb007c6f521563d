"""The adaptive in-flight limit, driven by a simulated service in discrete time.

:class:`Service` is a service of capacity K (calls served at once) and latency L per call,
either queueing the calls beyond K (first come, first served: latency grows with the queue)
or refusing them at once (a 429 with a ``Retry-After`` hold, during which the client starts
nothing). :func:`simulate` is a client that keeps as many calls in flight as the limit
allows (or as it has messages for) and reports each call to the limit as the consumer
does: ``on_sample`` with the call's latency and the calls in flight when it started,
``on_drop`` for a refusal. Everything runs on a simulated clock: the whole file takes
well under a second.
"""

from __future__ import annotations

import heapq
import itertools
import random
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from sentinel_platform.streams.consumer.calling.adaptive_limit import (
    CEILING_HOLD_S,
    PROBE_LIMIT,
    AdaptiveLimit,
    limit_for,
)
from sentinel_platform.streams.consumer.calling.concurrency_limit import FixedLimit, LimitChange


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Service:
    """Capacity ``capacity`` at once, ``latency()`` seconds each; beyond it ``queue`` or refuse."""

    capacity: int
    latency: Callable[[], float]
    queue: bool = True
    busy: int = 0
    waiting: deque[int] = field(default_factory=deque)


@dataclass
class Run:
    limits: list[tuple[float, int]]  # (time, limit) after every event
    completed: list[tuple[float, float]]  # (completion time, latency)
    drops: list[float]
    peak_busy: int

    def limits_between(self, start: float, end: float) -> list[int]:
        return [limit for t, limit in self.limits if start <= t < end]

    def rate(self, start: float, end: float) -> float:
        return sum(start <= t < end for t, _ in self.completed) / (end - start)

    def mean_latency(self, start: float, end: float) -> float:
        return statistics.mean(rtt for t, rtt in self.completed if start <= t < end)


def simulate(
    limit: AdaptiveLimit,
    clock: Clock,
    service: Service,
    duration_s: float,
    *,
    retry_after_s: float = 1.0,
    demand: int | None = None,
    events: dict[float, Callable[[Service], None]] | None = None,
    observe: Callable[[], None] = lambda: None,
    start_gap_s: float = 0.0,
) -> Run:
    """Drive ``limit`` against ``service`` for ``duration_s`` simulated seconds.

    ``start_gap_s``: calls start one at a time, that far apart (a worker's threads take
    their turns), so a refusal that comes back within it holds the calls not yet sent;
    0: every call the limit allows starts at the same instant."""
    heap: list[tuple[float, int, str, int]] = []
    seq = itertools.count()
    started: dict[int, tuple[float, int]] = {}  # call -> (start time, in flight at start)
    in_flight = 0
    held_until = next_start = 0.0
    run = Run([], [], [], 0)
    pending_events = sorted((events or {}).items())

    def admit(call: int) -> None:
        service.busy += 1
        run.peak_busy = max(run.peak_busy, service.busy)
        heapq.heappush(heap, (clock.now + service.latency(), next(seq), "done", call))

    while clock.now < duration_s:
        while pending_events and pending_events[0][0] <= clock.now:
            pending_events.pop(0)[1](service)
        room = limit.limit if demand is None else min(limit.limit, demand)
        while clock.now >= max(held_until, next_start) and in_flight < room:
            if start_gap_s:
                next_start = clock.now + start_gap_s
            call = next(seq)
            in_flight += 1
            started[call] = (clock.now, in_flight)
            if service.busy < service.capacity:
                admit(call)
            elif service.queue:
                service.waiting.append(call)
            else:
                heapq.heappush(heap, (clock.now + 0.001, next(seq), "drop", call))
        wakes = (held_until, next_start, *(t for t, _ in pending_events))
        wake = [t for t in wakes if t > clock.now]
        if not heap and not wake:
            break
        if wake and (not heap or min(wake) < heap[0][0]):
            clock.now = min(wake)
            continue
        clock.now, _, kind, call = heapq.heappop(heap)
        start, count = started.pop(call)
        in_flight -= 1
        if kind == "drop":
            limit.on_drop(count, clock.now - start)
            run.drops.append(clock.now)
            held_until = max(held_until, clock.now + retry_after_s)
        else:
            service.busy -= 1
            while service.waiting and service.busy < service.capacity:
                admit(service.waiting.popleft())
            limit.on_sample(clock.now - start, count)
            run.completed.append((clock.now, clock.now - start))
        run.limits.append((clock.now, limit.limit))
        observe()
    return run


def jitter(base_s: float, rng: random.Random, spread: float = 0.1) -> Callable[[], float]:
    return lambda: base_s * rng.uniform(1 - spread, 1 + spread)


def new_limit(
    initial: int = 8, maximum: int = 256, minimum: int = 1
) -> tuple[AdaptiveLimit, Clock]:
    clock = Clock()
    return AdaptiveLimit(initial=initial, maximum=maximum, minimum=minimum, clock=clock), clock


# --- convergence ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "latency_s", "initial", "band"),
    [
        (8, 0.1, 8, (8, 12)),  # the benchmark's K = 8, L = 100 ms
        (8, 0.1, 64, (8, 12)),  # starting far above the capacity
        (32, 0.1, 8, (32, 44)),
        (4, 0.1, 1, (4, 7)),
        (16, 2.0, 8, (16, 22)),  # a slow service: windows of seconds
    ],
)
def test_queueing_service_converges_just_above_its_capacity(
    capacity: int, latency_s: float, initial: int, band: tuple[int, int]
) -> None:
    """Enough calls to keep the service busy, few enough that the queue stays short: the
    limit settles in ``band`` (K up to about 1.4 K), the service runs at >= 0.9 K / L and
    a call waits in its queue less than half its latency on average."""
    limit, clock = new_limit(initial)
    rng = random.Random(1)
    duration = 600 * latency_s
    service = Service(capacity, jitter(latency_s, rng))
    run = simulate(limit, clock, service, duration)
    settled = run.limits_between(duration / 2, duration)
    low, high = band
    assert low <= statistics.median(settled) <= high, statistics.median(settled)
    assert run.rate(duration / 2, duration) >= 0.9 * capacity / latency_s
    assert run.mean_latency(duration / 2, duration) <= 1.5 * latency_s


def test_unlimited_service_grows_to_the_maximum_quickly() -> None:
    limit, clock = new_limit(8, maximum=256)
    service = Service(10_000, jitter(0.1, random.Random(2)))
    run = simulate(limit, clock, service, 10.0)
    reached = next(t for t, value in run.limits if value == 256)
    assert reached < 5.0, f"256 only after {reached:.1f} s"
    assert min(run.limits_between(reached, 10.0)) >= PROBE_LIMIT  # only probes dip


def test_capacity_cut_from_32_to_4_then_restored_is_followed() -> None:
    """A capacity cut mid-run, in a queueing service: the limit follows K down within a
    few round trips (no long queue) and back up once the capacity returns."""
    limit, clock = new_limit(8)
    service = Service(32, jitter(0.1, random.Random(3)))

    def cut(s: Service) -> None:
        s.capacity = 4

    def restore(s: Service) -> None:
        s.capacity = 32

    run = simulate(limit, clock, service, 60.0, events={20.0: cut, 40.0: restore})
    assert 32 <= statistics.median(run.limits_between(10, 20)) <= 44
    after_cut = run.limits_between(22, 40)
    assert 4 <= statistics.median(after_cut) <= 7, statistics.median(after_cut)
    assert max(after_cut) <= 10
    assert 32 <= statistics.median(run.limits_between(50, 60)) <= 44


def test_refusing_service_holds_the_limit_at_its_capacity_with_rare_refusals() -> None:
    """K = 8 answering 429 + ``Retry-After: 1`` beyond it: each refusal costs the whole
    hold, so after the first the limit sits at K and probes one above only once per
    ``CEILING_HOLD_S``: throughput stays >= 0.8 K / L."""
    limit, clock = new_limit(32)
    service = Service(8, jitter(0.1, random.Random(4)), queue=False)
    run = simulate(limit, clock, service, 120.0, retry_after_s=1.0)
    assert run.peak_busy <= 8
    late_drops = [t for t in run.drops if t >= 20.0]
    # At most one refusal burst per hold period (a burst is refusals within 0.1 s).
    bursts = len([t for i, t in enumerate(late_drops) if i == 0 or t - late_drops[i - 1] > 0.1])
    assert bursts <= 100 / CEILING_HOLD_S + 1, bursts
    assert run.rate(20, 120) >= 0.8 * 8 / 0.1
    assert statistics.median(run.limits_between(20, 120)) == 8


@pytest.mark.parametrize("start_gap_s", [0.0, 0.0005])
def test_capacity_cut_in_a_refusing_service_cuts_the_limit_at_once(start_gap_s: float) -> None:
    """A refusal holds every call for its ``Retry-After``, so after the cut each round
    sends only what got out before the first refusal came back: with the calls started
    0.5 ms apart, two or three. Cut by them alone the limit fell 10% a round (32 to 4 in
    20 s of holds, the drain near nothing meanwhile); refused again at the level its last
    cut left, it halves."""
    limit, clock = new_limit(8)
    service = Service(32, jitter(0.1, random.Random(5)), queue=False)

    def cut(s: Service) -> None:
        s.capacity = 4

    run = simulate(
        limit,
        clock,
        service,
        60.0,
        retry_after_s=1.0,
        events={20.0: cut},
        start_gap_s=start_gap_s,
    )
    assert max(run.limits_between(26.0, 60.0)) <= 5
    assert statistics.median(run.limits_between(30.0, 60.0)) == 4


# --- tiny and noisy latencies ---------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_noisy_sub_millisecond_calls_never_cut_the_limit(seed: int) -> None:
    """A CPU-bound processor: 10 us to 1.5 ms per call, 3% of them 20 ms (a pause),
    unbounded capacity. 20 us against 40 us is no queue: the limit is never cut."""
    rng = random.Random(seed)

    def latency() -> float:
        return 0.02 if rng.random() < 0.03 else rng.uniform(0.00001, 0.0015)

    limit, clock = new_limit(8, maximum=32)
    run = simulate(limit, clock, Service(10_000, latency), 1.5)
    assert min(value for _, value in run.limits) == PROBE_LIMIT  # the first probe
    grown = next(t for t, value in run.limits if value == 32)
    assert min(run.limits_between(grown, 1.5)) == 32


def test_sub_millisecond_latency_that_grows_with_load_is_not_queueing() -> None:
    """20 us per call, served one at a time (a CPU-bound processor behind one lock): 24 in
    flight wait about 0.5 ms, 24x the latency of one, and still below the floor: no cut."""
    limit, clock = new_limit(8, maximum=24)
    run = simulate(limit, clock, Service(1, lambda: 0.00002), 1.0)
    grown = next(t for t, value in run.limits if value == 24)
    assert run.mean_latency(grown + 0.01, 1.0) > 12 * 0.00002  # the queue is there
    assert min(run.limits_between(grown, 1.0)) == 24


@pytest.mark.parametrize(("latency_s", "instant"), [(0.00005, True), (0.005, False)])
def test_instant_tells_cpu_bound_calls_from_waiting_ones(latency_s: float, instant: bool) -> None:
    limit, clock = new_limit(8)
    assert not limit.instant  # nothing measured yet
    simulate(limit, clock, Service(1000, lambda: latency_s), 0.5, demand=2)
    assert limit.instant is instant


def test_app_limited_worker_does_not_grow_the_limit() -> None:
    """Two messages at a time to give: no window says anything about the capacity."""
    limit, clock = new_limit(8)
    run = simulate(limit, clock, Service(1000, lambda: 0.05), 20.0, demand=2)
    assert {value for t, value in run.limits if t > 1.0} <= {8, PROBE_LIMIT}


def test_sub_millisecond_calls_that_stay_fast_keep_the_initial_limit_when_app_limited() -> None:
    limit, clock = new_limit(8)
    rng = random.Random(9)
    simulate(limit, clock, Service(1000, lambda: rng.uniform(1e-5, 4e-5)), 0.5, demand=1)
    assert limit.limit == 8


# --- bounds and drops -----------------------------------------------------------------------


def test_limit_respects_maximum_and_minimum() -> None:
    high, clock = new_limit(8, maximum=20)
    simulate(high, clock, Service(10_000, lambda: 0.05), 10.0)
    assert high.limit == 20
    low, clock = new_limit(4, minimum=3)
    run = simulate(low, clock, Service(1, lambda: 0.05), 20.0)  # queueing at every level
    assert min(value for _, value in run.limits) == 3


@pytest.mark.parametrize(
    ("drops", "expected"),
    [
        (1, 28),  # one refusal: at least the factor, 0.9 x 32 = 28.8
        (5, 27),  # a burst cuts by the calls refused in it: 32 - 5
        (3, 28),  # a few refusals: at least the factor
        (10, 22),
        (28, 4),  # 28 of 32 refused: the capacity fell to 4, and the count says so
    ],
)
def test_a_burst_of_drops_cuts_by_its_refusals_between_the_factor_and_half(
    drops: int, expected: int
) -> None:
    """Refusals until the next window closes are one burst (a ``Retry-After`` hold stops
    every call, so no window closes during it): the limit loses one per call refused,
    at least ``DROP_FACTOR`` of it; with fewer than ``COLLAPSE_DROPS`` refusals at most
    half. The cut is proportional to what the worker sent beyond the service's capacity,
    so workers sharing a service lose in proportion to their shares (what makes their
    shares converge), and a collapse of the capacity is followed in one burst."""
    limit, _ = settled_limit(32)
    for _ in range(drops):
        limit.on_drop(32, 0.002)
    assert limit.limit == expected


def test_a_drop_never_cuts_below_the_minimum() -> None:
    limit, _ = settled_limit(1)
    limit.on_drop(1, 0.002)
    assert limit.limit == 1


@pytest.mark.parametrize("told", ["drop", "hold"])
def test_a_refusal_during_a_probe_ends_the_probe_at_or_below_its_level(told: str) -> None:
    """A probe pins the limit to 3; a refusal then (of this worker's call, or of another
    worker's, which holds the fleet) says the service did not take 3 more of ours: the
    probe ends at 2 (a drop) or 3 (a hold), not back at the 32 it interrupted. Three
    workers starting together against K = 8 otherwise each return to 8 after their first
    probe, and the fleet spends its first seconds in one hold after another."""
    limit, clock = new_limit(32)
    assert limit.probing and limit.limit == PROBE_LIMIT
    limit.on_drop(PROBE_LIMIT, 0.002) if told == "drop" else limit.on_hold()
    for _ in range(10):
        clock.now += 0.1
        limit.on_sample(0.1, 1)
    assert not limit.probing
    assert limit.limit == (PROBE_LIMIT - 1 if told == "drop" else PROBE_LIMIT)


@pytest.mark.parametrize(
    ("settled", "first", "refused", "expected"),
    [
        (32, 2, [5, 6, 7, 8, 9], 14),  # a burst of its own: halved from 28
        (6, 1, [5], 4),  # halved, but not below the 4 the service held of ours
    ],
)
def test_a_round_refused_after_the_hold_is_a_burst_of_its_own(
    settled: int, first: int, refused: list[int], expected: int
) -> None:
    """Seen on a real worker: a collapse, a first burst, the 1 s hold, then the round
    sent after it: 4 answered (too few to close a window), the rest refused. Those went
    out after the first cut, so it was not enough: they are a burst of their own and
    halve the limit (counted in the first burst they cut nothing, and the limit came
    down one hold in two), though never below the calls of ours the service held when
    it refused (the refused call's ``in_flight`` less itself)."""
    limit, clock = settled_limit(settled)
    for _ in range(first):
        limit.on_drop(settled, 0.002)
    assert limit.limit == int(settled * 0.9)
    clock.now += 1.0  # the Retry-After hold
    for _ in range(4):
        limit.on_sample(0.05, 4)
    clock.now += 0.05
    for in_flight in refused:
        limit.on_drop(in_flight, 0.002)
    assert limit.limit == expected


def test_timeouts_of_calls_sent_before_the_burst_are_one_burst() -> None:
    """Timeouts come back spread over time, each a call sent long before: all were sent
    at the level in force when the burst began, so they are one burst, cut once."""
    limit, clock = settled_limit(32)
    for _ in range(3):
        limit.on_drop(32, 30.0)
        clock.now += 0.5
    assert limit.limit == 28


def test_a_hold_caused_by_another_worker_stops_growth_for_the_ceiling_hold() -> None:
    """``on_hold``: another worker was refused. No cut, but no growth above the level in
    force until ``CEILING_HOLD_S`` has passed, then one above it."""
    limit, clock = settled_limit(8)
    limit.on_hold()
    assert limit.limit == 8
    grown_at = None
    while clock.now < 2 * CEILING_HOLD_S and grown_at is None:
        clock.now += 0.1
        limit.on_sample(0.1, limit.limit)
        if limit.limit > 8:
            grown_at = clock.now
    assert grown_at is not None and grown_at >= CEILING_HOLD_S, grown_at


def settled_limit(value: int) -> tuple[AdaptiveLimit, Clock]:
    """A limit of ``value`` whose no-load latency (100 ms) was measured."""
    limit, clock = new_limit(value)
    for _ in range(10):
        clock.now += 0.1
        limit.on_sample(0.1, 1)
    assert not limit.probing and limit.limit == value and limit.noload_s == pytest.approx(0.1)
    return limit, clock


# --- reporting, fixed limits, construction --------------------------------------------------


def test_changes_are_reported_at_most_once_per_interval() -> None:
    """Asked after every call, :meth:`AdaptiveLimit.change` answers at most once per
    ``log_interval_s`` (10 s) although the limit moves far more often."""
    limit, clock = new_limit(8)
    changes: list[tuple[float, LimitChange]] = []

    def ask() -> None:
        if change := limit.change():
            changes.append((clock.now, change))

    service = Service(64, jitter(0.1, random.Random(6)))
    run = simulate(limit, clock, service, 45.0, observe=ask)
    moves = sum(a != b for (_, a), (_, b) in itertools.pairwise(run.limits))
    assert moves > 20
    times = [t for t, _ in changes]
    assert 2 <= len(changes) <= 5
    assert all(b - a >= 10.0 for a, b in itertools.pairwise(times))
    assert changes[0][1].previous == 8
    assert all(a.limit == b.previous for (_, a), (_, b) in itertools.pairwise(changes))


def test_a_probe_pins_the_limit_but_not_the_steady_limit_nor_the_changes() -> None:
    """While the no-load latency is measured again, calls are held to 3, but the figure
    a worker publishes and logs stays the limit the probe interrupted."""
    limit, clock = new_limit(8, maximum=32)
    run = simulate(limit, clock, Service(10_000, lambda: 0.1), 35.0)
    assert any(value == PROBE_LIMIT for t, value in run.limits if t > 30.0)  # re-probed
    while not limit.probing:  # run until the next probe (every 30 s at 100 ms)
        clock.now += 0.1
        limit.on_sample(0.1, limit.limit)
    assert limit.limit == PROBE_LIMIT and limit.steady_limit == 32
    clock.now += 60.0
    change = limit.change()
    assert change is not None and change.limit == 32


def test_fixed_limit_never_moves() -> None:
    fixed = FixedLimit(5)
    fixed.on_sample(10.0, 5)
    fixed.on_drop(5, 0.002)
    assert (fixed.limit, fixed.steady_limit, fixed.change()) == (5, 5, None)
    with pytest.raises(ValueError, match="at least 1"):
        FixedLimit(0)


@pytest.mark.parametrize(
    ("initial", "maximum", "minimum", "message"),
    [
        (0, 8, 1, "outside"),
        (9, 8, 1, "outside"),
        (4, 8, 0, "minimum"),
        (4, 2, 3, "minimum"),
    ],
)
def test_bad_bounds_are_refused(initial: int, maximum: int, minimum: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdaptiveLimit(initial=initial, maximum=maximum, minimum=minimum)


def test_limit_for_pins_or_adapts() -> None:
    assert isinstance(limit_for(12, 256), FixedLimit) and limit_for(12, 256).limit == 12
    adaptive = limit_for(None, 4)
    assert isinstance(adaptive, AdaptiveLimit) and adaptive.maximum == 4


# --- a fleet sharing one refusing service ---------------------------------------------------


def simulate_fleet(
    limits: list[AdaptiveLimit],
    clock: Clock,
    service: Service,
    duration_s: float,
    rng: random.Random,
) -> tuple[list[list[float]], list[float]]:
    """Clients sharing ``service`` (refusing beyond its capacity) and one ``Retry-After: 1``
    hold, as the workers of a fleet share the analyzer's hold through Redis: the refused
    client reports ``on_drop``; every other client that has a call to start while the
    fleet is held reports ``on_hold`` (the call was never sent). Returns each client's
    completion times and the times of the refusals."""
    heap: list[tuple[float, int, str, int, int]] = []  # (time, seq, kind, client, call)
    seq = itertools.count()
    started: dict[int, int] = {}  # call -> in flight at its start
    in_flight = [0] * len(limits)
    completed: list[list[float]] = [[] for _ in limits]
    drops: list[float] = []
    held_until = 0.0
    while clock.now < duration_s:
        # Calls of all the workers reach the service interleaved, in no fixed order.
        starts = [c for c in range(len(limits)) for _ in range(limits[c].limit - in_flight[c])]
        rng.shuffle(starts)
        for client in starts:
            if clock.now < held_until:
                limits[client].on_hold()
                continue
            call = next(seq)
            in_flight[client] += 1
            started[call] = in_flight[client]
            if service.busy < service.capacity:
                service.busy += 1
                heapq.heappush(heap, (clock.now + service.latency(), call, "done", client, call))
            else:
                heapq.heappush(heap, (clock.now + 0.001, call, "drop", client, call))
        wake = held_until if held_until > clock.now else None
        if wake is not None and (not heap or wake < heap[0][0]):
            clock.now = wake
            continue
        clock.now, _, kind, client, call = heapq.heappop(heap)
        count = started.pop(call)
        in_flight[client] -= 1
        if kind == "drop":
            limits[client].on_drop(count, 0.001)  # refused 1 ms after it started
            drops.append(clock.now)
            held_until = max(held_until, clock.now + 1.0)
        else:
            service.busy -= 1
            limits[client].on_sample(0.1, count)
            completed[client].append(clock.now)
        next(seq)
    return completed, drops


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_sharing_a_refusing_service_get_fair_shares_of_its_capacity(workers: int) -> None:
    """K = 8 answering 429 + ``Retry-After: 1`` beyond it, shared by several workers whose
    limits each start at the default: a refusal holds the whole fleet, and a worker that
    meets the hold (``on_hold``) stops growing as the refused one does. Without that, the
    workers that are never refused keep growing, each refusal costs the fleet a second,
    and the shares drift apart (this model, before: 0.72x K / L, one worker 6x another;
    the benchmark measured 0.51x and 4.3x). Ten runs: every one >= 0.8x K / L together,
    the typical (median) spread within 2x, none beyond 3.5x (shares of two or three calls
    are coarse: a share of 2 beside one of 3 is already 1.5x)."""
    spreads = []
    for seed in range(10):
        clock = Clock()
        limits = [AdaptiveLimit(initial=8, maximum=256, clock=clock) for _ in range(workers)]
        service = Service(8, jitter(0.1, random.Random(seed)), queue=False)
        completed, _ = simulate_fleet(limits, clock, service, 200.0, random.Random(seed))
        rates = [sum(t >= 40.0 for t in done) / 160.0 for done in completed]
        assert sum(rates) >= 0.8 * 8 / 0.1, (seed, rates)
        spreads.append(max(rates) / min(rates))
    assert statistics.median(spreads) <= 2.0, spreads
    assert max(spreads) <= 3.5, spreads
