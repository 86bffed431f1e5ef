"""A local cluster's state between commands: `cluster.json` in its directory (ZooKeeper's
ports and pids, each broker's, the planner's and the console's), and the processes it names,
as the local-cluster library (node/cluster/local.py) runs them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson

from node.cluster.local import BrokerProcess, ConsoleProcess, LocalCluster, PlannerProcess
from node.cluster.security import ClusterSecurity, load_cluster_security
from node.cluster.zookeeper import EmbeddedZooKeeper
from node.command.entry import CommandError
from wire.security import PLAINTEXT_CLIENT

SESSION_TIMEOUT_MS = 6000
STATE_FILE = "cluster.json"


@dataclasses.dataclass
class BrokerRecord:
    """What `cluster.json` keeps of a broker between commands."""

    broker_id: int
    port: int
    pid: int | None = None
    # Its metrics.http.listener's port (None in a cluster.json from before metrics).
    metrics_port: int | None = None
    # Its Kafka listener's port (kafka.listeners; None in a cluster.json from before them).
    kafka_port: int | None = None


@dataclasses.dataclass
class PlannerRecord:
    """What `cluster.json` keeps of the planner between commands."""

    port: int
    spark_master: str = "local[*]"
    pid: int | None = None
    metrics_port: int | None = None
    spark_ui_port: int | None = None


@dataclasses.dataclass
class ConsoleRecord:
    """What `cluster.json` keeps of the web console (bin/keel-ui) between commands."""

    port: int
    pid: int | None = None


@dataclasses.dataclass
class ClusterState:
    directory: Path
    zookeeper_servers: int
    zookeeper_ports: list[int]
    zookeeper_pids: list[int]
    brokers: dict[int, BrokerRecord]
    planner: PlannerRecord | None = None
    # `--security` of the first `up`: None, "tls" or "sasl".
    security: str | None = None
    console: ConsoleRecord | None = None

    @classmethod
    def load(cls, directory: Path) -> ClusterState | None:
        try:
            raw = orjson.loads((directory / STATE_FILE).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        brokers = {int(k): BrokerRecord(**v) for k, v in raw["brokers"].items()}
        planner = PlannerRecord(**raw["planner"]) if raw.get("planner") else None
        return cls(
            directory,
            raw["zookeeper_servers"],
            raw["zookeeper_ports"],
            raw["zookeeper_pids"],
            brokers,
            planner,
            raw.get("security"),
            ConsoleRecord(**raw["console"]) if raw.get("console") else None,
        )

    def save(self) -> None:
        value = dataclasses.asdict(self)
        value.pop("directory")
        value["brokers"] = {str(k): v for k, v in value["brokers"].items()}
        tmp = self.directory / (STATE_FILE + ".tmp")
        tmp.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2))
        tmp.replace(self.directory / STATE_FILE)

    @property
    def zookeeper(self) -> EmbeddedZooKeeper:
        return EmbeddedZooKeeper(
            self.directory / "zookeeper", servers=self.zookeeper_servers, ports=self.zookeeper_ports
        )

    def log_file(self, broker_id: int) -> Path:
        return self.directory / "logs" / f"broker-{broker_id}.log"

    @property
    def cluster_security(self) -> ClusterSecurity | None:
        if self.security is None:
            return None
        security = load_cluster_security(self.directory)
        if security is None:
            raise CommandError(f"the cluster in {self.directory} has lost its security files; remove it")
        return security

    def cluster(self) -> LocalCluster:
        """The brokers as the local-cluster library sees them, by their recorded pids."""
        security = self.cluster_security
        cluster = LocalCluster(
            self.directory,
            self.zookeeper_connect,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            settings=None if security is None else security.broker_settings,
            security=PLAINTEXT_CLIENT if security is None else security.client(),
        )
        for record in self.brokers.values():
            cluster.new(
                record.broker_id,
                {
                    **({} if security is None else security.listeners(record.port)),
                    **metrics_listener(record.metrics_port),
                    **kafka_listener(
                        record.kafka_port, "PLAINTEXT" if security is None else security.protocol
                    ),
                },
                port=record.port,
                home=self.directory / f"broker-{record.broker_id}",
                log_path=self.log_file(record.broker_id),
                pid=record.pid,
            )
        return cluster

    @property
    def zookeeper_connect(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.zookeeper_ports[::3])

    def planner_process(self) -> PlannerProcess | None:
        if self.planner is None:
            return None
        security = self.cluster_security
        return PlannerProcess(
            home=self.directory / "planner",
            port=self.planner.port,
            log_path=self.directory / "logs" / "planner.log",
            pid=self.planner.pid,
            settings={
                "zookeeper.connect": self.zookeeper_connect,
                "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "spark.master": self.planner.spark_master,
                **({} if security is None else security.planner_settings(self.planner.port)),
                **metrics_listener(self.planner.metrics_port),
                **spark_ui(self.planner.spark_ui_port, self.planner.spark_master),
            },
        )

    def how_to_connect(self) -> str:
        """The command line that reaches this cluster."""
        security = self.cluster_security
        if security is None:
            return "bin/keel topic list"
        return f"bin/keel --command-config {security.client_config} topic list"

    def start_planner(self) -> None:
        planner = self.planner_process()
        if planner is not None and not planner.running:
            assert self.planner is not None
            self.planner.pid = planner.start(detach=True).pid
            self.save()

    def process(self, broker_id: int) -> BrokerProcess:
        return next(b for b in self.cluster().all if b.broker_id == broker_id)

    def console_process(self) -> ConsoleProcess | None:
        if self.console is None:
            return None
        security = self.cluster_security
        return ConsoleProcess(
            home=self.directory / "console",
            zk_connect=self.zookeeper_connect,
            command_config=None if security is None else security.client_config,
            port=self.console.port,
            log_path=self.directory / "logs" / "keel-ui.log",
            pid=self.console.pid,
        )

    def start_console(self) -> None:
        console = self.console_process()
        if console is not None and not console.running:
            assert self.console is not None
            self.console.pid = console.start(detach=True).pid
            self.save()

    def start_broker(self, broker_id: int) -> None:
        broker = self.process(broker_id)
        if not broker.running:
            self.brokers[broker_id].pid = broker.start(detach=True).pid
            self.save()


def metrics_listener(port: int | None) -> dict[str, str]:
    return {} if port is None else {"metrics.http.listener": f"127.0.0.1:{port}"}


def kafka_listener(port: int | None, protocol: str) -> dict[str, str]:
    """A Kafka listener with the security of the cluster's own listeners."""
    return {} if port is None else {"kafka.listeners": f"{protocol}://127.0.0.1:{port}"}


