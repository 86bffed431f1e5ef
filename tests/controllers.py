"""KafkaControllers on the in-memory ZooKeeper and broker channel: the one harness for the
controller's unit tests (election and failover, partition leadership, leader elections,
ISR changes, reassignment, deletion, controlled shutdown). Each broker gets its own store
(its own ZooKeeper session), channel and hand-driven clock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from actors.base.ports import BrokerInfo, LeaderAndIsr, ReplicaAssignment, TopicAssignment, TopicPartition
from actors.controller import KafkaController
from actors.controller.controller import ControllerConfig
from tests.fakes import FakeBrokerChannel, FakeClusterStore, FakeZooKeeper
from tests.support import ManualClock, eventually, topic_admin
from wire.api import (
    AlterPartitionItem,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    LeaderAndIsrRequest,
)
from wire.endpoint import Endpoint
from wire.errors import ErrorCode


def info(broker_id: int) -> BrokerInfo:
    return BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9000 + broker_id),))


class ControllerCluster:
    def __init__(self) -> None:
        self.zk = FakeZooKeeper()
        self.controllers: dict[int, KafkaController] = {}
        self.stores: dict[int, FakeClusterStore] = {}
        self.channels: dict[int, FakeBrokerChannel] = {}
        self.clocks: dict[int, ManualClock] = {}

    async def start(self, broker_id: int, **config: object) -> KafkaController:
        """Register broker `broker_id` and start its controller; `config` are
        ControllerConfig's fields (e.g. unclean_leader_election_enable=True)."""
        store, channel, clock = FakeClusterStore(self.zk), FakeBrokerChannel(), ManualClock()
        epoch = await store.register_broker(info(broker_id))
        controller = KafkaController(
            info(broker_id),
            store,
            clock,
            channel,
            ControllerConfig(**config),  # type: ignore[arg-type]
        )
        controller.startup(epoch)
        self.controllers[broker_id], self.stores[broker_id] = controller, store
        self.channels[broker_id], self.clocks[broker_id] = channel, clock
        return controller

    async def kill(self, broker_id: int) -> None:
        """kill -9: the session goes, and with it the broker's znodes."""
        controller = self.controllers.pop(broker_id)
        await controller.event_manager.close()
        self.zk.drop_session(self.stores.pop(broker_id).session)
        self.channels.pop(broker_id)

    def active(self) -> list[int]:
        return [i for i, c in self.controllers.items() if c.is_active]

    @property
    def controller(self) -> KafkaController:
        (active,) = [c for c in self.controllers.values() if c.is_active]
        return active

    @property
    def channel(self) -> FakeBrokerChannel:
        """What the active controller has sent."""
        return self.channels[self.controller.broker_id]

    async def idle(self) -> bool:
        return all(c.event_manager.queue_size == 0 and c.state == 0 for c in self.controllers.values())

    async def settled(self) -> bool:
        """Every broker idle, and all agree on one active controller."""
        views = {c.active_controller_id for c in self.controllers.values()}
        return await self.idle() and len(self.active()) == 1 and views == set(self.active())

    def state(self, topic: str, partition: int) -> LeaderAndIsr:
        """The partition's state znode, its data version as the partition epoch."""
        state, _, version = self.zk.partition_states[TopicPartition(topic, partition)]
        return state._replace(partition_epoch=version)

    async def create_topic(self, topic: str, replicas: dict[int, tuple[int, ...]], **config: str) -> None:
        """Write the topic's znode as an admin would; `config` keys use _ for . (min_insync_replicas)."""
        assignment = TopicAssignment(topic, {p: ReplicaAssignment(r) for p, r in replicas.items()})
        await topic_admin(next(iter(self.stores.values()))).create_topic(
            assignment, {k.replace("_", "."): v for k, v in config.items()}
        )

    async def expand_isr(self, tp: TopicPartition, isr: tuple[int, ...]) -> None:
        """What the leader does once a follower caught up: AlterPartition to the controller."""
        state = self.state(*tp)
        item = AlterPartitionItem(
            partition_index=tp.partition,
            leader_epoch=state.leader_epoch,
            new_isr_with_epochs=[
                BrokerState(broker_id=r, broker_epoch=self.controller.context.live_brokers[r].broker_epoch)
                for r in isr
            ],
            partition_epoch=state.partition_epoch,
        )
        answer = await self.controller.alter_partition(
            AlterPartitionRequest(
                broker_id=state.leader,
                broker_epoch=self.controller.context.broker_epoch(state.leader),
                topics=[AlterPartitionTopic(topic_name=tp.topic, partitions=[item])],
            )
        )
        assert answer.topics[0].partitions[0].error_code == ErrorCode.NONE, answer

    async def stop(self) -> None:
        for controller in self.controllers.values():
            await controller.shutdown()


def settled(cluster: ControllerCluster, predicate: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    """A probe for `eventually`: every controller idle, and `predicate` holds."""

    async def probe() -> bool:
        return await cluster.idle() and predicate()

    return probe


async def started(cluster: ControllerCluster, *broker_ids: int, **config: object) -> None:
    """Start the brokers and wait until one of them is controller and all are idle."""
    for broker_id in broker_ids:
        await cluster.start(broker_id, **config)
    await eventually(settled(cluster, lambda: len(cluster.active()) == 1), timeout=2, message="no controller")


def leader_and_isr_to(channel: FakeBrokerChannel, broker: int) -> list[LeaderAndIsrRequest]:
    return [r for r in channel.received(broker) if isinstance(r, LeaderAndIsrRequest)]
