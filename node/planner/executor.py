"""PlanExecutor: carries a plan out through the controller, a few moves at a time.

One task owns the plan while it runs. Every `poll_interval_s` it looks at the cluster
(Metadata for the current replicas, ListPartitionReassignments for what is in progress),
brings each move up to date (node/planner/moves.py), and hands the controller the next
moves that fit: at most `max_moves_per_broker` in flight on any broker, a move counting on
the brokers it copies from and to (AlterPartitionReassignments). With a throttle, the rates
go on every broker of the plan when it starts, each topic's throttled-replica lists follow
the moves in flight, and all of them are removed when the plan ends, as Kafka's tool does.

The plan is saved under `state_dir` after every change, and `/keel/plan` (or any
PlanRecord) names it and its state and keeps a copy of it; `resume()` picks it up after a
restart, or in the standby planner when the one executing it died, skipping the moves done
and watching those in flight. `cancel()` cancels the moves in flight at the
controller (null targets), which puts their partitions back on their replicas before the
step.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import orjson

from actors.base.clock import Clock
from node.clients.replica_sizes import ReplicaSizeReader
from node.clients.throttles import broker_rate_resources, throttle_plan, topic_list_resources
from node.planner.moves import (
    FINISHED,
    SETTLE_S,
    Move,
    MoveState,
    Ongoing,
    Partition,
    RateWindow,
    bytes_copied,
    reconcile,
    seconds_left,
    select_batch,
    start_step,
)
from node.planner.plan_state import MemoryPlanRecord, PlanFile, PlanRecord, PlanStateError
from node.zk.client import connection_lost
from wire.api import (
    AlterConfigsResource,
    AlterPartitionReassignmentsResponse,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsResponse,
    MetadataResponse,
)
from wire.errors import ErrorCode, WireError, for_code

log = logging.getLogger(__name__)

RUNNING, COMPLETE, FAILED, CANCELLED = "running", "complete", "failed", "cancelled"
# How many moves in flight and failures status() lists by name.
LISTED = 20
# The plan is saved at most this often while it runs (and always when it starts and ends):
# a large plan's file is megabytes, and a save that lags only makes a resumed executor look
# at the controller for what changed since (moves.py's rules need nothing more).
SAVE_INTERVAL_S = 1.0
# The copy in ZooKeeper, for a planner that takes the plan over, at most this often while it
# runs (and always when it starts and ends): it is the whole plan again each time.
PLAN_COPY_INTERVAL_S = 5.0
# The journal beside the copy stays well under ZooKeeper's 1 MiB znode limit: past this, a
# whole copy (in parts) is written instead, and the journal starts again.
JOURNAL_MAX_BYTES = 256 * 1024
# One line per move handed to the controller and one per move found done: the chaos checker
# reads them from every planner's log (node/chaos/logs.py) to tell a move done twice, as when a
# planner that took a plan over sends again what the one before it had completed. Keep their
# words; tests/unit/test_chaos_logs.py parses them as this logger writes them.
SUBMITTING_LINE = "plan %s: submitting the move of %s-%d to replicas %s"
DONE_LINE = "plan %s: the move of %s-%d is done"


class PlanInProgress(Exception):
    """A plan is running already; cancel it or wait for it."""


class PlanExecutionError(ValueError):
    """The plan cannot be started (a partition that does not exist, one being reassigned
    by someone else); nothing was executed. The message says why, in one line."""


class ReassignmentAdmin(Protocol):
    """What the executor asks of the cluster (KeelAdminClient is one)."""

    async def metadata(self, topics: list[str] | None = None) -> MetadataResponse: ...

    async def alter_partition_reassignments(
        self, reassignments: Mapping[Partition, Sequence[int] | None], *, timeout_ms: int = ...
    ) -> AlterPartitionReassignmentsResponse: ...

    async def list_partition_reassignments(
        self, partitions: Iterable[Partition] | None = None, *, timeout_ms: int = ...
    ) -> ListPartitionReassignmentsResponse: ...

    async def incremental_alter_configs(
        self, resources: list[AlterConfigsResource], *, validate_only: bool = ...
    ) -> IncrementalAlterConfigsResponse: ...

    async def close(self) -> None: ...


class SizeSource(Protocol):
    """Replica sizes per broker (DescribeLogDirs); ReplicaSizeReader is one."""

    def update(self, metadata: MetadataResponse) -> None: ...

    async def sizes(self, broker: int, partitions: list[Partition]) -> dict[Partition, int]: ...

    async def close(self) -> None: ...


class PlanExecutor:
    def __init__(
        self,
        admin_factory: Callable[[], ReassignmentAdmin],
        *,
        max_moves_per_broker: int = 5,
        throttle_bytes_per_s: int = -1,
        state_dir: str | Path,
        clock: Clock,
        record: PlanRecord | None = None,
        poll_interval_s: float = 1.0,
        watch_interval_s: float = 0.2,
        settle_s: float = SETTLE_S,
        size_source_factory: Callable[[MetadataResponse], SizeSource] | None = None,
        autorun: bool = True,
    ) -> None:
        """`throttle_bytes_per_s` < 0: no throttle. `autorun=False` leaves the looking to
        whoever calls `tick()` (the unit tests)."""
        if max_moves_per_broker < 1:
            raise ValueError("max_moves_per_broker must be at least 1")
        self._admin_factory = admin_factory
        self._admin: ReassignmentAdmin | None = None
        self.max_moves_per_broker = max_moves_per_broker
        self.throttle_bytes_per_s = throttle_bytes_per_s
        self._file = PlanFile(state_dir)
        self._clock = clock
        self._record: PlanRecord = record or MemoryPlanRecord()
        self._poll_interval_s = poll_interval_s
        self._watch_interval_s = watch_interval_s
        self._settle_s = settle_s
        self._size_source_factory = size_source_factory or (lambda m: ReplicaSizeReader(m, timeout=10.0))
        self._sizes: SizeSource | None = None
        self._autorun = autorun
        self._plan: dict[str, object] = {}
        self._moves: list[Move] = []
        self._topic_lists: dict[str, tuple[str, str]] = {}
        self._rates = RateWindow()
        self._copied = 0
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._last_error = ""
        self._unsaved = False
        self._saved_at = float("-inf")
        # When ZooKeeper's copy of the plan was last written, and whether a save since is not in it.
        self._plan_copied_at = float("-inf")
        self._copy_behind = False
        # The moves changed since ZooKeeper's copy was written, as the journal beside it has them.
        self._journal: list[dict[str, object]] = []
        # Whether the throttle rates are on the brokers (a failure is tried again each look).
        self._rates_applied = True
        # start(), resume(), cancel() and close() one at a time: a plan asked for while the
        # planner becomes active waits for the resumption.
        self._lifecycle = asyncio.Lock()

    # --- the public interface ---

    @property
    def running(self) -> bool:
        return self._plan.get("state") == RUNNING

    async def start(
        self,
        plan_id: str,
        partitions: Sequence[Mapping[str, object]],
        sizes: Mapping[Partition, int] | None = None,
        *,
        origin: str = "request",
        reason: str = "",
        throttle_bytes_per_s: int | None = None,
    ) -> dict[str, object]:
        """Start executing `partitions` (Kafka's reassignment entries: topic, partition,
        replicas) with `sizes` (bytes per partition; a missing one is asked of its leader),
        at this plan's throttle (None: the executor's `throttle_bytes_per_s`).
        Raises PlanInProgress, or PlanExecutionError with nothing executed."""
        async with self._lifecycle:
            return await self._start(
                plan_id,
                partitions,
                sizes,
                origin=origin,
                reason=reason,
                throttle_bytes_per_s=throttle_bytes_per_s,
            )

    async def _start(
        self,
        plan_id: str,
        partitions: Sequence[Mapping[str, object]],
        sizes: Mapping[Partition, int] | None,
        *,
        origin: str,
        reason: str,
        throttle_bytes_per_s: int | None,
    ) -> dict[str, object]:
        if self.running:
            raise PlanInProgress(f"plan {self._plan.get('plan_id')} is still being executed")
        record = await self._record.read()
        if record is not None and record.get("state") == RUNNING:
            # A plan whose planner died, not yet taken over (resume() runs as this one
            # becomes active): starting another would leave it half done.
            raise PlanInProgress(f"plan {record.get('plan_id')} is still being executed")
        moves = [_move(entry, sizes or {}) for entry in partitions]
        if len({m.tp for m in moves}) != len(moves):
            raise PlanExecutionError("a partition is listed twice in the plan")
        admin = self._connect()
        metadata = await admin.metadata(sorted({m.topic for m in moves}))
        current, leaders = _assignment(metadata)
        missing = [f"{t}-{p}" for t, p in (m.tp for m in moves) if (t, p) not in current]
        if missing:
            raise PlanExecutionError(f"these partitions do not exist: {', '.join(missing[:10])}")
        ongoing = await self._list_ongoing(admin, [m.tp for m in moves])
        foreign = [f"{t}-{p}" for t, p in ongoing]
        if foreign:
            raise PlanExecutionError(
                f"these partitions are being reassigned already: {', '.join(foreign[:10])}"
            )
        for move in moves:
            move.source = tuple(current[move.tp])
            if move.target == move.source:
                move.state = MoveState.DONE
        await self._fill_sizes(metadata, leaders, [m for m in moves if m.size_bytes <= 0])
        previous = self._plan, self._moves, self._topic_lists
        self._moves, self._topic_lists, self._rates, self._copied = moves, {}, RateWindow(), 0
        self._plan_copied_at, self._journal = float("-inf"), []
        throttle = self.throttle_bytes_per_s if throttle_bytes_per_s is None else throttle_bytes_per_s
        self._plan = {
            "plan_id": plan_id,
            "writer": _new_writer(),
            "origin": origin,
            "reason": reason,
            "state": RUNNING,
            "created_ms": self._clock.wall_ms(),
            "finished_ms": None,
            "throttle_bytes_per_s": throttle,
            "max_moves_per_broker": self.max_moves_per_broker,
            "throttled_brokers": [],
            "throttled_topics": [],
            "message": "",
        }
        # Saved, and named in /keel/plan, before anything is done: a planner that dies from
        # here on leaves a plan that the next active planner resumes.
        try:
            await self._save()
        except Exception as e:
            self._plan, self._moves, self._topic_lists = previous
            raise PlanExecutionError(f"the plan could not be saved: {e!r}") from e
        log.info(
            "executing plan %s (%s): %d moves, %d bytes to copy, at most %d in flight per broker, %s",
            plan_id,
            origin,
            len(moves),
            sum(m.bytes_total for m in moves),
            self.max_moves_per_broker,
            f"throttle {throttle} bytes/s" if throttle >= 0 else "no throttle",
        )
        self._log_done(moves)
        await self._try_rates()
        self._unsaved = True
        self._launch()
        return self.status()

    async def resume(self) -> bool:
        """Pick up the plan saved under the state dir if it was still running and
        `/keel/plan` names it; True when it goes on. A finished one is loaded for status().
        A plan stopped by close() (this planner stood down) goes on from where it was."""
        async with self._lifecycle:
            return await self._resume()

    async def _resume(self) -> bool:
        if self.running and self._task is not None and not self._task.done():
            return True
        try:
            document = self._file.load()
        except PlanStateError as e:
            log.warning("cannot resume a plan: %s", e)
            document = None
        record = await self._record.read()
        from_zookeeper = False
        if record is not None:
            # The plan /keel/plan names, from ZooKeeper's copy when this state dir does not
            # hold it (another planner executed it) or holds an older copy of it.
            same = document is not None and document.get("plan_id") == record.get("plan_id")
            if not same or record.get("state") == RUNNING:
                shared = await self._record.read_plan()
                if (
                    shared is not None
                    and shared.get("plan_id") == record.get("plan_id")
                    and (not same or _more_recent(shared, document or {}))
                ):
                    document, from_zookeeper = shared, True
        if document is None or (
            record is not None
            and record.get("state") == RUNNING
            and document.get("plan_id") != record.get("plan_id")
        ):
            await self._stop_unknown(record)
        if document is None:
            return False
        try:
            moves = [Move.from_json(_mapping(m)) for m in _list(document.get("moves"))]
            journaled = _apply_journal(moves, document, await self._record.read_journal())
        except (KeyError, ValueError, TypeError) as e:
            log.warning("cannot resume a plan: %s: %s", self._file.path, e)
            return False
        plan = {k: v for k, v in document.items() if k not in ("moves", "topic_lists", "version")}
        lists = document.get("topic_lists") or {}
        self._moves, self._plan = moves, plan
        self._plan_copied_at, self._journal = float("-inf"), []
        self._topic_lists = {str(t): (str(v[0]), str(v[1])) for t, v in dict(lists).items()}  # type: ignore[call-overload]
        self._rates, self._copied = RateWindow(), sum(bytes_copied(m, {}) for m in moves)
        if plan.get("state") != RUNNING:
            # A record still naming it as running (its planner died between the copy and the
            # record, or the record's write failed) is set right: new plans wait on it.
            stale_record = (
                record is not None
                and record.get("plan_id") == plan.get("plan_id")
                and record.get("state") == RUNNING
            )
            if from_zookeeper:
                # Ended by another planner: shown by status() here too.
                self._log_end(" (executed by another planner; from its copy in ZooKeeper)")
            if from_zookeeper or stale_record:
                await self._save(record_too=stale_record)
            return False
        if record is not None and record.get("plan_id") != plan.get("plan_id"):
            plan["state"], plan["message"] = FAILED, f"superseded by plan {record.get('plan_id')}"
            log.warning(
                "not resuming plan %s: /keel/plan names %s", plan.get("plan_id"), record.get("plan_id")
            )
            await self._save(record_too=False)
            return False
        if record is not None and record.get("state") != RUNNING:
            plan["state"] = str(record.get("state"))
            await self._save(record_too=False)
            return False
        done = sum(m.state is MoveState.DONE for m in moves)
        in_flight = sum(m.state is MoveState.IN_FLIGHT for m in moves)
        log.info(
            "resuming plan %s: %d of %d moves done, %d were in flight%s%s",
            plan.get("plan_id"),
            done,
            len(moves),
            in_flight,
            " (taken over from its copy in ZooKeeper)" if from_zookeeper else "",
            f"; {journaled} moves changed since, from its journal" if journaled else "",
        )
        self._connect()
        # This activation's own copies from now on (see _more_recent).
        plan["writer"] = _new_writer()
        await self._try_rates()
        await self._save()
        self._launch()
        return True

    async def _stop_unknown(self, record: dict[str, object] | None) -> None:
        """/keel/plan names a running plan that neither this state dir nor ZooKeeper holds
        (its copy is unreadable): nobody can go on with it, so it is reported stopped, and
        new plans are not refused for ever."""
        if record is None or record.get("state") != RUNNING:
            return
        log.warning(
            "plan %s stopped: /keel/plan names it as running, but no copy of it can be read",
            record.get("plan_id"),
        )
        await self._record.write({**record, "state": FAILED, "updated_ms": self._clock.wall_ms()})

    async def cancel(self) -> dict[str, object]:
        """Stop the plan: the moves in flight are cancelled at the controller (their
        partitions go back to the replicas before the step), the pending ones are dropped,
        the throttles removed. Raises LookupError when no plan runs."""
        async with self._lifecycle:
            return await self._cancel()

    async def _cancel(self) -> dict[str, object]:
        if not self.running:
            raise LookupError("no plan is being executed")
        await self._stop_loop()
        admin = self._connect()
        unfinished = [m for m in self._moves if m.state not in FINISHED]
        metadata = await admin.metadata(sorted({m.topic for m in unfinished}))
        current, _ = _assignment(metadata)
        ongoing = await self._list_ongoing(admin, [m.tp for m in unfinished])
        # What completed since the last look stays done.
        changed, _ = reconcile(
            self._moves, current, ongoing, self._clock.monotonic(), settle_s=self._settle_s
        )
        self._log_done(changed)
        unfinished = [m for m in unfinished if m.state not in FINISHED]
        ours = [m.tp for m in unfinished if m.tp in ongoing and ongoing[m.tp].target in (m.step, m.target)]
        if ours:
            response = await admin.alter_partition_reassignments(dict.fromkeys(ours))
            if response.error_code != ErrorCode.NONE:
                log.warning(
                    "cancelling plan %s: the controller refused: %s",
                    self._plan.get("plan_id"),
                    ErrorCode(response.error_code).name,
                )
        for move in unfinished:
            was = move.state
            move.state = MoveState.CANCELLED
            move.reason = (
                "cancelled in flight" if was is MoveState.IN_FLIGHT else "cancelled before it started"
            )
        log.info(
            "cancelled plan %s: %d moves in flight cancelled at the controller, %d not started",
            self._plan.get("plan_id"),
            len(ours),
            len(unfinished) - len(ours),
        )
        await self._end(CANCELLED)
        return self.status()

    async def close(self) -> None:
        """Stop looking (the plan stays saved, to be resumed) and close the connections."""
        async with self._lifecycle:
            await self._close()

    async def _close(self) -> None:
        await self._stop_loop()
        if self._unsaved:
            await self._save()
        if self._sizes is not None:
            await self._sizes.close()
            self._sizes = None
        if self._admin is not None:
            await self._admin.close()
            self._admin = None

    async def wait(self) -> None:
        """Until the plan's task ends (complete, failed or cancelled)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def status(self) -> dict[str, object]:
        """The plan's progress as a JSON-able dict; {} before any plan."""
        if not self._plan:
            return {}
        counts = {state: 0 for state in MoveState}
        for move in self._moves:
            counts[move.state] += 1
        total_bytes = sum(m.bytes_total for m in self._moves)
        rate = self._rates.rate() if self.running else None
        return {
            "plan_id": self._plan.get("plan_id"),
            "origin": self._plan.get("origin"),
            "reason": self._plan.get("reason"),
            "state": self._plan.get("state"),
            "created_ms": self._plan.get("created_ms"),
            "finished_ms": self._plan.get("finished_ms"),
            "message": self._plan.get("message") or self._last_error,
            "moves_total": len(self._moves),
            "moves_done": counts[MoveState.DONE],
            "moves_in_flight": counts[MoveState.IN_FLIGHT],
            "moves_pending": counts[MoveState.PENDING],
            "moves_failed": counts[MoveState.FAILED],
            "moves_cancelled": counts[MoveState.CANCELLED],
            "bytes_total": total_bytes,
            "bytes_copied": min(self._copied, total_bytes),
            "rate_bytes_per_s": rate,
            "seconds_left": seconds_left(total_bytes, self._copied, rate) if self.running else 0.0,
            "throttle_bytes_per_s": self._plan.get("throttle_bytes_per_s"),
            "max_moves_per_broker": self._plan.get("max_moves_per_broker"),
            "in_flight": [
                {"topic": m.topic, "partition": m.partition, "replicas": list(m.step or ())}
                for m in self._moves
                if m.state is MoveState.IN_FLIGHT
            ][:LISTED],
            "failures": [
                {"topic": m.topic, "partition": m.partition, "reason": m.reason}
                for m in self._moves
                if m.state is MoveState.FAILED
            ][:LISTED],
        }

    def moves(self) -> list[Move]:
        return list(self._moves)

    # --- one look at the cluster ---

    async def tick(self) -> None:
        """Reconcile with the controller, start what fits, measure, save."""
        if not self.running:
            return
        admin = self._connect()
        unfinished = [m for m in self._moves if m.state not in FINISHED]
        metadata = await admin.metadata(sorted({m.topic for m in unfinished}))
        current, leaders = _assignment(metadata)
        ongoing = await self._list_ongoing(admin, [m.tp for m in unfinished])
        changed, blocked = reconcile(
            self._moves, current, ongoing, self._clock.monotonic(), settle_s=self._settle_s
        )
        for move in changed:
            if move.state is MoveState.FAILED:
                log.warning(
                    "plan %s: move of %s-%d failed: %s",
                    self._plan.get("plan_id"),
                    move.topic,
                    move.partition,
                    move.reason,
                )
        if changed:
            # Saved even if the journal's write below fails.
            self._unsaved = True
        self._log_done(changed)
        await self._write_journal(changed)
        if not self._rates_applied:
            await self._try_rates()
        if all(m.state in FINISHED for m in self._moves):
            await self._measure(metadata)
            await self._end(FAILED if any(m.state is MoveState.FAILED for m in self._moves) else COMPLETE)
            return
        started = await self._start_batch(admin, current, leaders, blocked)
        await self._measure(metadata)
        if changed or started:
            self._unsaved = True
        now = self._clock.monotonic()
        if (self._unsaved and now - self._saved_at >= SAVE_INTERVAL_S) or (
            self._copy_behind and now - self._plan_copied_at >= PLAN_COPY_INTERVAL_S
        ):
            await self._save()

    async def _start_batch(
        self,
        admin: ReassignmentAdmin,
        current: Mapping[Partition, list[int]],
        leaders: Mapping[Partition, int],
        blocked: set[Partition],
    ) -> int:
        batch = select_batch(self._moves, current, leaders, self.max_moves_per_broker, blocked=blocked)
        if not batch:
            return 0
        if not await self._throttle_lists([(m.tp, tuple(current[m.tp]), s) for m, s in batch]):
            return 0
        # In the journal before the controller has them: a planner taking the plan over
        # from an older copy watches these moves rather than sends them again.
        await self._write_journal([_started(m, current[m.tp], s) for m, s in batch])
        for move, step in batch:
            log.info(SUBMITTING_LINE, self._plan.get("plan_id"), move.topic, move.partition, list(step))
        try:
            response = await admin.alter_partition_reassignments({m.tp: s for m, s in batch})
        except BaseException:
            # Perhaps never sent: the journal has them back as they are. (Had the controller
            # taken them, a planner taking over finds them in progress and waits for them.)
            with contextlib.suppress(Exception):
                await self._write_journal([m for m, _ in batch])
            raise
        if response.error_code != ErrorCode.NONE:
            self._last_error = f"the controller refused the moves: {ErrorCode(response.error_code).name}"
            log.warning("plan %s: %s; trying again", self._plan.get("plan_id"), self._last_error)
            await self._write_journal([m for m, _ in batch])
            return 0
        self._last_error = ""
        errors = {
            (t.name, p.partition_index): (p.error_code, p.error_message)
            for t in response.responses
            for p in t.partitions
        }
        for move, step in batch:
            code, message = errors.get(move.tp, (ErrorCode.NONE, None))
            self._unsaved = True
            if code == ErrorCode.NONE:
                start_step(move, current[move.tp], step)
            else:
                move.state = MoveState.FAILED
                move.reason = f"{ErrorCode(code).name}: {message or ''}".rstrip(": ")
                log.warning(
                    "plan %s: the controller refused the move of %s-%d: %s",
                    self._plan.get("plan_id"),
                    move.topic,
                    move.partition,
                    move.reason,
                )
        await self._write_journal([m for m, _ in batch if m.state is MoveState.FAILED])
        log.info(
            "plan %s: started %d moves; %d in flight",
            self._plan.get("plan_id"),
            len(batch),
            sum(m.state is MoveState.IN_FLIGHT for m in self._moves),
        )
        return len(batch)

    # --- throttles ---

    @property
    def _throttle(self) -> int:
        """The plan's own throttle (a resumed plan keeps the one it started with);
        `throttle_bytes_per_s` is what the next plan starts with."""
        value = self._plan.get("throttle_bytes_per_s")
        return value if isinstance(value, int) else self.throttle_bytes_per_s

    async def _apply_rates(self) -> None:
        """The throttle rates on every broker that a move still to finish copies from or to."""
        self._rates_applied = True
        if self._throttle < 0:
            return
        brokers = sorted({b for m in self._moves if m.state not in FINISHED for b in (*m.source, *m.target)})
        # Named as throttled before they are: a plan that ends clears them either way.
        known = {_int(b) for b in _list(self._plan.get("throttled_brokers"))}
        self._plan["throttled_brokers"] = sorted(known | set(brokers))
        self._rates_applied = await self._alter(broker_rate_resources(brokers, self._throttle))

    async def _try_rates(self) -> None:
        """_apply_rates, or a note to try again at the next look."""
        try:
            await self._apply_rates()
        except (WireError, OSError, TimeoutError) as e:
            self._rates_applied = False
            self._report(f"cannot set the throttle rates: {e}")

    async def _throttle_lists(
        self, starting: list[tuple[Partition, tuple[int, ...], tuple[int, ...]]]
    ) -> bool:
        """Each topic's throttled replicas: the moves in flight and those starting. False
        when the configs could not be written (the moves then wait for the next look)."""
        if self._throttle < 0:
            return True
        origins = {m.tp: list(m.step_origin) for m in self._moves if m.state is MoveState.IN_FLIGHT}
        steps = {m.tp: list(m.step or ()) for m in self._moves if m.state is MoveState.IN_FLIGHT}
        for tp, origin, step in starting:
            origins[tp], steps[tp] = list(origin), list(step)
        wanted = throttle_plan(origins, steps).topics
        changes: dict[str, tuple[str, str] | None] = {
            t: v for t, v in wanted.items() if self._topic_lists.get(t) != v
        }
        changes.update({t: None for t in self._topic_lists if t not in wanted})
        if not changes:
            return True
        # A topic deleted under the plan has no throttle to set or remove: its moves fail as
        # "no longer exists", and the others must not wait on it.
        if not await self._alter(topic_list_resources(changes), missing_ok=True):
            return False
        self._topic_lists = dict(wanted)
        ever = {str(t) for t in _list(self._plan.get("throttled_topics"))}
        self._plan["throttled_topics"] = sorted(ever | set(wanted))
        return True

    async def _clear_throttles(self) -> None:
        brokers = [_int(b) for b in _list(self._plan.get("throttled_brokers"))]
        topics = [str(t) for t in _list(self._plan.get("throttled_topics"))]
        if not brokers and not topics:
            return
        resources = broker_rate_resources(brokers, None) + topic_list_resources(dict.fromkeys(topics))
        if await self._alter(resources, missing_ok=True):
            self._topic_lists = {}
            log.info(
                "plan %s: throttles removed from brokers %s and topics %s",
                self._plan.get("plan_id"),
                brokers,
                topics,
            )

    async def _alter(self, resources: list[AlterConfigsResource], *, missing_ok: bool = False) -> bool:
        if not resources:
            return True
        response = await self._connect().incremental_alter_configs(resources)
        failed = [
            r
            for r in response.responses
            if r.error_code != ErrorCode.NONE
            and not (missing_ok and r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        ]
        for r in failed:
            self._last_error = (
                f"cannot set the throttle on {r.resource_name}: "
                f"{ErrorCode(r.error_code).name}: {r.error_message}"
            )
            log.warning("plan %s: %s", self._plan.get("plan_id"), self._last_error)
        return not failed

    # --- progress ---

    async def _measure(self, metadata: MetadataResponse) -> None:
        """Bytes copied: the moves done in full, and what the replicas being added hold."""
        wanted: dict[int, list[Partition]] = {}
        for move in self._moves:
            if move.state is MoveState.IN_FLIGHT and move.step is not None:
                for broker in set(move.step) - set(move.step_origin):
                    wanted.setdefault(broker, []).append(move.tp)
        sizes: dict[int, dict[Partition, int]] = {}
        if wanted:
            source = self._size_source(metadata)
            for broker, tps in wanted.items():
                sizes[broker] = await source.sizes(broker, tps)
        copied = 0
        for move in self._moves:
            adding = {b: s.get(move.tp, 0) for b, s in sizes.items()}
            copied += bytes_copied(move, adding)
        self._copied = copied
        self._rates.add(self._clock.monotonic(), copied)

    async def _fill_sizes(
        self, metadata: MetadataResponse, leaders: Mapping[Partition, int], moves: list[Move]
    ) -> None:
        by_leader: dict[int, list[Move]] = {}
        for move in moves:
            by_leader.setdefault(leaders.get(move.tp, -1), []).append(move)
        source = self._size_source(metadata)
        for leader, group in by_leader.items():
            if leader < 0:
                continue
            sizes = await source.sizes(leader, [m.tp for m in group])
            for move in group:
                move.size_bytes = max(move.size_bytes, sizes.get(move.tp, 0))

    def _size_source(self, metadata: MetadataResponse) -> SizeSource:
        if self._sizes is None:
            self._sizes = self._size_source_factory(metadata)
        else:
            self._sizes.update(metadata)
        return self._sizes

    # --- the task, the end, saving ---

    def _connect(self) -> ReassignmentAdmin:
        if self._admin is None:
            self._admin = self._admin_factory()
        return self._admin

    def _launch(self) -> None:
        self._stopping = False
        if self._autorun:
            self._task = asyncio.create_task(self._run(), name=f"plan-{self._plan.get('plan_id')}")

    async def _run(self) -> None:
        while not self._stopping and self.running:
            try:
                await self.tick()
            except (WireError, OSError, TimeoutError) as e:
                self._report(f"cannot reach the cluster: {e}")
            except Exception as e:
                if not connection_lost(e):
                    # Not one we know: logged whole, and the next look tries again.
                    log.exception("plan %s: a look at the cluster failed", self._plan.get("plan_id"))
                self._report(f"cannot reach ZooKeeper: {e!r}")
            if self._stopping or not self.running:
                break
            await self._wait_for_change()

    def _report(self, message: str) -> None:
        if message != self._last_error:
            log.warning("plan %s: %s; trying again", self._plan.get("plan_id"), message)
        self._last_error = message

    async def _wait_for_change(self) -> None:
        """Until the next full look: `poll_interval_s`, or sooner when a move in flight is
        no longer in progress at the controller (a cheap ListPartitionReassignments of the
        moves in flight every `watch_interval_s`), so that the next moves start at once."""
        deadline = self._clock.monotonic() + self._poll_interval_s
        in_flight = [m.tp for m in self._moves if m.state is MoveState.IN_FLIGHT]
        self._wake.clear()
        while not self._stopping:
            left = deadline - self._clock.monotonic()
            if left <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), min(left, self._watch_interval_s))
            if self._wake.is_set() or not in_flight:
                continue
            try:
                ongoing = await self._list_ongoing(self._connect(), in_flight)
            except (WireError, OSError, TimeoutError):
                continue
            if len(ongoing) < len(in_flight):
                return

    async def _stop_loop(self) -> None:
        self._stopping = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            await task

    async def _end(self, state: str) -> None:
        self._plan["state"] = state
        self._plan["finished_ms"] = self._clock.wall_ms()
        await self._clear_throttles()
        await self._save()
        self._log_end()

    async def _copy(self, document: dict[str, object]) -> None:
        """ZooKeeper's copy of the plan: `document`, then an empty journal (the copy holds
        all of it)."""
        await self._record.write_plan(document)
        self._plan_copied_at, self._copy_behind = self._clock.monotonic(), False
        if self._journal:
            self._journal = []
            await self._record.write_journal(self._journal_document([]))

    async def _write_journal(self, moves: Iterable[Move]) -> None:
        """Add `moves` as they are now to the journal beside ZooKeeper's copy, each with this
        writer and the revision of its last save: it happened after that save, and a copy of
        the plan at that revision or older does not hold it. A journal grown too large for a
        znode gives way to a whole copy, with `moves` in it as they are given."""
        moves = list(moves)
        writer, revision = self._plan.get("writer"), _revision(self._plan)
        entries = [{"writer": writer, "revision": revision, "move": m.to_json()} for m in moves]
        if not entries:
            return
        journal = self._journal_document(self._journal + entries)
        if len(orjson.dumps(journal)) > JOURNAL_MAX_BYTES:
            await self._copy(self._document({m.tp: m for m in moves}))
            return
        await self._record.write_journal(journal)
        self._journal = _list_of_dicts(journal["entries"])

    def _journal_document(self, entries: list[dict[str, object]]) -> dict[str, object]:
        return {"version": 1, "plan_id": self._plan.get("plan_id"), "entries": entries}

    def _log_done(self, moves: Iterable[Move]) -> None:
        """A line for each of `moves` found done (at its target replicas)."""
        for move in moves:
            if move.state is MoveState.DONE:
                log.info(DONE_LINE, self._plan.get("plan_id"), move.topic, move.partition)

    def _log_end(self, how: str = "") -> None:
        counts = {s: sum(m.state is s for m in self._moves) for s in MoveState}
        log.info(
            "plan %s %s: %d moves done, %d failed, %d cancelled%s",
            self._plan.get("plan_id"),
            self._plan.get("state"),
            counts[MoveState.DONE],
            counts[MoveState.FAILED],
            counts[MoveState.CANCELLED],
            how,
        )

    def _document(self, moves: Mapping[Partition, Move] | None = None) -> dict[str, object]:
        """The plan as saved, with `moves` in place of the executor's own where given. Its
        revision goes up first: which of two copies of one writer is the more recent."""
        self._plan["revision"] = _revision(self._plan) + 1
        overrides = moves or {}
        return {
            "version": 1,
            **self._plan,
            "topic_lists": {t: list(v) for t, v in self._topic_lists.items()},
            "moves": [overrides.get(m.tp, m).to_json() for m in self._moves],
        }

    async def _save(self, *, record_too: bool = True) -> None:
        self._unsaved, self._saved_at = False, self._clock.monotonic()
        document = self._document()
        await asyncio.to_thread(self._file.save, document)
        self._copy_behind = True
        if record_too and (
            self._plan.get("state") != RUNNING
            or self._clock.monotonic() - self._plan_copied_at >= PLAN_COPY_INTERVAL_S
        ):
            # Before the record: a record that names a plan has its copy there already.
            await self._copy(document)
        if record_too:
            await self._record.write(
                {
                    "plan_id": self._plan.get("plan_id"),
                    "state": self._plan.get("state"),
                    "origin": self._plan.get("origin"),
                    "moves_total": len(self._moves),
                    "moves_done": sum(m.state is MoveState.DONE for m in self._moves),
                    "updated_ms": self._clock.wall_ms(),
                }
            )

    async def _list_ongoing(
        self, admin: ReassignmentAdmin, partitions: list[Partition]
    ) -> dict[Partition, Ongoing]:
        if not partitions:
            return {}
        response = await admin.list_partition_reassignments(partitions)
        if response.error_code != ErrorCode.NONE:
            raise for_code(response.error_code, "listing the reassignments in progress")
        return {
            (t.name, p.partition_index): Ongoing(
                tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
            )
            for t in response.topics
            for p in t.partitions
        }


