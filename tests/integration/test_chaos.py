"""Short seeded chaos runs (node/chaos): every fault kind but the planner against a cluster of
its own (3 brokers, a 3-server ZooKeeper ensemble, proxies), with Keel's clients and Kafka's
(an idempotent producer and a consumer group), then the checker. About 75 s
each; the long forms, and the runs recorded, are in docs/RELIABILITY.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.chaos.run import ChaosOptions, run_chaos
from node.chaos.schedule import DEFAULT_FAULTS
from tests.support import run_command

DURATION_S = 60.0


@pytest.mark.parametrize("seed", [20261124, 5])
@pytest.mark.plain_pass_only(
    "the chaos runner starts a PLAINTEXT cluster of its own behind proxies; 75 s each, nothing about security"
)
async def test_a_seeded_chaos_run_passes_every_check(seed: int, tmp_path: Path) -> None:
    options = ChaosOptions(
        seed=seed, duration_s=DURATION_S, brokers=3, zookeeper_servers=3, faults=DEFAULT_FAULTS
    )
    said: list[str] = []
    report = await run_chaos(options, tmp_path, said.append)
    value = report.as_json()
    # Whatever fails, the message carries the run's summary, its last lines, and where the
    # brokers' logs and events.log are kept (pytest keeps the last runs' tmp_path).
    run = f"{report.summary()}\n" + "\n".join(said[-60:]) + f"\nthe run's files: {tmp_path}"
    assert report.ok, run
    assert sum(value["faults"].values()) >= 6, run
    # The workload made progress under the faults; how much depends on the machine's load.
    assert value["acknowledged"] > 200, run
    assert value["lost"] == 0, run
    assert value["read"] >= value["acknowledged"], run
    # Kafka's clients made progress too: the idempotent producer's values acknowledged and read
    # back, none twice, and the group committed.
    kafka = value["kafka_clients"]
    assert kafka["acknowledged"] > 50 and kafka["read"] >= kafka["acknowledged"], run
    assert kafka["duplicates"] == 0 and kafka["commits"] > 10, run
    # Progress was shown: one line per fault and the periodic status.
    assert any("fault:" in line for line in said) and any("acked" in line for line in said), run
    assert (tmp_path / "events.log").exists(), run
    # The controller checks had something to go on: a passing run that read nothing from the
    # brokers' logs (a line whose wording changed) would prove nothing. Every run elects a
    # controller before its faults (in controller.log, and the watcher sees it) and creates
    # its topics (state changes under `[Controller id=N epoch=E]`).
    observed = value["observed"]
    assert observed["elections_logged"] >= 1 and observed["controllers_watched"] >= 1, run
    assert observed["controller_state_changes"] > 0 and report.history.controller_actions, run


def test_chaos_refuses_an_unknown_fault_kind_and_too_few_brokers() -> None:
    unknown = run_command("node.cli.keel_cluster", "chaos", "--faults", "kill,meteor")
    assert unknown.returncode == 2 and "unknown fault kind(s) meteor" in unknown.stderr
    few = run_command("node.cli.keel_cluster", "chaos", "--brokers", "2")
    assert few.returncode == 2 and "at least 3 brokers" in few.stderr
