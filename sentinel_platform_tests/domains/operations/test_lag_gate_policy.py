"""The lag gate's decisions, from tables of cases: no Redis, no Dagster, just state in, state
and actions out."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sentinel_platform.domains.operations.lag_gate import lag_card
from sentinel_platform.domains.operations.lag_gate_policy import (
    PAUSE_FLAG_TTL_S,
    ClearPauseFlag,
    LagCard,
    Launch,
    Observation,
    PauseMove,
    RecordObservation,
    SetPauseFlag,
    SpikeAlert,
    ZoneAlert,
    episode_to_resume,
    new_episode,
    pause_move,
    spike_alerted,
    step,
    zone_alert,
)
from sentinel_platform.domains.operations.lag_gate_state import GateState
from sentinel_platform.domains.operations.lag_verdict import evaluate_lag
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.backlog.lag import LagReading, Zone
from sentinel_platform.streams.backlog.peaks import Peaks
from sentinel_platform.streams.operators.group_view import LagSnapshot
from sentinel_platform_tests.harness.gate_states import EPISODE, paused

WALL_MS = 1_767_960_000_000
FLAG = f"sensor:backpressure:{EPISODE}"
LAG_OF: dict[Zone, int] = {"nominal": 1, "elevated": 6, "backpressure": 12, "worker_off": 3}


def card(zone: Zone = "nominal", **changes: Any) -> LagCard:
    lag = changes.pop("lag", LAG_OF[zone])
    base = LagCard(
        zone=zone,
        lag=lag,
        lag_peak=lag,
        peak_zone=zone,
        blocks=zone in ("backpressure", "worker_off"),
        figures=f"{zone}:{lag}",
    )
    return replace(base, **changes)


def seen(zone: Zone = "nominal", **changes: Any) -> Observation:
    """An observation of the ``transactions`` stream, publishing, nothing due."""
    base = Observation(
        stream="transactions",
        card=card(zone, **changes.pop("card", {})),
        now_s=1000.0,
        wall_ms=WALL_MS,
        record_every_s=300,
        publishes=True,
    )
    return replace(base, **changes)


def calm(**changes: Any) -> GateState:
    """Nominal, not paused, with the nominal figures already recorded."""
    base = GateState(zone="nominal", last_due="2026-01-09", observed="nominal:1", observed_at=990.0)
    return replace(base, **changes)


def of(kind: type, actions: list[Any]) -> list[Any]:
    return [a for a in actions if isinstance(a, kind)]


def resume_key(partition: str, episode: str = EPISODE) -> str:
    return f"resume:transactions:{partition}:{episode}"


STEP_CASES = [
    pytest.param(
        calm(),
        seen("backpressure"),
        {
            "flag": [SetPauseFlag(f"sensor:backpressure:{WALL_MS}", PAUSE_FLAG_TTL_S)],
            "launches": [],
            "alert": ("pause", f"pause:{WALL_MS}", "error"),
            "paused": True,
        },
        id="backpressure-starts-an-episode-named-by-the-wall-clock-and-sets-the-flag",
    ),
    pytest.param(
        calm(),
        seen("worker_off"),
        {
            "flag": [SetPauseFlag(f"sensor:worker_off:{WALL_MS}")],
            "launches": [],
            "alert": ("pause", f"pause:{WALL_MS}", "error"),
            "paused": True,
        },
        id="no-live-worker-pauses-like-backpressure",
    ),
    pytest.param(
        calm(zone="elevated", observed="elevated:6"),
        seen("elevated"),
        {"flag": [], "launches": [], "alert": None, "paused": False},
        id="elevated-alone-never-pauses",
    ),
    pytest.param(
        paused(),
        seen("backpressure", due="2026-01-10"),
        {
            "flag": [SetPauseFlag(FLAG)],
            "launches": [],
            "alert": None,
            "paused": True,
            "held": ("2026-01-10",),
        },
        id="partition-due-during-a-pause-is-held-not-launched",
    ),
    pytest.param(
        paused(held=("2026-01-10",), last_due="2026-01-10"),
        seen("backpressure", due="2026-01-10"),
        {
            "flag": [SetPauseFlag(FLAG)],
            "launches": [],
            "alert": None,
            "paused": True,
            "held": ("2026-01-10",),
        },
        id="held-partition-is-held-once",
    ),
    pytest.param(
        paused(),
        seen("elevated"),
        {
            "flag": [SetPauseFlag(f"sensor:elevated:{EPISODE}", PAUSE_FLAG_TTL_S)],
            "launches": [],
            "alert": (None, "zone:backpressure->elevated", "info"),
            "paused": True,
        },
        id="elevated-during-a-pause-keeps-it-and-refreshes-the-flag-ttl",
    ),
    pytest.param(
        paused(zone="elevated", held=("2026-01-10",)),
        seen("nominal", flag=f"sensor:elevated:{EPISODE}"),
        {
            "flag": [ClearPauseFlag(f"sensor:elevated:{EPISODE}")],
            "launches": [Launch("2026-01-10", resume_key("2026-01-10"), "resume")],
            "alert": ("resume", f"resume:{EPISODE}", "info"),
            "paused": False,
            "held": (),
            "relaunched": ("2026-01-10",),
        },
        id="only-nominal-ends-the-pause-and-relaunches-each-held-partition",
    ),
    pytest.param(
        paused(held=("2026-01-10",)),
        seen("nominal", flag=FLAG, failed=("2026-01-09", "2026-01-10")),
        {
            "flag": [ClearPauseFlag(FLAG)],
            "launches": [
                Launch("2026-01-09", resume_key("2026-01-09"), "resume"),
                Launch("2026-01-10", resume_key("2026-01-10"), "resume"),
            ],
            "alert": ("resume", f"resume:{EPISODE}", "info"),
            "paused": False,
            "relaunched": ("2026-01-09", "2026-01-10"),
        },
        id="publish-run-failed-during-the-pause-is-held-back-and-relaunched-once",
    ),
    pytest.param(
        paused(held=("2026-01-10",)),
        seen("nominal", flag=FLAG, materialised=frozenset({"2026-01-10"})),
        {
            "flag": [ClearPauseFlag(FLAG)],
            "launches": [],
            "alert": ("resume", f"resume:{EPISODE}", "info"),
            "paused": False,
            "relaunched": (),
        },
        id="held-partition-materialised-meanwhile-is-not-relaunched",
    ),
    pytest.param(
        paused(held=("2026-01-10",)),
        seen("nominal", flag=None),
        {
            "flag": [],
            "launches": [Launch("2026-01-10", resume_key("2026-01-10"), "resume")],
            "alert": ("resume", f"resume:{EPISODE}", "info"),
            "paused": False,
        },
        id="expired-flag-needs-no-clearing-but-the-pause-still-ends",
    ),
    pytest.param(
        paused(),
        seen("nominal", flag="operator"),
        {
            "flag": [],
            "launches": [],
            "alert": ("resume", f"resume:{EPISODE}", "info"),
            "paused": False,
        },
        id="operator-flag-is-never-cleared",
    ),
    pytest.param(
        calm(),
        seen("nominal", flag="operator"),
        {"flag": [], "launches": [], "alert": None, "paused": False},
        id="operator-flag-is-not-adopted",
    ),
    pytest.param(
        GateState(),
        seen("nominal", flag=FLAG),
        {
            "flag": [ClearPauseFlag(FLAG)],
            "launches": [],
            "alert": ("resume", f"resume:{EPISODE}", "info"),
            "paused": False,
            "episode": EPISODE,
        },
        id="lost-cursor-adopts-the-sensors-flag-and-ends-its-episode",
    ),
    pytest.param(
        GateState(),
        seen("backpressure", flag=FLAG),
        {
            "flag": [SetPauseFlag(FLAG)],
            "launches": [],
            "alert": (None, "zone:None->backpressure", "error"),
            "paused": True,
            "episode": EPISODE,
        },
        id="lost-cursor-continues-the-flags-episode-instead-of-starting-one",
    ),
    pytest.param(
        calm(),
        seen("nominal", due="2026-01-10"),
        {
            "flag": [],
            "launches": [Launch("2026-01-10", "publish:transactions:2026-01-10", "due")],
            "alert": None,
            "paused": False,
        },
        id="newly-due-partition-is-launched-outside-a-pause",
    ),
    pytest.param(
        calm(last_due="2026-01-10"),
        seen("nominal", due="2026-01-10"),
        {"flag": [], "launches": [], "alert": None, "paused": False},
        id="due-partition-is-launched-once",
    ),
    pytest.param(
        GateState(),
        seen("nominal", due="2026-01-10"),
        {"flag": [], "launches": [], "alert": None, "paused": False, "last_due": "2026-01-10"},
        id="fresh-gate-notes-the-due-partition-and-launches-nothing-unasked",
    ),
    pytest.param(
        GateState(last_due="2026-01-10", observed="nominal:1", observed_at=990.0),
        seen("nominal", due="2026-01-11"),
        {
            "flag": [],
            "launches": [Launch("2026-01-11", "publish:transactions:2026-01-11", "due")],
            "alert": None,
            "paused": False,
        },
        id="after-a-fresh-start-the-next-day-is-launched-when-it-comes-due",
    ),
    pytest.param(
        GateState(),
        seen("worker_off", due="2026-01-10"),
        {
            "flag": [SetPauseFlag(f"sensor:worker_off:{WALL_MS}")],
            "launches": [],
            "alert": ("pause", f"pause:{WALL_MS}", "error"),
            "paused": True,
            "held": (),
            "last_due": "2026-01-10",
        },
        id="fresh-gate-in-a-pause-holds-nothing-it-was-never-asked-to-publish",
    ),
    pytest.param(
        calm(),
        seen("nominal", due="2026-01-10", materialised=frozenset({"2026-01-10"})),
        {"flag": [], "launches": [], "alert": None, "paused": False},
        id="materialised-due-partition-is-not-launched",
    ),
    pytest.param(
        calm(),
        seen("nominal", due="2026-01-10", card={"blocks": True}),
        {"flag": [], "launches": [], "alert": None, "paused": False, "held": ("2026-01-10",)},
        id="failing-blocking-check-holds-the-due-partition",
    ),
    pytest.param(
        paused(held=("2026-01-10",)),
        seen("nominal", flag=FLAG, due="2026-01-10"),
        {
            "flag": [ClearPauseFlag(FLAG)],
            "launches": [Launch("2026-01-10", resume_key("2026-01-10"), "resume")],
            "alert": ("resume", f"resume:{EPISODE}", "info"),
            "paused": False,
        },
        id="partition-due-on-the-resume-tick-is-launched-once-as-a-resume",
    ),
    pytest.param(
        paused(held=("2026-01-10",)),
        seen("nominal", flag=FLAG, due="2026-01-11"),
        {
            "flag": [ClearPauseFlag(FLAG)],
            "launches": [
                Launch("2026-01-10", resume_key("2026-01-10"), "resume"),
                Launch("2026-01-11", "publish:transactions:2026-01-11", "due"),
            ],
            "alert": ("resume", f"resume:{EPISODE}", "info"),
            "paused": False,
        },
        id="resume-tick-also-launches-a-newly-due-partition",
    ),
    pytest.param(
        paused(held=("2026-01-10",)),
        seen("nominal", flag=FLAG, publishes=False),
        {
            "flag": [ClearPauseFlag(FLAG)],
            "launches": [],
            "alert": ("resume", f"resume:{EPISODE}", "info"),
            "paused": False,
        },
        id="stream-without-a-publish-job-is-paused-and-resumed-but-never-launched",
    ),
]


@pytest.mark.parametrize(("state", "observation", "expected"), STEP_CASES)
def test_step(state: GateState, observation: Observation, expected: dict[str, Any]) -> None:
    after, actions = step(state, observation)

    assert of(SetPauseFlag, actions) + of(ClearPauseFlag, actions) == expected["flag"]
    assert of(Launch, actions) == expected["launches"]
    alerts = of(ZoneAlert, actions)
    if expected["alert"] is None:
        assert alerts == []
    else:
        (alert,) = alerts
        assert (alert.action, alert.condition, alert.severity) == expected["alert"]
        assert alert.relaunched == tuple(
            launch.partition for launch in of(Launch, actions) if launch.reason == "resume"
        )
    assert after.paused is expected["paused"]
    assert after.zone == observation.card.zone
    for name in ("held", "relaunched", "episode", "last_due"):
        if name in expected:
            assert getattr(after, name) == expected[name]


def test_a_replayed_tick_asks_for_the_same_run_keys() -> None:
    """Dagster launches a run key once: a tick replayed from the same cursor is harmless."""
    state = paused(held=("2026-01-10",))
    observation = seen("nominal", flag=FLAG, failed=("2026-01-09",))
    assert step(state, observation) == step(state, observation)


def test_a_tick_after_the_resume_launches_nothing_again() -> None:
    state = paused(held=("2026-01-10",))
    after, first = step(state, seen("nominal", flag=FLAG))
    again, second = step(after, seen("nominal", flag=None))
    assert [a.partition for a in of(Launch, first)] == ["2026-01-10"]
    assert of(Launch, second) == [] and of(ZoneAlert, second) == []
    assert again.relaunched == ("2026-01-10",)


def test_a_stale_flag_of_an_ended_episode_relaunches_nothing_twice() -> None:
    """The flag of an episode the cursor already ended (a clear that was lost) ends it
    again, without launching its partitions a second time."""
    ended, _ = step(paused(held=("2026-01-10",)), seen("nominal", flag=FLAG))
    after, actions = step(ended, seen("nominal", flag=FLAG, failed=("2026-01-10",)))
    assert of(Launch, actions) == []
    assert of(ClearPauseFlag, actions) == [ClearPauseFlag(FLAG)]
    assert not after.paused


@pytest.mark.parametrize(
    ("previous", "wall_ms", "expected"),
    [
        pytest.param(None, WALL_MS, str(WALL_MS), id="first-episode-is-the-wall-clock"),
        pytest.param(EPISODE, WALL_MS, str(WALL_MS), id="later-episode-is-the-wall-clock"),
        pytest.param(str(WALL_MS), WALL_MS, str(WALL_MS + 1), id="same-ms-moves-one-on"),
        pytest.param(
            str(WALL_MS + 5), WALL_MS, str(WALL_MS + 6), id="clock-behind-never-reuses-an-id"
        ),
        pytest.param("manual", WALL_MS, str(WALL_MS), id="hand-set-episode-is-ignored"),
    ],
)
def test_two_episodes_never_share_an_id(previous: str | None, wall_ms: int, expected: str) -> None:
    assert new_episode(previous, wall_ms) == expected


COUNTS = {"lag_warn": 5, "lag_pause": 10, "read_count": 1}
DEFAULTS: dict[str, Any] = {}  # 2 s / 10 s of work, reads of 100, concurrency 1


@pytest.mark.parametrize(
    ("worker_lag", "backlog", "pending", "alive", "rate", "held", "env", "expected"),
    [
        # Sentinel-L7's count limits, warn 5 and pause 10: the drain rate does not matter
        pytest.param(4, 0, 0, 1, None, 0, COUNTS, "nominal", id="below-warn-is-nominal"),
        pytest.param(5, 0, 0, 1, 1e6, 0, COUNTS, "elevated", id="warn-limit-is-elevated"),
        pytest.param(10, 0, 0, 1, 1e6, 0, COUNTS, "backpressure", id="pause-limit-is-backpressure"),
        pytest.param(
            2, 40, 0, 1, None, 0, COUNTS, "nominal", id="worker-figure-wins-over-the-group"
        ),
        pytest.param(
            None, 3, 4, 1, None, 0, COUNTS, "elevated", id="expired-key-with-a-live-lease-on-group"
        ),
        pytest.param(None, 0, 0, 0, None, 0, COUNTS, "worker_off", id="no-key-and-no-lease"),
        pytest.param(None, 50, 0, 0, 1e3, 0, DEFAULTS, "worker_off", id="backlog-without-worker"),
        # the defaults: seconds of work past what the live workers hold in flight (``held``:
        # what they published, streams.backlog.holdings)
        pytest.param(254, 0, 0, 1, 18_556.0, 0, DEFAULTS, "nominal", id="issue-peak-is-14ms"),
        pytest.param(254, 0, 0, 1, None, 0, DEFAULTS, "nominal", id="no-rate-yet-no-alarm"),
        pytest.param(20_000, 0, 0, 1, 5_000.0, 0, DEFAULTS, "elevated", id="4s-of-work"),
        pytest.param(60_000, 0, 0, 1, 5_000.0, 0, DEFAULTS, "backpressure", id="12s-of-work"),
        pytest.param(5_000, 0, 0, 1, 0.0, 0, DEFAULTS, "backpressure", id="consumers-stopped"),
        pytest.param(100, 0, 0, 1, 0.0, 100, DEFAULTS, "nominal", id="in-flight-is-no-pressure"),
        pytest.param(300, 0, 0, 3, 0.0, 300, DEFAULTS, "nominal", id="three-workers-in-flight"),
        pytest.param(301, 0, 0, 3, 0.0, 300, DEFAULTS, "backpressure", id="past-three-in-flight"),
    ],
)
def test_zone_of_the_lag_card(
    worker_lag: int | None,
    backlog: int,
    pending: int,
    alive: int,
    rate: float | None,
    held: int,
    env: dict[str, Any],
    expected: Zone,
) -> None:
    """The zone the gate steps on: the lag card's, from the one zone definition."""
    reading = LagReading(backlog, pending)
    snapshot = LagSnapshot(worker_lag, reading, alive, drain_rate=rate, allowance=held)
    verdict = evaluate_lag(snapshot, load_settings(**env))
    assert verdict.metadata["zone"] == expected
    assert verdict.blocks is (expected in ("backpressure", "worker_off"))


