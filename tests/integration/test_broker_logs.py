"""Kafka's log split on real broker processes, read with `keel-cluster logs`: a topic created,
then the controller killed; the new controller's controller.log has its election with the
epoch, its state-change.log the partitions' changes with the controller epoch, and the
surviving brokers' state-change.log, followed as it grows, the LeaderAndIsr they handled."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from node.clients.admin import KeelAdminClient
from node.cluster.local import ROOT
from tests import security_pass
from tests.support import eventually_sync, run_command
from wire.api import CreatableTopic
from wire.security import PLAINTEXT_CLIENT

CHANGE = r"LeaderAndIsr\(leader=\d+, leaderEpoch=\d+, isr=[\d,]+, partitionEpoch=\d+\)"


def _cluster(*args: str) -> subprocess.CompletedProcess[str]:
    return run_command("node.cli.keel_cluster", *args)


async def _create_topic(bootstrap: str) -> list[int]:
    # keel-cluster up without --security is a PLAINTEXT cluster in either pass of the suite.
    async with KeelAdminClient(bootstrap, security=PLAINTEXT_CLIENT) as admin:
        created = await admin.create_topics(
            [CreatableTopic(name="logged", num_partitions=3, replication_factor=3)]
        )
    return [t.error_code for t in created.topics]


def _brokers(directory: list[str]) -> list[dict[str, object]]:
    shown = _cluster("status", "--format", "json", *directory)
    assert shown.returncode == 0, shown.stderr
    return orjson.loads(shown.stdout)["brokers"]  # type: ignore[no-any-return]


def _follow(broker: int, directory: list[str], out: Path) -> subprocess.Popen[str]:
    """`keel-cluster logs ID --state-change --follow`, its output into `out` (and `out`.err),
    interruptible with SIGINT however the test suite itself was started."""
    # A test suite started in the background by a non-interactive shell has SIGINT ignored, which
    # its children would inherit (and Python then never raises KeyboardInterrupt). A signal with
    # a handler is reset to its default in a child, as Ctrl-C in a terminal finds it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with out.open("w") as stdout, out.with_suffix(".err").open("w") as stderr:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "node.cli.keel_cluster",
                    "logs",
                    str(broker),
                    "--state-change",
                    "--follow",
                    *directory,
                ],
                stdout=stdout,
                stderr=stderr,
                text=True,
                cwd=ROOT,
            )
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.plain_pass_only(security_pass.OWN_PLAINTEXT_CLUSTER)
def test_controller_and_state_change_logs_through_keel_cluster_logs(tmp_path: Path) -> None:
    directory = ["--dir", str(tmp_path / "cluster")]
    up = _cluster("up", "--brokers", "3", "--no-planner", *directory)
    follower: subprocess.Popen[str] | None = None
    try:
        assert up.returncode == 0, up.stdout + up.stderr

        rows = _brokers(directory)
        (old,) = [r for r in rows if r["controller"]]
        controller, epoch = int(str(old["broker_id"])), int(str(old["controller_epoch"]))
        bootstrap = ",".join(str(r["address"]) for r in rows)
        assert asyncio.run(_create_topic(bootstrap)) == [0]

        def created_lines() -> list[str] | None:
            text = _cluster("logs", str(controller), "--state-change", *directory).stdout
            lines = re.findall(
                rf"\[Controller id={controller} epoch={epoch}\] Changed partition logged-\d from "
                rf"NewPartition to OnlinePartition with state {CHANGE}",
                text,
            )
            return lines if len(lines) == 3 else None

        eventually_sync(created_lines, timeout=20, interval=0.2, message="no OnlinePartition changes")

        # Another broker's state-change.log, followed from now on.
        survivor = next(int(str(r["broker_id"])) for r in rows if r["broker_id"] != controller)
        followed = tmp_path / "followed.txt"
        follower = _follow(survivor, directory, followed)
        killed = _cluster("kill", str(controller), "--signal", "KILL", *directory)
        assert killed.returncode == 0, killed.stderr

        def new_controller() -> int | None:
            now = [r for r in _brokers(directory) if r["controller"] and r["controller_epoch"] == epoch + 1]
            return int(str(now[0]["broker_id"])) if now else None

        elected = eventually_sync(new_controller, timeout=30, interval=0.3, message="no new controller")

        controller_log = _cluster("logs", str(elected), "--controller", *directory)
        assert controller_log.returncode == 0, controller_log.stderr
        assert f"broker {elected} is controller at epoch {epoch + 1}" in controller_log.stdout
        assert "state.change.logger" not in controller_log.stdout

        def elected_lines() -> list[str] | None:
            text = _cluster("logs", str(elected), "--state-change", *directory).stdout
            return (
                re.findall(
                    rf"\[Controller id={elected} epoch={epoch + 1}\] Changed partition logged-\d from "
                    rf"OfflinePartition to OnlinePartition with state {CHANGE}",
                    text,
                )
                or None
            )

        (election,) = eventually_sync(elected_lines, timeout=20, interval=0.2, message="no election logged")
        assert f"leader={controller}," not in election, "the dead broker does not lead"

        server_log = _cluster("logs", str(elected), *directory).stdout
        assert f"broker {elected} is controller at epoch {epoch + 1}" in server_log, "server.log has all"
        assert "Changed partition" not in server_log, "state changes only in state-change.log"

        handled = re.compile(
            rf"\[Broker id={survivor}\] Handling LeaderAndIsr request correlationId \d+ "
            rf"from controller {elected} epoch {epoch + 1} for \d+ partitions"
        )
        eventually_sync(
            lambda: handled.search(followed.read_text()),
            timeout=20,
            interval=0.2,
            message="the followed state-change.log did not show the new controller's LeaderAndIsr",
        )
        follower.send_signal(signal.SIGINT)
        assert follower.wait(10) == 130
        assert "Traceback" not in followed.with_suffix(".err").read_text()
        # What was there before following began is printed first: the topic's creation.
        assert f"from controller {controller} epoch {epoch} for" in followed.read_text()

        unknown = _cluster("logs", "9", *directory)
        assert (unknown.returncode, unknown.stderr) == (1, "keel-cluster: no broker 9 (brokers: [1, 2, 3])\n")
    finally:
        if follower is not None and follower.poll() is None:
            follower.kill()
            follower.wait(10)
        stopped = _cluster("stop", *directory)
    assert stopped.returncode == 0, stopped.stderr
    assert _cluster("logs", "1", "--controller", *directory).returncode == 0, "readable once stopped"
