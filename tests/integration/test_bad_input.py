"""Bad input, as a new user types it, against a real ZooKeeper and real brokers: one row per input.

Each row runs one of Keel's commands as a process and expects an exit status, a phrase in its
one-line error, an answer within a time bound, and no traceback. Every row then checks that the
cluster is as it was: the same topics, the same assignments and partition states in ZooKeeper,
and at the end of the module every record produced at the start reads back.

Placeholders in a row's arguments: {bootstrap} (the brokers), {zk} (ZooKeeper with this module's
chroot), {tmp} (a scratch directory), {props} (a valid server.properties for a broker 99 that is
not running), {busy_port} (a port a broker listens on), {file} (a regular file, not JSON),
{duplicate_replica} (a reassignment file that lists a broker twice).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from kazoo.client import KazooClient

from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports
from tests.integration.conftest import local_cluster
from tests.support import keel, run_command

# The topic every row must leave intact: two partitions, RF 3, RECORDS records.
TOPIC = "pc"
RECORDS = 200
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s+File \"", re.MULTILINE)


@dataclass(frozen=True)
class BadInput:
    """One bad input: `args` of `module` (default `keel`), what it must answer, and how fast."""

    name: str
    args: tuple[str, ...]
    status: int
    phrase: str
    seconds: float = 10.0
    module: str = "node.cli.main"
    stdin: str | None = None
    # Most errors are one line; a few commands print what they did before it (exit 3).
    max_stderr_lines: int = 1
    env: dict[str, str] = field(default_factory=dict)


# Inputs handled well before this table existed: they must stay so.
HANDLED = [
    BadInput(
        "create-duplicate-topic",
        ("topic", "create", "--topic", TOPIC, "--partitions", "1", "--bootstrap-server", "{bootstrap}"),
        1,
        "already exists",
    ),
    BadInput(
        "create-zero-partitions",
        ("topic", "create", "--topic", "z", "--partitions", "0", "--bootstrap-server", "{bootstrap}"),
        2,
        "partitions",
    ),
    BadInput(
        "reassign-file-missing",
        (
            "reassign",
            "execute",
            "--reassignment-json-file",
            "{tmp}/none.json",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        2,
        "none.json",
    ),
    BadInput(
        "create-invalid-topic-name",
        ("topic", "create", "--topic", "bad name", "--partitions", "1", "--bootstrap-server", "{bootstrap}"),
        1,
        "INVALID_TOPIC_EXCEPTION",
    ),
    BadInput(
        "create-replication-factor-above-brokers",
        (
            "topic",
            "create",
            "--topic",
            "rf4",
            "--partitions",
            "1",
            "--replication-factor",
            "4",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        1,
        "INVALID_REPLICATION_FACTOR",
    ),
    BadInput(
        "create-bad-config-value",
        (
            "topic",
            "create",
            "--topic",
            "cfg",
            "--partitions",
            "1",
            "--config",
            "min.insync.replicas=abc",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        1,
        "min.insync.replicas",
    ),
    BadInput(
        "delete-missing-topic",
        ("topic", "delete", "--topic", "nosuchtopic", "--bootstrap-server", "{bootstrap}"),
        1,
        "nosuchtopic",
    ),
    BadInput(
        "reassign-file-not-json",
        ("reassign", "execute", "--reassignment-json-file", "{file}", "--bootstrap-server", "{bootstrap}"),
        2,
        "regular-file",
    ),
    BadInput(
        "reassign-file-duplicate-replica",
        (
            "reassign",
            "execute",
            "--reassignment-json-file",
            "{duplicate_replica}",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        2,
        "duplicate-replica.json",
    ),
    BadInput(
        "election-file-not-json",
        (
            "leader-election",
            "--election-type",
            "preferred",
            "--path-to-json-file",
            "{file}",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        2,
        "regular-file",
    ),
    BadInput(
        "plan-from-file-not-json",
        ("reassign", "plan", "--from-file", "{file}", "--goal", "rebalance", "--output", "{tmp}/p.json"),
        2,
        "regular-file",
    ),
    BadInput(
        "node-bad-property-value",
        ("{props}", "--override", "num.partitions=many"),
        2,
        "num.partitions",
        module="node.broker.main",
    ),
    BadInput(
        "node-bad-log-format",
        ("{props}", "--override", "log.format=xml"),
        2,
        "log.format: 'xml' is not text or json",
        module="node.broker.main",
    ),
    BadInput(
        # broker.id 1 is registered by a running broker: refused once the wait for an old session
        # of its own to expire (the session timeout) is over; the start-up's log lines come first
        # (up to 7: the log directory's recovery, the logs loaded, the wait, the stop; and one
        # per SCRAM user in /config/users, two in the secured pass).
        "node-duplicate-broker-id",
        ("{props}", "--override", "broker.id=1"),
        1,
        "broker.id 1 is already registered",
        seconds=20,
        module="node.broker.main",
        max_stderr_lines=10,
    ),
]

# Limits checked at the edge (max.partitions, max.broker.partitions, jute.maxbuffer), at the
# brokers' defaults: 300,000 partition replicas in the cluster, 9,000 on one broker.
LIMITS: list[BadInput] = [
    BadInput(
        "create-hundred-million-partitions",
        (
            "topic",
            "create",
            "--topic",
            "hugep",
            "--partitions",
            "100000000",
            "--replication-factor",
            "1",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        1,
        "max.partitions is 300000",
        seconds=5,
    ),
    BadInput(
        "alter-hundred-million-partitions",
        (
            "topic",
            "alter",
            "--topic",
            TOPIC,
            "--partitions",
            "100000000",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        1,
        "max.partitions is 300000",
        seconds=5,
    ),
    BadInput(
        # 9,000 partitions of RF 3 on 3 brokers: 9,002 replicas on each with pc's.
        "create-past-max-broker-partitions",
        (
            "topic",
            "create",
            "--topic",
            "wide",
            "--partitions",
            "9000",
            "--replication-factor",
            "3",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        1,
        "max.broker.partitions is 9000",
        seconds=5,
    ),
    BadInput(
        # 9,000 partitions all on broker 1, given explicitly.
        "create-assignment-past-max-broker-partitions",
        (
            "topic",
            "create",
            "--topic",
            "onone",
            "--replica-assignment",
            ",".join(["1"] * 9000),
            "--bootstrap-server",
            "{bootstrap}",
        ),
        1,
        "broker 1 would hold 9002",
        seconds=5,
    ),
    BadInput(
        "alter-zero-partitions",
        ("topic", "alter", "--topic", TOPIC, "--partitions", "0", "--bootstrap-server", "{bootstrap}"),
        2,
        "partitions",
    ),
]

# Clients fail fast on facts: missing topics and partitions, record size, bounded waits.
# No broker listening where the command was pointed: the one line says so and where to look.
NO_BROKER = "is the cluster up? bin/keel-cluster status"

CLIENTS: list[BadInput] = [
    BadInput("no-broker-topic-list", ("topic", "list", "--bootstrap-server", "127.0.0.1:1"), 1, NO_BROKER),
    BadInput(
        "no-broker-consume", ("consume", "--topic", TOPIC, "--bootstrap-server", "127.0.0.1:1"), 1, NO_BROKER
    ),
    BadInput(
        "no-broker-produce",
        ("produce", "--topic", TOPIC, "--bootstrap-server", "127.0.0.1:1"),
        1,
        NO_BROKER,
        stdin="hi\n",
    ),
    BadInput(
        "no-broker-reassign-list", ("reassign", "list", "--bootstrap-server", "127.0.0.1:1"), 1, NO_BROKER
    ),
    BadInput(
        "no-broker-controller-show", ("controller", "show", "--bootstrap-server", "127.0.0.1:1"), 1, NO_BROKER
    ),
    BadInput(
        "produce-missing-topic",
        ("produce", "--topic", "nosuchtopic", "--timeout", "5", "--bootstrap-server", "{bootstrap}"),
        1,
        "topic 'nosuchtopic' does not exist",
        seconds=5,
        stdin="hi\n",
    ),
    BadInput(
        "produce-missing-partition",
        (
            "produce",
            "--topic",
            TOPIC,
            "--partition",
            "5",
            "--timeout",
            "5",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        1,
        f"topic '{TOPIC}' has no partition 5: it has 2",
        seconds=5,
        stdin="hi\n",
    ),
    BadInput(
        "produce-negative-partition",
        ("produce", "--topic", TOPIC, "--partition", "-1", "--bootstrap-server", "{bootstrap}"),
        2,
        "--partition",
        stdin="hi\n",
    ),
    BadInput(
        # 2 MB in one line: refused once past the record limit, without reading the rest.
        "produce-line-over-record-limit",
        ("produce", "--topic", TOPIC, "--bootstrap-server", "{bootstrap}"),
        2,
        "is longer than the 1048576-byte record limit (--max-request-size); nothing was sent",
        seconds=5,
        stdin="B" * 2_000_000 + "\n",
    ),
    BadInput(
        # A line of exactly max.request.size bytes: the record batch around it is larger.
        "produce-record-batch-over-limit",
        ("produce", "--topic", TOPIC, "--bootstrap-server", "{bootstrap}"),
        2,
        "makes a record batch of 1048650 bytes, over the 1048576-byte record limit",
        seconds=5,
        stdin="B" * 1048576 + "\n",
    ),
    BadInput(
        # With --timeout-ms 10000, an answer within 5 s shows it did not wait for the idle limit.
        "consume-missing-topic",
        ("consume", "--topic", "nosuchtopic", "--timeout-ms", "10000", "--bootstrap-server", "{bootstrap}"),
        1,
        "topic 'nosuchtopic' does not exist",
        seconds=5,
    ),
    BadInput(
        "consume-missing-partition",
        (
            "consume",
            "--topic",
            TOPIC,
            "--partition",
            "7",
            "--timeout-ms",
            "10000",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        1,
        f"topic '{TOPIC}' has no partition 7: it has 2",
        seconds=5,
    ),
    BadInput(
        "consume-negative-max-messages",
        ("consume", "--topic", TOPIC, "--max-messages", "-3", "--bootstrap-server", "{bootstrap}"),
        2,
        "--max-messages",
    ),
    BadInput(
        "consume-negative-timeout-ms",
        ("consume", "--topic", TOPIC, "--timeout-ms", "-1", "--bootstrap-server", "{bootstrap}"),
        2,
        "--timeout-ms",
    ),
]


def _reassignment(topic: str, partition: int, replicas: list[int]) -> str:
    """A reassignment file for `--reassignment-json-file /dev/stdin`, braces escaped for the
    placeholders."""
    text = orjson.dumps(
        {"version": 1, "partitions": [{"topic": topic, "partition": partition, "replicas": replicas}]}
    )
    return text.decode().replace("{", "{{").replace("}", "}}")


def _reassign(command: str, *extra: str) -> tuple[str, ...]:
    return (
        "reassign",
        command,
        "--reassignment-json-file",
        "/dev/stdin",
        *extra,
        "--bootstrap-server",
        "{bootstrap}",
    )


# Check, then act: commands that validate every input and open every output first.
COMMANDS: list[BadInput] = [
    BadInput(
        # Refused before the planner is asked: nothing executes, so there is nothing to roll back.
        "plan-execute-unwritable-output",
        (
            "reassign",
            "plan",
            "--goal",
            "remove-brokers",
            "--remove-brokers",
            "3",
            "--topics",
            TOPIC,
            "--execute",
            "--output",
            "/nonexistent/dir/plan.json",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        2,
        "cannot write --output /nonexistent/dir/plan.json",
        seconds=5,
    ),
    BadInput(
        "plan-execute-unwritable-report",
        (
            "reassign",
            "plan",
            "--goal",
            "rebalance",
            "--execute",
            "--output",
            "{tmp}/plan.json",
            "--report",
            "{file}/report.json",
            "--bootstrap-server",
            "{bootstrap}",
        ),
        2,
        "cannot write --report",
        seconds=5,
    ),
    BadInput(
        "plan-planner-not-host-port",
        ("reassign", "plan", "--goal", "rebalance", "--planner", "nohost", "--output", "{tmp}/plan.json"),
        2,
        "--planner nohost is not host:port",
        seconds=5,
    ),
    BadInput(
        # The master is an argument: checked before the snapshot file is read or Spark starts.
        "plan-bogus-spark-master",
        (
            "reassign",
            "plan",
            "--goal",
            "rebalance",
            "--from-file",
            "{file}",
            "--spark-master",
            "bogus://x",
            "--output",
            "{tmp}/plan.json",
        ),
        2,
        "--spark-master bogus://x: not a Spark master URL",
        seconds=5,
    ),
    BadInput(
        "snapshot-unwritable-output",
        ("reassign", "snapshot", "--zookeeper", "{zk}", "--output", "/nonexistent/x.json"),
        2,
        "cannot write --output /nonexistent/x.json",
        seconds=5,
    ),
    BadInput(
        "snapshot-no-zookeeper",
        ("reassign", "snapshot", "--zookeeper", "127.0.0.1:1", "--output", "{tmp}/cluster.json"),
        1,
        "cannot reach ZooKeeper at 127.0.0.1:1",
        seconds=10,
    ),
    BadInput(
        "status-planner-not-host-port",
        ("reassign", "status", "--planner", "nohost"),
        2,
        "--planner nohost is not host:port",
        seconds=5,
    ),
    BadInput(
        "verify-missing-topic",
        _reassign("verify"),
        1,
        "nosuch-0 does not exist: there is no topic nosuch",
        stdin=_reassignment("nosuch", 0, [1]),
    ),
    BadInput(
        "verify-missing-partition",
        _reassign("verify"),
        1,
        f"{TOPIC}-5 does not exist: {TOPIC} has partitions 0 to 1",
        stdin=_reassignment(TOPIC, 5, [1, 2, 3]),
    ),
    BadInput(
        "execute-missing-topic",
        _reassign("execute"),
        1,
        "nosuch-0 does not exist",
        stdin=_reassignment("nosuch", 0, [1]),
    ),
    BadInput(
        "cancel-missing-partition",
        _reassign("cancel"),
        1,
        f"{TOPIC}-5 does not exist",
        stdin=_reassignment(TOPIC, 5, [1, 2, 3]),
    ),
    BadInput(
        # Refused before the throttle is set: the controller would refuse the move anyway.
        "execute-to-a-broker-that-is-not-alive",
        _reassign("execute", "--throttle", "1000"),
        1,
        f"{TOPIC}-0 to broker 9 (live brokers: 1,2,3)",
        stdin=_reassignment(TOPIC, 0, [1, 2, 9]),
    ),
]

# One error path per entry point: keel-node, keel-planner, keel-cluster, keel. A server that
# fails to start prints the log lines of what it started and stopped, then the one error line.
NODE = "node.broker.main"
PLANNER = "node.planner.main"
CLUSTER = "node.cli.keel_cluster"
ENTRY_POINTS: list[BadInput] = [
    BadInput(
        "node-unknown-argument", ("{props}", "--partitions", "3"), 2, "keel-node: unrecognized", 5, NODE
    ),
    BadInput("node-properties-missing", ("{tmp}/none.properties",), 2, "cannot read", 5, NODE),
    BadInput(
        "node-bad-per-ip-override",
        ("{props}", "--override", "max.connections.per.ip.overrides=10.0.0.1"),
        2,
        "max.connections.per.ip.overrides: '10.0.0.1' is not host:count",
        5,
        NODE,
    ),
    BadInput(
        "node-port-in-use",
        ("{props}", "--override", "listeners=PLAINTEXT://127.0.0.1:{busy_port}"),
        1,
        "address already in use: stop the process that holds it",
        10,
        NODE,
        # The start-up's lines before it, one per SCRAM user (two in the secured pass).
        max_stderr_lines=7,
    ),
    BadInput(
        "node-log-dirs-a-file",
        ("{props}", "--override", "log.dirs={file}"),
        2,
        "regular-file is a file, not a directory",
        5,
        NODE,
    ),
    BadInput(
        "node-log-dirs-under-a-file",
        ("{props}", "--override", "log.dirs={file}/logs"),
        2,
        "log.dirs: cannot create",
        5,
        NODE,
    ),
    BadInput(
        "node-log-dirs-under-proc",
        ("{props}", "--override", "log.dirs=/proc/keel-logs"),
        2,
        "log.dirs: cannot create /proc/keel-logs",
        5,
        NODE,
    ),
    BadInput(
        # The wait is zookeeper.connection.timeout.ms, which defaults to the session timeout (6 s).
        "node-zookeeper-unreachable",
        ("{props}", "--override", "zookeeper.connect=127.0.0.1:1"),
        1,
        "no ZooKeeper session with 127.0.0.1:1 within 6 s",
        10,
        NODE,
        max_stderr_lines=3,
    ),
    BadInput(
        "node-zookeeper-connection-timeout",
        (
            "{props}",
            "--override",
            "zookeeper.connect=127.0.0.1:1",
            "--override",
            "zookeeper.connection.timeout.ms=1500",
        ),
        1,
        "within 1.5 s",
        5,
        NODE,
        max_stderr_lines=3,
    ),
    BadInput(
        "planner-unknown-argument", ("/dev/null", "--bogus"), 2, "keel-planner: unrecognized", 5, PLANNER
    ),
    BadInput(
        "planner-bad-property",
        ("/dev/null", "--override", "zookeeper.connect={zk}", "--override", "listeners=nonsense"),
        2,
        "invalid configuration: listeners",
        5,
        PLANNER,
    ),
    BadInput(
        # Credentials for the brokers behind a listener that lets anyone in (issue: hostile
        # clients): refused before anything starts.
        "planner-credentials-behind-plaintext",
        (
            "/dev/null",
            "--override",
            "zookeeper.connect={zk}",
            "--override",
            "security.protocol=SASL_PLAINTEXT",
            "--override",
            "sasl.mechanism=SCRAM-SHA-512",
            "--override",
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="admin" password="p";',
        ),
        2,
        "whoever reaches it could act as that user",
        5,
        PLANNER,
    ),
    BadInput(
        # After Spark has started: its two lines, the stop's two, then the error naming the key.
        "planner-zookeeper-connection-timeout",
        (
            "/dev/null",
            "--override",
            "zookeeper.connect=127.0.0.1:1",
            "--override",
            "zookeeper.connection.timeout.ms=1500",
            "--override",
            "spark.master=local[1]",
        ),
        1,
        "no ZooKeeper session with 127.0.0.1:1 within 1.5 s (zookeeper.connection.timeout.ms)",
        45,
        PLANNER,
        max_stderr_lines=5,
    ),
    BadInput(
        # After Spark has started: its log lines, the planner's start and stop, then the error.
        "planner-port-in-use",
        (
            "/dev/null",
            "--override",
            "zookeeper.connect={zk}",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:{busy_port}",
            "--override",
            "spark.master=local[1]",
        ),
        1,
        "keel-planner: cannot listen on 127.0.0.1",
        45,
        PLANNER,
        # Spark's two lines, the users read (secured pass), the stop's two, the error.
        max_stderr_lines=6,
    ),
    BadInput(
        "cluster-zero-brokers",
        ("up", "--brokers", "0", "--dir", "{tmp}/cluster"),
        2,
        "keel-cluster up: argument --brokers: must be at least 1, not 0",
        5,
        CLUSTER,
    ),
    BadInput("cluster-none-there", ("status", "--dir", "{tmp}/no-cluster"), 1, "no cluster in", 5, CLUSTER),
    BadInput("cluster-unknown-command", ("frobnicate",), 2, "invalid choice: 'frobnicate'", 5, CLUSTER),
    BadInput(
        "keel-unknown-command",
        ("topic", "frobnicate", "--bootstrap-server", "{bootstrap}"),
        2,
        "keel topic: argument command: invalid choice",
    ),
    BadInput(
        "keel-unknown-option",
        ("topic", "list", "--partitions", "3", "--bootstrap-server", "{bootstrap}"),
        2,
        "keel: unrecognized arguments: --partitions",
    ),
    BadInput(
        "keel-bad-timeout",
        ("topic", "list", "--timeout", "-1", "--bootstrap-server", "{bootstrap}"),
        2,
        "keel topic list: argument --timeout: must be more than 0",
    ),
]

# SCRAM users and ZooKeeper security: refused before ZooKeeper is asked, or with one line.
SECURITY = [
    BadInput(
        "user-too-few-iterations",
        (
            "user",
            "add",
            "alice",
            "--mechanism",
            "SCRAM-SHA-256",
            "--iterations",
            "1000",
            "--password",
            "x",
            "--zookeeper",
            "{zk}",
        ),
        2,
        "iterations 1000 is less than the minimum 4096 of SCRAM-SHA-256",
    ),
    BadInput(
        "user-no-mechanism",
        ("user", "add", "alice", "--password", "x", "--zookeeper", "{zk}"),
        2,
        "name a --mechanism",
    ),
    BadInput(
        "user-unknown-mechanism",
        ("user", "add", "alice", "--mechanism", "SCRAM-SHA-1", "--password", "x", "--zookeeper", "{zk}"),
        2,
        "invalid choice: 'SCRAM-SHA-1'",
    ),
    BadInput(
        "user-add-config-without-brackets",
        ("user", "add", "alice", "--add-config", "SCRAM-SHA-256=secret", "--zookeeper", "{zk}"),
        2,
        "is not SCRAM-SHA-256=[password=...]",
    ),
    BadInput(
        "user-empty-password",
        ("user", "add", "alice", "--mechanism", "SCRAM-SHA-256", "--zookeeper", "{zk}"),
        2,
        "the password is empty",
        stdin="\n",
    ),
    BadInput(
        "user-delete-unknown", ("user", "delete", "nobody", "--zookeeper", "{zk}"), 1, "user nobody has no"
    ),
    BadInput(
        "user-no-zookeeper",
        ("user", "list", "--zookeeper", "127.0.0.1:1"),
        1,
        "cannot reach ZooKeeper at 127.0.0.1:1",
    ),
    BadInput(
        "zookeeper-secure-without-credentials",
        ("zookeeper", "secure", "--zookeeper", "{zk}"),
        2,
        "no ZooKeeper credentials",
        seconds=5,
    ),
    BadInput(
        "node-set-acl-without-credentials",
        ("{props}", "--override", "zookeeper.set.acl=true"),
        2,
        "zookeeper.set.acl: is true, but no ZooKeeper credentials",
        5,
        NODE,
    ),
    BadInput(
        "node-zookeeper-tls",
        ("{props}", "--override", "zookeeper.ssl.client.enable=true"),
        2,
        "TLS to ZooKeeper is not supported",
        5,
        NODE,
    ),
    BadInput(
        "node-jaas-file-missing",
        ("{props}", "--override", "java.security.auth.login.config={tmp}/none.conf"),
        2,
        "java.security.auth.login.config: cannot read",
        5,
        NODE,
    ),
]

ROWS = HANDLED + LIMITS + CLIENTS + COMMANDS + ENTRY_POINTS + SECURITY


@dataclass
class Cluster:
    bootstrap: str
    zk: str
    tmp: Path
    props: Path
    busy_port: int
    file: Path
    duplicate_replica: Path
    kazoo: KazooClient
    values: list[str]

    def placeholders(self) -> dict[str, str]:
        return {
            "bootstrap": self.bootstrap,
            "zk": self.zk,
            "tmp": str(self.tmp),
            "props": str(self.props),
            "busy_port": str(self.busy_port),
            "file": str(self.file),
            "duplicate_replica": str(self.duplicate_replica),
        }

    def state(self) -> dict[str, object]:
        """Topics, their assignments and their partitions' states, and the SCRAM users, as
        ZooKeeper holds them."""
        shown: dict[str, object] = {}
        for topic in sorted(self.kazoo.get_children("/brokers/topics")):
            assignment, _ = self.kazoo.get(f"/brokers/topics/{topic}")
            states = {}
            partitions = f"/brokers/topics/{topic}/partitions"
            for partition in sorted(
                self.kazoo.get_children(partitions) if self.kazoo.exists(partitions) else []
            ):
                data, _ = self.kazoo.get(f"{partitions}/{partition}/state")
                states[partition] = orjson.loads(data)
            shown[topic] = {"assignment": orjson.loads(assignment), "states": states}
        shown["/config/users"] = sorted(self.kazoo.get_children("/config/users"))
        return shown


@pytest.fixture(scope="module")
def cluster(zookeeper: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    home = tmp_path_factory.mktemp("bad-input")
    chroot = f"/keel-bad-input-{time.monotonic_ns()}"
    root = KazooClient(hosts=zookeeper.connect_string)
    root.start(timeout=10)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    zk = zookeeper.connect_string + chroot
    brokers = local_cluster(
        home, zk, session_timeout_ms=6000, settings={"auto.leader.rebalance.enable": "false"}
    )
    kazoo = KazooClient(hosts=zk)
    kazoo.start(timeout=10)
    try:
        started = brokers.start(1, 2, 3)
        asyncio.run(brokers.wait_for_controller(60))
        bootstrap = ",".join(f"127.0.0.1:{b.port}" for b in started)
        created = keel(
            "topic",
            "create",
            "--topic",
            TOPIC,
            "--partitions",
            "2",
            "--replication-factor",
            "3",
            "--bootstrap-server",
            bootstrap,
        )
        assert created.returncode == 0, created.stderr
        values = [f"record-{i}" for i in range(RECORDS)]
        produced = keel(
            "produce",
            "--topic",
            TOPIC,
            "--acks",
            "all",
            "--bootstrap-server",
            bootstrap,
            stdin="\n".join(values) + "\n",
        )
        assert produced.returncode == 0, produced.stderr
        props = home / "server.properties"
        props.write_text(
            "broker.id=99\n"
            f"zookeeper.connect={zk}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{free_ports(1)[0]}\n"
            f"log.dirs={home / 'broker-99'}\n"
            "zookeeper.session.timeout.ms=6000\n"
        )
        regular = home / "regular-file"
        regular.write_text("not a directory\n")
        duplicate_replica = home / "duplicate-replica.json"
        duplicate_replica.write_bytes(
            orjson.dumps(
                {"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1, 1, 2]}]}
            )
        )
        yield Cluster(bootstrap, zk, home, props, started[0].port, regular, duplicate_replica, kazoo, values)
    finally:
        kazoo.stop()
        kazoo.close()
        brokers.kill_all()


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_bad_input_is_refused_at_once(cluster: Cluster, row: BadInput) -> None:
    before = cluster.state()
    args = [arg.format(**cluster.placeholders()) for arg in row.args]
    stdin = row.stdin.format(**cluster.placeholders()) if row.stdin is not None else None
    started = time.monotonic()
    done = run_command(row.module, *args, timeout=row.seconds + 60, stdin=stdin, env=row.env or None)
    elapsed = time.monotonic() - started
    said = (
        f"exit {done.returncode} after {elapsed:.1f} s\n"
        f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-4000:]}"
    )
    assert done.returncode == row.status, said
    assert row.phrase.lower() in done.stderr.lower(), said
    assert not TRACEBACK.search(done.stderr), said
    error_lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(error_lines) <= row.max_stderr_lines, said
    assert elapsed <= row.seconds, said
    assert cluster.state() == before, f"{row.name} changed the cluster"


def test_every_record_reads_back_after_the_bad_inputs(cluster: Cluster) -> None:
    done = keel(
        "consume",
        "--topic",
        TOPIC,
        "--from-beginning",
        "--max-messages",
        str(RECORDS),
        "--timeout-ms",
        "10000",
        "--bootstrap-server",
        cluster.bootstrap,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == sorted(cluster.values)
