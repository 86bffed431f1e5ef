"""Kafka clients' own integration suites against a Keel broker, out of the tree.

    .venv/bin/python -m bench.client_suites [--suite kafka-python|aiokafka|confluent-kafka|all]
        [--aiokafka-source DIR] [--confluent-kafka-source DIR] [-k EXPR] [--keep]

Each suite runs in a scratch directory against one Keel broker of its own (broker id 0, a
Kafka listener, topics auto-created) on an embedded ZooKeeper, with the broker settings that
suite's own test brokers have. Prints pytest's summary and one line of counts per suite; the
list of failures and why each fails is in docs/COMING_FROM_KAFKA.md.

- kafka-python: its source distribution, of the version installed, from PyPI (nothing else
  is fetched); its `test/integration` is aimed at the broker with the suite's own `KAFKA_URI`
  and `KAFKA_VERSION` (3.0.0: what kafka-python infers from Keel's version table). The sdist
  leaves out `test/service.py`; a stand-in with the one class an external broker needs is
  written in its place.
- aiokafka and confluent-kafka: their sdists leave the tests out (`exclude tests/**`,
  `prune tests`) and no other registry artifact carries them, so these take a checkout of the
  client's repository at the release of the installed version (`--aiokafka-source`,
  `--confluent-kafka-source`, or KEEL_AIOKAFKA_SOURCE, KEEL_CONFLUENT_KAFKA_SOURCE); its
  `tests/` is copied into the scratch directory and the installed client is the one tested.
  aiokafka's conftest starts Kafka in Docker: a fixture-override plugin
  (`client_suite_plugins/keel_aiokafka_fixtures.py`) points its fixtures at the broker.
  confluent-kafka's conftest uses an existing cluster when `BROKERS` is set; a plugin
  (`keel_confluent_kafka_fixtures.py`) only stands in for the modules its fixture imports
  and does not use with one (trivup, the Schema Registry client).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

from node.cluster.local import LocalCluster
from node.cluster.zookeeper import EmbeddedZooKeeper, free_ports

PLUGINS = Path(__file__).resolve().parent / "client_suite_plugins"

# Settings every suite's broker has: the suites' own test brokers run one broker with
# __consumer_offsets of one replica, and groups that form at once.
BASE_SETTINGS = {
    "auto.leader.rebalance.enable": "false",
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    # The ACL tests need an authorizer; with no ACLs everyone is allowed, as on the suites'
    # own brokers.
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}

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


def copied_tests(checkout: Path, into: Path, extra: tuple[str, ...] = ()) -> Path:
    """`checkout`'s tests/ (and `extra` files beside it) copied to `into`: the suite writes
    there (aiokafka's certificates, confluent-kafka's .pyc), never into the checkout. The
    client's own package is left behind, so that the installed one is imported."""
    if not (checkout / "tests").is_dir():
        raise SystemExit(f"{checkout} has no tests/: give a checkout of the client's repository")
    into.mkdir(parents=True)
    shutil.copytree(checkout / "tests", into / "tests")
    for name in extra:
        if (checkout / name).exists():
            shutil.copy2(checkout / name, into / name)
    return into


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


@contextmanager
def keel_broker(scratch: Path, settings: dict[str, str]) -> Iterator[str]:
    """One Keel broker (id 0) on an embedded ZooKeeper; yields its Kafka bootstrap."""
    zookeeper = EmbeddedZooKeeper(scratch / "zookeeper")
    zookeeper.start()
    cluster = LocalCluster(scratch / "cluster", zookeeper.connect_string)
    try:
        (kafka_port,) = free_ports(1)
        cluster.new(
            0, {"kafka.listeners": f"PLAINTEXT://127.0.0.1:{kafka_port}", **BASE_SETTINGS, **settings}
        ).start()
        bootstrap = f"127.0.0.1:{kafka_port}"
        wait_for_kafka_listener(bootstrap, timeout=60)
        yield bootstrap
    finally:
        cluster.kill_all()
        zookeeper.stop()


