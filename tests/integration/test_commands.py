"""The commands a person types: `keel` and `keel-cluster`, run as processes."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
from kazoo.client import KazooClient

from node.clients.admin import KeelAdminClient
from node.clients.producer import partition_for
from node.cluster.security import jaas_entry, load_cluster_security
from tests import security_pass
from tests.integration.conftest import Brokers
from tests.support import eventually, eventually_sync, run_command


async def test_keel_cli_describes_and_forces_reelection(brokers: Brokers, kazoo: KazooClient) -> None:
    one, two = brokers.start(1, 2)
    controller, epoch = await eventually(brokers.agreed_controller, timeout=20, message="no controller")
    bootstrap = f"127.0.0.1:{one.port},127.0.0.1:{two.port}"

    described = run_command(
        "node.cli.main", "cluster", "describe", "--bootstrap-server", bootstrap, "--format", "json"
    )
    assert described.returncode == 0, described.stderr
    cluster = orjson.loads(described.stdout)
    assert (cluster["controller_id"], cluster["controller_epoch"]) == (controller, epoch)
    assert [b["broker_id"] for b in cluster["brokers"]] == [1, 2]

    table = run_command("node.cli.main", "cluster", "describe", "--bootstrap-server", bootstrap)
    assert f"Controller:        {controller}" in table.stdout and "BROKER" in table.stdout

    reelect = run_command(
        "node.cli.main", "controller", "reelect", "--bootstrap-server", bootstrap, "--format", "json"
    )
    assert orjson.loads(reelect.stdout) == {"deleted_controller_id": controller}

    async def next_epoch() -> tuple[int, int] | None:
        agreed = await brokers.agreed_controller()
        return agreed if agreed is not None and agreed[1] == epoch + 1 else None

    await eventually(next_epoch, timeout=10, message="no re-election after keel controller reelect")
    shown = orjson.loads(
        run_command(
            "node.cli.main", "controller", "show", "--bootstrap-server", bootstrap, "--format", "json"
        ).stdout
    )
    assert shown["controller_epoch"] == epoch + 1
    assert shown["address"] == f"127.0.0.1:{brokers.by_id(shown['controller_id']).port}"


def test_keel_cli_reports_an_unreachable_cluster() -> None:
    from node.cluster.zookeeper import free_ports

    result = run_command(
        "node.cli.main",
        "cluster",
        "describe",
        "--bootstrap-server",
        f"127.0.0.1:{free_ports(1)[0]}",
        "--timeout",
        "2",
    )
    assert result.returncode == 1 and "cannot connect" in result.stderr


def check_metrics_urls(output: str, processes: list[str]) -> None:
    """`keel-cluster up` prints a metrics URL per process; every broker's answers."""
    urls = dict(
        line.removeprefix("Metrics: ").rsplit(" ", 1)
        for line in output.splitlines()
        if line.startswith("Metrics: ")
    )
    assert sorted(urls) == processes
    for name, url in urls.items():
        if name.startswith("broker"):
            with urllib.request.urlopen(url, timeout=5) as answer:
                assert "kafka_controller_kafkacontroller_activecontrollercount" in answer.read().decode()


def page_text(url: str) -> str:
    """The page at `url`, or "" while nothing answers there."""
    try:
        with urllib.request.urlopen(url, timeout=5) as page:
            return str(page.read().decode())
    except OSError:
        return ""


