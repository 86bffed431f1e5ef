"""Kafka clients' own integration suites against a Keel broker, out of the tree.

    .venv/bin/python -m bench.client_suites [--suite kafka-python] [-k EXPR] [--keep]

For kafka-python: its source distribution, of the version installed, from PyPI (nothing else
is fetched), unpacked into a scratch directory; its `test/integration` then runs against one
Keel broker (broker id 0, as the suite assumes of an external broker; a Kafka listener; topics
auto-created with 4 partitions) on an embedded ZooKeeper, aimed at it with the suite's own
`KAFKA_URI` and `KAFKA_VERSION` (3.0.0: what kafka-python infers from Keel's version table).
The sdist leaves out `test/service.py`; a stand-in with the one class an external broker
needs is written in its place. Prints pytest's summary and one line of counts; the list of
failures and why each fails is in docs/COMING_FROM_KAFKA.md.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports

# The sdist's test/service.py is missing; the suite imports these two names from it.
_SERVICE_STAND_IN = """\
class ExternalService:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def open(self):
        pass

    def close(self):
        pass


class SpawnedService:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("this run uses an already running broker")
"""


def unpacked_kafka_python(scratch: Path) -> Path:
    """kafka-python's sdist, of the installed version, unpacked under `scratch`."""
    wanted = version("kafka-python")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"kafka-python=={wanted}",
            "--dest",
            str(scratch),
        ],
        check=True,
    )
    (archive,) = scratch.glob("kafka_python-*.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(scratch, filter="data")
    source = scratch / f"kafka_python-{wanted}"
    (source / "test" / "__init__.py").touch()
    (source / "test" / "service.py").write_text(_SERVICE_STAND_IN)
    (scratch / "kafka-root").mkdir(exist_ok=True)  # the suite checks it exists; unused
    return source


def wait_for_kafka_listener(bootstrap: str, timeout: float) -> None:
    from kafka import KafkaAdminClient

    deadline = time.monotonic() + timeout
    while True:
        try:
            KafkaAdminClient(bootstrap_servers=bootstrap, bootstrap_timeout_ms=2_000).close()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def run_kafka_python(scratch: Path, selection: str | None) -> int:
    source = unpacked_kafka_python(scratch)
    zookeeper = EmbeddedZooKeeper(scratch / "zookeeper")
    zookeeper.start()
    cluster = LocalCluster(scratch / "cluster", zookeeper.connect_string)
    try:
        (kafka_port,) = free_ports(1)
        cluster.new(
            0,
            {
                "kafka.listeners": f"PLAINTEXT://127.0.0.1:{kafka_port}",
                "num.partitions": "4",
                "auto.leader.rebalance.enable": "false",
                # One broker: __consumer_offsets with one replica; groups form at once, as
                # Kafka's own test brokers are set.
                "offsets.topic.replication.factor": "1",
                "group.initial.rebalance.delay.ms": "0",
                # test_group joins with 3 s sessions, below Kafka's default minimum of 6 s:
                # the suite's own test brokers allow them.
                "group.min.session.timeout.ms": "1000",
                # The ACL tests need an authorizer; with no ACLs everyone is allowed, as on
                # the suite's own brokers.
                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                "allow.everyone.if.no.acl.found": "true",
            },
        ).start()
        wait_for_kafka_listener(f"127.0.0.1:{kafka_port}", timeout=60)
        env = {
            **os.environ,
            "KAFKA_URI": f"PLAINTEXT://127.0.0.1:{kafka_port}",
            "KAFKA_VERSION": "3.0.0",
            "KAFKA_ROOT": str(scratch / "kafka-root"),
            "PYTHONPATH": str(source),
        }
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "-o",
            "addopts=",
            "-o",
            "filterwarnings=",
            "-rfE",
            "test/integration",
        ]
        if selection:
            command += ["-k", selection]
        result = subprocess.run(command, check=False, cwd=source, env=env, capture_output=True, text=True)
        print(result.stdout[-20_000:])
        summaries = [line for line in result.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
        found = re.findall(r"(\d+) (passed|failed|skipped|error)", summaries[-1] if summaries else "")
        counts = {kind: int(n) for n, kind in found}
        print(
            f"kafka-python {version('kafka-python')} test/integration against Keel: "
            f"{counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
            f"{counts.get('skipped', 0)} skipped, {counts.get('error', 0)} errors"
        )
        return 0
    finally:
        cluster.kill_all()
        zookeeper.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=["kafka-python"], default="kafka-python")
    parser.add_argument("-k", dest="selection", help="pytest's -k, to run part of the suite")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="keel-client-suite-"))
    try:
        return run_kafka_python(scratch, args.selection)
    finally:
        if args.keep:
            print(f"scratch directory kept: {scratch}")
        else:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
