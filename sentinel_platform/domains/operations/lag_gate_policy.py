"""The lag gate's decisions, apart from any I/O: ``step(state, observation) -> (state, actions)``.

The sensor (``lag_gate.py``) reads one stream's lag card, pause flag, due and materialised
partitions and failed publish runs into an :class:`Observation`, calls :func:`step` with the
:class:`~sentinel_platform.domains.operations.lag_gate_state.GateState` it kept in its
cursor (its format: :mod:`~sentinel_platform.domains.operations.lag_gate_state`), applies
the returned actions (flag, run requests, observation, alerts) and stores the new state.
Everything that decides lives here, so every rule is tested from a table of cases without
Redis or Dagster:

- a pause zone (backpressure, worker off) starts a *pause episode*: the producer-pause flag
  is set (and refreshed every tick, it carries a TTL so a stopped sensor cannot pause
  producers forever) and no publish run is launched;
- partitions that come due during the episode are held back, and so are those whose
  publish run failed during it (a run waiting on the flag gives up after a while);
- only back at nominal, not merely elevated, does the episode end (hysteresis against the
  on/off sawtooth): the flag is cleared and each held partition not yet materialised is
  launched once, run key ``resume:<stream>:<partition>:<episode>``;
- outside a pause each newly due partition is launched once, run key
  ``publish:<stream>:<partition>``, unless it is already materialised. A fresh gate (no
  ``last_due`` yet: a new Dagster home, a cursor reset) only notes the partition due now:
  starting the platform must not start publish runs nobody asked for (on a small machine
  each is a Spark JVM), so the gate launches the partitions that come due while it runs
  (each new day), and a user publishes today's by hand.

The episode id is the pause start in wall-clock ms, strictly above the previous episode's,
so two episodes never share a run key and a replayed tick (same state, same observation)
asks for the same run keys, which Dagster launches once. A flag this sensor set survives a
lost cursor: its episode is adopted rather than orphaned. An operator's own flag (any value
without the ``sensor:`` prefix) is never cleared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from sentinel_platform.domains.operations.lag_gate_state import GateState
from sentinel_platform.streams.backlog.lag import Zone

#: The pause flag outlives many ticks but not a dead sensor by long.
PAUSE_FLAG_TTL_S = 3600
#: What marks a pause flag as this sensor's (an operator's flag is left alone).
FLAG_PREFIX = "sensor:"
PAUSE_ZONES: frozenset[Zone] = frozenset({"backpressure", "worker_off"})
#: Elevated is the pacing zone: producers are slowed to the fleet's pace, which is the
#: controller doing its job, so entering it is recorded (info), never a warning; a fleet that
#: falls behind reaches backpressure, an error with a pause.
ZONE_SEVERITY: Mapping[Zone, Literal["info", "warning", "error"]] = {
    "nominal": "info",
    "elevated": "info",
    "backpressure": "error",
    "worker_off": "error",
}

PauseMove = Literal["start", "hold", "resume", "none"]
PauseAction = Literal["pause", "resume"]
#: The pause moves an operator is told about.
PAUSE_ACTION: Mapping[PauseMove, PauseAction | None] = {
    "start": "pause",
    "hold": None,
    "resume": "resume",
    "none": None,
}


@dataclass(frozen=True)
class LagCard:
    """The lag check's verdict as the gate needs it."""

    zone: Zone
    lag: int
    lag_peak: int
    peak_zone: Zone
    hard_episodes: int = 0
    soft_episodes: int = 0
    #: The blocking lag check fails at ERROR: no publish run may start.
    blocks: bool = False
    #: A digest of every recorded figure and the materialisation they are about.
    figures: str = ""
    #: A live worker's adaptive limit is still climbing (the zone stops at elevated).
    climbing: bool = False

    @property
    def spiked(self) -> bool:
        """A peak above the current lag, or a backpressure episode, since the last tick."""
        return self.lag_peak > self.lag or bool(self.hard_episodes or self.soft_episodes)