@pytest.mark.parametrize(
    ("peaks", "rate", "env", "alerted"),
    [
        pytest.param(Peaks(254, 0, 3), 18_556.0, DEFAULTS, False, id="healthy-peak-in-budget"),
        pytest.param(Peaks(254, 0, 3), None, DEFAULTS, False, id="peak-before-a-rate"),
        pytest.param(Peaks(250_000, 0, 3), 18_556.0, DEFAULTS, True, id="peak-past-10s"),
        pytest.param(Peaks(254, 1, 0), 18_556.0, DEFAULTS, True, id="hard-episode"),
        pytest.param(Peaks(254, 0, 3), 18_556.0, COUNTS, True, id="l7-counts-keep-their-alarm"),
    ],
)
def test_spike_alert_only_past_the_pause_limit(
    peaks: Peaks, rate: float | None, env: dict[str, Any], alerted: bool
) -> None:
    """The "lag peaked at N" ERROR: never for peaks within the time budget."""
    snapshot = LagSnapshot(0, LagReading(0, 0), 1, drain_rate=rate)
    verdict = evaluate_lag(snapshot, load_settings(**env), peaks)
    assert spike_alerted(lag_card(verdict, None)) is alerted


@pytest.mark.parametrize(
    ("is_paused", "zone", "move"),
    [
        pytest.param(False, "nominal", "none", id="calm-stays-calm"),
        pytest.param(False, "elevated", "none", id="elevated-does-not-pause"),
        pytest.param(False, "backpressure", "start", id="backpressure-pauses"),
        pytest.param(False, "worker_off", "start", id="worker-off-pauses"),
        pytest.param(True, "worker_off", "hold", id="worker-off-holds"),
        pytest.param(True, "backpressure", "hold", id="backpressure-holds"),
        pytest.param(True, "elevated", "hold", id="hysteresis-elevated-is-not-enough-to-resume"),
        pytest.param(True, "nominal", "resume", id="nominal-resumes"),
    ],
)
def test_pause_zone_hysteresis(is_paused: bool, zone: Zone, move: PauseMove) -> None:
    assert pause_move(is_paused, zone) == move


