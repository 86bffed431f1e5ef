"""A broker's log split (node/broker/logs.py): which logger's records reach server.log,
controller.log and state-change.log, rotation by size, json lines, and `log.format` checked
with the other properties."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from actors.base.ports import LeaderAndIsr
from actors.base.state_change_log import StateChangeLogger, describe_leader_and_isr
from node.broker.config import load_config
from node.broker.logs import (
    CONTROLLER_LOG,
    SERVER_LOG,
    STATE_CHANGE_LOG,
    BrokerLogs,
    LogSettings,
    configure_logging,
    follow_log,
    log_files,
    read_log,
)
from node.config.properties import ConfigError
from tests.support import eventually_sync

Configure = Callable[..., tuple[BrokerLogs, io.StringIO]]


@pytest.fixture
def configure(tmp_path: Path) -> Iterator[Configure]:
    """configure_logging on tmp_path, taken off again (and the root level restored) after."""
    installed: list[BrokerLogs] = []
    level = logging.getLogger().level

    def run(**settings: object) -> tuple[BrokerLogs, io.StringIO]:
        stream = io.StringIO()
        logs = configure_logging(LogSettings(tmp_path, 7, **settings), stream=stream)  # type: ignore[arg-type]
        installed.append(logs)
        return logs, stream

    yield run
    for logs in installed:
        logs.close()
    logging.getLogger().setLevel(level)


def test_each_logger_lands_in_its_files(tmp_path: Path, configure: Configure) -> None:
    _, stderr = configure()
    logging.getLogger("actors.controller.controller").info("broker 7 is controller at epoch 3")
    logging.getLogger("node.broker.server").info("broker 7 started")
    StateChangeLogger.for_controller(7, lambda: 3).info("Changed partition t-0 state from X to Y")

    server = (tmp_path / SERVER_LOG).read_text()
    controller = (tmp_path / CONTROLLER_LOG).read_text()
    state_change = (tmp_path / STATE_CHANGE_LOG).read_text()
    assert "broker 7 is controller at epoch 3" in server and "broker 7 started" in server
    assert "broker 7 is controller at epoch 3" in controller and "broker 7 started" not in controller
    assert state_change.endswith(
        "INFO [broker 7] state.change.logger: "
        "[Controller id=7 epoch=3] Changed partition t-0 state from X to Y\n"
    )
    assert "Changed partition" not in server and "Changed partition" not in stderr.getvalue()
    assert stderr.getvalue().splitlines() == server.splitlines(), "stderr carries server.log's lines"


def test_a_batch_of_state_changes_is_a_line_each_with_its_head(tmp_path: Path, configure: Configure) -> None:
    configure()
    state = LeaderAndIsr(leader=2, leader_epoch=5, isr=(2, 3), partition_epoch=9)
    StateChangeLogger.for_broker(2).log(
        logging.INFO, (f"t-{p} {describe_leader_and_isr(state)}" for p in range(3))
    )
    lines = (tmp_path / STATE_CHANGE_LOG).read_text().splitlines()
    assert [line.split("state.change.logger: ", 1)[1] for line in lines] == [
        f"[Broker id=2] t-{p} LeaderAndIsr(leader=2, leaderEpoch=5, isr=2,3, partitionEpoch=9)"
        for p in range(3)
    ]
    assert all(line.split(" ")[2] == "INFO" for line in lines)


def test_files_rotate_at_their_size(tmp_path: Path, configure: Configure) -> None:
    configure(max_bytes=1024, backup_count=2)
    log = logging.getLogger("node.broker.server")
    for i in range(100):
        log.info("line %03d %s", i, "x" * 40)
    files = log_files(tmp_path, SERVER_LOG)
    assert [p.name for p in files] == ["server.log.2", "server.log.1", "server.log"]
    assert all(p.stat().st_size <= 1024 for p in files)
    kept = [int(line.split("line ")[1][:3]) for line in read_log(tmp_path, SERVER_LOG).splitlines()]
    assert kept == list(range(kept[0], 100)) and kept[0] > 0, "the newest lines, oldest first"


def test_json_is_one_object_per_line(tmp_path: Path, configure: Configure) -> None:
    _, stderr = configure(format="json")
    logging.getLogger("actors.controller.controller").warning("broker 7 resigned as controller")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("node.broker.server").exception("failed")
    StateChangeLogger.for_broker(7).log(logging.INFO, ["one", "two"])

    server = [orjson.loads(line) for line in (tmp_path / SERVER_LOG).read_text().splitlines()]
    assert [(o["level"], o["logger"], o["message"], o["broker_id"]) for o in server] == [
        ("WARNING", "actors.controller.controller", "broker 7 resigned as controller", 7),
        ("ERROR", "node.broker.server", "failed", 7),
    ]
    assert "RuntimeError: boom" in server[1]["exception"] and server[0]["time"].endswith("+00:00")
    state_change = (tmp_path / STATE_CHANGE_LOG).read_text().splitlines()
    changes = [orjson.loads(line)["message"] for line in state_change]
    assert changes == ["[Broker id=7] one", "[Broker id=7] two"]
    assert [orjson.loads(line) for line in stderr.getvalue().splitlines()] == server


@pytest.mark.parametrize(
    ("key", "value"),
    [("log.format", "xml"), ("log.file.max.bytes", "10"), ("log.file.backup.count", "-1")],
)
def test_bad_log_settings_are_refused(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"^{key}: "):
        load_config({"broker.id": "1", "zookeeper.connect": "localhost:2181", key: value})


def test_log_settings_default_to_text_in_the_first_log_dir(tmp_path: Path) -> None:
    config = load_config(
        {"broker.id": "4", "zookeeper.connect": "z:2181", "log.dirs": f"{tmp_path}/a,{tmp_path}/b"}
    )
    assert LogSettings.of(config) == LogSettings(tmp_path / "a", 4, "text", 104_857_600, 10)
    json_config = load_config({"broker.id": "4", "zookeeper.connect": "z:2181", "log.format": "JSON"})
    assert LogSettings.of(json_config).format == "json"


def test_follow_writes_what_is_appended_across_a_rotation(tmp_path: Path, configure: Configure) -> None:
    configure(max_bytes=2048, backup_count=5)
    log = logging.getLogger("node.broker.server")
    log.info("line 000 before following")
    out = io.StringIO()
    stop = threading.Event()
    follower = threading.Thread(
        target=follow_log, args=(tmp_path, SERVER_LOG, out), kwargs={"interval": 0.01, "until": stop.is_set}
    )
    follower.start()
    try:
        for i in range(1, 120):
            log.info("line %03d %s", i, "y" * 30)
        assert len(log_files(tmp_path, SERVER_LOG)) > 2, "the file rotated while followed"

        def numbers() -> list[int] | None:
            seen = [int(line.split("line ")[1][:3]) for line in out.getvalue().splitlines()]
            return seen if seen and seen[-1] == 119 else None

        assert eventually_sync(numbers, timeout=10, message="the follower fell behind") == list(range(120))
    finally:
        stop.set()
        follower.join(10)


def test_the_backups_between_two_files_are_opened_oldest_first_each_checked_to_be_the_one_listed(
    tmp_path: Path,
) -> None:
    """`bin/test` under load: a rotation renamed the backups between their listing and their
    reading, and the follower read one twice, or lost one, or died of FileNotFoundError."""
    from node.broker.logs import _open_rotated_between

    for name, text in (
        ("server.log.3", "oldest\n"),
        ("server.log.2", "older\n"),
        ("server.log.1", "newer\n"),
    ):
        (tmp_path / name).write_text(text)
    (tmp_path / "server.log").write_text("current\n")

    def read(after: int, before: int) -> list[str]:
        handles = _open_rotated_between(tmp_path, "server.log", after, before)
        texts = [h.read().decode() for h in handles]
        for handle in handles:
            handle.close()
        return texts

    inode = {n: (tmp_path / n).stat().st_ino for n in ("server.log.3", "server.log.2", "server.log")}
    assert read(-1, inode["server.log"]) == ["oldest\n", "older\n", "newer\n"]
    assert read(inode["server.log.3"], inode["server.log"]) == ["older\n", "newer\n"]
    # The file being read went to .2 and the new one to .1 meanwhile: only what is between.
    assert read(inode["server.log.3"], inode["server.log.2"]) == []
