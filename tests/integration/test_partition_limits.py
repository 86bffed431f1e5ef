"""The partition limits on real brokers: CreateTopics and CreatePartitions past max.partitions,
max.broker.partitions or the assignment znode's jute.maxbuffer are refused with
POLICY_VIOLATION, naming the limit and the count, before anything reaches ZooKeeper; the
controller stays the same and the cluster serves on."""

from __future__ import annotations

import time

import orjson
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from tests.integration.conftest import Brokers
from tests.support import eventually, keel
from wire.api import CreatableReplicaAssignment, CreatableTopic, CreatePartitionsTopic
from wire.errors import ErrorCode

# Small limits: 40 partition replicas in the cluster, 16 per broker, and 200 bytes of
# assignment znode (jute.maxbuffer less the 1 KiB kept for the request around it).
LIMITS = {"max.partitions": "40", "max.broker.partitions": "16", "zookeeper.jute.maxbuffer": "1224"}


def topic(
    name: str, partitions: int = -1, rf: int = -1, on: dict[int, list[int]] | None = None
) -> CreatableTopic:
    return CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=rf,
        assignments=[CreatableReplicaAssignment(partition=p, broker_ids=r) for p, r in (on or {}).items()],
    )


def zookeeper_topics(kazoo: KazooClient) -> dict[str, object]:
    """Every topic's assignment and config znode, as ZooKeeper holds them."""
    configs = set(kazoo.get_children("/config/topics"))
    return {
        t: (orjson.loads(kazoo.get(f"/brokers/topics/{t}")[0])["partitions"], t in configs)
        for t in sorted(kazoo.get_children("/brokers/topics"))
    }


async def test_requests_past_a_limit_are_refused_before_anything_is_written(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    for broker_id in (1, 2, 3):
        brokers.new(broker_id, LIMITS).start()
    before = await brokers.wait_for_controller(30)
    bootstrap = f"127.0.0.1:{brokers.by_id(1).port}"
    async with KeelAdminClient(bootstrap) as admin:
        # Within the limits: 12 partition replicas, 4 on each broker.
        (created,) = (await admin.create_topics([topic("a", 4, 3)])).topics
        assert created.error_code == ErrorCode.NONE, created.error_message

        async def counted() -> bool:
            # The limits count what the receiving broker's metadata cache holds.
            served = (await admin.metadata(["a"])).topics[0].partitions
            return len(served) == 4 and all(p.leader >= 0 for p in served)

        await eventually(counted, timeout=20, message="topic a is not served yet")
        written = zookeeper_topics(kazoo)

        refused = {
            "max.partitions": await admin.create_topics([topic("b", 10, 3)]),
            "max.broker.partitions": await admin.create_topics([topic("c", on={p: [1] for p in range(13)})]),
            "jute.maxbuffer": await admin.create_topics([topic("j", 20, 1)]),
            "validate-only": await admin.create_topics([topic("v", 10, 3)], validate_only=True),
        }
        messages = {}
        for limit, response in refused.items():
            (result,) = response.topics
            assert result.error_code == ErrorCode.POLICY_VIOLATION, (limit, result)
            messages[limit] = result.error_message
        assert messages["max.partitions"] == (
            "max.partitions is 40: the cluster would hold 42 partition replicas (12 now, 30 more)"
        )
        assert messages["validate-only"] == messages["max.partitions"]
        assert messages["max.broker.partitions"] == (
            "max.broker.partitions is 16: broker 1 would hold 17 partition replicas (4 now, 13 more)"
        )
        assert str(messages["jute.maxbuffer"]).startswith(
            "zookeeper.jute.maxbuffer is 1224: "
            "the assignment znode /brokers/topics/j would take at least 242 bytes"
        )

        started = time.monotonic()
        (grown,) = (
            await admin.create_partitions(
                [CreatePartitionsTopic(name="a", count=100_000_000)], timeout_ms=5000
            )
        ).results
        assert time.monotonic() - started < 5
        assert grown.error_code == ErrorCode.POLICY_VIOLATION
        assert grown.error_message == (
            "max.partitions is 40: "
            "the cluster would hold 300000000 partition replicas (12 now, 299999988 more)"
        )

        assert zookeeper_topics(kazoo) == written, "a refused request wrote to ZooKeeper"
        assert await brokers.agreed_controller() == before, "the controller changed"

        # The cluster serves on: what fits is created.
        (fits,) = (await admin.create_topics([topic("d", 2, 3)])).topics
        assert fits.error_code == ErrorCode.NONE, fits.error_message


async def test_the_cli_names_the_limit_in_one_line_and_exits_1(brokers: Brokers) -> None:
    broker = brokers.new(1, LIMITS).start()
    await brokers.wait_for_controller(30)
    started = time.monotonic()
    done = keel(
        "topic",
        "create",
        "--topic",
        "hugep",
        "--partitions",
        "100000000",
        "--bootstrap-server",
        f"127.0.0.1:{broker.port}",
    )
    assert time.monotonic() - started < 10
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "POLICY_VIOLATION" in line
    assert "max.partitions is 40: the cluster would hold 100000000 partition replicas" in line
