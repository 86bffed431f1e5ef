"""An in-memory ZooKeeper: the ClusterStore port without a server, for the controller's unit
tests and the deterministic simulation (node/sim).

`FakeZooKeeper` holds what the real ensemble would: the controller znode and epoch with its
data version, broker registrations with their czxids and owning sessions, and watchers.
Its watches are the real store's: one-shot, armed by the read that answers (`/controller`
and the admin requests as by `exists`, on a missing znode too; a registration's or a topic's
data as by `getData`, never on a missing one, and used up unreported by the znode's deletion),
and a session's own write reports to it before the write returns.
Each `FakeClusterStore` is one broker's session on it. It passes the same contract suite as
`node.zk.store.ZkClusterStore` (tests/contract/test_cluster_store.py), so what runs against it
does not run against a fantasy.

Every call is a round trip: it yields to the loop, after `FakeZooKeeper.latency()` seconds
when a simulation sets one, so that concurrency is real. A simulation may also watch every
fenced write through `FakeZooKeeper.on_fenced_write`, to check that only the controller of
the current epoch writes. A fenced write passes where the real store's would: `/controller_epoch`
at the version the writer won, and `/controller` there.

A simulation may lose the answers to a session's fenced writes (`FakeClusterStore.lose_replies`):
such a write is applied, then answered as the real store answers a write whose reply was lost
and whose retry it could not recognise as its own (node/zk/retried_writes.py): the partition
states created are each reported as existing, those updated each as a conflict; the topic
znode's conditional set is written once more (the real store re-reads and merges after the
BadVersion); the other fenced writes (deletions, unconditional sets) answer as usual, since the
real store finishes those retries itself (a znode already deleted is done, an unconditional set
is not refused).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable

from actors.base.ports import (
    AcknowledgedChanges,
    BrokerIdTakenError,
    BrokerInfo,
    ChangeRecord,
    ChangeRecordWatcher,
    ClusterWatcher,
    ControllerEpoch,
    ControllerMovedError,
    ControllerView,
    ControllerWatcher,
    LeaderAndIsr,
    LeadershipInfo,
    LogDirEventWatcher,
    PartitionChange,
    PartitionStateConflict,
    PreferredReplicaElectionWatcher,
    ReassignmentWatcher,
    RegisteredBroker,
    ReplicaAssignment,
    SessionExpiredError,
    SessionWatcher,
    TopicAlreadyMarkedForDeletionError,
    TopicAssignment,
    TopicDeletionWatcher,
    TopicExistsError,
    TopicPartition,
    TopicVersionConflict,
    UnknownTopicError,
)
from node.zk import paths
from node.zk import store as zk_store

# What the fake holds in place of `/admin/reassign_partitions` when it is not Kafka's JSON.
INVALID_JSON = object()


@dataclasses.dataclass
class _Ephemeral:
    value: object
    owner: int
    czxid: int


class _VersionedTopics(dict[str, TopicAssignment]):
    """The topic znodes: each write bumps the topic's data version, as ZooKeeper's does."""

    def __init__(self) -> None:
        super().__init__()
        self._versions: dict[str, int] = {}

    def version(self, topic: str) -> int:
        return self._versions[topic]

    def __setitem__(self, topic: str, assignment: TopicAssignment) -> None:
        self._versions[topic] = self._versions[topic] + 1 if topic in self else 0
        super().__setitem__(topic, assignment)

    def __delitem__(self, topic: str) -> None:
        super().__delitem__(topic)
        del self._versions[topic]

    def pop(self, topic: str, default: object = None) -> object:  # type: ignore[override]
        self._versions.pop(topic, None)
        return super().pop(topic, default)


class FakeZooKeeper:
    def __init__(self) -> None:
        self.topics = _VersionedTopics()
        self.topic_configs: dict[str, dict[str, str]] = {}
        # partition -> (state, controller epoch that wrote it, data version)
        self.partition_states: dict[TopicPartition, tuple[LeaderAndIsr, int, int]] = {}
        self.cluster_watchers: list[tuple[FakeClusterStore, ClusterWatcher]] = []
        self.controller: _Ephemeral | None = None
        self.epoch: tuple[int, int] | None = None  # (value, data version)
        self.brokers: dict[int, _Ephemeral] = {}
        self.controller_watchers: list[tuple[FakeClusterStore, ControllerWatcher]] = []
        # /admin/delete_topics children, and who watches them.
        self.deletion_markers: set[str] = set()
        self.deletion_watchers: list[tuple[FakeClusterStore, TopicDeletionWatcher]] = []
        # /admin/reassign_partitions: None when absent; INVALID_JSON when unreadable.
        self.reassignments: dict[TopicPartition, tuple[int, ...]] | object | None = None
        self.reassignment_watchers: list[tuple[FakeClusterStore, ReassignmentWatcher]] = []
        self._zxid = itertools.count(100)
        self.preferred_replica_election: list[TopicPartition] | None = None
        self.preferred_election_watchers: list[tuple[FakeClusterStore, PreferredReplicaElectionWatcher]] = []
        self._sessions = itertools.count(1)
        # /log_dir_event_notification children (name -> broker), and who watches them.
        self.log_dir_events: dict[str, int] = {}
        self.log_dir_event_watchers: list[tuple[FakeClusterStore, LogDirEventWatcher]] = []
        self._log_dir_event_seq = itertools.count()
        # The session (store) that bumped `/controller_epoch` to its current value.
        self.epoch_owner: FakeClusterStore | None = None
        # /keel/controller_changes: each record by its sequence, oldest first (docs/STANDBY.md).
        self.change_records: dict[int, ChangeRecord] = {}
        self._change_seq = itertools.count()
        self.change_record_watchers: list[tuple[FakeClusterStore, ChangeRecordWatcher]] = []
        self.change_records_epoch: int | None = None
        # /keel/acknowledged_changes: the last controller's mark (None: none or cleared).
        self.acknowledged: AcknowledgedChanges | None = None
        # Set by a simulation: each round trip's delay, and an observer of fenced writes
        # (the writing store, and the controller epoch it stamps on what it writes, or None).
        self.latency: Callable[[], float] | None = None
        self.on_fenced_write: Callable[[FakeClusterStore, int | None], None] | None = None
        # And an observer of every partition state written: the partition, the state it
        # replaces (None for a new one), and the new state.
        self.on_partition_state: (
            Callable[[TopicPartition, LeaderAndIsr | None, LeaderAndIsr], None] | None
        ) = None

    def next_zxid(self) -> int:
        return next(self._zxid)

    def elected(self, broker_id: int, epoch: tuple[int, int]) -> None:
        """What an election on a session outside this ensemble leaves: `/controller` naming
        the broker (owned by no store's session), and `/controller_epoch` at `epoch` (its value
        and data version). For tests that start from a controller already in office."""
        self.controller = _Ephemeral(broker_id, -1, self.next_zxid())
        self.epoch = epoch

    def write_partition_state(self, tp: TopicPartition, state: LeaderAndIsr, controller_epoch: int) -> int:
        """Store a partition's state at the next data version (0 for a new one); the version."""
        current = self.partition_states.get(tp)
        version = 0 if current is None else current[2] + 1
        self.partition_states[tp] = (state, controller_epoch, version)
        if self.on_partition_state is not None:
            self.on_partition_state(tp, None if current is None else current[0], state)
        return version

    def new_session(self) -> int:
        return next(self._sessions)

    def controller_event(self, deleted: bool) -> None:
        # A watch fires once per arming: only stores that re-read since the last event hear it.
        for store, watcher in self.controller_watchers:
            if store.controller_watch_armed and not store.expired:
                store.controller_watch_armed = False
                if deleted:
                    watcher.controller_deleted()
                else:
                    watcher.controller_changed()

    def fire(self, watch: str, call: str, *args: object) -> None:
        """A watch fires once per arming, for stores that armed it."""
        for store, watcher in self.cluster_watchers:
            if watch in store.armed and not store.expired:
                store.armed.discard(watch)
                getattr(watcher, call)(*args)

    def data_watch_deleted(self, path: str) -> None:
        """A znode's deletion fires its data watches; the stores report that of a registration
        or a topic to nobody (the parent's children watch reports the deletion), so it is
        only used up."""
        for store, _ in self.cluster_watchers:
            store.armed.discard(path)

    def update_broker_registration(self, info: BrokerInfo) -> None:
        """What an operator's `set /brokers/ids/<id>` (Kafka's updateBrokerInfo) does: new data
        in the same ephemeral znode, which fires the data watches armed on it."""
        self.brokers[info.broker_id].value = info
        self.fire(f"/brokers/ids/{info.broker_id}", "broker_modified", info.broker_id)

    def create_preferred_replica_election(self, partitions: list[TopicPartition]) -> None:
        """What an admin tool writes; reported once to each store that armed the watch."""
        if self.preferred_replica_election is not None:
            raise FileExistsError("/admin/preferred_replica_election exists")
        self.preferred_replica_election = list(partitions)
        for store, watcher in self.preferred_election_watchers:
            if store.preferred_election_watch_armed and not store.expired:
                store.preferred_election_watch_armed = False
                watcher.preferred_replica_election_created()

    def fire_topic_deletions(self) -> None:
        for store, watcher in self.deletion_watchers:
            if "/admin/delete_topics" in store.armed and not store.expired:
                store.armed.discard("/admin/delete_topics")
                watcher.topic_deletions_changed()

    def fire_change_records(self) -> None:
        """Once per arming, to every watcher of the stores that armed it."""
        armed = {
            id(store) for store, _ in self.change_record_watchers if paths.CONTROLLER_CHANGES in store.armed
        }
        for store, watcher in self.change_record_watchers:
            if id(store) in armed and not store.expired:
                store.armed.discard(paths.CONTROLLER_CHANGES)
                watcher.change_records_changed()

    def fire_log_dir_events(self) -> None:
        for store, watcher in self.log_dir_event_watchers:
            if "/log_dir_event_notification" in store.armed and not store.expired:
                store.armed.discard("/log_dir_event_notification")
                watcher.log_dir_events_changed()

    def reassignments_created(self) -> None:
        """An exists-watch fires once per arming, for stores that armed it."""
        for store, watcher in self.reassignment_watchers:
            if store.reassignment_watch_armed and not store.expired:
                store.reassignment_watch_armed = False
                watcher.partition_reassignment_created()

    def drop_session(self, session: int) -> None:
        if self.controller is not None and self.controller.owner == session:
            self.controller = None
            self.controller_event(deleted=True)
        for broker_id, node in list(self.brokers.items()):
            if node.owner == session:
                del self.brokers[broker_id]
                self.data_watch_deleted(f"/brokers/ids/{broker_id}")
                self.fire("/brokers/ids", "brokers_changed")