@pytest.mark.parametrize(
    ("state", "flag", "zone", "episode"),
    [
        pytest.param(paused(), FLAG, "nominal", EPISODE, id="resume-tick-needs-its-failures"),
        pytest.param(paused(), FLAG, "elevated", None, id="held-pause-needs-none"),
        pytest.param(GateState(), FLAG, "nominal", EPISODE, id="adopted-flag-episode"),
        pytest.param(GateState(), "operator", "nominal", None, id="operator-flag-is-not-ours"),
        pytest.param(calm(), None, "nominal", None, id="no-pause-no-query"),
    ],
)
def test_failed_runs_are_read_only_for_the_episode_that_ends(
    state: GateState, flag: str | None, zone: Zone, episode: str | None
) -> None:
    assert episode_to_resume(state, flag, zone) == episode


@pytest.mark.parametrize(
    ("state", "observation", "recorded"),
    [
        pytest.param(calm(), seen("nominal"), False, id="unchanged-within-interval-is-skipped"),
        pytest.param(
            calm(), seen("nominal", card={"lag": 2, "figures": "nominal:2"}), True, id="change"
        ),
        pytest.param(calm(), seen("nominal", now_s=1290.0), True, id="interval-elapsed"),
        pytest.param(calm(observed_at=None), seen("nominal"), True, id="never-recorded"),
        pytest.param(calm(), seen("nominal", card={"lag_peak": 30}), True, id="peak-above-lag"),
        pytest.param(calm(), seen("nominal", card={"soft_episodes": 1}), True, id="soft-episode"),
    ],
)
def test_figures_are_recorded_on_change_spike_or_interval(
    state: GateState, observation: Observation, recorded: bool
) -> None:
    after, actions = step(state, observation)
    assert (RecordObservation() in actions) is recorded
    expected_at = observation.now_s if recorded else state.observed_at
    assert after.observed_at == expected_at