def kafka_bootstrap(state: ClusterState) -> str | None:
    """The brokers' Kafka listeners, as Kafka's clients take `bootstrap.servers`."""
    ports = [r.kafka_port for _, r in sorted(state.brokers.items()) if r.kafka_port is not None]
    return ",".join(f"127.0.0.1:{p}" for p in ports) or None


def spark_ui(port: int | None, master: str) -> dict[str, str]:
    """The planner's Spark UI on a port of the cluster's own (the planner turns it off by
    default); on 127.0.0.1 like the rest of the cluster when Spark runs in the planner's
    process, where no executor elsewhere needs to reach the driver."""
    if port is None:
        return {}
    settings = {"spark.ui.enabled": "true", "spark.ui.port": str(port)}
    if master.startswith("local"):
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    return settings


def spark_ui_url(state: ClusterState) -> str | None:
    if state.planner is None or state.planner.spark_ui_port is None:
        return None
    return f"http://127.0.0.1:{state.planner.spark_ui_port}/"


def metrics_urls(state: ClusterState) -> dict[str, str]:
    """Each process's /metrics URL, by its name in the status output."""
    urls = {
        f"broker {r.broker_id}": f"http://127.0.0.1:{r.metrics_port}/metrics"
        for r in state.brokers.values()
        if r.metrics_port is not None
    }
    if state.planner is not None and state.planner.metrics_port is not None:
        urls["planner"] = f"http://127.0.0.1:{state.planner.metrics_port}/metrics"
    return urls