class FakeClusterStore:
    def __init__(self, zk: FakeZooKeeper, *, stale_session_wait: float = 0.0) -> None:
        self.zk = zk
        self.session = zk.new_session()
        self.expired = False
        self.controller_watch_armed = False
        self.preferred_election_watch_armed = False
        self.armed: set[str] = set()
        self.reassignment_watch_armed = False
        self.session_watchers: list[SessionWatcher] = []
        self.stale_session_wait = stale_session_wait
        # Faults a test may inject into the next calls.
        self.fail_next_registered_brokers: Exception | None = None
        self.fail_next_topic_configs: Exception | None = None
        self.fail_next_create_partition_states: Exception | None = None
        # Set by a simulation: whether the answer to the fenced write being made is lost.
        self.lose_replies: Callable[[], bool] | None = None
        # Cleared while this client cannot reach the ensemble: its calls wait, as a real
        # client's do while it reconnects (a simulation's network partition).
        self.reachable = asyncio.Event()
        self.reachable.set()
        self.registry = FakeBrokerRegistry(self)
        # As ZkClusterStore's: whether writes of partition states are recorded, how many
        # records this store wrote, and under which controller epoch.
        self.change_records = False
        self.records_written = 0
        self._recording_epoch = 0

    # --- change records (docs/STANDBY.md), as ZkClusterStore writes them ---

    def _record(self, record: ChangeRecord) -> None:
        """With records on, what a write changed, as one record; the oldest trimmed beyond
        what is kept, a batch at a time."""
        if not self.change_records or record.starts_epoch:
            return
        records = self.zk.change_records
        records[next(self.zk._change_seq)] = record
        self.records_written += 1
        self.zk.fire_change_records()
        if len(records) >= zk_store.RECORDS_KEPT + zk_store._RECORDS_TRIMMED_AT_ONCE:
            for sequence in sorted(records)[: zk_store._RECORDS_TRIMMED_AT_ONCE]:
                del records[sequence]
            self.zk.fire_change_records()

    async def change_record_names(self, *, watch: bool = False) -> list[str]:
        await self.round_trip()
        if watch:
            self.armed.add(paths.CONTROLLER_CHANGES)
        return [f"{paths.CHANGE_PREFIX}{sequence:010d}" for sequence in sorted(self.zk.change_records)]

    async def start_change_records(self, controller_epoch: int, epoch_zk_version: int) -> None:
        await self.round_trip()
        self._check_fence(epoch_zk_version, controller_epoch)
        self.zk.change_records_epoch = controller_epoch
        self._recording_epoch = controller_epoch
        records = self.zk.change_records
        records[next(self.zk._change_seq)] = ChangeRecord(controller_epoch, ())
        self.records_written += 1
        self.zk.fire_change_records()

    async def change_records_generation(self) -> int | None:
        await self.round_trip()
        return 1  # the in-memory ensemble's parent is never deleted

    async def change_records_epoch(self) -> int | None:
        await self.round_trip()
        return self.zk.change_records_epoch

    def watch_change_records(self, watcher: ChangeRecordWatcher) -> None:
        self.zk.change_record_watchers.append((self, watcher))

    async def change_records_named(self, names: list[str]) -> list[ChangeRecord | None]:
        await self.round_trip()
        sequences = [paths.change_sequence(name) for name in names]
        return [None if s is None else self.zk.change_records.get(s) for s in sequences]

    async def acknowledged_changes(self) -> AcknowledgedChanges | None:
        await self.round_trip()
        return self.zk.acknowledged

    async def mark_acknowledged(self, mark: AcknowledgedChanges | None, epoch_zk_version: int) -> None:
        await self.round_trip()
        self._check_fence(epoch_zk_version)
        self.zk.acknowledged = mark

    async def round_trip(self) -> None:
        # Every real call is a round trip; yield so concurrency in the tests is real.
        await self.reachable.wait()
        await asyncio.sleep(0 if self.zk.latency is None else self.zk.latency())
        await self.reachable.wait()

    async def round_trip_on_session(self) -> None:
        """The round trip of a call whose effect belongs to the session (an ephemeral it
        creates): the real client fails such a call with SessionExpired when the session
        expired before it was answered (node/zk/client.py), and it creates nothing."""
        session = self.session
        await self.round_trip()
        self.check_session(session)

    def check_session(self, session: int) -> None:
        if self.expired or self.session != session:
            raise SessionExpiredError(f"ZooKeeper session {session} expired before the call was answered")

    async def controller_id(self) -> int | None:
        await self.round_trip()
        self.controller_watch_armed = True
        return None if self.zk.controller is None else int(self.zk.controller.value)  # type: ignore[call-overload]

    async def controller_epoch(self) -> ControllerEpoch | None:
        await self.round_trip()
        return None if self.zk.epoch is None else ControllerEpoch(*self.zk.epoch)

    async def read_controller(self) -> ControllerView:
        await self.round_trip()
        self.controller_watch_armed = True
        holder = None if self.zk.controller is None else int(self.zk.controller.value)  # type: ignore[call-overload]
        return ControllerView(holder, None if self.zk.epoch is None else ControllerEpoch(*self.zk.epoch))

    async def register_controller_and_increment_epoch(
        self, broker_id: int, seen: ControllerEpoch | None = None
    ) -> ControllerEpoch:
        await self.round_trip_on_session()
        if self.zk.epoch is None:
            self.zk.epoch = (0, 0)
        if self.zk.controller is not None:
            raise ControllerMovedError(f"broker {self.zk.controller.value} is controller")
        value, version = self.zk.epoch
        if seen is not None and seen.zk_version != version:
            raise ControllerMovedError(f"/controller_epoch moved past version {seen.zk_version}")
        self.zk.epoch = (value + 1, version + 1)
        self.zk.epoch_owner = self
        self.zk.controller = _Ephemeral(broker_id, self.session, self.zk.next_zxid())
        self.zk.controller_event(deleted=False)
        return ControllerEpoch(*self.zk.epoch)

    async def delete_controller(self, epoch_zk_version: int) -> None:
        await self.round_trip()
        if self.zk.epoch is None or self.zk.epoch[1] != epoch_zk_version:
            raise ControllerMovedError(f"/controller_epoch is past version {epoch_zk_version}")
        if self.zk.controller is not None:
            self.zk.controller = None
            self.zk.controller_event(deleted=True)

    async def force_delete_controller(self) -> int | None:
        await self.round_trip()
        holder = self.zk.controller
        if holder is not None:
            self.zk.controller = None
            self.zk.controller_event(deleted=True)
        return None if holder is None else int(holder.value)  # type: ignore[call-overload]

    async def register_broker(self, info: BrokerInfo) -> int:
        return await self.registry.register_broker(info)

    async def registered_brokers(self, *, watch: bool = False) -> list[RegisteredBroker]:
        return await self.registry.registered_brokers(watch=watch)

    async def registered_broker(self, broker_id: int, *, watch: bool = False) -> RegisteredBroker | None:
        return await self.registry.registered_broker(broker_id, watch=watch)

    async def topics(self, *, watch: bool = False) -> set[str]:
        await self.round_trip()
        if watch:
            self.armed.add("/brokers/topics")
        return set(self.zk.topics)

    async def topic_assignments(self, topics: set[str], *, watch: bool = False) -> dict[str, TopicAssignment]:
        await self.round_trip()
        found = {t: self.zk.topics[t] for t in topics if t in self.zk.topics}
        if watch:
            # Only on the topics read: a failed getData arms nothing.
            self.armed.update(f"/brokers/topics/{t}" for t in found)
        return found

    async def topic_configs(self, topics: set[str]) -> dict[str, dict[str, str]]:
        await self.round_trip()
        if self.fail_next_topic_configs is not None:
            error, self.fail_next_topic_configs = self.fail_next_topic_configs, None
            raise error
        return {t: dict(self.zk.topic_configs.get(t, {})) for t in topics}

    async def partition_states(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, LeadershipInfo]:
        await self.round_trip()
        found = {}
        for tp in partitions:
            if tp in self.zk.partition_states:
                state, controller_epoch, version = self.zk.partition_states[tp]
                found[tp] = LeadershipInfo(state._replace(partition_epoch=version), controller_epoch)
        return found

    def _check_fence(self, epoch_zk_version: int, controller_epoch: int | None = None) -> None:
        # The real store's two checks (node/zk/store.py): the epoch's version, and that
        # `/controller` exists, whoever's it is (a check op sees no owner).
        if self.zk.epoch is None or self.zk.epoch[1] != epoch_zk_version:
            raise ControllerMovedError(f"/controller_epoch is past version {epoch_zk_version}")
        if self.zk.controller is None:
            raise ControllerMovedError("/controller is gone: the reign that wrote the epoch has ended")
        if self.zk.on_fenced_write is not None:
            self.zk.on_fenced_write(self, controller_epoch)

    def _reply_lost(self) -> bool:
        return self.lose_replies is not None and self.lose_replies()

    async def create_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], controller_epoch: int, epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        await self.round_trip()
        self._check_fence(epoch_zk_version, controller_epoch)
        if self.fail_next_create_partition_states is not None:
            error, self.fail_next_create_partition_states = self.fail_next_create_partition_states, None
            return dict.fromkeys(states, error)
        lost = self._reply_lost()
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        changes = []
        for tp, state in states.items():
            if tp in self.zk.partition_states:
                results[tp] = FileExistsError(f"{tp} state exists")
                continue
            self.zk.write_partition_state(tp, state, controller_epoch)
            written = state._replace(partition_epoch=0)
            changes.append(PartitionChange(tp, -1, LeadershipInfo(written, controller_epoch)))
            results[tp] = FileExistsError(f"{tp} state exists") if lost else written
        self._record(ChangeRecord(controller_epoch, tuple(changes)))
        return results

    async def update_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], controller_epoch: int, epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        await self.round_trip()
        self._check_fence(epoch_zk_version, controller_epoch)
        lost = self._reply_lost()
        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        changes = []
        for tp, state in states.items():
            current = self.zk.partition_states.get(tp)
            conflict = PartitionStateConflict(f"{tp}: partition epoch moved past {state.partition_epoch}")
            if current is None:
                results[tp] = LookupError(f"{tp} has no state")
            elif current[2] != state.partition_epoch:
                results[tp] = conflict
            else:
                version = self.zk.write_partition_state(tp, state, controller_epoch)
                written = state._replace(partition_epoch=version)
                changes.append(PartitionChange(tp, current[2], LeadershipInfo(written, controller_epoch)))
                results[tp] = conflict if lost else written
        self._record(ChangeRecord(controller_epoch, tuple(changes)))
        return results

    async def partition_reassignments(
        self, *, watch: bool = False
    ) -> dict[TopicPartition, tuple[int, ...]] | None:
        await self.round_trip()
        if watch:
            self.reassignment_watch_armed = True
        current = self.zk.reassignments
        if current is INVALID_JSON:
            return {}
        return None if current is None else dict(current)  # type: ignore[call-overload]

    async def set_partition_reassignments(
        self, reassignments: dict[TopicPartition, tuple[int, ...]], epoch_zk_version: int
    ) -> None:
        await self.round_trip()
        self._check_fence(epoch_zk_version)
        existed = self.zk.reassignments is not None
        self.zk.reassignments = dict(reassignments) if reassignments else None
        if reassignments and not existed:
            self.zk.reassignments_created()

    async def create_partition_reassignments(
        self, reassignments: dict[TopicPartition, tuple[int, ...]]
    ) -> None:
        await self.round_trip()
        if self.zk.reassignments is not None:
            raise FileExistsError("/admin/reassign_partitions exists: a reassignment is in progress")
        self.zk.reassignments = dict(reassignments)
        self.zk.reassignments_created()

    def write_invalid_reassignments(self) -> None:
        """What a broken tool leaves behind: a node that is not Kafka's JSON."""
        self.zk.reassignments = INVALID_JSON
        self.zk.reassignments_created()

    async def set_partition_assignments(
        self, topic: str, partitions: dict[int, ReplicaAssignment], epoch_zk_version: int
    ) -> None:
        await self.round_trip()
        self._check_fence(epoch_zk_version)
        for _ in range(2 if self._reply_lost() else 1):
            current = self.zk.topics[topic]
            self.zk.topics[topic] = TopicAssignment(
                topic, {**current.partitions, **partitions}, current.topic_id
            )
            self.zk.fire(f"/brokers/topics/{topic}", "topic_modified", topic)
        self._record(ChangeRecord(self._recording_epoch, (), (topic,)))

    def watch_reassignments(self, watcher: ReassignmentWatcher) -> None:
        self.zk.reassignment_watchers.append((self, watcher))

    async def set_partition_state(
        self, tp: TopicPartition, state: LeaderAndIsr, controller_epoch: int
    ) -> None:
        """What another writer (a leader's ISR change, a test) does behind the controller's back."""
        if tp not in self.zk.partition_states:
            raise KeyError(tp)
        self.zk.write_partition_state(tp, state, controller_epoch)

    # --- log-dir failures (spec §7.11) ---

    async def propagate_log_dir_event(self, broker_id: int) -> None:
        await self.round_trip()
        self.zk.log_dir_events[f"log_dir_event_{next(self.zk._log_dir_event_seq):010d}"] = broker_id
        self.zk.fire_log_dir_events()

    async def log_dir_events(self, *, watch: bool = False) -> dict[str, int | None]:
        await self.round_trip()
        if watch:
            self.armed.add("/log_dir_event_notification")
        return dict(sorted(self.zk.log_dir_events.items()))

    async def delete_log_dir_events(self, names: list[str], epoch_zk_version: int) -> None:
        await self.round_trip()
        self._check_fence(epoch_zk_version)
        removed = [name for name in names if self.zk.log_dir_events.pop(name, None) is not None]
        if removed:
            self.zk.fire_log_dir_events()

    def watch_log_dir_events(self, watcher: LogDirEventWatcher) -> None:
        self.zk.log_dir_event_watchers.append((self, watcher))

    # --- topic deletion and partition expansion ---

    async def topics_to_delete(self, *, watch: bool = False) -> set[str]:
        await self.round_trip()
        if watch:
            self.armed.add("/admin/delete_topics")
        return set(self.zk.deletion_markers)

    def watch_topic_deletions(self, watcher: TopicDeletionWatcher) -> None:
        self.zk.deletion_watchers.append((self, watcher))

    async def delete_topic_deletions(self, topics: set[str], epoch_zk_version: int) -> None:
        await self.round_trip()
        self._check_fence(epoch_zk_version)
        if topics & self.zk.deletion_markers:
            self.zk.deletion_markers -= topics
            self.zk.fire_topic_deletions()

    async def delete_topic(self, topic: str, epoch_zk_version: int) -> None:
        await self.round_trip()
        self._check_fence(epoch_zk_version)
        doomed = [tp for tp in self.zk.partition_states if tp.topic == topic]
        for tp in doomed:
            del self.zk.partition_states[tp]
        self._record(ChangeRecord(-1, tuple(PartitionChange(tp, -1, None) for tp in doomed)))
        self.zk.topic_configs.pop(topic, None)
        if self.zk.topics.pop(topic, None) is not None:
            self.zk.data_watch_deleted(f"/brokers/topics/{topic}")
            self.zk.fire("/brokers/topics", "topics_changed")
        if topic in self.zk.deletion_markers:
            self.zk.deletion_markers.discard(topic)
            self.zk.fire_topic_deletions()

    async def topic_partition_ids(self, topic: str) -> set[int]:
        await self.round_trip()
        return {tp.partition for tp in self.zk.partition_states if tp.topic == topic}

    async def set_topic_assignment(self, assignment: TopicAssignment, epoch_zk_version: int) -> None:
        await self.round_trip()
        self._check_fence(epoch_zk_version)
        if assignment.topic not in self.zk.topics:
            raise LookupError(f"topic {assignment.topic} does not exist")
        self.zk.topics[assignment.topic] = assignment
        self.zk.fire(f"/brokers/topics/{assignment.topic}", "topic_modified", assignment.topic)
        self._record(ChangeRecord(self._recording_epoch, (), (assignment.topic,)))

    def watch_cluster(self, watcher: ClusterWatcher) -> None:
        self.zk.cluster_watchers.append((self, watcher))

    def watch_controller(self, watcher: ControllerWatcher) -> None:
        self.zk.controller_watchers.append((self, watcher))

    def watch_session(self, watcher: SessionWatcher) -> None:
        self.session_watchers.append(watcher)

    async def preferred_replica_election(self) -> list[TopicPartition] | None:
        await self.round_trip()
        self.preferred_election_watch_armed = True
        found = self.zk.preferred_replica_election
        return None if found is None else list(found)

    async def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        await self.round_trip()
        self._check_fence(epoch_zk_version)
        self.zk.preferred_replica_election = None

    def watch_preferred_replica_election(self, watcher: PreferredReplicaElectionWatcher) -> None:
        self.zk.preferred_election_watchers.append((self, watcher))

    async def create_preferred_replica_election(self, partitions: list[TopicPartition]) -> None:
        await self.round_trip()
        self.zk.create_preferred_replica_election(partitions)

    async def expire_session(self) -> None:
        """What the ensemble does when this session times out, then the client reconnects."""
        self.expired = True
        self.zk.drop_session(self.session)
        await self.renew_session()

    async def renew_session(self) -> None:
        """The client learns its session expired (the ensemble already dropped it) and
        opens a new one; the session watchers hear of it (spec §2.5)."""
        self.session = self.zk.new_session()
        self.expired = False
        for watcher in self.session_watchers:
            await watcher.before_new_session()
            watcher.after_new_session()


