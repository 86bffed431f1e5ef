"""A real ZooKeeper server run with `java` from the jars that the pyspark wheel ships.

One server, or a three-server ensemble on loopback; free ports; a given data directory;
four-letter words enabled. `start` returns once every server answers `srvr` with a mode
(standalone, leader or follower), which is stricter than `ruok`: a server that is up but
not yet serving answers `ruok` too.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# What QuorumPeerMain needs from pyspark/jars, by file-name prefix.
_JAR_PREFIXES = (
    "zookeeper-",
    "zookeeper-jute-",
    "slf4j-api-",
    "log4j-slf4j2-impl-",
    "log4j-api-",
    "log4j-core-",
    "netty-handler-",
    "netty-common-",
    "netty-buffer-",
    "netty-transport-",
    "netty-codec-base-",
    "netty-resolver-",
    "netty-transport-native-unix-common-",
    "netty-transport-classes-epoll-",
    "metrics-core-",
    "commons-io-",
    "commons-cli-",
    "snappy-java-",
)
_LOG4J2 = """\
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = out
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d %p [%t] %c{1} - %m%n
"""


class JavaMissing(RuntimeError):
    pass


class ZooKeeperStartError(RuntimeError):
    pass


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise JavaMissing(
            "java was not found: the embedded ZooKeeper needs Java 17 or newer "
            "(e.g. `apt-get install openjdk-17-jre-headless`), or set JAVA_HOME"
        )
    return java


def classpath() -> str:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise ZooKeeperStartError("pyspark is not installed, so there are no ZooKeeper jars")
    jars_dir = Path(next(iter(spec.submodule_search_locations))) / "jars"
    jars = sorted(p.name for p in jars_dir.glob("*.jar"))
    chosen = []
    for prefix in _JAR_PREFIXES:
        # "zookeeper-" must not pick zookeeper-jute: take names whose rest starts with a digit.
        match = [j for j in jars if j.startswith(prefix) and j[len(prefix)].isdigit()]
        if not match:
            raise ZooKeeperStartError(f"no {prefix}*.jar in {jars_dir}")
        chosen.append(str(jars_dir / match[-1]))
    return os.pathsep.join(chosen)


# Every port free_ports has handed out in this process. The kernel may give a port again as
# soon as its probe socket is closed, so two brokers made one after the other could get the
# same port, and the second would fail to listen.
_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()
# Listening ports are drawn from here up to the kernel's ephemeral range, never inside it: a
# port inside it can be given, between its probe and its listener, to any outgoing connection
# as its source port (a ZooKeeper server's connection to another member lasts the whole run),
# and the listener then fails to bind for as long as that connection lives.
LISTEN_PORTS_LOW = 10000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_random = random.Random()


def _port_candidates() -> Iterator[int]:
    """Ports below the ephemeral range in a random order (so that two processes choosing at
    once rarely try the same); where that range leaves too few, the kernel's choice."""
    try:
        ephemeral_low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 0
    if ephemeral_low - LISTEN_PORTS_LOW < 1000:
        while True:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                yield probe.getsockname()[1]
    while True:
        yield _random.randrange(LISTEN_PORTS_LOW, ephemeral_low)


def free_ports(count: int) -> list[int]:
    """`count` loopback ports, free now, outside the kernel's ephemeral range and never handed
    out before by this process."""
    sockets: list[socket.socket] = []
    chosen: list[int] = []
    candidates = _port_candidates()
    try:
        with _HANDED_OUT_LOCK:
            for tries, port in enumerate(candidates):
                if len(chosen) == count:
                    break
                if tries >= count + 1000:
                    raise OSError(f"no {count} fresh loopback ports after {tries} tries")
                if port in _HANDED_OUT or port in chosen:
                    continue
                s = socket.socket()
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    s.close()
                    continue
                sockets.append(s)  # held open while the others are chosen
                chosen.append(port)
            _HANDED_OUT.update(chosen)
        return chosen
    finally:
        for s in sockets:
            s.close()


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")


@dataclasses.dataclass
class ServerSpec:
    server_id: int
    client_port: int
    peer_port: int
    election_port: int
    data_dir: Path


