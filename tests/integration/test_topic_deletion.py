"""Topic deletion and partition expansion across real broker processes on a real ZooKeeper
(spec §7.5, §7.6, §12.1): through the APIs, through the znodes, with a broker down, with the
controller killed in the middle, and through `keel topic delete|alter`."""

from __future__ import annotations

import signal
import subprocess

import orjson
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from node.clients.producer import KeelProducer
from node.cluster.zookeeper import free_ports
from tests import support
from tests.integration.conftest import BrokerProcess, Brokers
from tests.integration.test_election import controller_id
from tests.integration.test_partition_leadership import (
    controller_of,
    create_topic,
    metadata,
    settled_to,
    zk_state,
)
from tests.support import eventually
from wire.api import CreatePartitionsAssignment, CreatePartitionsTopic
from wire.errors import ErrorCode


def bootstrap(*brokers: BrokerProcess) -> str:
    return ",".join(f"127.0.0.1:{b.port}" for b in brokers)


async def produce(brokers: Brokers, topic: str, partitions: int) -> None:
    """A few records in every partition, so every replica has a log on disk."""
    async with KeelProducer(bootstrap(*brokers.running()), acks=-1, delivery_timeout=20) as producer:
        for partition in range(partitions):
            await producer.send_many(topic, [(None, b"x" * 100)] * 3, partition=partition)


def logs_on_disk(broker: BrokerProcess, topic: str) -> list[str]:
    data = broker.home / "data"
    return sorted(p.name for p in data.glob(f"{topic}-*")) if data.exists() else []


def znodes_of(kazoo: KazooClient, topic: str) -> list[str]:
    paths = [f"/brokers/topics/{topic}", f"/config/topics/{topic}", f"/admin/delete_topics/{topic}"]
    return [p for p in paths if kazoo.exists(p)]


async def served_by_none(brokers: Brokers, topic: str) -> bool:
    for broker in brokers.running():
        answer = await metadata(broker, topic)
        if answer is None or answer.topics[0].error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            return False
    return True


async def gone_everywhere(
    brokers: Brokers, kazoo: KazooClient, topic: str, everyone: list[BrokerProcess]
) -> bool:
    return (
        not znodes_of(kazoo, topic)
        and not any(logs_on_disk(b, topic) for b in everyone)
        and await served_by_none(brokers, topic)
    )