class FakeBrokerRegistry:
    """The BrokerRegistry port on a session of the in-memory ensemble (`FakeClusterStore`),
    held to the same contract tests as ZkBrokerRegistry."""

    def __init__(self, store: FakeClusterStore) -> None:
        self._store = store
        self._registered_session: int | None = None

    async def register_broker(self, info: BrokerInfo) -> int:
        session = self._store.session
        await self._store.round_trip_on_session()
        deadline = asyncio.get_running_loop().time() + self._store.stale_session_wait
        while True:
            self._store.check_session(session)
            existing = self._store.zk.brokers.get(info.broker_id)
            if existing is None:
                node = _Ephemeral(info, self._store.session, self._store.zk.next_zxid())
                self._store.zk.brokers[info.broker_id] = node
                self._registered_session = self._store.session
                self._store.zk.fire("/brokers/ids", "brokers_changed")
                return node.czxid
            if existing.owner == self._store.session:
                return existing.czxid
            if existing.owner == self._registered_session:
                del self._store.zk.brokers[info.broker_id]
                self._store.zk.data_watch_deleted(f"/brokers/ids/{info.broker_id}")
                continue
            if asyncio.get_running_loop().time() >= deadline:
                raise BrokerIdTakenError(f"broker.id {info.broker_id} is already registered")
            await asyncio.sleep(0.01)

    async def registered_brokers(self, *, watch: bool = False) -> list[RegisteredBroker]:
        await self._store.round_trip()
        if watch:
            self._store.armed.add("/brokers/ids")
        if self._store.fail_next_registered_brokers is not None:
            error, self._store.fail_next_registered_brokers = self._store.fail_next_registered_brokers, None
            raise error
        return [
            RegisteredBroker(node.value, node.czxid)  # type: ignore[arg-type]
            for _, node in sorted(self._store.zk.brokers.items())
        ]

    async def registered_broker(self, broker_id: int, *, watch: bool = False) -> RegisteredBroker | None:
        await self._store.round_trip()
        node = self._store.zk.brokers.get(broker_id)
        if node is None:
            return None  # a failed getData arms nothing
        if watch:
            self._store.armed.add(f"/brokers/ids/{broker_id}")
        return RegisteredBroker(node.value, node.czxid)  # type: ignore[arg-type]