@pytest.mark.parametrize(
    ("changes", "alerted"),
    [
        pytest.param({}, False, id="no-spike"),
        pytest.param({"lag_peak": 8, "peak_zone": "elevated"}, False, id="elevated-peak-only"),
        pytest.param({"lag_peak": 12, "peak_zone": "backpressure"}, True, id="peak-at-pause"),
        pytest.param({"hard_episodes": 2}, True, id="hard-episode"),
        pytest.param({"hard_episodes": 2, "climbing": True}, False, id="hard-while-climbing"),
        pytest.param({"soft_episodes": 3}, False, id="soft-episodes-only"),
    ],
)
def test_spike_alerts_on_a_hard_episode_or_a_peak_at_the_pause_limit(
    changes: dict[str, Any], alerted: bool
) -> None:
    assert spike_alerted(card("nominal", **changes)) is alerted
    _, actions = step(calm(), seen("nominal", card=changes))
    assert (SpikeAlert() in actions) is alerted


@pytest.mark.parametrize(
    ("previous", "zone", "action", "expected"),
    [
        pytest.param(None, "nominal", None, None, id="first-nominal-reading-is-silent"),
        pytest.param("nominal", "nominal", None, None, id="no-change-is-silent"),
        pytest.param(
            None, "elevated", None, ("info", "zone:None->elevated"), id="first-reading-elevated"
        ),
        pytest.param("nominal", "elevated", None, ("info", "zone:nominal->elevated"), id="warn-up"),
        pytest.param(
            "elevated", "nominal", None, ("info", "zone:elevated->nominal"), id="warn-down"
        ),
        pytest.param(
            "elevated", "backpressure", "pause", ("error", "pause:E1"), id="pause-names-episode"
        ),
        pytest.param("nominal", "nominal", "resume", ("info", "resume:E1"), id="resume-unchanged"),
    ],
)
def test_zone_alert_condition_lets_each_episode_through_the_cool_down(
    previous: Zone | None, zone: Zone, action: Any, expected: tuple[str, str] | None
) -> None:
    alert = zone_alert(previous, zone, action, "E1")
    assert (None if alert is None else (alert.severity, alert.condition)) == expected