@dataclass(frozen=True)
class Observation:
    """What one tick read about one stream."""

    #: The stream's name in run keys (``transactions``, ``axioms``).
    stream: str
    card: LagCard
    #: The sensor's clock, in seconds (drives the recording interval).
    now_s: float
    #: The real wall clock in ms: names a new pause episode (runs are stamped in real time).
    wall_ms: int
    #: Record the figures at least this often even when nothing changed.
    record_every_s: int
    #: The pause flag's value in Redis, if set (by this sensor or an operator).
    flag: str | None = None
    #: Whether the gate launches publish runs for this stream at all.
    publishes: bool = False
    #: The newest partition whose window has closed, if the gate launches new partitions.
    due: str | None = None
    materialised: frozenset[str] = frozenset()
    #: Partitions whose publish run failed during the episode :func:`episode_to_resume` named.
    failed: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecordObservation:
    """Record the lag observation and the lag check evaluation."""


@dataclass(frozen=True)
class SetPauseFlag:
    value: str
    ttl_s: int = PAUSE_FLAG_TTL_S


@dataclass(frozen=True)
class ClearPauseFlag:
    """Delete the flag if it still holds ``expected`` (this sensor's value)."""

    expected: str


@dataclass(frozen=True)
class Launch:
    partition: str
    run_key: str
    reason: Literal["due", "resume"]


@dataclass(frozen=True)
class SpikeAlert:
    """A hard backpressure episode or a peak at the pause limit since the last tick; the
    condition is fixed per stream so the alert cool-down silences repeats."""

    severity: Literal["error"] = "error"
    condition: str = "hard_backpressure"


@dataclass(frozen=True)
class ZoneAlert:
    """A zone change or a pause action; a pause or resume names its episode in the
    condition, so each episode passes the alert cool-down once."""

    severity: Literal["info", "warning", "error"]
    condition: str
    previous: Zone | None
    zone: Zone
    action: PauseAction | None
    episode: str | None
    relaunched: tuple[str, ...] = field(default=())


Action = RecordObservation | SetPauseFlag | ClearPauseFlag | Launch | SpikeAlert | ZoneAlert


def step(state: GateState, observation: Observation) -> tuple[GateState, list[Action]]:
    """One stream's tick: what to record, alert, flag and launch, and the state after it."""
    actions: list[Action] = []
    card = observation.card
    if should_record(state, observation):
        state = replace(state, observed=card.figures, observed_at=observation.now_s)
        actions.append(RecordObservation())
    if spike_alerted(card):
        actions.append(SpikeAlert())
    previous = state.zone
    state = adopt_flag(state, observation.flag)
    move = pause_move(state.paused, card.zone)
    state, flag_action, resumed = _move(state, observation, move)
    if flag_action is not None:
        actions.append(flag_action)
    state, launches = _launches(state, observation, resumed)
    actions.extend(launches)
    relaunched = tuple(launch.partition for launch in launches if launch.reason == "resume")
    alert = zone_alert(previous, card.zone, PAUSE_ACTION[move], state.episode, relaunched)
    if alert is not None:
        actions.append(alert)
    return replace(state, zone=card.zone), actions


def should_record(state: GateState, observation: Observation) -> bool:
    """Record on change, on a spike, and at least every ``record_every_s``."""
    card = observation.card
    if card.spiked or state.observed != card.figures or state.observed_at is None:
        return True
    return observation.now_s - state.observed_at >= observation.record_every_s


def spike_alerted(card: LagCard) -> bool:
    """A spike alerts when it was a hard episode or reached the pause limit; never while a
    worker's limit still climbs: a producer stopped then waited for capacity on its way."""
    hard = card.hard_episodes > 0 and not card.climbing
    return card.spiked and (hard or card.peak_zone == "backpressure")


def pause_move(paused: bool, zone: Zone) -> PauseMove:
    """The pause episode's next move: start in a pause zone, end only at nominal."""
    if not paused:
        return "start" if zone in PAUSE_ZONES else "none"
    return "resume" if zone == "nominal" else "hold"


