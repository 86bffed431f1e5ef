"""The planner sidecar as a process (`python -m node.planner.main`) beside real brokers on a
real ZooKeeper: it registers `/keel/planner`, answers plans for the live cluster, writes
Parquet snapshots, stands by while another planner holds the znode, and stops on SIGTERM.
Spark's start-up costs ~10 s, so each test reuses one planner for several checks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from node.clients.planner import PlannerClient
from node.clients.producer import KeelProducer
from node.cluster.local import PlannerProcess
from node.cluster.zookeeper import free_ports
from node.planner import live_snapshot
from tests.integration.conftest import Brokers
from tests.integration.replication import bootstrap
from tests.integration.test_metrics import dashboard_names, get, readyz, scrape, value
from tests.integration.test_partition_leadership import create_topic
from tests.support import eventually, keel, run_command
from wire.api.planner import PlanReassignmentRequest
from wire.errors import ErrorCode

# Spark's JVM start plus the first job, on a loaded two-core machine.
SPARK_START_S = 120


def registered(kazoo: KazooClient) -> dict[str, object] | None:
    if kazoo.exists("/keel/planner") is None:
        return None
    return orjson.loads(kazoo.get("/keel/planner")[0])  # type: ignore[no-any-return]


async def registered_port(kazoo: KazooClient, port: int) -> bool:
    znode = registered(kazoo)
    return znode is not None and znode["port"] == port


async def start_cluster(brokers: Brokers) -> None:
    """Three brokers; topic `t` (6 partitions) only on brokers 1 and 2, with records."""
    brokers.start(1, 2, 3)
    await brokers.wait_for_controller()
    assignment = {p: [1 + p % 2, 2 - p % 2] for p in range(6)}
    await create_topic(brokers.by_id(1), "t", assignment=assignment)
    async with KeelProducer(bootstrap(brokers), acks=-1) as producer:
        for p in range(6):
            await producer.send_many("t", [(None, b"x" * 1000) for _ in range(20)], partition=p)


async def check_active_planner_metrics(planner: PlannerProcess) -> None:
    """Its metrics after one plan: active, the plan counted with its stages' times, nothing
    executing; and ready."""
    samples = await scrape(planner)
    assert value(samples, "keel_planner_active") == 1
    assert value(samples, "keel_planner_plans_total", origin="request") == 1
    assert value(samples, "keel_planner_plan_stage_seconds", stage="snapshot") > 0
    assert value(samples, "keel_planner_snapshots_total") >= 1
    assert value(samples, "keel_planner_executing") == 0
    assert (await get(readyz(planner)))[0] == 200
    assert dashboard_names(("keel_planner",)) <= {name for name, _ in samples}, "the dashboard's names"


def test_bad_properties_exit_2_naming_the_key(tmp_path: Path) -> None:
    for props, key in (
        ("listeners=PLAINTEXT://127.0.0.1:0\n", "zookeeper.connect"),
        ("zookeeper.connect=127.0.0.1:1\nplanner.max.concurrent.moves.per.broker=0\n", "moves.per.broker"),
        ("zookeeper.connect=127.0.0.1:1\nplanner.self.healing.enable=maybe\n", "self.healing.enable"),
        ("zookeeper.connect=127.0.0.1:1\nlisteners=nonsense\n", "listeners"),
    ):
        path = tmp_path / "planner.properties"
        path.write_text(props)
        done = run_command("node.planner.main", str(path), timeout=60)
        assert done.returncode == 2, done.stderr
        assert key in done.stderr and "invalid configuration" in done.stderr


@pytest.mark.plain_pass_only(
    "Spark's local-cluster master, snapshots and the planner's metrics, nothing about security; the "
    "planner on SASL_SSL, its standby and the takeover run in this pass in test_plan_execution"
)
async def test_planner_registers_plans_snapshots_stands_by_and_stops(
    brokers: Brokers, kazoo: KazooClient, tmp_path: Path
) -> None:
    """Planner A (local[2]) and planner B on Spark's local-cluster master (two executor
    processes of one core and 1 GiB each): A registers and plans while B stands by; A stops on
    SIGTERM, B takes over and plans on its executors; B stops and the znode goes."""
    await start_cluster(brokers)
    first_metrics, second_metrics = free_ports(2)
    first = brokers.new_planner(
        {"planner.snapshot.interval.ms": "60000", "metrics.http.listener": f"127.0.0.1:{first_metrics}"}
    ).start()
    await eventually(
        lambda: registered_port(kazoo, first.port), timeout=SPARK_START_S, message="planner not registered"
    )
    second = brokers.new_planner(
        {
            "spark.master": "local-cluster[2,1,1024]",
            "planner.snapshot.interval.ms": "0",
            "metrics.http.listener": f"127.0.0.1:{second_metrics}",
        }
    ).start()
    # The brokers name the registered planner to clients.
    async with KeelAdminClient(bootstrap(brokers)) as admin:
        assert (await admin.describe_planner()).port == first.port

    # The CLI finds it through a broker; the plan for the live cluster fills broker 3.
    done = keel(
        "reassign", "plan", "--goal", "rebalance", "--bootstrap-server", bootstrap(brokers),
        "--output", str(tmp_path / "plan.json"), "--report", str(tmp_path / "report.json"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = orjson.loads((tmp_path / "plan.json").read_bytes())
    assert written["version"] == 1 and written["partitions"]
    assert all(len(set(p["replicas"])) == 2 for p in written["partitions"])
    assert any(3 in p["replicas"] for p in written["partitions"])
    assert orjson.loads((tmp_path / "report.json").read_bytes())["moves"] >= 1
    assert "BROKER" in done.stdout and "Moves:" in done.stdout

    await check_active_planner_metrics(first)

    # Bad input: a clear error each, nothing planned or executed.
    async with PlannerClient.at(first.address) as client:
        for request, words in (
            (PlanReassignmentRequest(goals=["shuffle"], execute=True), "unknown goal 'shuffle'"),
            (PlanReassignmentRequest(goals=["rebalance"], brokers=[1, 2, 9], execute=True), "broker 9"),
            (PlanReassignmentRequest(goals=["remove-brokers"], remove_brokers=[7]), "broker 7"),
        ):
            refused = await client.plan(request)
            assert refused.error_code == ErrorCode.INVALID_REQUEST, request
            assert words in (refused.error_message or ""), refused.error_message
            assert not refused.partitions
        assert (await client.status()).active
    async with KeelAdminClient(bootstrap(brokers)) as admin:
        assert not (await admin.list_partition_reassignments(None)).topics
    assert kazoo.exists("/admin/reassign_partitions") is None

    # Parquet snapshots, one directory per snapshot with its three tables.
    def complete_snapshots() -> list[Path]:
        found = live_snapshot.snapshots(Path(first.settings["planner.snapshot.dir"]))
        return [
            d
            for d in found
            if all((d / t / "_SUCCESS").exists() for t in ("brokers", "partitions", "replicas"))
        ]

    await eventually(lambda: asyncio.to_thread(complete_snapshots), timeout=30, message="no snapshots")

    # The second planner stands by while the first holds the znode.
    await asyncio.to_thread(second.wait_for_log, "standing by", SPARK_START_S)
    assert registered(kazoo)["port"] == first.port  # type: ignore[index]
    async with PlannerClient.at(second.address) as client:
        assert not (await client.status()).active
    assert value(await scrape(second), "keel_planner_active") == 0
    assert (await get(readyz(second)))[0] == 503, "a planner standing by is not ready"

    # SIGTERM: the first stops cleanly, its znode goes, and the second takes over and plans.
    assert await asyncio.to_thread(first.stop, 30) == 0
    await eventually(
        lambda: registered_port(kazoo, second.port),
        timeout=20,
        message="the second planner took nothing over",
    )
    async with PlannerClient.at(second.address) as client:
        answer = await client.plan(PlanReassignmentRequest(goals=["rebalance"]))
    assert answer.error_code == ErrorCode.NONE, answer.error_message
    assert any(3 in p.replicas for p in answer.partitions)
    assert "local-cluster[2,1,1024]" in second.log()
    assert await asyncio.to_thread(second.stop, 30) == 0
    await eventually(
        lambda: asyncio.sleep(0, registered(kazoo) is None), timeout=10, message="/keel/planner left behind"
    )

    # No planner: one clear line, exit non-zero, nothing written.
    done = keel(
        "reassign", "plan", "--goal", "rebalance", "--output", str(tmp_path / "none.json"),
        "--bootstrap-server", bootstrap(brokers),
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == "keel: no planner is running (start one with bin/keel-planner)"
    assert not (tmp_path / "none.json").exists()


async def test_snapshot_command_reads_zookeeper_and_the_brokers(
    brokers: Brokers, zk_connect: str, tmp_path: Path
) -> None:
    await start_cluster(brokers)
    output = tmp_path / "cluster.json"
    done = keel("reassign", "snapshot", "--output", str(output), "--zookeeper", zk_connect, timeout=60)
    assert done.returncode == 0, done.stderr
    document = orjson.loads(output.read_bytes())
    assert document["version"] == 1
    assert document["brokers"] == [{"id": i, "rack": None, "alive": True} for i in (1, 2, 3)]
    by_partition = {p["partition"]: p for p in document["partitions"]}
    assert sorted(by_partition) == list(range(6))
    for p, entry in by_partition.items():
        assert entry["replicas"] == [1 + p % 2, 2 - p % 2]
        assert entry["leader"] == 1 + p % 2
        assert entry["size_bytes"] > 20_000
