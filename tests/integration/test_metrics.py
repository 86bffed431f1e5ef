"""metrics.http.listener on real broker processes: /metrics in Prometheus's text format under
Kafka's names (as the JMX exporter with Strimzi's rules renders them), values that move with
the cluster, /healthz and /readyz, and a bad listener value refused at start-up."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import aiohttp
import orjson
import pytest
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from node.clients.producer import KeelProducer
from node.cluster.local import ManagedProcess
from node.cluster.zookeeper import free_ports
from tests.integration.conftest import BrokerProcess, Brokers
from tests.integration.replication import bootstrap
from tests.integration.test_partition_leadership import controller_of, create_topic, settled_to
from tests.support import eventually, run_command

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def readyz(process: ManagedProcess) -> str:
    return str(process.metrics_url).replace("/metrics", "/readyz")


async def get(url: str) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, timeout=aiohttp.ClientTimeout(5)) as answer,
    ):
        return answer.status, await answer.text()


async def scrape(process: ManagedProcess) -> Samples:
    assert process.metrics_url is not None
    status, text = await get(process.metrics_url)
    assert status == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


DASHBOARD = Path(__file__).parents[2] / "docs" / "grafana" / "keel.json"


def dashboard_names(prefixes: tuple[str, ...]) -> set[str]:
    """The metric names docs/grafana/keel.json queries, of those starting with `prefixes`."""
    exprs = [t["expr"] for p in orjson.loads(DASHBOARD.read_bytes())["panels"] for t in p.get("targets", ())]
    return {n for e in exprs for n in re.findall(r"\b[a-z_]+\b", e) if n.startswith(prefixes)}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def total(brokers: list[BrokerProcess], name: str, **labels: str) -> float:
    """A metric summed over brokers, as a dashboard sums it."""
    return sum([value(await scrape(b), name, **labels) for b in brokers])


def with_metrics(brokers: Brokers, broker_id: int) -> BrokerProcess:
    return brokers.new(broker_id, {"metrics.http.listener": f"127.0.0.1:{free_ports(1)[0]}"})


async def test_broker_metrics_follow_the_cluster(brokers: Brokers, kazoo: KazooClient) -> None:
    started = [with_metrics(brokers, i).start() for i in (1, 2, 3)]
    controller = await controller_of(brokers)

    async def ready() -> bool:
        statuses = [(await get(readyz(b)))[0] for b in started]
        return statuses == [200, 200, 200]

    await eventually(ready, timeout=30, message="every broker's /readyz says 200 once registered")
    samples = await scrape(brokers.by_id(controller))
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert await total(started, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "keel_controller_epoch") >= 1
    assert value(samples, "keel_server_broker_epoch") > 0
    # Every process measures how long its event loop was held (its ZooKeeper session with it).
    for broker in started:
        lag = await scrape(broker)
        assert ("keel_eventloop_lag_max_seconds", frozenset()) in lag
        assert value(lag, "keel_eventloop_lag_max_seconds") >= 0
    assert value(samples, "kafka_controller_kafkacontroller_globaltopiccount") == 0

    await create_topic(brokers.by_id(controller), "watched", partitions=3, rf=3)
    await settled_to(brokers, kazoo, "watched", lambda s: len(s) == 3, "topic never agreed")

    async def topic_counted() -> bool:
        samples = await scrape(brokers.by_id(controller))
        return (
            value(samples, "kafka_controller_kafkacontroller_globaltopiccount") == 1
            and value(samples, "kafka_controller_kafkacontroller_globalpartitioncount") == 3
        )

    await eventually(topic_counted, timeout=20, message="GlobalTopicCount and GlobalPartitionCount move")
    assert await total(started, "kafka_server_replicamanager_leadercount") == 3
    assert await total(started, "kafka_server_replicamanager_partitioncount") == 9

    async with KeelProducer(bootstrap(brokers), acks=-1) as producer:
        await producer.send_many("watched", [(None, b"x" * 100) for _ in range(60)])
    assert await total(started, "kafka_server_brokertopicmetrics_messagesin_total", topic="watched") == 60
    assert await total(started, "kafka_server_brokertopicmetrics_messagesin_total") == 60
    assert await total(started, "kafka_server_brokertopicmetrics_bytesin_total", topic="watched") > 6000
    assert await total(started, "kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert await total(started, "kafka_network_requestmetrics_totaltimems_count", request="Produce") >= 1

    async def replicated() -> bool:
        return await total(started, "kafka_server_brokertopicmetrics_replicationbytesin_total") > 12000

    await eventually(replicated, timeout=20, message="the followers' fetched bytes are counted")
    assert await total(started, "kafka_server_replicamanager_underreplicatedpartitions") == 0

    stopped = next(b for b in started if b.broker_id != controller)
    stopped.stop()
    alive = [b for b in started if b is not stopped]

    async def under_replicated() -> bool:
        return await total(alive, "kafka_server_replicamanager_underreplicatedpartitions") == 3

    await eventually(
        under_replicated, timeout=30, message="UnderReplicatedPartitions counts the 3 partitions"
    )


async def test_readyz_is_503_until_registered(tmp_path: Path) -> None:
    """A broker whose ZooKeeper does not answer yet runs (/healthz) but is not ready (/readyz)."""
    metrics_port, zk_port = free_ports(2)
    broker = BrokerProcess(
        1,
        home=tmp_path,
        settings={
            "zookeeper.connect": f"127.0.0.1:{zk_port}",
            "zookeeper.connection.timeout.ms": "60000",
            "metrics.http.listener": f"127.0.0.1:{metrics_port}",
        },
    ).start()
    base = f"http://127.0.0.1:{metrics_port}"
    try:

        async def answering() -> bool:
            try:
                return (await get(f"{base}/healthz"))[0] == 200
            except aiohttp.ClientConnectionError:
                return False

        await eventually(answering, timeout=30, message="/healthz answers once the process runs")
        status, text = await get(f"{base}/readyz")
        assert (status, text.strip()) == (503, "not ready: not registered in ZooKeeper yet")
        status, text = await get(f"{base}/metrics")
        assert status == 200 and "kafka_server_replicamanager_partitioncount 0.0" in text
    finally:
        broker.kill()


@pytest.mark.parametrize(
    ("listener", "message"),
    [
        ("9404", "'9404' is not host:port"),
        ("127.0.0.1:http", "'127.0.0.1:http': the port 'http' is not a number"),
    ],
)
def test_a_bad_metrics_listener_is_refused_in_one_line(tmp_path: Path, listener: str, message: str) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(f"broker.id=1\nzookeeper.connect=127.0.0.1:1\nmetrics.http.listener={listener}\n")
    result: subprocess.CompletedProcess[str] = run_command("node.broker.main", str(properties), timeout=60)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"keel-node: invalid configuration: metrics.http.listener: {message}"
    ]


async def test_a_taken_metrics_port_fails_start_up_in_one_line(tmp_path: Path) -> None:
    holder = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = holder.sockets[0].getsockname()[1]
    properties = tmp_path / "server.properties"
    properties.write_text(
        f"broker.id=1\nzookeeper.connect=127.0.0.1:1\nmetrics.http.listener=127.0.0.1:{port}\n"
    )
    try:
        result = await asyncio.to_thread(run_command, "node.broker.main", str(properties), timeout=60)
    finally:
        holder.close()
    assert result.returncode == 1
    assert (
        f"cannot listen on metrics.http.listener 127.0.0.1:{port}" in result.stderr.strip().splitlines()[-1]
    )