@pytest.mark.plain_pass_only(security_pass.OWN_PLAINTEXT_CLUSTER)
def test_keel_cluster_up_kill_status_restart_stop(tmp_path: Path) -> None:
    directory = ["--dir", str(tmp_path / "cluster")]
    up = run_command("node.cli.keel_cluster", "up", "--brokers", "3", *directory)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "CONTROLLER" in up.stdout
        check_metrics_urls(up.stdout, ["broker 1", "broker 2", "broker 3", "planner"])

        def status() -> dict[str, object]:
            result = run_command("node.cli.keel_cluster", "status", "--format", "json", *directory)
            assert result.returncode == 0, result.stderr
            return orjson.loads(result.stdout)  # type: ignore[no-any-return]

        first = status()
        rows = first["brokers"]
        assert isinstance(rows, list) and [r["state"] for r in rows] == ["running"] * 3
        (controller,) = [r for r in rows if r["controller"]]
        console = first["console"]
        assert isinstance(console, dict) and console["state"] == "running"
        assert f"Console: {console['url']}" in up.stdout
        planner = first["planner"]
        assert isinstance(planner, dict) and planner["pid"] and planner["spark_master"] == "local[*]"
        assert planner["state"] in ("starting", "active")
        again = run_command("node.cli.keel_cluster", "up", "--brokers", "3", *directory)
        assert again.returncode == 0, "up is idempotent"

        run_command(
            "node.cli.keel_cluster", "kill", str(controller["broker_id"]), "--signal", "KILL", *directory
        )

        def taken_over() -> dict[str, object] | None:
            now = status()["brokers"]
            assert isinstance(now, list)
            new = [r for r in now if r["controller"]]
            return (
                new[0] if new and new[0]["controller_epoch"] == controller["controller_epoch"] + 1 else None
            )

        new = eventually_sync(taken_over, timeout=20, interval=0.2, message="no new controller after kill")
        assert new["broker_id"] != controller["broker_id"]

        restarted = run_command("node.cli.keel_cluster", "restart", str(controller["broker_id"]), *directory)
        assert restarted.returncode == 0
        assert all(r["state"] == "running" for r in status()["brokers"])  # type: ignore[union-attr]
        logs = run_command("node.cli.keel_cluster", "logs", str(controller["broker_id"]), *directory)
        assert f"broker {controller['broker_id']} is controller at epoch" in logs.stdout
        # The planner's Spark UI, at the URL up printed, once its Spark has started.
        spark_ui = first["spark_ui"]
        assert isinstance(spark_ui, str) and f"Spark UI: {spark_ui}" in up.stdout
        eventually_sync(
            lambda: "Spark" in page_text(spark_ui),
            timeout=120,
            interval=0.5,
            message=f"the planner's Spark UI never answered at {spark_ui}",
        )
    finally:
        stopped = run_command("node.cli.keel_cluster", "stop", *directory)
    assert stopped.returncode == 0
    assert all(r["state"] == "stopped" for r in status()["brokers"])  # type: ignore[union-attr]
    assert status()["planner"]["state"] == "stopped"  # type: ignore[index]
    assert status()["console"]["state"] == "stopped"  # type: ignore[index]


