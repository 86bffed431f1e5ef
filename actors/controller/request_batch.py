"""The requests of one controller event, batched per broker (spec §8.2).

State changes add to the batch; `send` then emits, per broker, one LeaderAndIsr, one
UpdateMetadata and one StopReplica, in that order, and only to brokers that are live or
shutting down at send time. Past PARTITIONS_PER_REQUEST partitions, each is several requests
of at most that many, in partition order (Kafka sends one, however large; Keel's brokers
would spend seconds of their event loop on one of 200k). A LeaderAndIsr add also adds
UpdateMetadata for the partition to every live-or-shutting-down broker; `is_new` and `delete`
are sticky within a batch. Each request sent is a line of the state-change log, as Kafka's
ControllerChannelManager writes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

from actors.base.loop_slices import SLICE, turn_if_held
from actors.base.ports import (
    BrokerChannel,
    LeaderAndIsr,
    LeadershipInfo,
    ReplicaAssignment,
    ResponseCallback,
    TopicPartition,
)
from actors.base.state_change_log import StateChangeLogger
from actors.controller.context import ControllerContext
from wire.api import (
    Endpoint,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveBroker,
    LiveLeader,
    Response,
    StopReplicaPartition,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from wire.api.update_metadata import LEADER_DURING_DELETE

log = logging.getLogger(__name__)

# Partition states per request: a state change of more goes to each broker as several requests,
# in order. A request is encoded on the controller, and decoded, applied and answered on the
# broker, each in one step of an event loop that also carries a ZooKeeper session; one of 200k
# partition states takes seconds at each end (actors/base/loop_slices.py).
PARTITIONS_PER_REQUEST = 1000

make_leader_and_isr_state = LeaderAndIsrPartitionState.make
make_update_metadata_state = UpdateMetadataPartitionState.make
make_stop_replica_partition = StopReplicaPartition.make


_StateKey = tuple[TopicPartition, int, int, bool]
T = TypeVar("T")


@dataclasses.dataclass
class _LeaderAndIsrEntry:
    leadership: LeadershipInfo
    assignment: ReplicaAssignment
    is_new: bool


# Told of a StopReplica answer for the partitions it deleted of topics whose deletion has
# started: (broker, response, those partitions). It must only enqueue (spec §8.3).
DeletionResponseHandler = Callable[[int, int, Response, tuple[TopicPartition, ...]], None]
# Told of every LeaderAndIsr answer: (broker, response). It must only enqueue.
LeaderAndIsrResponseHandler = Callable[[int, Response], None]


class RequestBatch:
    def __init__(
        self,
        context: ControllerContext,
        channel: BrokerChannel,
        controller_id: int,
        *,
        inter_broker_listener: str = "PLAINTEXT",
        on_deletion_response: DeletionResponseHandler | None = None,
        on_leader_and_isr_response: LeaderAndIsrResponseHandler | None = None,
    ) -> None:
        self._on_deletion_response = on_deletion_response
        self._on_leader_and_isr_response = on_leader_and_isr_response
        self._context = context
        self._inter_broker_listener = inter_broker_listener
        self._channel = channel
        self._controller_id = controller_id
        self._leader_and_isr: dict[int, dict[TopicPartition, _LeaderAndIsrEntry]] = {}
        self._update_metadata_brokers: set[int] = set()
        self._update_metadata_to_all = False
        self._update_metadata_partitions: set[TopicPartition] = set()
        self._stop_replica: dict[int, dict[TopicPartition, bool]] = {}
        self._state_change_log = StateChangeLogger.for_controller(controller_id, lambda: context.epoch)

    @property
    def empty(self) -> bool:
        return not (
            self._leader_and_isr
            or self._update_metadata_brokers
            or self._update_metadata_to_all
            or self._stop_replica
        )

    def add_leader_and_isr(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        leadership: LeadershipInfo,
        assignment: ReplicaAssignment,
        *,
        is_new: bool = False,
    ) -> None:
        for broker in brokers:
            if broker < 0:
                continue
            entries = self._leader_and_isr.setdefault(broker, {})
            earlier = entries.get(tp)
            entries[tp] = _LeaderAndIsrEntry(
                leadership, assignment, is_new or (earlier is not None and earlier.is_new)
            )
        # UpdateMetadata for the partition to every live-or-shutting-down broker, resolved at
        # send time (which filters to those brokers anyway) instead of once per partition.
        self._update_metadata_to_all = True
        self._update_metadata_partitions.add(tp)

    def add_update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition] = ()) -> None:
        self._update_metadata_brokers.update(b for b in brokers if b >= 0)
        self._update_metadata_partitions.update(partitions)

    def add_stop_replica(self, brokers: Iterable[int], tp: TopicPartition, *, delete: bool) -> None:
        for broker in brokers:
            if broker < 0:
                continue
            entries = self._stop_replica.setdefault(broker, {})
            entries[tp] = delete or entries.get(tp, False)

    async def send(self) -> None:
        """Hand the batch to the channel. Building a request for 100k partitions takes a
        while, so it yields between requests: senders deliver what is already queued (the
        failover's first UpdateMetadata above all) and ZooKeeper heartbeats keep going."""
        targets = self._context.live_or_shutting_down_ids()
        epoch = self._context.epoch
        # A partition told to several brokers is built once: its state is the same object in
        # each of their requests (frozen, as UpdateMetadata's shared states are).
        built: dict[_StateKey, LeaderAndIsrPartitionState] = {}
        for broker, entries in sorted(self._leader_and_isr.items()):
            if broker in targets:
                ordered = [(tp, entries[tp]) for tp in await _in_partition_order(entries)]
                for part in _parts(ordered):
                    order = self._leader_and_isr_request(broker, part, epoch, built)
                    leading = sum(1 for state in order.partition_states if state.leader == broker)
                    self._state_change_log.info(
                        f"Sending LeaderAndIsr request to broker {broker} with {leading} become-leader and "
                        f"{len(order.partition_states) - leading} become-follower partitions"
                    )
                    self._channel.send(broker, order, self._leader_and_isr_callback(broker))
                    await asyncio.sleep(0)
        if self._update_metadata_to_all:
            self._update_metadata_brokers |= targets
        if self._update_metadata_brokers:
            states = await self._update_metadata_states()
            live = self._live_brokers()
            receivers = sorted(self._update_metadata_brokers & targets)
            # An UpdateMetadata without partitions (brokers came or went) is still sent.
            for shared in _parts(states) or [states]:
                if receivers:
                    self._state_change_log.info(
                        f"Sending UpdateMetadata request to brokers {','.join(map(str, receivers))} "
                        f"for {len(shared)} partitions"
                    )
                for broker in receivers:
                    request = UpdateMetadataRequest(
                        controller_id=self._controller_id,
                        controller_epoch=epoch,
                        broker_epoch=self._context.broker_epoch(broker),
                        partition_states=shared,
                        live_brokers=live,
                    )
                    self._channel.send(broker, request, _log_errors(broker))
        for broker, all_stops in sorted(self._stop_replica.items()):
            if broker in targets:
                for stops in map(dict, _parts(sorted(all_stops.items()))):
                    deleting = sum(1 for delete in stops.values() if delete)
                    self._state_change_log.info(
                        f"Sending StopReplica request for {len(stops)} replicas to broker {broker} "
                        f"({deleting} with deletion)"
                    )
                    self._channel.send(
                        broker,
                        self._stop_replica_request(broker, stops, epoch),
                        self._stop_replica_callback(broker, stops),
                    )
        self._leader_and_isr.clear()
        self._update_metadata_brokers.clear()
        self._update_metadata_to_all = False
        self._update_metadata_partitions.clear()
        self._stop_replica.clear()

    def _leader_and_isr_request(
        self,
        broker: int,
        entries: list[tuple[TopicPartition, _LeaderAndIsrEntry]],
        epoch: int,
        built: dict[_StateKey, LeaderAndIsrPartitionState],
    ) -> LeaderAndIsrRequest:
        """A LeaderAndIsr of `entries`, in the order given."""
        states = []
        leaders = set()
        for tp, entry in entries:
            state = entry.leadership.leader_and_isr
            leaders.add(state.leader)
            # The objects the state is made of (alive for the whole send) and is_new.
            key = (tp, id(entry.leadership), id(entry.assignment), entry.is_new)
            partition_state = built.get(key)
            if partition_state is None:
                # Field order of LeaderAndIsrPartitionState; built without the dataclass
                # constructor, since one request can hold 100k of them.
                partition_state = built[key] = make_leader_and_isr_state(
                    tp.topic,
                    tp.partition,
                    entry.leadership.controller_epoch,
                    state.leader,
                    state.leader_epoch,
                    list(state.isr),
                    state.partition_epoch,
                    list(entry.assignment.replicas),
                    list(entry.assignment.adding),
                    list(entry.assignment.removing),
                    entry.is_new,
                )
            states.append(partition_state)
        live_leaders = []
        for leader in sorted(leaders):
            registered = self._context.live_brokers.get(leader)
            # Followers fetch over the inter-broker listener; a leader without one is left
            # out (its followers wait), as Kafka's controller cannot name it either.
            listener = self._inter_broker_listener
            endpoint = None if registered is None else registered.info.endpoint_for(listener)
            if endpoint is not None:
                live_leaders.append(LiveLeader(broker_id=leader, host=endpoint.host, port=endpoint.port))
        return LeaderAndIsrRequest(
            controller_id=self._controller_id,
            controller_epoch=epoch,
            broker_epoch=self._context.broker_epoch(broker),
            partition_states=states,
            live_leaders=live_leaders,
        )

    async def _update_metadata_states(self) -> list[UpdateMetadataPartitionState]:
        states = []
        online = self._context.live_ids()
        on_offline_dirs = self._context.replicas_on_offline_dirs
        queued = self._context.topics_to_be_deleted
        for count, tp in enumerate(await _in_partition_order(self._update_metadata_partitions), 1):
            if count % SLICE == 0:
                await turn_if_held()
            info = self._context.leadership.get(tp)
            if info is None:
                continue  # partitions without leadership are skipped, as Kafka does
            replicas = self._context.replicas(tp)
            state = info.leader_and_isr
            if tp.topic in queued:
                # Leader -2: brokers drop the partition from their metadata (spec §8.3).
                state = LeaderAndIsr(LEADER_DURING_DELETE, 0, state.isr, 0)
            states.append(
                make_update_metadata_state(
                    tp.topic,
                    tp.partition,
                    info.controller_epoch,
                    state.leader,
                    state.leader_epoch,
                    list(state.isr),
                    state.partition_epoch,
                    list(replicas),
                    [
                        r
                        for r in replicas
                        if r not in online or (on_offline_dirs and tp in on_offline_dirs.get(r, ()))
                    ],
                )
            )
        return states

    def _live_brokers(self) -> list[LiveBroker]:
        return [
            LiveBroker(
                broker_id=broker_id,
                endpoints=[
                    Endpoint(
                        listener=e.listener, security_protocol=e.security_protocol, host=e.host, port=e.port
                    )
                    for e in registered.info.endpoints
                ],
                rack=registered.info.rack,
                broker_epoch=registered.broker_epoch,
            )
            for broker_id, registered in sorted(self._context.live_brokers.items())
        ]

    def _stop_replica_request(
        self, broker: int, stops: dict[TopicPartition, bool], epoch: int
    ) -> StopReplicaRequest:
        return StopReplicaRequest(
            controller_id=self._controller_id,
            controller_epoch=epoch,
            broker_epoch=self._context.broker_epoch(broker),
            partitions=[
                # Field order of StopReplicaPartition, without the dataclass constructor.
                make_stop_replica_partition(tp.topic, tp.partition, self._leader_epoch(tp), delete)
                for tp, delete in sorted(stops.items())
            ],
        )

    def _stop_replica_callback(self, broker: int, stops: dict[TopicPartition, bool]) -> ResponseCallback:
        started = self._context.topics_with_deletion_started
        deleting = tuple(tp for tp, delete in sorted(stops.items()) if delete and tp.topic in started)
        handler = self._on_deletion_response
        if not deleting or handler is None:
            return _log_errors(broker)
        logger = _log_errors(broker)
        # The incarnation asked: an answer from one the broker has since replaced is not about
        # the replicas the controller now tracks on it.
        broker_epoch = self._context.broker_epoch(broker)

        def on_response(response: Response) -> None:
            logger(response)
            handler(broker, broker_epoch, response, deleting)

        return on_response

    def _leader_and_isr_callback(self, broker: int) -> ResponseCallback:
        handler = self._on_leader_and_isr_response
        logger = _log_errors(broker)
        if handler is None:
            return logger

        def on_response(response: Response) -> None:
            logger(response)
            handler(broker, response)

        return on_response

    def _leader_epoch(self, tp: TopicPartition) -> int:
        return self._context.leader_epoch(tp)


async def _in_partition_order(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """`sorted(partitions)`, topic by topic, the loop turning between topics if held: a
    failover's 200k partitions sorted as tuples would take a fifth of a second in one step."""
    by_topic: dict[str, list[int]] = {}
    for count, tp in enumerate(partitions, 1):
        if count % SLICE == 0:
            await turn_if_held()
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    ordered: list[TopicPartition] = []
    for topic in sorted(by_topic):
        await turn_if_held()
        ordered += [TopicPartition(topic, p) for p in sorted(by_topic[topic])]
    return ordered


def _parts(items: list[T]) -> list[list[T]]:
    """`items` in requests of at most PARTITIONS_PER_REQUEST."""
    return [items[i : i + PARTITIONS_PER_REQUEST] for i in range(0, len(items), PARTITIONS_PER_REQUEST)]


def _log_errors(broker: int) -> _ErrorLogger:
    return _ErrorLogger(broker)


class _ErrorLogger:
    """A response callback that only logs refusals (the controller acts on none yet)."""

    def __init__(self, broker: int) -> None:
        self._broker = broker

    def __call__(self, response: Response) -> None:
        if response.error_code:
            log.warning("broker %d refused a controller request: %s", self._broker, response.error_message)
        partition_errors = getattr(response, "partition_errors", [])
        failed = [e for e in partition_errors if e.error_code]
        if failed:
            log.warning(
                "broker %d refused %d partition(s), e.g. %s-%d with error %d",
                self._broker,
                len(failed),
                failed[0].topic,
                failed[0].partition,
                failed[0].error_code,
            )
