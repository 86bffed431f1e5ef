"""The checks a chaos run must pass once healed, over its History and FinalState.

Each check is a pure function returning the violations it found, each with the events
around it: Jepsen's Kafka checker's anomalies (lost, inconsistent offsets, non-monotonic
reads, duplicates counted, and none at all from the idempotent producer), a consumer group's
commits that never go back, replica convergence below the high watermark, one controller
per epoch and none that was not elected, a controller again soon after /controller goes
while a broker could be elected, partition states that never go back to an older epoch, a
healthy cluster within HEALTHY_WITHIN_S of the heal, and planner plans that end without
doing a move twice.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import signal
from collections.abc import Callable, Iterable

from node.chaos.history import (
    BROKER_CUT,
    BROKER_DOWN,
    DONE,
    ZOOKEEPER_DOWN,
    Commit,
    FinalState,
    History,
    Outage,
    PlanMove,
    Read,
)
from node.chaos.schedule import CONTROLLER_GRACE_S

HEALTHY_WITHIN_S = 30.0
# How many examples a violation lists.
EXAMPLES = 5


@dataclasses.dataclass(frozen=True)
class Violation:
    kind: str
    message: str
    t: float
    events: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "message": self.message,
            "t": round(self.t, 3),
            "events": list(self.events),
        }


def _violation(history: History, kind: str, message: str, t: float) -> Violation:
    return Violation(kind, message, t, tuple(e.line() for e in history.around(t)))


def _client_reads(history: History) -> list[Read]:
    """What consumers read (not the replicas' files): what "read back" means."""
    return [r for r in history.reads if not r.reader.startswith("replica-")]


def check_lost(history: History, final: FinalState) -> list[Violation]:
    """Every acknowledged value is read back by a consumer or the final drain."""
    read = {r.value for r in _client_reads(history)}
    lost = [a for a in history.acks if a.value not in read]
    if not lost:
        return []
    first = min(lost, key=lambda a: a.t)
    examples = ", ".join(f"{a.value} ({a.topic}-{a.partition}@{a.offset})" for a in lost[:EXAMPLES])
    return [
        _violation(
            history, "lost-write", f"{len(lost)} acknowledged record(s) never read: {examples}", first.t
        )
    ]


def _places(history: History, *, idempotent: bool) -> dict[str, set[tuple[str, int, int]]]:
    """value → every (topic, partition, offset) a consumer or the drain read it at, for the
    values of the idempotent producer's topics or for the others'."""
    topics = set(history.idempotent_topics)
    where: dict[str, set[tuple[str, int, int]]] = {}
    for r in _client_reads(history):
        if (r.topic in topics) == idempotent:
            where.setdefault(r.value, set()).add((r.topic, r.partition, r.offset))
    return where


def duplicates(history: History) -> int:
    """Values of Keel's producer read at more than one offset (a retried send appends again:
    it is not idempotent)."""
    return sum(1 for places in _places(history, idempotent=False).values() if len(places) > 1)


def idempotent_duplicates(history: History) -> int:
    """Values of the idempotent producer read at more than one offset."""
    return sum(1 for places in _places(history, idempotent=True).values() if len(places) > 1)


def check_idempotent_duplicates(history: History, final: FinalState) -> list[Violation]:
    """No value of the idempotent producer is read (by a consumer or the final drain) at more
    than one offset: the broker appends a batch retried with the same producer id and sequence
    once, and answers the retry with the offsets it was given (Kafka's idempotence). The
    workload never sends a value twice itself, so a second copy is the retry's."""
    first_read: dict[str, float] = {}
    for r in _client_reads(history):
        first_read.setdefault(r.value, r.t)
    twice = sorted(
        ((v, p) for v, p in _places(history, idempotent=True).items() if len(p) > 1),
        key=lambda vp: first_read[vp[0]],
    )
    if not twice:
        return []
    examples = ", ".join(
        f"{value} at " + " and ".join(f"{t}-{p}@{o}" for t, p, o in sorted(places))
        for value, places in twice[:EXAMPLES]
    )
    return [
        _violation(
            history,
            "idempotent-duplicate",
            f"{len(twice)} value(s) of the idempotent producer written more than once: {examples}",
            first_read[twice[0][0]],
        )
    ]


def check_commits_never_go_backwards(history: History, final: FinalState) -> list[Violation]:
    """Per partition, the consumer group's successful commits, in the order they were
    answered, never go down: a member that lost a partition in a rebalance is fenced by the
    generation (its commit is refused with ILLEGAL_GENERATION), and the member that took it
    over starts at the last commit, so that what the group has consumed is never forgotten."""
    last: dict[tuple[str, int], Commit] = {}
    out = []
    for commit in sorted(history.commits, key=lambda c: c.t):
        key = (commit.topic, commit.partition)
        before = last.get(key)
        if before is not None and commit.offset < before.offset:
            out.append(
                _violation(
                    history,
                    "commit-went-backwards",
                    f"{commit.topic}-{commit.partition}: {commit.member} committed offset {commit.offset} "
                    f"at t={commit.t:.2f}s after {before.member} had committed {before.offset} at "
                    f"t={before.t:.2f}s",
                    commit.t,
                )
            )
        last[key] = commit
    return out


def lost_count(history: History) -> int:
    read = {r.value for r in _client_reads(history)}
    return sum(1 for a in history.acks if a.value not in read)


def check_inconsistent_offsets(history: History, final: FinalState) -> list[Violation]:
    """No (topic, partition, offset) ever holds two values: not in an acknowledgement, not in
    any read, not in any replica's log below the high watermark."""
    seen: dict[tuple[str, int, int], tuple[str, str, float]] = {}
    out = []
    observations: Iterable[tuple[str, str, int, int, str, float]] = [
        *(("ack", a.topic, a.partition, a.offset, a.value, a.t) for a in history.acks),
        *((r.reader, r.topic, r.partition, r.offset, r.value, r.t) for r in history.reads),
    ]
    reported: set[tuple[str, int, int]] = set()
    for source, topic, partition, offset, value, t in observations:
        key = (topic, partition, offset)
        first = seen.setdefault(key, (value, source, t))
        if first[0] != value and key not in reported:
            reported.add(key)
            out.append(
                _violation(
                    history,
                    "inconsistent-offset",
                    f"{topic}-{partition} offset {offset} held {first[0]!r} ({first[1]}) "
                    f"and {value!r} ({source})",
                    t,
                )
            )
    return out


def check_monotonic_reads(history: History, final: FinalState) -> list[Violation]:
    """Per reader and partition, offsets rise strictly in the order they were read."""
    last: dict[tuple[str, str, int], int] = {}
    out = []
    for r in history.reads:
        key = (r.reader, r.topic, r.partition)
        before = last.get(key)
        if before is not None and r.offset <= before:
            out.append(
                _violation(
                    history,
                    "nonmonotonic-read",
                    f"{r.reader} read {r.topic}-{r.partition} offset {r.offset} after offset {before}",
                    r.t,
                )
            )
        last[key] = r.offset
    return out


def check_replicas_converged(history: History, final: FinalState) -> list[Violation]:
    """Once healed, every replica holds the same records below the high watermark."""
    out = []
    for tp, by_broker in sorted(final.replica_logs.items()):
        hw = final.high_watermarks.get(tp)
        if hw is None or not by_broker:
            continue
        replicas, leader, _ = final.partitions.get(tp, ((), -1, ()))
        reference_broker = leader if leader in by_broker else min(by_broker)
        reference = {o: v for o, v in by_broker[reference_broker].items() if o < hw}
        for broker, log in sorted(by_broker.items()):
            if replicas and broker not in replicas:
                continue
            mine = {o: v for o, v in log.items() if o < hw}
            if mine == reference:
                continue
            differing = sorted(o for o in set(mine) | set(reference) if mine.get(o) != reference.get(o))
            examples = ", ".join(
                f"@{o}: {mine.get(o)!r} vs {reference.get(o)!r}" for o in differing[:EXAMPLES]
            )
            out.append(
                _violation(
                    history,
                    "replica-divergence",
                    f"{tp[0]}-{tp[1]}: broker {broker} differs from broker {reference_broker} below the "
                    f"high watermark {hw} at {len(differing)} offset(s): {examples}",
                    history.healed_s,
                )
            )
    return out


def check_one_controller_per_epoch(history: History, final: FinalState) -> list[Violation]:
    """At most one broker per controller epoch, whether elected (a broker's controller.log, the
    ZooKeeper watcher) or acting (state changes logged as `[Controller id=N epoch=E]`); the
    epoch ZooKeeper shows never goes down."""
    claims = sorted(
        [
            *((c.t, c.epoch, c.broker, f"{c.source}: elected") for c in history.controllers),
            *(
                (a.t, a.epoch, a.broker, f"{a.source}: {a.lines} state change(s) from t={a.t:.1f}s")
                for a in history.controller_actions
            ),
        ]
    )
    # epoch → broker → how it first claimed the epoch.
    holders: dict[int, dict[int, str]] = {}
    out = []
    for t, epoch, broker, how in claims:
        brokers = holders.setdefault(epoch, {})
        if broker in brokers:
            continue
        brokers[broker] = how
        if len(brokers) == 2:
            out.append(
                _violation(
                    history,
                    "two-controllers",
                    f"controller epoch {epoch} was held by brokers {sorted(brokers)} ("
                    + "; ".join(f"broker {b}, {first}" for b, first in sorted(brokers.items()))
                    + ")",
                    t,
                )
            )
    highest = -1
    for seen in (c for c in history.controllers if c.source == "zookeeper"):
        if seen.epoch < highest:
            out.append(
                _violation(
                    history,
                    "controller-epoch-regression",
                    f"/controller_epoch went from {highest} back to {seen.epoch}",
                    seen.t,
                )
            )
        highest = max(highest, seen.epoch)
    return out


def check_controllers_elected(history: History, final: FinalState) -> list[Violation]:
    """Every broker that acted as controller (state changes in its state-change.log under
    `[Controller id=N epoch=E]`) won that epoch's election, as a broker's controller.log or
    the ZooKeeper watcher recorded it: a broker acting on a stale /controller acts at an
    epoch no election gave it. (A zombie acting on at the epoch it won is the fencing's
    business: its writes are refused, and the partition-state check sees any that were not.)"""
    elected: dict[int, set[int]] = {}
    for seen in history.controllers:
        elected.setdefault(seen.epoch, set()).add(seen.broker)
    out = []
    for acted in sorted(history.controller_actions, key=lambda a: a.t):
        winners = elected.get(acted.epoch, set())
        if acted.broker in winners:
            continue
        out.append(
            _violation(
                history,
                "controller-not-elected",
                f"broker {acted.broker} acted as controller at epoch {acted.epoch} ({acted.lines} "
                f"state change(s) in {acted.source}, t={acted.t:.1f}s to {acted.last_t:.1f}s), an epoch "
                f"no election gave it (elected at epoch {acted.epoch}: "
                f"{', '.join(f'broker {b}' for b in sorted(winners)) or 'none seen'})",
                acted.t,
            )
        )
    return out


def _outage_end(history: History, outage: Outage) -> float:
    """An outage still open was healed with everything at the end."""
    return outage.end if outage.end is not None else max(outage.t, history.healed_s)


def _electable(history: History, brokers: Iterable[int], t: float) -> list[int]:
    """The brokers that could be elected at `t`: up (not killed, stopped or paused) and
    reaching ZooKeeper (not cut from it), while the ensemble has its majority (none without)."""
    active = [o for o in history.outages if o.t <= t < _outage_end(history, o)]
    servers_down = {o.target for o in active if o.kind == ZOOKEEPER_DOWN}
    if history.zookeeper_servers - len(servers_down) < history.zookeeper_servers // 2 + 1:
        return []
    unable = {o.target for o in active if o.kind in (BROKER_DOWN, BROKER_CUT)}
    return sorted(set(brokers) - unable)


def _election_blocked(history: History, brokers: list[int]) -> list[tuple[float, float]]:
    """The stretches, in time order and merged, in which no controller could be elected:
    ZooKeeper without a majority, or no broker both up and reaching it."""
    outages = history.outages
    times = sorted({o.t for o in outages} | {_outage_end(history, o) for o in outages})
    blocked: list[tuple[float, float]] = []
    for start, end in itertools.pairwise(times):
        # Nothing changes between two consecutive times: one look in the middle tells.
        if _electable(history, brokers, (start + end) / 2):
            continue
        if blocked and blocked[-1][1] >= start:
            blocked[-1] = (blocked[-1][0], end)
        else:
            blocked.append((start, end))
    return blocked


def _controller_absences(history: History) -> list[tuple[float, float, bool]]:
    """Each stretch the observer found /controller absent: (from, to, whether it ended). It
    starts at the poll that found it gone (the latest it can have gone) and ends at the
    next controller's creation (the znode's ctime); one still open ends at the last poll."""
    out = []
    since: float | None = None
    for seen in sorted(history.controller_znodes, key=lambda z: z.t):
        if seen.broker is None:
            since = seen.t if since is None else since
        elif since is not None:
            out.append((since, max(since, min(seen.t, seen.since)), True))
            since = None
    if since is not None:
        out.append((since, max(since, history.observed_until_s), False))
    return out


def check_controller_present(history: History, final: FinalState) -> list[Violation]:
    """A live cluster has a controller within the ZooKeeper session timeout plus
    CONTROLLER_GRACE_S of any change: /controller absent for longer than that, while some
    broker was up and reaching a ZooKeeper majority, is a cluster that stopped electing. What
    legitimately prevents an election (the ensemble's majority lost, every broker cut from
    ZooKeeper, every broker killed, stopped or paused) stops the clock; it starts again when
    the last of those heals (a ZooKeeper server once it serves again), as the election can
    only start then."""
    limit = history.session_timeout_s + CONTROLLER_GRACE_S
    blocked = _election_blocked(history, final.expected_brokers)
    out = []
    for start, end, ended in _controller_absences(history):
        # Each stretch of the absence in which an election could be held, in time order: the
        # first one longer than the limit is the violation.
        able_from = start
        for blocked_start, blocked_end in [*blocked, (math.inf, math.inf)]:
            if blocked_end <= able_from:
                continue
            able_until = min(blocked_start, end)
            if able_until - able_from > limit:
                until = f"t={end:.1f}s" if ended else f"the end of the run (t={end:.1f}s)"
                healed = "" if able_from == start else " (when the last outage preventing an election healed)"
                able = _electable(history, final.expected_brokers, able_from)
                message = (
                    f"/controller absent from t={start:.1f}s to {until}: {able_until - able_from:.1f}s "
                    f"of it from t={able_from:.1f}s{healed} with broker(s) {able} up and reaching "
                    f"ZooKeeper, more than the session timeout ({history.session_timeout_s:g}s) "
                    f"plus {CONTROLLER_GRACE_S:g}s"
                )
                out.append(_violation(history, "controller-absent", message, able_from))
                break
            if blocked_start >= end:
                break
            able_from = max(able_from, blocked_end)
    return out


def check_partition_states(history: History, final: FinalState) -> list[Violation]:
    """No partition state in ZooKeeper goes back to an older controller epoch or leader epoch:
    each version compared with the version before it (in version order, as observed)."""
    out = []
    ordered = sorted(history.states, key=lambda s: (s.topic, s.partition, s.zk_version, s.t))
    for before, state in itertools.pairwise(ordered):
        same_partition = (before.topic, before.partition) == (state.topic, state.partition)
        if not same_partition or state.zk_version == before.zk_version:
            continue
        if state.controller_epoch < before.controller_epoch or state.leader_epoch < before.leader_epoch:
            out.append(
                _violation(
                    history,
                    "partition-state-regression",
                    f"{state.topic}-{state.partition} state version {state.zk_version} has controller "
                    f"epoch {state.controller_epoch} and leader epoch {state.leader_epoch} after "
                    f"{before.controller_epoch} and {before.leader_epoch} (version {before.zk_version})",
                    state.t,
                )
            )
    return out


def check_healthy(history: History, final: FinalState) -> list[Violation]:
    """Within HEALTHY_WITHIN_S of the heal: every partition has a leader in a full ISR, every
    broker is registered, a planner is active (in a run with planners), and no reassignment,
    deletion or plan is left in progress."""
    out = []
    t = history.healed_s
    if final.healthy_after_s is None or final.healthy_after_s > HEALTHY_WITHIN_S:
        unhealthy = [
            f"{topic}-{p} (replicas {list(replicas)}, leader {leader}, isr {list(isr)})"
            for (topic, p), (replicas, leader, isr) in sorted(final.partitions.items())
            if leader not in isr or set(isr) != set(replicas)
        ]
        late = "" if final.healthy_after_s is None else f" (healthy {final.healthy_after_s:g} s after it)"
        waited = "; ".join(final.held_up_by) or "nothing seen at the last look before it"
        out.append(
            _violation(
                history,
                "not-healed",
                f"not healthy within {HEALTHY_WITHIN_S:g} s of the heal{late}, held up by: {waited}"
                + ("".join(f"; {u}" for u in unhealthy[:EXAMPLES]) if final.healthy_after_s is None else ""),
                t,
            )
        )
    if final.reassignments_in_progress:
        out.append(
            _violation(
                history,
                "stuck-reassignment",
                f"reassignments still in progress: {sorted(final.reassignments_in_progress)[:EXAMPLES]}",
                t,
            )
        )
    if final.topics_pending_deletion:
        out.append(
            _violation(
                history,
                "stuck-deletion",
                f"topics still marked for deletion: {sorted(final.topics_pending_deletion)[:EXAMPLES]}",
                t,
            )
        )
    if final.plan_state == "running":
        out.append(_violation(history, "stuck-plan", "the planner's plan is still running", t))
    if final.planner_expected and not final.planner_active:
        out.append(_violation(history, "planner-not-active", "no planner holds /keel/planner", t))
    missing = sorted(set(final.expected_brokers) - set(final.registered_brokers))
    if missing:
        out.append(_violation(history, "broker-not-registered", f"brokers {missing} are not registered", t))
    return out


def check_shutdowns(history: History, final: FinalState) -> list[Violation]:
    """Every controlled shutdown ends by itself (within shutdown.timeout.ms, or soon after
    when it gives up): one that had to be killed was stuck."""
    return [
        _violation(
            history,
            "stuck-shutdown",
            f"broker {s.broker} did not exit within {s.seconds:.0f} s of SIGTERM and was killed",
            s.t,
        )
        for s in history.shutdowns
        # -SIGKILL: the nemesis killed it. -SIGTERM is a broker stopped while it was still
        # starting, before its signal handlers were in place: not stuck.
        if s.exit_code is None or s.exit_code == -signal.SIGKILL
    ]


def check_plans(history: History, final: FinalState) -> list[Violation]:
    """Every plan ends, complete or reported stopped: one that no planner ended was left half
    done (one still running at the end is the stuck-plan check's; with no planner active at
    the end, the planner-not-active check says why)."""
    if final.plan_state == "running" or (final.planner_expected and not final.planner_active):
        return []
    return [
        _violation(
            history,
            "plan-not-ended",
            f"plan {plan.plan_id} ({plan.moves} moves) never ended: no planner completed it "
            f"or reported it stopped (resumed with {plan.resumed_with_done} done)",
            history.healed_s,
        )
        for plan in history.plans.values()
        if plan.state is None
    ]


def check_plan_moves(history: History, final: FinalState) -> list[Violation]:
    """No move of a plan is handed to the controller again once a planner found it done, by
    that planner or one that took the plan over: a move done twice. Sending again a move not
    yet found done (its request failed or timed out, or a planner died before it saw the
    answer) is how a plan goes on. Across planners the times of their logs order the lines
    (equal times order nothing); within one planner's log, its order."""
    done: dict[tuple[str, str, int], PlanMove] = {}
    reported: set[tuple[str, str, int]] = set()
    out = []
    for move in sorted(history.plan_moves, key=lambda m: (m.t, m.planner, m.position)):
        key = (move.plan_id, move.topic, move.partition)
        if move.kind == DONE:
            done.setdefault(key, move)
            continue
        first = done.get(key)
        if first is None or key in reported:
            continue
        if first.t < move.t or (first.planner == move.planner and first.position < move.position):
            reported.add(key)
            out.append(
                _violation(
                    history,
                    "plan-move-repeated",
                    f"plan {move.plan_id}: {move.planner} sent the move of {move.topic}-{move.partition} "
                    f"to replicas {list(move.replicas)} at t={move.t:.1f}s, after {first.planner} had "
                    f"found it done at t={first.t:.1f}s",
                    move.t,
                )
            )
    return out


CHECKS: tuple[Callable[[History, FinalState], list[Violation]], ...] = (
    check_lost,
    check_inconsistent_offsets,
    check_monotonic_reads,
    check_idempotent_duplicates,
    check_commits_never_go_backwards,
    check_replicas_converged,
    check_one_controller_per_epoch,
    check_controllers_elected,
    check_controller_present,
    check_partition_states,
    check_healthy,
    check_shutdowns,
    check_plans,
    check_plan_moves,
)


def check(history: History, final: FinalState) -> list[Violation]:
    return [v for run in CHECKS for v in run(history, final)]


def longest_unavailability(history: History) -> dict[str, float]:
    """Per partition produced to, the longest stretch without an acknowledged write while the
    workload produced (a leader gone, unreachable, or fewer than min.insync.replicas)."""
    times: dict[tuple[str, int], list[float]] = {tp: [] for tp in history.partitions}
    for ack in history.acks:
        times.setdefault((ack.topic, ack.partition), []).append(ack.t)
    out = {}
    for (topic, p), ts in sorted(times.items()):
        points = [history.produce_started_s, *sorted(ts), history.produce_stopped_s]
        out[f"{topic}-{p}"] = round(max(b - a for a, b in itertools.pairwise(points)), 2)
    return out


def longest_without_leader(history: History) -> dict[str, float]:
    """Per partition produced to, the longest stretch its state znode named no leader (-1), as
    the observer saw it; a stretch still open at the heal ends there."""
    out = {f"{t}-{p}": 0.0 for t, p in history.partitions}
    since: dict[str, float] = {}
    for state in sorted(history.states, key=lambda s: s.t):
        name = f"{state.topic}-{state.partition}"
        if state.leader < 0:
            since.setdefault(name, state.t)
        elif name in since:
            out[name] = max(out.get(name, 0.0), state.t - since.pop(name))
    for name, start in since.items():
        out[name] = max(out.get(name, 0.0), history.healed_s - start)
    return {name: round(s, 2) for name, s in sorted(out.items())}


def longest_without_controller(history: History) -> float:
    """The longest stretch the observer found /controller absent (one still open at the end
    lasting to the last poll), whatever prevented an election meanwhile."""
    return round(max((end - start for start, end, _ in _controller_absences(history)), default=0.0), 2)