def _assignment(metadata: MetadataResponse) -> tuple[dict[Partition, list[int]], dict[Partition, int]]:
    replicas: dict[Partition, list[int]] = {}
    leaders: dict[Partition, int] = {}
    for topic in metadata.topics:
        if topic.error_code != ErrorCode.NONE:
            continue
        for p in topic.partitions:
            replicas[topic.name, p.partition] = list(p.replicas)
            leaders[topic.name, p.partition] = p.leader
    return replicas, leaders


def _move(entry: Mapping[str, object], sizes: Mapping[Partition, int]) -> Move:
    topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
    if not isinstance(topic, str) or type(partition) is not int or not isinstance(replicas, list | tuple):
        raise PlanExecutionError(f"not a reassignment entry (topic, partition, replicas): {dict(entry)!r}")
    if not replicas or any(type(r) is not int for r in replicas) or len(set(replicas)) != len(replicas):
        raise PlanExecutionError(
            f"{topic}-{partition}: replicas {list(replicas)} are not distinct broker ids"
        )
    return Move(topic, partition, tuple(replicas), size_bytes=int(sizes.get((topic, partition), 0)))


def _started(move: Move, origin: Sequence[int], step: tuple[int, ...]) -> Move:
    """`move` as it is once its step is handed to the controller."""
    started = dataclasses.replace(move)
    start_step(started, origin, step)
    return started