def kafka_brokers_seen(bootstrap: str) -> set[tuple[str, int]]:
    """The brokers kafka-python's client learns of from `bootstrap`'s Metadata."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        consumer.topics()
        return {(b.host, b.port) for b in consumer._client.cluster.brokers()}
    finally:
        consumer.close()


@pytest.mark.plain_pass_only(security_pass.OWN_PLAINTEXT_CLUSTER)
def test_keel_cluster_on_a_three_server_zookeeper_ensemble(tmp_path: Path) -> None:
    directory = ["--dir", str(tmp_path / "ensemble")]
    try:
        up = run_command(
            "node.cli.keel_cluster",
            "up",
            "--brokers",
            "2",
            "--zookeeper-servers",
            "3",
            "--no-planner",
            *directory,
        )
        assert up.returncode == 0, up.stdout + up.stderr
        status = orjson.loads(
            run_command("node.cli.keel_cluster", "status", "--format", "json", *directory).stdout
        )
        assert status["zookeeper"]["running"] is True
        assert len(status["zookeeper"]["connect"].split(",")) == 3
        assert sum(1 for row in status["brokers"] if row["controller"]) == 1
        # Kafka's own clients bootstrap from the line up prints, and find both brokers.
        bootstrap = status["kafka_bootstrap"]
        assert f"Kafka bootstrap: {bootstrap}" in up.stdout
        assert len(kafka_brokers_seen(bootstrap)) == 2
    finally:
        assert run_command("node.cli.keel_cluster", "stop", *directory).returncode == 0


@pytest.mark.plain_pass_only(
    "keel-cluster up --security sasl makes its own CA and users; the secured pass's would not be trusted"
)
def test_keel_cluster_up_with_sasl_security(tmp_path: Path) -> None:
    """`up --security sasl`: SASL_SSL everywhere, the admin and broker users made in ZooKeeper
    before the brokers start, the authorizer on; `keel` reaches the cluster with its
    client.properties (found by default for the local cluster) and nothing without them."""
    cluster_dir = tmp_path / "secured"
    directory = ["--dir", str(cluster_dir)]
    local = {"KEEL_CLUSTER_DIR": str(cluster_dir)}
    up = run_command(
        "node.cli.keel_cluster", "up", "--brokers", "2", "--no-planner", "--security", "sasl", *directory
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        client_config = cluster_dir / "client.properties"
        assert f"--command-config {client_config}" in up.stdout, "it says how to connect"
        assert client_config.stat().st_mode & 0o077 == 0
        status = orjson.loads(
            run_command("node.cli.keel_cluster", "status", "--format", "json", *directory).stdout
        )
        assert [row["state"] for row in status["brokers"]] == ["running", "running"]
        assert status["connect"]["security"] == "sasl"
        # The console reads the secured cluster with its client.properties.
        assert status["console"]["state"] == "running"
        eventually_sync(
            lambda: page_text(status["console"]["url"]).count('data-alive="true"') == 2,
            timeout=30,
            interval=0.2,
            message="the console shows both brokers alive",
        )
        secured = ["--command-config", str(client_config)]
        created = run_command(
            "node.cli.main", *secured, "topic", "create", "--topic", "locked", "--partitions", "1",
            "--replication-factor", "2", env=local,
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        produced = run_command(
            "node.cli.main", *secured, "produce", "--topic", "locked", env=local, stdin="one\ntwo\n"
        )
        assert produced.returncode == 0 and "sent 2 records" in produced.stderr, produced.stderr
        # Without --command-config, keel finds the local cluster's client.properties. The list
        # comes from one broker's metadata cache, which the controller fills after the leader's.
        eventually_sync(
            lambda: (
                (listed := run_command("node.cli.main", "topic", "list", env=local)).returncode == 0
                and "locked" in listed.stdout
            ),
            timeout=20,
            interval=0.5,
            message="keel topic list never showed the topic locked",
        )
        # A client without the credentials gets nothing: a plaintext one, and a TLS one
        # that does not authenticate.
        port = status["brokers"][0]["address"].rsplit(":", 1)[1]
        bootstrap = ["--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "5"]
        plaintext = run_command("node.cli.main", "topic", "list", *bootstrap, env=local)
        assert plaintext.returncode == 1, plaintext.stdout
        stranger = tmp_path / "stranger.properties"
        props = {**load_cluster_security(cluster_dir).client_properties}  # type: ignore[union-attr]
        props["sasl.jaas.config"] = jaas_entry("admin", "not-the-password")
        stranger.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
        refused = run_command("node.cli.main", "--command-config", str(stranger), "topic", "list", *bootstrap)
        assert refused.returncode == 1 and "invalid credentials" in refused.stderr, refused.stderr
    finally:
        stopped = run_command("node.cli.keel_cluster", "stop", *directory)
    assert stopped.returncode == 0, stopped.stderr


async def test_keel_produce_and_consume_like_kafkas_console_tools(
    brokers: Brokers, kazoo: KazooClient
) -> None:
    brokers.start(1, 2, 3)
    await eventually(brokers.agreed_controller, timeout=20, message="no controller")
    bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in brokers.all)
    created = run_command(
        "node.cli.main",
        "topic",
        "create",
        "--topic",
        "lines",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--bootstrap-server",
        bootstrap,
    )
    assert created.returncode == 0, created.stderr
    lines = "".join(f"user-{i % 7}:event {i}\n" for i in range(300))
    produced = run_command(
        "node.cli.main",
        "produce",
        "--topic",
        "lines",
        "--key-separator",
        ":",
        "--bootstrap-server",
        bootstrap,
        stdin=lines,
    )
    assert produced.returncode == 0, produced.stderr
    assert "sent 300 records" in produced.stderr
    consumed = run_command(
        "node.cli.main",
        "consume",
        "--topic",
        "lines",
        "--from-beginning",
        "--max-messages",
        "300",
        "--format",
        "json",
        "--bootstrap-server",
        bootstrap,
    )
    assert consumed.returncode == 0, consumed.stderr
    got = [orjson.loads(line) for line in consumed.stdout.splitlines()]
    assert sorted(r["value"] for r in got) == sorted(f"event {i}" for i in range(300))
    partitions_of = {}
    for record in got:
        partitions_of.setdefault(record["key"], set()).add(record["partition"])
        assert record["key"] == f"user-{int(record['value'].split()[1]) % 7}"
    assert all(len(p) == 1 for p in partitions_of.values()), "one key, one partition"
    for key, (partition,) in partitions_of.items():
        assert partition == partition_for(key.encode(), 3), "Kafka's murmur2 partitioner"
    per_partition = {}
    for record in got:
        per_partition.setdefault(record["partition"], []).append(int(record["value"].split()[1]))
    assert all(v == sorted(v) for v in per_partition.values()), "in order within each partition"


async def test_keel_produce_refuses_what_cannot_be_sent_in_one_line(brokers: Brokers) -> None:
    """A batch the topic's max.message.bytes refuses, a line over --max-request-size after
    others were sent, and a partition without a leader: each one line, and soon."""
    brokers.start(1, 2)
    await eventually(brokers.agreed_controller, timeout=20, message="no controller")
    bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in brokers.all)

    def keel(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_command("node.cli.main", *args, "--bootstrap-server", bootstrap, stdin=stdin)

    def one_line(done: subprocess.CompletedProcess[str]) -> str:
        assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
        return done.stderr

    small = keel(
        "topic",
        "create",
        "--topic",
        "small",
        "--replica-assignment",
        "1",
        "--config",
        "max.message.bytes=1000",
    )
    orphan = keel("topic", "create", "--topic", "orphan", "--replica-assignment", "2")
    assert small.returncode == 0 and orphan.returncode == 0, small.stderr + orphan.stderr

    refused = keel("produce", "--topic", "small", stdin="B" * 2000 + "\n")
    assert refused.returncode == 1
    assert (
        "topic 'small' partition 0 refused" in one_line(refused)
        and "max.message.bytes 1000" in refused.stderr
    )

    partial = keel(
        "produce", "--topic", "small", "--max-request-size", "1000", stdin="a\nb\n" + "B" * 5000 + "\n"
    )
    assert partial.returncode == 3
    assert one_line(partial).startswith("keel: sent 2 records, then stopped: line 3 of stdin")
    consumed = keel(
        "consume", "--topic", "small", "--from-beginning", "--max-messages", "2", "--timeout-ms", "10000"
    )
    assert consumed.stdout.split() == ["a", "b"], consumed.stderr

    brokers.by_id(2).stop()

    async def leaderless() -> bool:
        async with KeelAdminClient(f"127.0.0.1:{brokers.by_id(1).port}", timeout=5) as admin:
            (topic,) = (await admin.metadata(["orphan"])).topics
            return topic.partitions[0].leader == -1

    await eventually(leaderless, timeout=20, message="orphan-0 kept a leader")
    started = time.monotonic()
    waited = run_command(
        "node.cli.main",
        "produce",
        "--topic",
        "orphan",
        "--timeout",
        "3",
        "--bootstrap-server",
        f"127.0.0.1:{brokers.by_id(1).port}",
        stdin="hi\n",
    )
    assert waited.returncode == 1 and "partition 0 had no leader within 3.0 s" in one_line(waited)
    assert time.monotonic() - started < 10, "--timeout bounds the wait for a leader"