def adopt_flag(state: GateState, flag: str | None) -> GateState:
    """Continue the episode of a flag this sensor set, if the cursor forgot it."""
    if state.paused or flag is None or not flag.startswith(FLAG_PREFIX):
        return state
    episode = flag.rsplit(":", 1)[-1]
    if episode == state.episode:  # the flag of an episode this cursor already ended
        return replace(state, paused=True)
    return replace(state, paused=True, episode=episode, held=(), relaunched=())


def episode_to_resume(state: GateState, flag: str | None, zone: Zone) -> str | None:
    """The episode this tick ends, if any: the one whose failed publish runs are needed."""
    state = adopt_flag(state, flag)
    return state.episode if pause_move(state.paused, zone) == "resume" else None


def episode_start_ms(episode: str | None) -> int | None:
    """The episode's start in ms, or None for an id that is not one (a hand-set flag)."""
    if episode is None or not episode.isdigit():
        return None
    return int(episode)


def new_episode(previous: str | None, wall_ms: int) -> str:
    """A fresh episode id: the start in ms, strictly after the previous episode's."""
    last = episode_start_ms(previous)
    return str(wall_ms if last is None else max(wall_ms, last + 1))


def flag_value(zone: Zone, episode: str) -> str:
    return f"{FLAG_PREFIX}{zone}:{episode}"


def zone_alert(
    previous: Zone | None,
    zone: Zone,
    action: PauseAction | None,
    episode: str | None,
    relaunched: Sequence[str] = (),
) -> ZoneAlert | None:
    """An alert for a zone change (not the first nominal reading) or a pause action."""
    changed = previous != zone and not (previous is None and zone == "nominal")
    if not (changed or action):
        return None
    condition = f"{action}:{episode}" if action else f"zone:{previous}->{zone}"
    return ZoneAlert(
        severity=ZONE_SEVERITY[zone],
        condition=condition,
        previous=previous,
        zone=zone,
        action=action,
        episode=episode,
        relaunched=tuple(relaunched) if action == "resume" else (),
    )


def _move(
    state: GateState, observation: Observation, move: PauseMove
) -> tuple[GateState, SetPauseFlag | ClearPauseFlag | None, tuple[str, ...] | None]:
    """Apply the pause move; return the flag action and, when the episode ends, the
    partitions to resume."""
    zone = observation.card.zone
    if move == "none":
        return state, None, None
    if move == "start":
        episode = new_episode(state.episode, observation.wall_ms)
        state = replace(state, paused=True, episode=episode, held=(), relaunched=())
    if move in ("start", "hold"):
        return state, SetPauseFlag(flag_value(zone, state.episode or "0")), None
    flag = observation.flag
    clear = ClearPauseFlag(flag) if flag is not None and flag.startswith(FLAG_PREFIX) else None
    candidates = tuple(sorted({*state.held, *observation.failed}))
    return replace(state, paused=False, held=()), clear, candidates


def _launches(
    state: GateState, observation: Observation, resumed: tuple[str, ...] | None
) -> tuple[GateState, list[Launch]]:
    """Resumed partitions and a newly due one, never a materialised one, never twice."""
    if not observation.publishes:
        return state, []
    done, stream = observation.materialised, observation.stream
    candidates = resumed or ()
    launches = [
        Launch(p, f"resume:{stream}:{p}:{state.episode}", "resume")
        for p in candidates
        if p not in done and p not in state.relaunched
    ]
    if resumed is not None:
        relaunched = (*state.relaunched, *(launch.partition for launch in launches))
        state = replace(state, relaunched=relaunched)
    due = observation.due
    if due is None or due == state.last_due:
        return state, launches
    fresh = state.last_due is None
    state = replace(state, last_due=due)
    if fresh:  # a fresh gate launches only what comes due while it runs
        return state, launches
    if state.paused or observation.card.blocks:
        if due not in state.held:
            state = replace(state, held=(*state.held, due))
    elif due not in done and due not in candidates:
        launches.append(Launch(due, f"publish:{stream}:{due}", "due"))
    return state, launches
