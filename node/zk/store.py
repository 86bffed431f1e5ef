"""ZkClusterStore: the ClusterStore port over ZooKeeper, as Kafka's KafkaZkClient does it.

Every controller write is fenced: a multi-op whose first op checks the version of
`/controller_epoch` this controller wrote when elected (spec §2.4), and whose second checks
that `/controller` exists. An election creates `/controller` and raises the epoch in one
multi-op, so the two checks together hold only while the reign that wrote that version
stands: once its session expired (and its ephemeral `/controller` went with it), or an
operator deleted `/controller`, its writes are refused even before anyone is elected again.
Kafka fences by the epoch version alone and is safe only because its client opens a new
session after the controller has run Expire; a controller here may reach ZooKeeper on its
new session with events of the old reign still queued.

Watches (node/zk/watches.py): `watch_*` registers a watcher's handlers; a read with `watch`
(or one that always watches, as `read_controller`) arms the watch by that same read, with the
kind of read the znode needs: `exists` where a creation must be heard (`/controller`, the
admin requests), `getData` where the parent's children watch reports creations (a broker's
registration, a topic), `getChildren` for children watches.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiozk.protocol.acl import ACL
from aiozk.protocol.stat import Stat

from actors.base.clock import Clock
from actors.base.loop_slices import SLICE, turn_if_held
from actors.base.ports import (
    AcknowledgedChanges,
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
    SessionWatcher,
    TopicAssignment,
    TopicDeletionWatcher,
    TopicPartition,
)
from node.zk import data, paths
from node.zk.broker_registry import ZkBrokerRegistry
from node.zk.client import (
    ANY_VERSION,
    BadVersion,
    NodeExists,
    NoNode,
    RolledBack,
    RuntimeInconsistency,
    ZooKeeperClient,
    multi_failure,
)
from node.zk.in_flight import windowed
from node.zk.watches import ZNodeChangeHandler, ZNodeChildChangeHandler, ZNodeCreationHandler

log = logging.getLogger(__name__)

# Partitions per fenced multi-op: two creates (or one set) each, well under jute.maxbuffer.
_PARTITIONS_PER_MULTI = 500

# Change records kept (docs/STANDBY.md): older ones are deleted, oldest first, a batch at a
# time. About 30 KB each at most: ZooKeeper holds some 30 MB of them.
RECORDS_KEPT = 1000
_RECORDS_TRIMMED_AT_ONCE = 100


class ZkClusterStore:
    def __init__(self, zk: ZooKeeperClient, clock: Clock) -> None:
        self.zk = zk
        self._clock = clock
        self._cluster_watcher: ClusterWatcher | None = None
        self.registry = ZkBrokerRegistry(zk, clock, self._broker_handler)
        # Whether each fenced write of partition states also writes its change record
        # (controller.standby.enable); the names of the records there, oldest first, once
        # listed (None until the first record is written).
        self.change_records = False
        # Records this store wrote, since it last trimmed, and under which controller epoch
        # (the one that started recording last).
        self.records_written = 0
        self._since_trim = 0
        self._recording_epoch = 0
        # Each topic's assignment as last decoded, by the zxids of the znode's creation and
        # last change: a read that finds them unchanged reuses it (decoding 1,000 partitions
        # takes a few milliseconds; a standby decodes every topic before it is elected).
        self._topics_decoded: dict[str, tuple[int, int, TopicAssignment]] = {}

    # --- controller (spec §2.2) ---

    async def controller_id(self) -> int | None:
        # The exists-watch fires on creation, change and deletion alike.
        return self._decode_controller(await self.zk.watch_existence(paths.CONTROLLER))

    async def controller_epoch(self) -> ControllerEpoch | None:
        return self._decode_epoch(await self.zk.get_or_none(paths.CONTROLLER_EPOCH))

    async def read_controller(self) -> ControllerView:
        # One after the other, not pipelined: requests that wait for a reconnection, or are
        # sent again after one, may go out in another order, and the epoch must be read after
        # the controller it is paired with (at least as new), and the data after the arming.
        controller = await self.zk.watch_existence(paths.CONTROLLER)
        epoch = await self.zk.get_or_none(paths.CONTROLLER_EPOCH)
        return ControllerView(self._decode_controller(controller), self._decode_epoch(epoch))

    @staticmethod
    def _decode_controller(value: tuple[bytes | None, Stat] | None) -> int | None:
        if value is None:
            return None
        try:
            return data.decode_controller(value[0])
        except data.ZNodeDataError as e:
            log.warning("ignoring unreadable /controller: %s", e)
            return None

    @staticmethod
    def _decode_epoch(value: tuple[bytes | None, Stat] | None) -> ControllerEpoch | None:
        if value is None:
            return None
        return ControllerEpoch(data.decode_controller_epoch(value[0]), value[1].version)

    async def _controller_epoch_or_create(self) -> ControllerEpoch:
        current = await self.controller_epoch()
        if current is not None:
            return current
        with contextlib.suppress(NodeExists):
            await self.zk.create(paths.CONTROLLER_EPOCH, data.encode_controller_epoch(0))
        current = await self.controller_epoch()
        assert current is not None, "/controller_epoch vanished right after its creation"
        return current

    async def register_controller_and_increment_epoch(
        self, broker_id: int, seen: ControllerEpoch | None = None
    ) -> ControllerEpoch:
        current = seen or await self._controller_epoch_or_create()
        new_epoch = current.epoch + 1
        results = await self.zk.multi(
            [
                self.zk.create_op(
                    paths.CONTROLLER, data.encode_controller(broker_id, self._clock.wall_ms()), ephemeral=True
                ),
                self.zk.set_op(
                    paths.CONTROLLER_EPOCH, data.encode_controller_epoch(new_epoch), current.zk_version
                ),
            ]
        )
        error = next((r for r in results if isinstance(r, NodeExists | BadVersion)), None)
        if error is None and not any(isinstance(r, Exception) for r in results):
            return ControllerEpoch(new_epoch, results[1].stat.version)
        if error is None:
            raise next(r for r in results if isinstance(r, Exception))
        # The multi may have succeeded with its answer lost (spec §2.2 step 2d).
        view = await self.read_controller()
        holder, epoch = view.controller_id, view.epoch
        if holder == broker_id and epoch is not None and epoch.epoch == new_epoch:
            return epoch
        raise ControllerMovedError(f"broker {holder} won the election at epoch {epoch and epoch.epoch}")

    async def delete_controller(self, epoch_zk_version: int) -> None:
        results = await self.zk.multi(
            [self.zk.check_op(paths.CONTROLLER_EPOCH, epoch_zk_version), self.zk.delete_op(paths.CONTROLLER)]
        )
        if isinstance(results[0], Exception):
            raise ControllerMovedError(f"/controller_epoch is past version {epoch_zk_version}")
        if isinstance(results[1], Exception) and not isinstance(results[1], NoNode):
            raise results[1]

    async def force_delete_controller(self) -> int | None:
        """Unfenced delete of `/controller`, as `zookeeper-shell delete /controller`."""
        holder = await self.controller_id()
        with contextlib.suppress(NoNode):
            await self.zk.delete(paths.CONTROLLER)
        return holder

    def watch_controller(self, watcher: ControllerWatcher) -> None:
        self.zk.register_handler(
            ZNodeChangeHandler(
                paths.CONTROLLER,
                on_created=watcher.controller_changed,
                on_data_changed=watcher.controller_changed,
                on_deleted=watcher.controller_deleted,
            )
        )

    def watch_session(self, watcher: SessionWatcher) -> None:
        self.zk.watch_session(watcher)

    # --- brokers (spec §2.1): the registry's, with the cluster watch's handlers ---

    async def register_broker(self, info: BrokerInfo) -> int:
        return await self.registry.register_broker(info)

    async def registered_brokers(self, *, watch: bool = False) -> list[RegisteredBroker]:
        return await self.registry.registered_brokers(watch=watch)

    async def registered_broker(self, broker_id: int, *, watch: bool = False) -> RegisteredBroker | None:
        return await self.registry.registered_broker(broker_id, watch=watch)

    # --- watches on brokers and topics (spec §3.2) ---

    def watch_cluster(self, watcher: ClusterWatcher) -> None:
        self._cluster_watcher = watcher
        self.zk.register_handler(ZNodeChildChangeHandler(paths.BROKER_IDS, watcher.brokers_changed))
        self.zk.register_handler(ZNodeChildChangeHandler(paths.BROKER_TOPICS, watcher.topics_changed))

    def _broker_handler(self, broker_id: int) -> ZNodeChangeHandler | None:
        """A registration's data watch reports changes only: its deletion (and a new
        registration after it) is the `/brokers/ids` children watch's to report."""
        watcher = self._cluster_watcher
        if watcher is None:
            return None
        return ZNodeChangeHandler(
            paths.broker_id(broker_id), on_data_changed=lambda: watcher.broker_modified(broker_id)
        )

    def _topic_handler(self, topic: str) -> ZNodeChangeHandler | None:
        """As `_broker_handler`, under the `/brokers/topics` children watch."""
        watcher = self._cluster_watcher
        if watcher is None:
            return None
        return ZNodeChangeHandler(paths.topic(topic), on_data_changed=lambda: watcher.topic_modified(topic))

    # --- topics and partition states (spec §1, §5) ---

    async def topics(self, *, watch: bool = False) -> set[str]:
        if watch:
            topics = set(await self.zk.watch_children(paths.BROKER_TOPICS))
        else:
            topics = set(await self.zk.children(paths.BROKER_TOPICS))
        for gone in self._topics_decoded.keys() - topics:
            del self._topics_decoded[gone]  # deleted: its assignment will not be read again
        return topics

    async def topic_assignments(self, topics: set[str], *, watch: bool = False) -> dict[str, TopicAssignment]:
        """`watch` arms each topic's data watch by the getData that reads it (pipelined, one
        request per topic): none on a topic whose znode is missing."""
        names = sorted(topics)
        if watch:
            reads = (self.zk.watch_data(paths.topic(name), self._topic_handler(name)) for name in names)
        else:
            reads = (self.zk.get_or_none(paths.topic(name)) for name in names)
        values = await asyncio.gather(*reads)
        assignments = {}
        decoded = self._topics_decoded
        for name, value in zip(names, values, strict=True):
            if value is None:
                decoded.pop(name, None)
                continue
            zxids = value[1].created_zxid, value[1].last_modified_zxid
            known = decoded.get(name)
            if known is not None and known[:2] == zxids:
                assignments[name] = known[2]
                continue
            # A topic of 1,000 partitions takes a millisecond or two to decode; 200 of them
            # read together would hold the loop (actors/base/loop_slices.py).
            await turn_if_held()
            try:
                assignments[name] = data.decode_topic(name, value[0])
            except data.ZNodeDataError as e:
                log.warning("ignoring unreadable topic: %s", e)
                continue
            decoded[name] = (*zxids, assignments[name])
        return assignments

    async def topic_configs(self, topics: set[str]) -> dict[str, dict[str, str]]:
        names = sorted(topics)
        values = await asyncio.gather(*(self.zk.get_or_none(paths.topic_config(name)) for name in names))
        configs = {}
        for name, value in zip(names, values, strict=True):
            try:
                configs[name] = {} if value is None else data.decode_topic_config(name, value[0])
            except data.ZNodeDataError as e:
                log.warning("ignoring unreadable topic config: %s", e)
                configs[name] = {}
        return configs

    async def partition_states(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, LeadershipInfo]:
        values = await self.zk.get_many([paths.partition_state(tp.topic, tp.partition) for tp in partitions])
        states = {}
        for count, (tp, value) in enumerate(zip(partitions, values, strict=True), 1):
            if count % SLICE == 0:
                await turn_if_held()  # a failover decodes every partition's state: 200k
            if value is None:
                continue
            try:
                states[tp] = data.decode_partition_state(tp, value[0], value[1].version)
            except data.ZNodeDataError as e:
                log.warning("ignoring unreadable partition state: %s", e)
        return states

    async def create_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], controller_epoch: int, epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        return await _per_chunk(
            states, controller_epoch, epoch_zk_version, self._create_chunk, self.zk.max_in_flight_requests
        )

    async def _create_chunk(
        self,
        chunk: list[TopicPartition],
        states: dict[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        # The common case (a new topic) is one multi-op for the whole chunk; anything
        # already there fails it, and then each partition goes on its own. A topic's
        # `partitions` znode goes with its partition 0: the chunks after the first of a
        # topic larger than a chunk would otherwise fail on it, every one of them.
        ops = []
        for topic in sorted({tp.topic for tp in chunk if tp.partition == 0}):
            ops.append(self.zk.create_op(paths.topic_partitions(topic)))
        for tp in chunk:
            ops.append(self.zk.create_op(paths.topic_partition(tp.topic, tp.partition)))
            ops.append(
                self.zk.create_op(
                    paths.partition_state(tp.topic, tp.partition),
                    data.encode_partition_state(states[tp], controller_epoch),
                )
            )
        created = [_created(tp, states[tp], controller_epoch) for tp in chunk]
        if not _failed(
            await self._fenced(ops, epoch_zk_version, ChangeRecord(controller_epoch, tuple(created)))
        ):
            return {tp: states[tp]._replace(partition_epoch=0) for tp in chunk}
        for topic in sorted({tp.topic for tp in chunk}):
            await self._fenced_ignoring_exists(
                self.zk.create_op(paths.topic_partitions(topic)), epoch_zk_version
            )
        outcomes = await asyncio.gather(
            *(self._create_one(tp, states[tp], controller_epoch, epoch_zk_version) for tp in chunk)
        )
        return dict(zip(chunk, outcomes, strict=True))

    async def _create_one(
        self, tp: TopicPartition, state: LeaderAndIsr, controller_epoch: int, epoch_zk_version: int
    ) -> LeaderAndIsr | Exception:
        container_error = await self._fenced_ignoring_exists(
            self.zk.create_op(paths.topic_partition(tp.topic, tp.partition)), epoch_zk_version
        )
        if container_error is not None:
            return container_error
        results = await self._fenced(
            [
                self.zk.create_op(
                    paths.partition_state(tp.topic, tp.partition),
                    data.encode_partition_state(state, controller_epoch),
                )
            ],
            epoch_zk_version,
            ChangeRecord(controller_epoch, (_created(tp, state, controller_epoch),)),
        )
        error = _failed(results)
        return error if error is not None else state._replace(partition_epoch=0)

    async def update_partition_states(
        self, states: dict[TopicPartition, LeaderAndIsr], controller_epoch: int, epoch_zk_version: int
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        return await _per_chunk(
            states, controller_epoch, epoch_zk_version, self._update_chunk, self.zk.max_in_flight_requests
        )

    def _set_state_op(self, tp: TopicPartition, state: LeaderAndIsr, controller_epoch: int) -> Any:
        return self.zk.set_op(
            paths.partition_state(tp.topic, tp.partition),
            data.encode_partition_state(state, controller_epoch),
            state.partition_epoch,
        )

    async def _update_chunk(
        self,
        chunk: list[TopicPartition],
        states: dict[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        epoch_zk_version: int,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        ops = [self._set_state_op(tp, states[tp], controller_epoch) for tp in chunk]
        record = ChangeRecord(controller_epoch, tuple(_set(tp, states[tp], controller_epoch) for tp in chunk))
        results = await self._fenced(ops, epoch_zk_version, record)
        if _failed(results) is None:
            return {
                tp: states[tp]._replace(partition_epoch=r.stat.version)
                for tp, r in zip(chunk, results, strict=True)
            }
        singles = await asyncio.gather(
            *(
                self._fenced(
                    [self._set_state_op(tp, states[tp], controller_epoch)],
                    epoch_zk_version,
                    ChangeRecord(controller_epoch, (_set(tp, states[tp], controller_epoch),)),
                )
                for tp in chunk
            )
        )
        outcome: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        for tp, single in zip(chunk, singles, strict=True):
            error = _failed(single)
            if isinstance(error, BadVersion):
                outcome[tp] = PartitionStateConflict(
                    f"{tp}: partition epoch moved past {states[tp].partition_epoch}"
                )
            elif error is not None:
                outcome[tp] = error
            else:
                outcome[tp] = states[tp]._replace(partition_epoch=single[0].stat.version)
        return outcome

    async def _fenced(
        self, ops: list[Any], epoch_zk_version: int, record: ChangeRecord | None = None
    ) -> list[Any]:
        """Run ops in one multi-op behind the `/controller_epoch` version check (spec §2.4);
        with records on, `record` (what the ops change in partition states) is created last
        in the same multi-op, so it exists if and only if the change does."""
        recorded = self.change_records and record is not None and not record.starts_epoch
        if recorded:
            assert record is not None
            ops = [*ops, self._record_op(record)]
        results = await self.zk.multi(
            [
                self.zk.check_op(paths.CONTROLLER_EPOCH, epoch_zk_version),
                self.zk.check_op(paths.CONTROLLER, ANY_VERSION),
                *ops,
            ]
        )
        (epoch_check, controller_check), results = results[:2], results[2:]
        # When another op fails, a check reports RolledBack; only its own failure fences.
        if isinstance(epoch_check, Exception) and not isinstance(epoch_check, RolledBack):
            raise ControllerMovedError(f"/controller_epoch is past version {epoch_zk_version}")
        if isinstance(controller_check, Exception) and not isinstance(controller_check, RolledBack):
            raise ControllerMovedError("/controller is gone: the reign that wrote the epoch has ended")
        if not recorded:
            return results
        results, made = results[:-1], results[-1]
        if isinstance(made, NoNode) and not any(
            isinstance(r, Exception) and not isinstance(r, RolledBack | RuntimeInconsistency) for r in results
        ):
            # The records' parent is gone (an operator's doing): made again, and the write
            # sent again, rather than every write of partition states failing from now on.
            await self.zk.create_all_if_missing([paths.KEEL, paths.CONTROLLER_CHANGES])
            return await self._fenced(ops[:-1], epoch_zk_version, record)
        if _failed(results) is None:
            await self._record_written(epoch_zk_version)
        return results

    def _assignment_record(self, topic: str) -> ChangeRecord:
        return ChangeRecord(self._recording_epoch, (), (topic,))

    # --- change records (docs/STANDBY.md) ---

    def _record_op(self, record: ChangeRecord) -> Any:
        return self.zk.create_op(
            f"{paths.CONTROLLER_CHANGES}/{paths.CHANGE_PREFIX}",
            data.encode_change_record(record),
            sequential=True,
        )

    async def _record_written(self, epoch_zk_version: int) -> None:
        """Every so many records, the oldest beyond RECORDS_KEPT deleted, oldest first, from
        a listing made now (whoever wrote them): the standbys rely on that order (a view
        whose last record is still listed missed nothing), which a failed or partial trim
        keeps, since what it deleted is always the oldest."""
        self.records_written += 1
        self._since_trim += 1
        if self._since_trim < _RECORDS_TRIMMED_AT_ONCE:
            return
        self._since_trim = 0
        names = await self.change_record_names()
        doomed = [f"{paths.CONTROLLER_CHANGES}/{name}" for name in names[: max(len(names) - RECORDS_KEPT, 0)]]
        if not doomed:
            return
        try:
            await self._fenced_delete(doomed, epoch_zk_version)
        except ControllerMovedError:
            pass  # deposed: the next controller trims them
        except Exception as e:
            log.warning("trimming %d change records failed: %s", len(doomed), e)

    async def change_record_names(self, *, watch: bool = False) -> list[str]:
        """The records' znode names, oldest first; `watch` arms the children watch (the
        parent made first where missing, so that there is something to watch)."""
        if watch:
            await self.zk.create_all_if_missing([paths.KEEL, paths.CONTROLLER_CHANGES])
            names = await self.zk.watch_children(paths.CONTROLLER_CHANGES)
        else:
            try:
                names = await self.zk.children(paths.CONTROLLER_CHANGES)
            except NoNode:
                return []
        listed = sorted((seq, name) for name in names if (seq := paths.change_sequence(name)) is not None)
        return [name for _, name in listed]

    async def start_change_records(self, controller_epoch: int, epoch_zk_version: int) -> None:
        """A controller just elected that records its changes says so: a record with no
        change, and the records' parent's data set to its epoch, in one fenced multi-op."""
        self._recording_epoch = controller_epoch
        ops = [
            self._record_op(ChangeRecord(controller_epoch, ())),
            self.zk.set_op(paths.CONTROLLER_CHANGES, str(controller_epoch).encode()),
        ]
        results = await self._fenced(ops, epoch_zk_version)
        error = _failed(results)
        if isinstance(error, NoNode):
            await self.zk.create_all_if_missing([paths.KEEL, paths.CONTROLLER_CHANGES])
            results = await self._fenced(ops, epoch_zk_version)
            error = _failed(results)
        if error is not None:
            raise error
        await self._record_written(epoch_zk_version)

    async def change_records_generation(self) -> int | None:
        """Which records' parent this is (its czxid; None: none): one made again numbers its
        records from 0, and a view of the one before cannot follow it."""
        found = await self.zk.get_or_none(paths.CONTROLLER_CHANGES)
        return None if found is None else int(found[1].created_zxid)

    async def change_records_epoch(self) -> int | None:
        found = await self.zk.get_or_none(paths.CONTROLLER_CHANGES)
        raw = b"" if found is None else (found[0] or b"")
        return int(raw) if raw.isdigit() else None

    def watch_change_records(self, watcher: ChangeRecordWatcher) -> None:
        self.zk.register_handler(
            ZNodeChildChangeHandler(paths.CONTROLLER_CHANGES, watcher.change_records_changed)
        )

    async def acknowledged_changes(self) -> AcknowledgedChanges | None:
        found = await self.zk.get_or_none(paths.ACKNOWLEDGED_CHANGES)
        try:
            return None if found is None else data.decode_acknowledged_changes(found[0])
        except data.ZNodeDataError as e:
            log.warning("%s cannot be read: %s", paths.ACKNOWLEDGED_CHANGES, e)
            return None

    async def mark_acknowledged(self, mark: AcknowledgedChanges | None, epoch_zk_version: int) -> None:
        ops = [self.zk.set_op(paths.ACKNOWLEDGED_CHANGES, data.encode_acknowledged_changes(mark))]
        error = _failed(await self._fenced(ops, epoch_zk_version))
        if isinstance(error, NoNode):  # an operator's doing: made again
            await self.zk.create_all_if_missing([paths.KEEL, paths.ACKNOWLEDGED_CHANGES])
            error = _failed(await self._fenced(ops, epoch_zk_version))
        if error is not None:
            raise error

    async def change_records_named(self, names: list[str]) -> list[ChangeRecord | None]:
        """These records, read by multiRead; None for one gone, or that cannot be read (a
        later version's, say): either way a standby cannot follow the records past it, and
        reads every state."""
        found = await self.zk.get_many([f"{paths.CONTROLLER_CHANGES}/{name}" for name in names])
        records: list[ChangeRecord | None] = []
        for name, value in zip(names, found, strict=True):
            try:
                records.append(None if value is None else data.decode_change_record(name, value[0]))
            except data.ZNodeDataError as e:
                log.warning("a change record cannot be read: %s", e)
                records.append(None)
        return records

    async def _fenced_ignoring_exists(self, op: Any, epoch_zk_version: int) -> Exception | None:
        error = _failed(await self._fenced([op], epoch_zk_version))
        return None if error is None or isinstance(error, NodeExists) else error

    # --- preferred replica election (spec §7.8) ---

    async def preferred_replica_election(self) -> list[TopicPartition] | None:
        # The exists-watch reports a creation; a get alone would not arm on an absent node.
        value = await self.zk.watch_existence(paths.PREFERRED_REPLICA_ELECTION)
        if value is None:
            return None
        try:
            return data.decode_preferred_replica_election(value[0])
        except data.ZNodeDataError as e:
            log.warning("ignoring unreadable preferred replica election: %s", e)
            return []

    async def delete_preferred_replica_election(self, epoch_zk_version: int) -> None:
        error = _failed(
            await self._fenced([self.zk.delete_op(paths.PREFERRED_REPLICA_ELECTION)], epoch_zk_version)
        )
        if error is not None and not isinstance(error, NoNode):
            raise error

    def watch_preferred_replica_election(self, watcher: PreferredReplicaElectionWatcher) -> None:
        # Its creation only (Kafka's PreferredReplicaElectionHandler); a deletion or change
        # re-arms the watch rather than use it up (node/zk/watches.py).
        self.zk.register_handler(
            ZNodeCreationHandler(paths.PREFERRED_REPLICA_ELECTION, watcher.preferred_replica_election_created)
        )

    async def create_preferred_replica_election(self, partitions: list[TopicPartition]) -> None:
        """What Kafka's legacy admin tool writes to ask for preferred elections."""
        await self.zk.create(
            paths.PREFERRED_REPLICA_ELECTION, data.encode_preferred_replica_election(partitions)
        )

    # --- partition reassignment (spec §1, §7.7) ---

    async def partition_reassignments(
        self, *, watch: bool = False
    ) -> dict[TopicPartition, tuple[int, ...]] | None:
        if watch:
            # The exists-watch is armed whether or not the node is there: it reports creation.
            value = await self.zk.watch_existence(paths.REASSIGN_PARTITIONS)
        else:
            value = await self.zk.get_or_none(paths.REASSIGN_PARTITIONS)
        if value is None:
            return None
        try:
            return data.decode_partition_reassignment(value[0])
        except data.ZNodeDataError as e:
            log.warning("ignoring invalid %s: %s", paths.REASSIGN_PARTITIONS, e)
            return {}

    async def set_partition_reassignments(
        self, reassignments: dict[TopicPartition, tuple[int, ...]], epoch_zk_version: int
    ) -> None:
        path = paths.REASSIGN_PARTITIONS
        if not reassignments:
            error = _failed(await self._fenced([self.zk.delete_op(path)], epoch_zk_version))
            if error is not None and not isinstance(error, NoNode):
                raise error
            return
        encoded = data.encode_partition_reassignment(reassignments)
        error = _failed(await self._fenced([self.zk.set_op(path, encoded)], epoch_zk_version))
        if isinstance(error, NoNode):
            error = _failed(await self._fenced([self.zk.create_op(path, encoded)], epoch_zk_version))
        if error is not None:
            raise error

    async def create_partition_reassignments(
        self, reassignments: dict[TopicPartition, tuple[int, ...]]
    ) -> None:
        try:
            await self.zk.create(paths.REASSIGN_PARTITIONS, data.encode_partition_reassignment(reassignments))
        except NodeExists:
            raise FileExistsError(
                f"{paths.REASSIGN_PARTITIONS} exists: a reassignment is in progress"
            ) from None

    async def set_partition_assignments(
        self, topic: str, partitions: dict[int, ReplicaAssignment], epoch_zk_version: int
    ) -> None:
        path = paths.topic(topic)
        while True:
            raw, stat = await self.zk.get(path)
            current = data.decode_topic(topic, raw)
            updated = TopicAssignment(topic, {**current.partitions, **partitions}, current.topic_id)
            op = self.zk.set_op(path, data.encode_topic(updated), stat.version)
            error = _failed(await self._fenced([op], epoch_zk_version, self._assignment_record(topic)))
            if error is None:
                return
            if not isinstance(error, BadVersion):
                raise error
            # Someone (an admin adding partitions) wrote it in between: merge again.

    def watch_reassignments(self, watcher: ReassignmentWatcher) -> None:
        # Its creation only (Kafka's PartitionReassignmentHandler): the controller rewrites and
        # deletes the node as reassignments end, and an operator may delete it; neither may
        # use the watch up, or the next request written there would go unheard.
        self.zk.register_handler(
            ZNodeCreationHandler(paths.REASSIGN_PARTITIONS, watcher.partition_reassignment_created)
        )

    # --- admin writes (AdminZkClient, spec §1) ---

    # --- topic deletion and partition expansion (spec §1, §7.5, §7.6) ---

    async def topics_to_delete(self, *, watch: bool = False) -> set[str]:
        if watch:
            return set(await self.zk.watch_children(paths.ADMIN_DELETE_TOPICS))
        return set(await self.zk.children(paths.ADMIN_DELETE_TOPICS))

    def watch_topic_deletions(self, watcher: TopicDeletionWatcher) -> None:
        self.zk.register_handler(
            ZNodeChildChangeHandler(paths.ADMIN_DELETE_TOPICS, watcher.topic_deletions_changed)
        )

    async def delete_topic_deletions(self, topics: set[str], epoch_zk_version: int) -> None:
        await self._fenced_delete([paths.delete_topic_marker(t) for t in sorted(topics)], epoch_zk_version)

    async def delete_topic(self, topic: str, epoch_zk_version: int) -> None:
        subtree = await self._subtree(paths.topic(topic))
        config = [paths.topic_config(topic)]
        await self._fenced_delete([*subtree, *config, paths.delete_topic_marker(topic)], epoch_zk_version)

    async def _subtree(self, root: str) -> list[str]:
        """Every path under `root` and `root` itself, children before their parents."""
        try:
            children = await self.zk.children(root)
        except NoNode:
            return []
        below = await asyncio.gather(*(self._subtree(f"{root}/{child}") for child in children))
        return [path for paths_below in below for path in paths_below] + [root]

    async def _fenced_delete(self, doomed: list[str], epoch_zk_version: int) -> None:
        """Delete paths in order (children first) in fenced multi-ops; a path already gone
        is skipped, so a retried deletion finishes what an interrupted one began."""
        for start in range(0, len(doomed), _PARTITIONS_PER_MULTI * 2):
            chunk = doomed[start : start + _PARTITIONS_PER_MULTI * 2]
            record = _deleted(chunk)
            error = _failed(
                await self._fenced([self.zk.delete_op(p) for p in chunk], epoch_zk_version, record)
            )
            if error is None:
                continue
            if not isinstance(error, NoNode):
                raise error
            for path in chunk:
                single = _failed(
                    await self._fenced([self.zk.delete_op(path)], epoch_zk_version, _deleted([path]))
                )
                if single is not None and not isinstance(single, NoNode):
                    raise single

    async def topic_partition_ids(self, topic: str) -> set[int]:
        try:
            children = await self.zk.children(paths.topic_partitions(topic))
        except NoNode:
            return set()
        return {int(c) for c in children if c.isdigit()}

    async def set_topic_assignment(self, assignment: TopicAssignment, epoch_zk_version: int) -> None:
        error = _failed(
            await self._fenced(
                [self.zk.set_op(paths.topic(assignment.topic), data.encode_topic(assignment))],
                epoch_zk_version,
                self._assignment_record(assignment.topic),
            )
        )
        if error is not None:
            raise error

    # --- log-dir failures (spec §7.11) ---

    async def propagate_log_dir_event(self, broker_id: int) -> None:
        """What a broker whose log directory failed writes (KafkaZkClient.propagateLogDirEvent)."""
        await self.zk.send(
            self.zk.create_op(
                paths.log_dir_event(paths.LOG_DIR_EVENT_PREFIX),
                data.encode_log_dir_event(broker_id),
                sequential=True,
            )
        )

    async def log_dir_events(self, *, watch: bool = False) -> dict[str, int | None]:
        """Each notification's name and the broker it names (None: unreadable, or gone since
        listed); `watch` arms the children watch."""
        root = paths.LOG_DIR_EVENT_NOTIFICATION
        listed = await (self.zk.watch_children(root) if watch else self.zk.children(root))
        names = sorted(c for c in listed if c.startswith(paths.LOG_DIR_EVENT_PREFIX))
        values = await asyncio.gather(*(self.zk.get_or_none(paths.log_dir_event(n)) for n in names))
        events: dict[str, int | None] = {}
        for name, value in zip(names, values, strict=True):
            try:
                events[name] = None if value is None else data.decode_log_dir_event(value[0])
            except data.ZNodeDataError as e:
                log.warning("ignoring %s: %s", name, e)
                events[name] = None
        return events

    async def delete_log_dir_events(self, names: list[str], epoch_zk_version: int) -> None:
        """Delete these notifications, fenced; ones already gone are fine."""
        await self._fenced_delete([paths.log_dir_event(n) for n in sorted(names)], epoch_zk_version)

    def watch_log_dir_events(self, watcher: LogDirEventWatcher) -> None:
        self.zk.register_handler(
            ZNodeChildChangeHandler(paths.LOG_DIR_EVENT_NOTIFICATION, watcher.log_dir_events_changed)
        )

    # --- cluster set-up (spec §1) ---

    async def ensure_persistent_paths(self) -> None:
        await self.zk.create_all_if_missing(paths.PERSISTENT_PATHS)
        if self.zk.security.set_acl:
            root = await self.zk.get_acl("/")
            if any(a.id.scheme == "world" and a.perms & ~ACL.READ_PERM for a in root):
                # Deleting a child is a right on its parent: anyone may delete /controller.
                log.warning(
                    "the root of %s is open to anyone, who can delete /controller and the other "
                    "top-level znodes; run keel zookeeper secure (docs/OPERATIONS.md, Security)",
                    self.zk.connect_string,
                )

    async def get_or_create_cluster_id(self) -> str:
        value = await self.zk.get_or_none(paths.CLUSTER_ID)
        if value is None:
            # Losing the race to another broker is fine: read what it wrote.
            with contextlib.suppress(NodeExists):
                await self.zk.create(paths.CLUSTER_ID, data.encode_cluster_id(data.new_cluster_id()))
            value = await self.zk.get_or_none(paths.CLUSTER_ID)
            assert value is not None
        return data.decode_cluster_id(value[0])

    # --- Keel's own: the planner's registration (/keel/planner) ---


StateResults = dict[TopicPartition, LeaderAndIsr | Exception]
ChunkWriter = Callable[
    [list[TopicPartition], dict[TopicPartition, LeaderAndIsr], int, int], Awaitable[StateResults]
]


async def _per_chunk(
    states: dict[TopicPartition, LeaderAndIsr],
    controller_epoch: int,
    epoch_zk_version: int,
    write: ChunkWriter,
    window: int,
) -> StateResults:
    """Split a write into multi-ops of _PARTITIONS_PER_MULTI partitions, sent pipelined, at
    most `window` at a time (zookeeper.max.in.flight.requests, node/zk/in_flight.py)."""
    ordered = sorted(states)
    chunks = [ordered[i : i + _PARTITIONS_PER_MULTI] for i in range(0, len(ordered), _PARTITIONS_PER_MULTI)]
    results: StateResults = {}
    writes = (functools.partial(write, c, states, controller_epoch, epoch_zk_version) for c in chunks)
    for outcome in await windowed(writes, window):
        results.update(outcome)
    return results


_failed = multi_failure


def _created(tp: TopicPartition, state: LeaderAndIsr, controller_epoch: int) -> PartitionChange:
    return PartitionChange(tp, -1, LeadershipInfo(state._replace(partition_epoch=0), controller_epoch))


def _set(tp: TopicPartition, state: LeaderAndIsr, controller_epoch: int) -> PartitionChange:
    after = state._replace(partition_epoch=state.partition_epoch + 1)
    return PartitionChange(tp, state.partition_epoch, LeadershipInfo(after, controller_epoch))


def _deleted(doomed: list[str]) -> ChangeRecord:
    """The record of a deletion: the partition states among `doomed`, gone (the controller
    epoch is not known here: -1)."""
    changes = []
    for path in doomed:
        found = paths.partition_of_state(path)
        if found is not None:
            changes.append(PartitionChange(TopicPartition(*found), -1, None))
    return ChangeRecord(-1, tuple(changes))
