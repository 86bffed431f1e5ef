"""The controller's data watches on registrations and topics, on the in-memory ZooKeeper: every
notification is acted on from a read that re-arms the watch, and a change between the read that
lists a znode and the read that arms its watch is not lost."""

from __future__ import annotations

from collections.abc import Callable

from actors.base.ports import BrokerInfo, RegisteredBroker, ReplicaAssignment, TopicAssignment, TopicPartition
from tests.controllers import ControllerCluster as Cluster
from tests.controllers import settled, started
from tests.support import eventually
from wire.api import UpdateMetadataRequest
from wire.endpoint import Endpoint


def moved(broker_id: int, port: int) -> BrokerInfo:
    return BrokerInfo(broker_id, (Endpoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", port),))


def publishes(cluster: Cluster, to: int, broker_id: int, port: int) -> Callable[[], bool]:
    return lambda: published_port(cluster, to, broker_id) == port


def published_port(cluster: Cluster, to: int, broker_id: int) -> int | None:
    """The port of `broker_id` in the last UpdateMetadata sent to broker `to`."""
    sent = [r for r in cluster.channel.received(to) if isinstance(r, UpdateMetadataRequest)]
    for live in sent[-1].live_brokers if sent else []:
        if live.broker_id == broker_id:
            return live.endpoints[0].port
    return None


async def test_a_changed_registration_is_published_and_its_watch_re_armed(cluster: Cluster) -> None:
    await started(cluster, 1, 2)
    controller = cluster.controller.broker_id
    other = 3 - controller
    for port in (7001, 7002):
        cluster.zk.update_broker_registration(moved(other, port))
        await eventually(
            settled(cluster, publishes(cluster, controller, other, port)),
            timeout=2,
            message=f"the registration's change to port {port} was not published",
        )


async def test_a_registration_changed_before_its_watch_was_armed_is_taken(cluster: Cluster) -> None:
    await started(cluster, 1, 2)
    store = cluster.stores[cluster.controller.broker_id]
    read_registration = store.registered_broker
    changed: list[int] = []

    async def changed_first(broker_id: int, *, watch: bool = False) -> RegisteredBroker | None:
        # Broker 3 moves to another port after the controller listed it and before its
        # data watch is armed: no notification can tell of that change.
        if broker_id == 3 and watch and not changed:
            changed.append(broker_id)
            cluster.zk.update_broker_registration(moved(3, 7003))
        return await read_registration(broker_id, watch=watch)

    store.registered_broker = changed_first  # type: ignore[method-assign]
    await cluster.start(3)
    await eventually(
        settled(cluster, lambda: cluster.controller.context.live_brokers.get(3) is not None),
        timeout=2,
        message="broker 3 not taken in",
    )
    assert changed == [3]
    assert cluster.controller.context.live_brokers[3].info == moved(3, 7003)
    assert published_port(cluster, cluster.controller.broker_id, 3) == 7003


async def test_a_topic_deleted_and_created_again_between_two_reads_is_created(cluster: Cluster) -> None:
    await started(cluster, 1, 2)
    store = cluster.stores[cluster.controller.broker_id]
    read_assignments = store.topic_assignments
    topic = TopicAssignment("t", {0: ReplicaAssignment((1, 2))})
    interfered: list[str] = []

    async def gone_while_read(topics: set[str], *, watch: bool = False) -> dict[str, TopicAssignment]:
        # An operator deletes the topic's znode after the controller listed it and creates
        # it again before the controller lists the topics once more: the read in between
        # finds nothing, and arms no data watch.
        if "t" in topics and not interfered:
            interfered.append("t")
            del cluster.zk.topics["t"]
            cluster.zk.data_watch_deleted("/brokers/topics/t")
            cluster.zk.fire("/brokers/topics", "topics_changed")
            found = await read_assignments(topics, watch=watch)
            cluster.zk.topics["t"] = topic
            cluster.zk.fire("/brokers/topics", "topics_changed")
            return found
        return await read_assignments(topics, watch=watch)

    store.topic_assignments = gone_while_read  # type: ignore[method-assign]
    await cluster.create_topic("t", {0: (1, 2)})
    await eventually(
        settled(cluster, lambda: TopicPartition("t", 0) in cluster.zk.partition_states),
        timeout=2,
        message="the topic created again was never read",
    )
    assert interfered == ["t"]
    assert cluster.controller.context.assignments["t"] == topic.partitions
