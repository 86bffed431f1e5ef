"""`keel reassign status`: the lines it draws, and following a plan to its end against a
planner endpoint that answers PlannerStatus."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator

import orjson
import pytest

from node.cli.plan_status import describe, progress_line, status_command
from node.cluster.zookeeper import free_ports
from node.command.entry import CommandError, UsageError
from wire.api import Response
from wire.api.planner import PlannerStatusResponse
from wire.envelope import ParsedRequest
from wire.security import PLAINTEXT_CLIENT
from wire.server import RpcServer

MIB = 1 << 20

RUNNING: dict[str, object] = {
    "plan_id": "p-7",
    "origin": "self-healing",
    "reason": "broker 4 gone",
    "state": "running",
    "moves_total": 40,
    "moves_done": 12,
    "moves_in_flight": 5,
    "moves_failed": 1,
    "bytes_total": 400 * MIB,
    "bytes_copied": 100 * MIB,
    "rate_bytes_per_s": 10 * MIB,
    "seconds_left": 30.0,
    "throttle_bytes_per_s": 10 * MIB,
    "max_moves_per_broker": 5,
    "failures": [{"topic": "t", "partition": 3, "reason": "INVALID_REPLICA_ASSIGNMENT"}],
    "message": "",
}


def test_the_progress_line() -> None:
    assert progress_line(RUNNING) == (
        "[######------------------]  25.0%  12/40 moves (5 in flight, 1 failed)  "
        "100.0 MiB of 400.0 MiB  10.0 MiB/s  0:00:30 left"
    )
    # Nothing to copy (leaders only): the bar counts moves; no rate yet.
    assert progress_line({"moves_total": 4, "moves_done": 1, "bytes_total": 0}) == (
        "[######------------------]  25.0%  1/4 moves (0 in flight)  "
        "0.0 MiB of 0.0 MiB  -- MiB/s  --:--:-- left"
    )


def test_the_table_format_with_self_healing() -> None:
    status = {
        **RUNNING,
        "self_healing": {
            "enabled": True,
            "active": True,
            "threshold_ms": 1_800_000,
            "gone": [{"broker": 4, "gone_for_s": 125.0, "heal_in_s": None}],
            "gone_without_replicas": [6],
            "last_heal": {"brokers": [4], "plan_id": "p-7", "state": "running"},
        },
    }
    lines = describe(status)
    assert lines[0] == "Plan p-7 (self-healing): running"
    assert "Throttle: 10.0 MiB/s; at most 5 moves in flight per broker." in lines
    assert "Failed: t-3: INVALID_REPLICA_ASSIGNMENT" in lines
    assert "Self-healing: on (threshold 1800 s)." in lines
    assert "  Broker 4 gone for 0:02:05; healed." in lines
    assert "  Broker(s) [6] gone, holding no replicas: nothing to heal." in lines
    assert not any("Broker 6" in line for line in lines)
    assert describe({})[0] == "No plan has been executed by this planner."


@pytest.fixture
async def planner() -> AsyncIterator[tuple[RpcServer, list[dict[str, object]]]]:
    """A planner endpoint answering each PlannerStatus with the next of `answers`."""
    answers: list[dict[str, object]] = []

    async def answer(request: ParsedRequest) -> Response:
        status = answers.pop(0) if len(answers) > 1 else answers[0]
        return PlannerStatusResponse(status_json=orjson.dumps(status).decode(), active=True)

    server = RpcServer(answer, "127.0.0.1", 0)
    await server.start()
    yield server, answers
    await server.close()


def args(port: int, **kw: object) -> argparse.Namespace:
    values = {
        "planner": f"127.0.0.1:{port}",
        "timeout": 5.0,
        "format": "table",
        "wait": False,
        "security": PLAINTEXT_CLIENT,
        **kw,
    }
    return argparse.Namespace(**values)


async def test_wait_follows_the_plan_to_its_end(
    planner: tuple[RpcServer, list[dict[str, object]]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, answers = planner
    monkeypatch.setattr("node.cli.plan_status.POLL_INTERVAL_S", 0.01)
    done = {**RUNNING, "state": "complete", "moves_done": 40, "moves_in_flight": 0, "bytes_copied": 400 * MIB}
    answers.extend([RUNNING, RUNNING, done])
    assert await status_command(args(server.port, wait=True, format="json"), "") == 0
    assert orjson.loads(capsys.readouterr().out)["state"] == "complete"

    answers[:] = [RUNNING, {**done, "state": "cancelled"}]
    assert await status_command(args(server.port, wait=True), "") == 1
    out, err = capsys.readouterr()
    assert out.startswith("Plan p-7 (self-healing): cancelled")
    assert "0:00:30 left" in err


async def test_no_planner_is_one_line_and_exit_1() -> None:
    with pytest.raises(CommandError, match=r"^the planner at 127\.0\.0\.1:\d+ does not answer") as caught:
        await status_command(args(free_ports(1)[0], timeout=1.0), "")
    assert caught.value.status == 1 and "\n" not in str(caught.value)


async def test_a_planner_address_that_is_not_host_port_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--planner nohost is not host:port"):
        await status_command(args(0, planner="nohost"), "")