async def test_delete_topics_through_the_api_removes_every_trace(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    everyone = brokers.start(1, 2, 3)
    await controller_of(brokers)
    await create_topic(everyone[0], "doomed", partitions=3, rf=2, retention_ms="600000")
    await create_topic(everyone[0], "kept", partitions=1, rf=3)
    await produce(brokers, "doomed", 3)
    await produce(brokers, "kept", 1)
    assert sum(len(logs_on_disk(b, "doomed")) for b in everyone) == 6

    async with KeelAdminClient(bootstrap(everyone[1])) as admin:
        answer = await admin.delete_topics(["doomed", "absent"], timeout_ms=20000)
    codes = {r.name: r.error_code for r in answer.responses}
    assert codes == {"doomed": ErrorCode.NONE, "absent": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

    async def gone() -> bool:
        return await gone_everywhere(brokers, kazoo, "doomed", everyone)

    await eventually(gone, timeout=20, interval=0.1, message="the topic is not gone everywhere")
    assert all(logs_on_disk(b, "kept") == ["kept-0"] for b in everyone), "the other topic keeps its data"
    await produce(brokers, "kept", 1)


async def test_a_marker_written_in_zookeeper_deletes_the_topic(brokers: Brokers, kazoo: KazooClient) -> None:
    everyone = brokers.start(1, 2)
    await controller_of(brokers)
    await create_topic(everyone[0], "doomed", partitions=2, rf=2)
    await produce(brokers, "doomed", 2)
    kazoo.create("/admin/delete_topics/doomed")

    async def gone() -> bool:
        return await gone_everywhere(brokers, kazoo, "doomed", everyone)

    await eventually(gone, timeout=20, interval=0.1, message="the topic is not gone everywhere")
    # The name is free again: a new topic of that name starts empty.
    await create_topic(everyone[0], "doomed", partitions=1, rf=1)
    await settled_to(brokers, kazoo, "doomed", lambda s: s[0][0] >= 0, "the new topic has no leader")


async def test_deletion_waits_for_a_dead_broker_and_the_next_controller_finishes_it(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    everyone = brokers.start(1, 2, 3)
    controller = await controller_of(brokers)
    others = [b for b in everyone if b.broker_id != controller]
    survivor, victim = others
    await create_topic(
        survivor,
        "doomed",
        assignment={0: [survivor.broker_id, victim.broker_id], 1: [victim.broker_id, survivor.broker_id]},
    )
    await produce(brokers, "doomed", 2)
    victim.signal(signal.SIGKILL)
    victim.wait(10)
    await eventually(
        lambda: _unregistered(kazoo, victim.broker_id),
        timeout=10,
        message="the killed broker is still registered",
    )
    async with KeelAdminClient(bootstrap(survivor)) as admin:
        await admin.delete_topics(["doomed"], timeout_ms=0)

        async def waiting() -> bool:
            described = await _controller_metrics(brokers.by_id(controller))
            return described.get("TopicsIneligibleToDeleteCount") == 1 and not logs_on_disk(
                survivor, "doomed"
            )

        await eventually(
            waiting, timeout=20, interval=0.1, message="the deletion did not wait for the dead broker"
        )
        assert znodes_of(kazoo, "doomed"), "nothing is removed while a replica cannot be deleted"
        refused = await admin.create_partitions([CreatePartitionsTopic(name="doomed", count=3)])
        assert refused.results[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION

    brokers.by_id(controller).signal(signal.SIGKILL)  # the controller goes in the middle
    await eventually(
        lambda: _controller_other_than(kazoo, controller), timeout=10, message="no new controller"
    )
    victim.start()  # same broker, same disk

    async def gone() -> bool:
        return await gone_everywhere(brokers, kazoo, "doomed", [survivor, victim])

    await eventually(
        gone, timeout=30, interval=0.1, message="the next controller did not finish the deletion"
    )


async def _unregistered(kazoo: KazooClient, broker_id: int) -> bool:
    return kazoo.exists(f"/brokers/ids/{broker_id}") is None


async def _controller_other_than(kazoo: KazooClient, broker_id: int) -> bool:
    holder = controller_id(kazoo)
    return holder is not None and holder != broker_id


async def _controller_metrics(broker: BrokerProcess) -> dict[str, float]:
    try:
        async with KeelAdminClient(bootstrap(broker), timeout=2) as admin:
            return (await admin.describe_controller()).metrics
    except Exception:
        return {}


async def test_deletion_disabled_refuses_and_removes_markers(brokers: Brokers, kazoo: KazooClient) -> None:
    broker = brokers.new(1, delete_topic_enable="false").start()
    await controller_of(brokers)
    await create_topic(broker, "kept", partitions=1, rf=1)
    async with KeelAdminClient(bootstrap(broker)) as admin:
        answer = await admin.delete_topics(["kept"])
    assert answer.responses[0].error_code == ErrorCode.TOPIC_DELETION_DISABLED
    kazoo.create("/admin/delete_topics/kept")

    async def marker_removed() -> bool:
        return kazoo.exists("/admin/delete_topics/kept") is None

    await eventually(marker_removed, timeout=10, message="the marker was kept")
    assert kazoo.exists("/brokers/topics/kept") is not None


def _write_partitions(kazoo: KazooClient, topic: str, added: dict[int, list[int]]) -> dict[str, object]:
    value = orjson.loads(kazoo.get(f"/brokers/topics/{topic}")[0])
    value["partitions"].update({str(p): r for p, r in added.items()})
    kazoo.set(f"/brokers/topics/{topic}", orjson.dumps(value))
    return value  # type: ignore[no-any-return]


async def test_partition_expansion_through_the_znode_and_the_api(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    everyone = brokers.start(0, 1)
    await controller_of(brokers)
    await create_topic(everyone[0], "t", assignment={0: [0]})
    topic_id = orjson.loads(kazoo.get("/brokers/topics/t")[0]).get("topic_id")
    _write_partitions(kazoo, "t", {1: [0]})
    state = await settled_to(brokers, kazoo, "t", lambda s: len(s) == 2, "partition 1 was not created")
    assert state[1][:2] == (0, 0), "TopicPartitionExpansion: leader 0, leader epoch 0"

    async with KeelAdminClient(bootstrap(everyone[1])) as admin:
        grown = await admin.create_partitions(
            [
                CreatePartitionsTopic(name="t", count=4),
                CreatePartitionsTopic(
                    name="t2", count=2, assignments=[CreatePartitionsAssignment(broker_ids=[1])]
                ),
            ],
            timeout_ms=20000,
        )
        assert [(r.name, r.error_code) for r in grown.results] == [
            ("t", ErrorCode.NONE),
            ("t2", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ]
        state = await settled_to(brokers, kazoo, "t", lambda s: len(s) == 4, "partitions 2-3 not served")
        assert all(leader in (0, 1) and epoch == 0 for leader, epoch, _ in state.values())
        value = orjson.loads(kazoo.get("/brokers/topics/t")[0])
        assert value.get("topic_id") == topic_id, "the topic id is kept"
        assert value["partitions"]["0"] == [0] and value["partitions"]["1"] == [0]

        refused = await admin.create_partitions(
            [CreatePartitionsTopic(name="t", count=4)], validate_only=True
        )
        assert refused.results[0].error_code == ErrorCode.INVALID_PARTITIONS
        wrong = await admin.create_partitions(
            [
                CreatePartitionsTopic(
                    name="t", count=5, assignments=[CreatePartitionsAssignment(broker_ids=[7])]
                )
            ]
        )
        assert wrong.results[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert len(orjson.loads(kazoo.get("/brokers/topics/t")[0])["partitions"]) == 4, "nothing changed"


async def test_partition_expansion_with_an_offline_replica(brokers: Brokers, kazoo: KazooClient) -> None:
    everyone = brokers.start(0, 1)
    controller = await controller_of(brokers)
    (other,) = [b for b in everyone if b.broker_id != controller]
    await create_topic(everyone[0], "t", assignment={0: [controller]})
    other.signal(signal.SIGKILL)
    other.wait(10)
    await eventually(lambda: _unregistered(kazoo, other.broker_id), timeout=10, message="still registered")
    _write_partitions(kazoo, "t", {1: [other.broker_id, controller]})

    async def led() -> object:
        state = zk_state(kazoo, "t", 1)
        return state is not None and state["leader"] == controller and state["leader_epoch"] == 0

    await eventually(
        led, timeout=20, interval=0.1, message="partition 1 did not get the live replica as leader"
    )


def keel(*args: str) -> subprocess.CompletedProcess[str]:
    return support.keel("topic", *args, timeout=60)


async def test_keel_topic_delete_and_alter(brokers: Brokers, kazoo: KazooClient) -> None:
    (broker,) = brokers.start(1)
    await controller_of(brokers)
    await create_topic(broker, "t", partitions=1, rf=1)
    server = ["--bootstrap-server", bootstrap(broker)]

    altered = keel("alter", "--topic", "t", "--partitions", "3", *server)
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout.strip() == "Topic t now has 3 partitions."
    again = keel("alter", "--topic", "t", "--partitions", "2", *server)
    assert again.returncode == 1 and "INVALID_PARTITIONS" in again.stderr

    deleted = keel("delete", "--topic", "t", *server, "--format", "json")
    assert deleted.returncode == 0, deleted.stderr
    assert orjson.loads(deleted.stdout)["error_code"] == 0

    async def removed() -> bool:
        return not znodes_of(kazoo, "t")

    await eventually(removed, timeout=10, message="t is still in ZooKeeper")
    missing = keel("delete", "--topic", "t", *server)
    assert missing.returncode == 1
    assert (
        missing.stderr.strip() == "Error deleting topic t: UNKNOWN_TOPIC_OR_PARTITION: topic t does not exist"
    )


def test_keel_topic_alter_checks_the_count_before_connecting() -> None:
    nobody = f"127.0.0.1:{free_ports(1)[0]}"
    result = keel("alter", "--topic", "t", "--partitions", "0", "--bootstrap-server", nobody)
    # A usage error, as `create --partitions 0` is: nothing was sent.
    assert result.returncode == 2, result.stderr
    assert "--partitions: must be at least 1, not 0" in result.stderr