class FakeTopicAdminStore:
    """The TopicAdminStore port on a session of the in-memory ensemble (`FakeClusterStore`),
    held to the same contract tests as ZkTopicAdminStore."""

    def __init__(self, store: FakeClusterStore) -> None:
        self._store = store

    async def create_topic(self, assignment: TopicAssignment, config: dict[str, str]) -> None:
        await self._store.round_trip()
        self._store.zk.topic_configs[assignment.topic] = dict(config)
        if assignment.topic in self._store.zk.topics:
            raise TopicExistsError(f"topic {assignment.topic} already exists")
        self._store.zk.topics[assignment.topic] = assignment
        self._store.zk.fire("/brokers/topics", "topics_changed")

    async def topic_assignment_and_version(self, topic: str) -> tuple[TopicAssignment, int] | None:
        await self._store.round_trip()
        found = self._store.zk.topics.get(topic)
        return None if found is None else (found, self._store.zk.topics.version(topic))

    async def add_partitions(self, assignment: TopicAssignment, expected_version: int = -1) -> None:
        await self._store.round_trip()
        if assignment.topic not in self._store.zk.topics:
            raise UnknownTopicError(f"topic {assignment.topic} does not exist")
        if expected_version not in (-1, self._store.zk.topics.version(assignment.topic)):
            raise TopicVersionConflict(f"topic {assignment.topic} changed since it was read")
        self._store.zk.topics[assignment.topic] = assignment
        self._store.zk.fire(f"/brokers/topics/{assignment.topic}", "topic_modified", assignment.topic)

    async def mark_topic_for_deletion(self, topic: str) -> None:
        await self._store.round_trip()
        if topic not in self._store.zk.topics:
            raise UnknownTopicError(f"topic {topic} does not exist")
        if topic in self._store.zk.deletion_markers:
            raise TopicAlreadyMarkedForDeletionError(f"topic {topic} is already marked for deletion")
        self._store.zk.deletion_markers.add(topic)
        self._store.zk.fire_topic_deletions()