class EmbeddedZooKeeper:
    """Start with `start()`, stop with `stop()`; `connect_string` is host:port,... ."""

    def __init__(
        self,
        data_dir: Path,
        *,
        servers: int = 1,
        tick_ms: int = 200,
        ports: list[int] | None = None,
        heap_mb: int = 256,
    ) -> None:
        """`ports` (client, peer, election per server) reuses an earlier run's; default: free ones.
        ZooKeeper keeps every znode in memory: give it `heap_mb` to match (benchmarks with
        hundreds of thousands of partitions need far more than a test does)."""
        self.heap_mb = heap_mb
        if servers not in (1, 3):
            raise ValueError("an embedded ZooKeeper has 1 or 3 servers")
        self.data_dir = Path(data_dir)
        self.tick_ms = tick_ms
        ports = ports or free_ports(servers * 3)
        self.servers = [
            ServerSpec(i + 1, ports[3 * i], ports[3 * i + 1], ports[3 * i + 2], self.data_dir / f"zk{i + 1}")
            for i in range(servers)
        ]
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def ports(self) -> list[int]:
        return [p for s in self.servers for p in (s.client_port, s.peer_port, s.election_port)]

    @property
    def connect_string(self) -> str:
        return ",".join(f"127.0.0.1:{s.client_port}" for s in self.servers)

    def _write_config(self, server: ServerSpec) -> Path:
        server.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_ms}",
            f"dataDir={server.data_dir}",
            f"clientPort={server.client_port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=*",
            # Kafka's default session timeout (18 s) must fit under the 20-tick default cap.
            "maxSessionTimeout=60000",
            "initLimit=20",
            "syncLimit=10",
        ]
        if len(self.servers) > 1:
            (server.data_dir / "myid").write_text(f"{server.server_id}\n")
            lines += [f"server.{s.server_id}=127.0.0.1:{s.peer_port}:{s.election_port}" for s in self.servers]
        config = server.data_dir / "zoo.cfg"
        config.write_text("\n".join(lines) + "\n")
        (server.data_dir / "log4j2.properties").write_text(_LOG4J2)
        return config

    def command(self, server: ServerSpec) -> list[str]:
        config = self._write_config(server)
        return [
            java_binary(),
            "-Xms32m",
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={server.data_dir / 'log4j2.properties'}",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            classpath(),
            MAIN_CLASS,
            str(config),
        ]

    def start(self, timeout: float = 60.0, *, detach: bool = False) -> str:
        """Start every server and wait until each serves; returns the connect string."""
        for server in self.servers:
            self.processes.append(self._launch(server, detach=detach))
        self.wait_serving(timeout)
        return self.connect_string

    def _launch(self, server: ServerSpec, *, detach: bool) -> subprocess.Popen[bytes]:
        server.data_dir.mkdir(parents=True, exist_ok=True)
        with (server.data_dir.parent / f"zookeeper-{server.server_id}.log").open("ab") as log_file:
            return subprocess.Popen(
                self.command(server),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=detach,
            )

    # --- one ensemble member at a time (chaos runs kill and restart them) ---

    def server_running(self, server_id: int) -> bool:
        return self.processes[server_id - 1].poll() is None

    def kill_server(self, server_id: int) -> None:
        """kill -9 of one member of a started ensemble; `start_server` brings it back."""
        process = self.processes[server_id - 1]
        if process.poll() is None:
            process.kill()
            process.wait()

    def start_server(self, server_id: int) -> None:
        """Start again a member that `kill_server` stopped (it rejoins the ensemble by itself)."""
        if not self.server_running(server_id):
            self.processes[server_id - 1] = self._launch(self.servers[server_id - 1], detach=False)

    def wait_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for server, process in zip(self.servers, self.processes, strict=True):
            while True:
                if process.poll() is not None:
                    raise ZooKeeperStartError(
                        f"ZooKeeper server {server.server_id} exited with {process.returncode}; "
                        f"see {server.data_dir.parent / f'zookeeper-{server.server_id}.log'}"
                    )
                if _serving(server.client_port):
                    break
                if time.monotonic() > deadline:
                    self.stop()
                    raise ZooKeeperStartError(
                        f"ZooKeeper server {server.server_id} not serving after {timeout} s"
                    )
                time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.processes.clear()


def _serving(port: int) -> bool:
    try:
        return "Mode:" in four_letter_word(port, "srvr")
    except OSError:
        return False
