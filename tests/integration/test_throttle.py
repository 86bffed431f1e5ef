"""Replication throttles and dynamic configs across real broker processes on a real
ZooKeeper: configs set and described over the API and seen in ZooKeeper with their change
notifications, and a replica that catches up at the throttled rate."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path

import orjson
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from node.clients.producer import KeelProducer
from tests.integration.conftest import BrokerProcess, Brokers
from tests.integration.replication import bootstrap
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually, keel
from wire.api import (
    AlterableConfig,
    AlterConfigsResource,
    DescribableLogDirTopic,
    DescribeConfigsResource,
)
from wire.errors import ErrorCode

TOPIC, BROKER = 2, 4
MB = 1 << 20


def zk_json(kazoo: KazooClient, path: str) -> dict[str, object]:
    value = orjson.loads(kazoo.get(path)[0])
    assert isinstance(value, dict)
    return value


async def alter(broker: BrokerProcess, *resources: AlterConfigsResource) -> list[tuple[int, str | None]]:
    async with KeelAdminClient(f"127.0.0.1:{broker.port}") as admin:
        response = await admin.incremental_alter_configs(list(resources))
    return [(r.error_code, r.error_message) for r in response.responses]


def setting(resource_type: int, name: str, **configs: str | None) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=resource_type,
        resource_name=name,
        configs=[
            AlterableConfig(name=k.replace("_", "."), config_operation=0 if v is not None else 1, value=v)
            for k, v in configs.items()
        ],
    )


async def test_configs_set_and_described_over_the_api_and_seen_in_zookeeper(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    (one,) = brokers.start(1)
    await controller_of(brokers)
    await create_topic(one, "configured", partitions=2, rf=1)
    answers = await alter(
        one,
        setting(BROKER, "", leader_replication_throttled_rate="1000000"),
        setting(BROKER, "1", follower_replication_throttled_rate="2000000"),
        setting(TOPIC, "configured", leader_replication_throttled_replicas="0:1,1:1"),
    )
    assert answers == [(ErrorCode.NONE, None)] * 3
    assert zk_json(kazoo, "/config/brokers/<default>") == {
        "version": 1,
        "config": {"leader.replication.throttled.rate": "1000000"},
    }
    assert zk_json(kazoo, "/config/brokers/1")["config"] == {"follower.replication.throttled.rate": "2000000"}
    topic_config = zk_json(kazoo, "/config/topics/configured")["config"]
    assert topic_config == {"leader.replication.throttled.replicas": "0:1,1:1"}
    changes = sorted(kazoo.get_children("/config/changes"))
    assert [zk_json(kazoo, f"/config/changes/{c}") for c in changes] == [
        {"version": 2, "entity_path": "brokers/<default>"},
        {"version": 2, "entity_path": "brokers/1"},
        {"version": 2, "entity_path": "topics/configured"},
    ]
    assert all(c.startswith("config_change_") and c[-10:].isdigit() for c in changes)

    # Bad values: one readable error per resource, nothing written.
    refused = await alter(
        one,
        setting(BROKER, "1", leader_replication_throttled_rate="-5"),
        setting(TOPIC, "configured", follower_replication_throttled_replicas="zero:one"),
        setting(TOPIC, "missing", retention_ms="1"),
        setting(BROKER, "one", leader_replication_throttled_rate="1"),
    )
    assert [code for code, _ in refused] == [
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_REQUEST,
    ]
    assert all(message for _, message in refused)
    assert zk_json(kazoo, "/config/brokers/1")["config"] == {"follower.replication.throttled.rate": "2000000"}
    assert len(kazoo.get_children("/config/changes")) == 3

    # Delete one key; describe shows the broker's own values over the cluster defaults.
    assert await alter(one, setting(BROKER, "", leader_replication_throttled_rate=None)) == [(0, None)]
    assert zk_json(kazoo, "/config/brokers/<default>")["config"] == {}
    assert await alter(one, setting(BROKER, "", follower_replication_throttled_rate="5")) == [(0, None)]
    async with KeelAdminClient(f"127.0.0.1:{one.port}") as admin:
        described = await admin.describe_configs(
            [
                DescribeConfigsResource(resource_type=BROKER, resource_name="1"),
                DescribeConfigsResource(resource_type=TOPIC, resource_name="configured"),
                DescribeConfigsResource(resource_type=TOPIC, resource_name="missing"),
            ]
        )
    broker, topic, missing = described.results
    dynamic = (1, 2, 3)  # DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG
    assert [(c.name, c.value, c.config_source) for c in broker.configs if c.config_source in dynamic] == [
        ("follower.replication.throttled.rate", "2000000", 2)
    ]
    assert [(c.name, c.value, c.config_source) for c in topic.configs if c.config_source in dynamic] == [
        ("leader.replication.throttled.replicas", "0:1,1:1", 1)
    ]
    # The rest are the broker's settings and Kafka's defaults (DescribeConfigs lists them all).
    assert {c.name: c.config_source for c in topic.configs}["retention.ms"] == 5  # DEFAULT_CONFIG
    assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # The broker re-read each change from its notification.
    await eventually(
        lambda: _logged(one, "applied the config of topic configured"),
        timeout=10,
        message="the broker never applied the topic's config change",
    )


async def _logged(broker: BrokerProcess, text: str) -> bool:
    return text in broker.log()


async def replica_size(broker: BrokerProcess, topic: str) -> int:
    async with KeelAdminClient(f"127.0.0.1:{broker.port}", timeout=2) as admin:
        response = await admin.describe_log_dirs([DescribableLogDirTopic(topic=topic, partitions=[0])])
    return sum(p.partition_size for r in response.results for t in r.topics for p in t.partitions)


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


async def bytes_to_copy(leader: BrokerProcess, topic: str) -> int:
    async with KeelAdminClient(f"127.0.0.1:{leader.port}", timeout=2) as admin:
        response = await admin.describe_log_dirs([DescribableLogDirTopic(topic=topic, partitions=[0])])
    (figure,) = [
        p.reassignment_bytes_to_copy for r in response.results for t in r.topics for p in t.partitions
    ]
    return figure


async def test_a_new_replica_is_copied_at_the_throttled_rate(brokers: Brokers, kazoo: KazooClient) -> None:
    rate = MB
    one = brokers.new(1, replica_fetch_max_bytes=str(128 * 1024)).start()
    two = brokers.new(2, replica_fetch_max_bytes=str(128 * 1024)).start()
    await controller_of(brokers)
    await create_topic(one, "moving", assignment={0: [1]})
    await settled_to(brokers, kazoo, "moving", lambda s: s[0][0] == 1, "broker 1 never led")
    async with KeelProducer(bootstrap(brokers), acks=1) as producer:
        for _ in range(16):
            await producer.send_many("moving", [(None, b"v" * 4096)] * 64, partition=0)  # 4 MiB
    total = await replica_size(one, "moving")
    assert total >= 4 * MB
    # What `keel reassign --throttle` sets for a move of [1] to [1, 2].
    answers = await alter(
        one,
        setting(
            BROKER,
            "",
            leader_replication_throttled_rate=str(rate),
            follower_replication_throttled_rate=str(rate),
        ),
        setting(
            TOPIC,
            "moving",
            leader_replication_throttled_replicas="0:1",
            follower_replication_throttled_replicas="0:2",
        ),
    )
    assert answers == [(0, None), (0, None)]
    for broker in (one, two):
        await eventually(
            lambda b=broker: _logged(b, "applied the config of topic moving"),
            timeout=10,
            message=f"broker {broker.broker_id} did not apply the config",
        )
    async with KeelAdminClient(bootstrap(brokers)) as admin:
        started = await admin.alter_partition_reassignments({("moving", 0): [1, 2]})
    assert [p.error_code for t in started.responses for p in t.partitions] == [0]
    first: list[tuple[float, int]] = []
    figures: list[int] = []

    async def copied() -> bool:
        figures.append(await bytes_to_copy(one, "moving"))
        size = await replica_size(two, "moving")
        if size and not first:
            first.append((time.monotonic(), size))
        return size >= total

    await eventually(copied, timeout=30, interval=0.05, message="the new replica never caught up")
    first_seen, first_size = first[0]
    measured = (total - first_size) / (time.monotonic() - first_seen)
    assert 0.75 * rate <= measured <= 1.15 * rate, f"copied at {measured / MB:.2f} MiB/s against 1 MiB/s"
    # The leader's progress metric counted down while the copy ran.
    counting = [f for f in figures if f > 0]
    assert len(counting) > 5 and counting[0] > counting[-1] and counting[0] <= total
    await settled_to(
        brokers, kazoo, "moving", lambda s: sorted(s[0][2]) == [1, 2], "the move never completed"
    )
    await eventually(
        lambda: _equals(bytes_to_copy(one, "moving"), -1),
        timeout=10,
        message="the leader still counts bytes to copy after the move",
    )


def plan_file(tmp_path: Path, name: str, replicas: list[int]) -> str:
    path = tmp_path / name
    path.write_text(
        orjson.dumps(
            {"version": 1, "partitions": [{"topic": "r", "partition": 0, "replicas": replicas}]}
        ).decode()
    )
    return str(path)


def configs_of(kazoo: KazooClient, path: str) -> dict[str, object]:
    if not kazoo.exists(path):
        return {}
    config = zk_json(kazoo, path)["config"]
    assert isinstance(config, dict)
    return config


async def test_keel_reassign_execute_verify_list_cancel(
    brokers: Brokers, kazoo: KazooClient, tmp_path: Path
) -> None:
    one, _, _ = brokers.start(1, 2, 3)
    await controller_of(brokers)
    await create_topic(one, "r", assignment={0: [1, 2]})
    await settled_to(brokers, kazoo, "r", lambda s: s[0][0] == 1, "broker 1 never led")
    async with KeelProducer(bootstrap(brokers), acks=-1) as producer:
        for _ in range(8):
            await producer.send_many("r", [(None, b"v" * 4096)] * 64, partition=0)  # 2 MiB
    server = ["--bootstrap-server", bootstrap(brokers)]
    move = plan_file(tmp_path, "move.json", [2, 3])

    # execute with a throttle: the configs Kafka's tool would set, then the move starts.
    started = await asyncio.to_thread(
        keel, "reassign", "execute", "--reassignment-json-file", move, "--throttle", str(MB), *server
    )
    assert started.returncode == 0, started.stderr
    assert '"replicas":[1,2]' in started.stdout, "the current assignment is printed for a rollback"
    for broker in (1, 2, 3):
        assert configs_of(kazoo, f"/config/brokers/{broker}") == {
            "leader.replication.throttled.rate": str(MB),
            "follower.replication.throttled.rate": str(MB),
        }
    assert configs_of(kazoo, "/config/topics/r") == {
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:3",
    }
    listed = await asyncio.to_thread(keel, "reassign", "list", "--format", "json", *server)
    assert listed.returncode == 0, listed.stderr
    (ongoing,) = orjson.loads(listed.stdout)
    assert ongoing["topic"] == "r" and ongoing["adding_replicas"] == [3] and ongoing["bytes_to_copy"] > 0

    async def verified() -> list[dict[str, object]] | None:
        answer = await asyncio.to_thread(
            keel, "reassign", "verify", "--reassignment-json-file", move, "--format", "json", *server
        )
        assert answer.returncode == 0, answer.stderr
        states = orjson.loads(answer.stdout)
        return states if states[0]["state"] == "complete" else None

    (done,) = await eventually(verified, timeout=30, interval=0.5, message="the move never completed")
    assert done["replicas"] == [2, 3]
    assert configs_of(kazoo, "/config/brokers/1") == {} and configs_of(kazoo, "/config/topics/r") == {}, (
        "verify removes the throttles once everything is complete"
    )

    # A crawling move is cancelled: the replicas go back and the throttles go away.
    back = plan_file(tmp_path, "back.json", [1, 2])
    slow = await asyncio.to_thread(
        keel, "reassign", "execute", "--reassignment-json-file", back, "--throttle", "10000", *server
    )
    assert slow.returncode == 0, slow.stderr
    cancelled = await asyncio.to_thread(
        keel, "reassign", "cancel", "--reassignment-json-file", back, "--format", "json", *server
    )
    assert cancelled.returncode == 0, cancelled.stderr
    assert orjson.loads(cancelled.stdout) == [{"topic": "r", "partition": 0, "error": None}]
    await settled_to(brokers, kazoo, "r", lambda s: sorted(s[0][2]) == [2, 3], "the cancel never settled")
    assert configs_of(kazoo, "/config/topics/r") == {}
    listed = await asyncio.to_thread(keel, "reassign", "list", "--format", "json", *server)
    assert orjson.loads(listed.stdout) == []

    # --wait draws progress to the end and verifies.
    waited = await asyncio.to_thread(
        keel, "reassign", "execute", "--reassignment-json-file", back, "--wait", *server
    )
    assert waited.returncode == 0, waited.stderr
    assert "1/1 partitions" in waited.stderr and "100.0%" in waited.stderr
    assert "the throttles are removed" in waited.stdout

    # A move to a broker that is not alive, which the controller would refuse, is refused
    # before anything is set: no throttle is left behind, no rollback printed for nothing.
    dead = plan_file(tmp_path, "dead.json", [1, 9])
    refused = await asyncio.to_thread(
        keel, "reassign", "execute", "--reassignment-json-file", dead, "--throttle", "10000", *server
    )
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr == (
        "keel: these moves go to brokers that are not alive: r-0 to broker 9 (live brokers: 1,2,3); "
        "nothing was started\n"
    )
    assert refused.stdout == ""
    for broker in (1, 2, 3):
        assert configs_of(kazoo, f"/config/brokers/{broker}") == {}
    assert configs_of(kazoo, "/config/topics/r") == {}