def _apply_journal(
    moves: list[Move], document: Mapping[str, object], journal: Mapping[str, object] | None
) -> int:
    """Bring `moves` (a saved copy of the plan) up to date with the journal of what changed
    since: the entries of the copy's writer written at its revision or later, for the same
    plan. A move the copy already has finished stays so. The number of moves changed."""
    if journal is None or journal.get("plan_id") != document.get("plan_id"):
        return 0
    revision, writer = _revision(document), document.get("writer")
    by_partition = {m.tp: i for i, m in enumerate(moves)}
    changed = 0
    for value in _list(journal.get("entries")):
        entry = _mapping(value)
        if entry.get("writer") != writer or _int(entry.get("revision")) < revision:
            continue
        later = Move.from_json(_mapping(entry.get("move")))
        index = by_partition.get(later.tp)
        if index is None or moves[index].state in FINISHED:
            continue
        moves[index] = later
        changed += 1
    return changed


def _new_writer() -> str:
    """A name for one planner's run of a plan (its start, or each resumption): what it saves
    and journals carries it."""
    return uuid.uuid4().hex[:12]


def _more_recent(copy: Mapping[str, object], saved: Mapping[str, object]) -> bool:
    """Whether ZooKeeper's `copy` of a plan is more recent than the one `saved` in a state
    dir. Every run of a plan copies it to ZooKeeper before it sends a move, so a copy by
    another run than the saved one's is the later run's; of one run's two, the higher
    revision is the later."""
    if copy.get("plan_id") != saved.get("plan_id") or copy.get("writer") != saved.get("writer"):
        return True
    return _revision(copy) > _revision(saved)


def _list_of_dicts(value: object) -> list[dict[str, object]]:
    return [v for v in _list(value) if isinstance(v, dict)]


def _revision(document: Mapping[str, object]) -> int:
    """How many times the plan was saved (0 for a plan saved before revisions were counted)."""
    value = document.get("revision", 0)
    return value if type(value) is int else 0


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else []


def _mapping(value: object) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise ValueError(f"{value!r} is not an object")
    return value


def _int(value: object) -> int:
    if type(value) is not int:
        raise ValueError(f"{value!r} is not an integer")
    return value