def run_pytest(label: str, arguments: list[str], cwd: Path, env: dict[str, str], log: Path) -> dict[str, int]:
    """pytest over `arguments` in `cwd`; its whole output goes to `log`, its tail to stdout."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfEs", *arguments]
    result = subprocess.run(
        command, check=False, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    log.write_text(result.stdout)
    print(result.stdout[-20_000:])
    summaries = [line for line in result.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    found = re.findall(r"(\d+) (passed|failed|skipped|error)", summaries[-1] if summaries else "")
    counts = {kind: int(n) for n, kind in found}
    print(
        f"{label} against Keel: {counts.get('passed', 0)} passed, {counts.get('failed', 0)} failed, "
        f"{counts.get('skipped', 0)} skipped, {counts.get('error', 0)} errors"
    )
    return counts


def run_kafka_python(scratch: Path, selection: str | None) -> dict[str, int]:
    source = unpacked_kafka_python(scratch)
    # test_group joins with 3 s sessions, below Kafka's default minimum of 6 s: the suite's
    # own test brokers allow them.
    with keel_broker(scratch, {"num.partitions": "4", "group.min.session.timeout.ms": "1000"}) as bootstrap:
        env = {
            **os.environ,
            "KAFKA_URI": f"PLAINTEXT://{bootstrap}",
            "KAFKA_VERSION": "3.0.0",
            "KAFKA_ROOT": str(scratch / "kafka-root"),
            "PYTHONPATH": str(source),
        }
        arguments = ["-q", "-p", "no:hypothesispytest", "-o", "addopts=", "-o", "filterwarnings="]
        arguments += ["test/integration", *(["-k", selection] if selection else [])]
        return run_pytest(
            f"kafka-python {version('kafka-python')} test/integration",
            arguments,
            source,
            env,
            scratch / "pytest.log",
        )


# aiokafka's modules with tests that need a broker (their unit tests run too); the rest of
# tests/ are unit tests of the client alone.
AIOKAFKA_TESTS = [
    f"tests/test_{name}.py"
    for name in (
        "coordinator",
        "producer",
        "consumer",
        "pep492",
        "admin",
        "client",
        "conn",
        "sender",
        "transactional_producer",
        "transactional_consumer",
        "sasl",
    )
]


def run_aiokafka(scratch: Path, checkout: Path, selection: str | None) -> dict[str, int]:
    suite = copied_tests(checkout, scratch / "suite", extra=("pyproject.toml",))
    plugins = scratch / "plugins"
    plugins.mkdir(exist_ok=True)
    shutil.copy2(PLUGINS / "keel_aiokafka_fixtures.py", plugins)
    # As aiokafka's test image (start-kafka.sh over Kafka's sample server.properties): topics
    # auto-created with 2 partitions, which its tests assume; Kafka's default minimum session
    # of 6 s, which its coordinator tests check.
    with keel_broker(scratch, {"num.partitions": "2"}) as bootstrap:
        env = {
            **os.environ,
            "KEEL_KAFKA_BOOTSTRAP": bootstrap,
            "PYTHONPATH": str(plugins),
        }
        # --docker-image: the suite reads only the Kafka version off its tag (3.0.0, as
        # kafka-python infers from Keel's table); no image is pulled or run.
        arguments = ["-p", "keel_aiokafka_fixtures", "--docker-image", "keel:3.0.0", "-o", "addopts="]
        # The suite's warnings are errors; this pytest-asyncio, newer than its pin, warns
        # when the fixtures' loop scope is left unset (the suite's async fixtures take it).
        arguments += ["-o", "asyncio_default_fixture_loop_scope=function"]
        arguments += [*AIOKAFKA_TESTS, *(["-k", selection] if selection else [])]
        return run_pytest(
            f"aiokafka {version('aiokafka')} tests (from {checkout_version(checkout, 'aiokafka')})",
            arguments,
            suite,
            env,
            scratch / "pytest.log",
        )


# The Kafka clients' tests of tests/integration; left out: schema_registry (a Schema Registry
# server) and share_consumer* (KIP-932 share groups, Kafka 4.2 in KRaft mode, which also start
# SASL and OAuth clusters of their own with trivup).
CONFLUENT_KAFKA_TESTS = [
    f"tests/integration/{name}"
    for name in ("producer", "consumer", "admin", "serialization", "integration_test.py")
]


def run_confluent_kafka(scratch: Path, checkout: Path, selection: str | None) -> dict[str, int]:
    suite = copied_tests(checkout, scratch / "suite", extra=("pyproject.toml",))
    plugins = scratch / "plugins"
    plugins.mkdir(exist_ok=True)
    shutil.copy2(PLUGINS / "keel_confluent_kafka_fixtures.py", plugins)
    # Kafka's defaults otherwise, as the suite's trivup cluster: test_consumer_error checks
    # that a session of 100 ms is refused, and the cooperative tests use 6 s, "the minimum
    # allowed by broker".
    with keel_broker(scratch, {}) as bootstrap:
        env = {
            **os.environ,
            "BROKERS": bootstrap,
            # The suite's modules import `tests.common`, from the directory it runs in.
            "PYTHONPATH": os.pathsep.join([str(plugins), str(suite)]),
        }
        arguments = ["-p", "keel_confluent_kafka_fixtures", "-o", "addopts="]
        arguments += [*CONFLUENT_KAFKA_TESTS, *(["-k", selection] if selection else [])]
        return run_pytest(
            f"confluent-kafka {version('confluent-kafka')} tests/integration "
            f"(from {checkout_version(checkout, 'confluent-kafka')})",
            arguments,
            suite,
            env,
            scratch / "pytest.log",
        )


def checkout_version(checkout: Path, client: str) -> str:
    """The release a checkout is of, as its package states it."""
    if client == "aiokafka":
        text = (checkout / "aiokafka" / "__init__.py").read_text()
        found = re.search(r'__version__ = "([^"]+)"', text)
    else:
        text = (checkout / "src" / "confluent_kafka" / "src" / "confluent_kafka.h").read_text()
        found = re.search(r'CFL_VERSION_STR "([^"]+)"', text)
    return f"{client} {found.group(1) if found else '(unknown version)'}"


SUITES = ("kafka-python", "aiokafka", "confluent-kafka")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=[*SUITES, "all"], default="kafka-python")
    parser.add_argument(
        "--aiokafka-source",
        type=Path,
        default=os.environ.get("KEEL_AIOKAFKA_SOURCE"),
        help="a checkout of aiokafka at the installed release (its sdist has no tests)",
    )
    parser.add_argument(
        "--confluent-kafka-source",
        type=Path,
        default=os.environ.get("KEEL_CONFLUENT_KAFKA_SOURCE"),
        help="a checkout of confluent-kafka-python at the installed release (its sdist has no tests)",
    )
    parser.add_argument("-k", dest="selection", help="pytest's -k, to run part of a suite")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    chosen = SUITES if args.suite == "all" else (args.suite,)
    sources = {"aiokafka": args.aiokafka_source, "confluent-kafka": args.confluent_kafka_source}
    for name, source in sources.items():
        if name in chosen and source is None:
            variable = f"KEEL_{name.upper().replace('-', '_')}_SOURCE"
            parser.error(f"--suite {name} needs --{name}-source (or {variable})")
    scratch = Path(tempfile.mkdtemp(prefix="keel-client-suite-"))
    try:
        for name in chosen:
            home = scratch / name
            home.mkdir()
            if name == "kafka-python":
                run_kafka_python(home, args.selection)
            elif name == "aiokafka":
                run_aiokafka(home, args.aiokafka_source.resolve(), args.selection)
            else:
                run_confluent_kafka(home, args.confluent_kafka_source.resolve(), args.selection)
        return 0
    finally:
        if args.keep:
            print(f"scratch directory kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
