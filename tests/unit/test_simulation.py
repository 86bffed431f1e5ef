"""The deterministic simulation of the control plane (node/sim): its parts (the virtual-time
loop, the in-memory log against the file log, the network), that a seed replays byte for
byte, whatever the hash seed, 500 seeds without a violation, and the regression tests of
what it found. The checker's invariants have their own tests (test_sim_invariants.py)."""

from __future__ import annotations

import asyncio
import collections
import os
import random
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.base.ports import BrokerInfo, SessionExpiredError, TopicPartition
from node.broker.log.config import LogConfig
from node.broker.log.log import Log
from node.cluster.local import ROOT
from node.sim.broker import BrokerSettings, SimBroker
from node.sim.invariants import Ack, Checker, Violation
from node.sim.log_store import MemoryLog, MemoryLogStore
from node.sim.loop import NODE, Deadlock, VirtualTimeLoop, run_simulated
from node.sim.main import parse_args, replay_command
from node.sim.network import SimNetwork, endpoint_of
from node.sim.simulation import DEFAULT_FAULTS, RunConfig, RunResult, run_seed
from node.sim.zookeeper import FakeClusterStore, FakeZooKeeper
from tests.support import run_command
from wire import records
from wire.api import ApiVersionsRequest, ProducePartitionData, ProduceRequest, ProduceTopicData
from wire.errors import NetworkException, RequestTimedOut

TP = TopicPartition("t", 0)
# The kinds the regression seeds below were found with ("every fault kind" then): a kind added
# since changes every seed's course, and with these the seeds take the courses they took.
FOUND_WITH = DEFAULT_FAULTS - {"lost-reply", "power-loss"}


def test_the_virtual_loop_runs_an_hour_of_timers_at_once() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.sleep(3600)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 10)
        return loop.time() - start

    assert run_simulated(main()) == 3610


def test_a_loop_with_nothing_to_do_is_a_deadlock_not_a_hang() -> None:
    loop = VirtualTimeLoop()
    with pytest.raises(Deadlock):
        loop.run_until_complete(loop.create_future())
    loop.close()


def test_killing_a_node_cancels_every_task_it_started_and_no_other() -> None:
    async def main() -> tuple[bool, bool, bool]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualTimeLoop)

        async def parent() -> asyncio.Task[None]:
            return asyncio.create_task(asyncio.sleep(100))

        NODE.set(1)
        child = await asyncio.create_task(parent())
        NODE.set(None)
        bystander = asyncio.create_task(asyncio.sleep(100))
        loop.kill(1)
        await asyncio.sleep(0)
        return child.cancelled(), bystander.cancelled(), bystander.done()

    assert run_simulated(main()) == (True, False, False)


def _batch(*values: bytes) -> bytes:
    return records.build_batch([(None, v) for v in values], timestamp=5)


def _operations(log: Log | MemoryLog) -> list[object]:
    """The same appends, truncations and reads on either log; what each answered."""
    seen: list[object] = [log.append_as_leader(_batch(b"a", b"b"), 0), log.append_as_leader(_batch(b"c"), 2)]
    seen += [log.end_offset_for_epoch(0), log.end_offset_for_epoch(1), log.latest_epoch]
    seen.append(records.records(log.read(1, 1 << 20)).__next__().value)
    seen.append(len(log.read(0, 1)))  # the first batch whole, however small the budget
    log.truncate_to(2)
    seen += [log.log_end_offset, log.latest_epoch, log.size_from(0) > 0]
    follower_batch = bytearray(_batch(b"d"))
    records.stamp(follower_batch, 0, 2, 3)
    seen += [log.append_as_follower(bytes(follower_batch)), log.end_offset_for_epoch(3)]
    log.assign_epoch_start_offset(5, log.log_end_offset)  # a new leader epoch, nothing written yet
    seen += [log.latest_epoch, log.end_offset_for_epoch(4), log.end_offset_for_epoch(5)]
    log.truncate_to(log.log_end_offset)  # drops the epoch that starts there, nothing else
    seen += [log.log_end_offset, log.latest_epoch]
    log.truncate_fully_and_start_at(7)
    seen += [log.log_start_offset, log.log_end_offset, log.read(7, 100)]
    return seen


def test_the_memory_log_answers_as_the_file_log_does(tmp_path: Path) -> None:
    on_disk = Log(tmp_path / "t-0", TP, LogConfig())
    try:
        assert _operations(MemoryLog(TP, LogConfig())) == _operations(on_disk)
    finally:
        on_disk.close()


def test_the_network_refuses_a_down_broker_and_times_out_a_cut_link() -> None:
    import random

    async def main() -> tuple[type[Exception], type[Exception]]:
        network = SimNetwork(random.Random(1), lambda line, **_: None)
        errors = []
        for cut in (False, True):
            if cut:
                network.serve(2, lambda request: asyncio.sleep(0))  # type: ignore[arg-type,return-value]
                network.partition({1}, {2})
            try:
                await network.request(1, endpoint_of(2), ApiVersionsRequest(), 3.0, "test")
            except (NetworkException, RequestTimedOut) as e:
                errors.append(type(e))
        return errors[0], errors[1]

    assert run_simulated(main()) == (NetworkException, RequestTimedOut)


def test_a_seed_replays_byte_for_byte() -> None:
    first, again, other = (run_seed(RunConfig(seed=s, steps=15)) for s in (3, 3, 4))
    assert first.violation is None
    assert (again.trace_hash, again.events, again.faults) == (first.trace_hash, first.events, first.faults)
    assert other.trace_hash != first.trace_hash


def test_a_seed_replays_whatever_the_hash_seed() -> None:
    """Sets of topic names and partitions iterate in an order that PYTHONHASHSEED changes:
    nothing the run does may depend on it. (Seed 9 took two courses while a follower's fetch
    listed its partitions in a set's order.)"""
    script = (
        "from node.sim.simulation import DEFAULT_FAULTS, RunConfig, run_seed\n"
        "print(run_seed(RunConfig(seed=9, steps=60)).trace_hash)"
    )
    hashes = {
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout.strip()
        for hash_seed in ("1", "2", "3")
    }
    assert len(hashes) == 1, hashes


@pytest.mark.parametrize("seed", [5, 24, 25])
def test_a_controller_elected_again_after_zookeeper_was_lost_by_every_broker(seed: int) -> None:
    """Seeds of these faults that, before the controller gave up a /controller left from
    before its session expired, left no controller able to act, and ISRs shrunk for good."""
    faults = frozenset({"crash", "restart", "zk-outage", "create", "reassign"})
    result = run_seed(RunConfig(seed=seed, brokers=3, faults=faults))
    assert result.faults["zk-outage"] >= 2
    assert result.violation is None, result.violation


@pytest.mark.parametrize(
    ("seed", "steps", "faults"),
    [(110, 8, FOUND_WITH), (37, 30, frozenset({"delete-controller"}))],
)
def test_a_controller_deleted_again_as_soon_as_it_is_elected_is_elected_again(
    seed: int, steps: int, faults: frozenset[str]
) -> None:
    """Seeds that, before every notification about `/controller` led to a re-read and an
    election if it was gone, left the cluster with no controller for good: each winner's
    create used up its own watch and fired the others', and an operator deleted the znode
    before anyone re-read it (the focused test: test_controller.py's
    test_controller_deleted_as_soon_as_each_election_creates_it_is_elected_again)."""
    result = run_seed(RunConfig(seed=seed, steps=steps, faults=faults))
    assert result.faults["delete-controller"] >= 1
    assert result.violation is None, result.violation


def test_a_deletion_answer_from_a_bounced_brokers_old_incarnation_does_not_stall_the_deletion() -> None:
    """Seed 197 (5 brokers, every fault kind): a broker change handled new brokers before a
    bounced one, so a deletion resumed for the new ones sent StopReplica to the bounced broker
    at its old epoch; its refusal counted as a failed deletion and marked the topics
    ineligible, and nothing ever resumed them."""
    result = run_seed(RunConfig(seed=197, faults=FOUND_WITH))
    assert result.violation is None, result.violation


def test_a_reassignment_back_to_its_origin_never_deletes_the_only_in_sync_replica() -> None:
    """Seed 11680 (5 brokers, every fault kind), found in the 100,000-seed run: a cancelled
    reassignment deleted the replica it had been adding, the partition's only in-sync one."""
    result = run_seed(RunConfig(seed=11680, faults=FOUND_WITH))
    assert result.violation is None, result.violation


def test_an_in_sync_replica_dropped_as_the_controller_moved_leads_until_the_targets_catch_up() -> None:
    """Seed 40029 (5 brokers, every fault kind): controller 1, its ZooKeeper calls held up by
    an outage, wrote a reassignment of t2-0 that superseded one in flight and dropped replica
    3, in the ISR; it lost its role before stopping it. The leader died with its session, 3
    was left the only in-sync replica, outside the assignment: nobody could lead, and the
    reassignment never completed (the focused tests: test_reassignment.py's
    test_an_in_sync_replica_dropped_before_the_controller_moved_leads_until_the_targets_catch_up
    and the two after it)."""
    result = run_seed(RunConfig(seed=40029, faults=FOUND_WITH))
    assert result.faults["reassign"] >= 1 and result.faults["zk-outage"] >= 1
    assert result.violation is None, result.violation


def test_a_follower_truncates_to_an_unclean_leader_that_has_not_written_in_its_epoch_yet() -> None:
    """Seed 90 (5 brokers, every fault kind): a broker elected uncleanly had no entry for its
    own leader epoch in its epoch cache, so it told followers holding a later epoch than any
    in its log that their epoch's end was unknown; they kept what they had below their high
    watermark and joined the ISR with replicas that differed."""
    result = run_seed(RunConfig(seed=90, faults=FOUND_WITH))
    assert result.faults["elect"] >= 1
    assert result.violation is None, result.violation


def test_a_follower_that_never_had_its_leaders_epoch_truncates_below_it_before_fetching() -> None:
    """Seed 37862 (5 brokers, every fault kind): broker 4, once leader at epoch 9 with a
    batch of epoch 4 that no later leader had, asked its new leader where epoch 9 ends and
    was told where epoch 8 ends, an epoch it never had; it truncated to that offset only,
    kept the batch below it, fetched on top of it and joined the ISR with a log that
    differed from the leader's below the high watermark (the focused test:
    test_replication.py::test_a_follower_that_never_had_the_leaders_epoch_truncates_to_where_an_epoch_both_had_ends)."""
    result = run_seed(RunConfig(seed=37862, faults=FOUND_WITH))
    assert result.violation is None, result.violation


def test_a_broker_restarted_before_its_old_session_expired_rejoins_the_isrs() -> None:
    """Seed 33398 (5 brokers, every fault kind), found in the 100,000-seed run: broker 2,
    killed during its controlled shutdown and restarted before its session expired, handled
    the LeaderAndIsr and StopReplica queued for its previous incarnation before it registered,
    and never rejoined the ISR of t2-0 (the focused test:
    test_a_restarted_broker_refuses_the_controller_requests_sent_to_its_previous_incarnation).
    Runs have taken other courses since (new faults, other choices); seed 33782 takes that
    one again: broker 2's controlled shutdown at 6.5 s, killed at 9.9 s, started at 10.7 s."""
    result = run_seed(RunConfig(seed=33782, faults=FOUND_WITH))
    assert result.faults["crash"] >= 1 and result.faults["shutdown"] >= 1
    assert result.violation is None, result.violation


@pytest.mark.parametrize("seed", [674, 1152])
def test_a_power_lost_broker_elected_as_an_isrs_last_name_lets_off_what_it_lost_downstream(seed: int) -> None:
    """Seeds of the 100,000-seed run on every fault kind (twelve in its first 5,400): a broker
    loses a tail in a power loss, the other members of an ISR go, and it stays the ISR's last
    name; the heal starts it, it is elected (ZooKeeper-mode Kafka cannot tell it lost
    anything; KIP-966 can), and in one step new replicas copy its log and the partition moves
    on. The checker let off the lost tail only on a broker leading at a step's end, so the
    replicas that copied it were held to it (seed 674: t2-0 reassigned to [1, 4, 5] from
    broker 2; the focused test is test_sim_invariants.py's
    test_a_broker_back_from_a_power_loss_elected_as_an_isrs_last_name_counts_as_unclean)."""
    result = run_seed(RunConfig(seed=seed))
    assert result.faults["power-loss"] >= 1
    assert result.violation is None, result.violation


@pytest.mark.parametrize("seed", [8, 14, 28])
def test_every_partition_comes_online_when_the_replies_to_the_controllers_writes_are_lost(seed: int) -> None:
    """Seeds of lost replies (issue 32): on the code before it, each left a partition not led
    (seed 8: t6-0's state created, its create answered as failed, and no broker told). With the
    created states read back and adopted but conflicts still taken at their word, 8 and 14 left
    an ISR change in ZooKeeper that its leader was refused (INVALID_UPDATE_VERSION), after
    which it waited for good for a LeaderAndIsr and its ISR never grew back, and 28 an ISR
    shrink with a new leader epoch that, read again, changed nothing more, so its leader was
    never told that epoch (the focused tests: test_partition_initialization.py, and
    test_alter_partition.py's
    test_an_isr_change_whose_write_was_answered_as_a_conflict_is_taken_as_written)."""
    faults = frozenset({"lost-reply", "create", "crash", "restart"})
    result = run_seed(RunConfig(seed=seed, steps=30, faults=faults))
    assert result.faults["lost-reply"] >= 1
    assert result.violation is None, result.violation


def test_an_isr_change_answered_not_controller_by_a_replaced_controller_is_sent_again() -> None:
    """Seed 67981 (5 brokers, every fault kind), found in the 100,000-seed run: leader 5, cut
    off from ZooKeeper, sent t2-0's ISR expansion to controller 4, itself cut off and already
    replaced by broker 1; 4 answered NOT_CONTROLLER for the partition, and the change stayed
    pending for a LeaderAndIsr that never came, so 5 proposed nothing more and the ISR stayed
    (5,) after the heal with both followers caught up (the focused test:
    test_alter_partition_manager.py's
    test_a_change_a_replaced_controller_answered_not_controller_is_sent_again)."""
    result = run_seed(RunConfig(seed=67981))
    assert result.faults["zk-partition"] >= 1
    assert result.violation is None, result.violation


def test_five_hundred_seeds_hold_every_invariant() -> None:
    result = run_command("node.sim.main", "--seeds", "1-500", "--steps", "8", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "500 runs, no violation" in result.stdout
    assert "events/s" in result.stdout and "faults: crash" in result.stdout


def test_a_violation_names_the_command_that_replays_it() -> None:
    args = parse_args(["--seeds", "9", "--steps", "30", "--faults", "expire,crash"])
    assert list(args.seeds) == [9]
    assert replay_command(args, 9) == "bin/keel-sim --seeds 9 --brokers 5 --steps 30 --faults crash,expire"
    standby = parse_args(["--seeds", "4", "--standby"])
    assert replay_command(standby, 4) == "bin/keel-sim --seeds 4 --brokers 5 --steps 60 --standby"


def test_bad_arguments_are_one_line() -> None:
    result = run_command("node.sim.main", "--seeds", "5-1")
    assert result.returncode == 2
    assert "not a range of seeds" in result.stderr
    result = run_command("node.sim.main", "--faults", "meteor")
    assert result.returncode == 2 and "unknown fault kind meteor" in result.stderr
    result = run_command("node.sim.main", "--brokers", "2")
    assert result.returncode == 2 and "--brokers: must be at least 3, not 2" in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


def _totals(stdout: str) -> tuple[str, str, str]:
    """The summary without its timings: runs, simulated events, faults by kind."""
    runs, events, faults = stdout.splitlines()[-3:]
    return runs, events.split(" in ")[0], faults


def test_seeds_shared_among_workers_add_up_to_the_same_totals() -> None:
    # One hash secret for both commands, as for one process (see test_a_seed_replays_whatever_the_hash_seed).
    env = {"PYTHONHASHSEED": "0"}
    alone = run_command("node.sim.main", "--seeds", "1-9", "--steps", "8", env=env)
    shared = run_command("node.sim.main", "--seeds", "1-9", "--steps", "8", "--jobs", "2", env=env)
    assert alone.returncode == shared.returncode == 0, alone.stderr + shared.stderr
    assert _totals(shared.stdout) == _totals(alone.stdout)
    assert "9 runs, no violation" in shared.stdout and "faults: crash" in shared.stdout
    assert "seed 9: 9/9 runs" in shared.stderr


def test_workers_replaced_after_each_dispatch_give_the_same_totals(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A worker is replaced after a bounded number of seeds (what a run leaves behind cannot
    end a long one); each replacement is forked from this process as the first was, so the
    seeds run as they would in one worker. Here every dispatch (4 seeds) gets a fresh one."""
    import node.sim.main as sim_main

    status = sim_main.main(["--seeds", "1-9", "--steps", "8", "--jobs", "2"])
    kept = capsys.readouterr().out
    monkeypatch.setattr(sim_main, "_CHUNKS_PER_WORKER", 1)
    workers = tmp_path / "workers"
    run = sim_main._ConfigOf.__call__

    def noting_the_worker(self: sim_main._ConfigOf, seed: int) -> RunResult:
        with workers.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return run(self, seed)

    monkeypatch.setattr(sim_main._ConfigOf, "__call__", noting_the_worker)
    replaced_status = sim_main.main(["--seeds", "1-9", "--steps", "8", "--jobs", "2"])
    replaced = capsys.readouterr().out
    assert status == replaced_status == 0, kept + replaced
    assert _totals(replaced) == _totals(kept)
    assert len(set(workers.read_text().split())) == 3, "9 seeds in dispatches of 4: three workers"


def test_a_violation_found_by_a_worker_is_reported_with_its_replay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checker broken on purpose for seed 3 (whose records' values start "3:"): the forked
    worker that runs it finds the violation, and this process reports it and stops."""
    acknowledged = Checker.acknowledged

    def broken(self: Checker, ack: Ack) -> None:
        acknowledged(self, ack)
        if ack.value.startswith(b"3:"):
            self._found.append(Violation("a test invariant", f"found in process {os.getpid()}"))

    monkeypatch.setattr(Checker, "acknowledged", broken)
    from node.sim.main import main

    status = main(["--seeds", "1-8", "--steps", "8", "--jobs", "2"])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "seed 3: violated: a test invariant: found in process" in out
    assert f"found in process {os.getpid()}\n" not in out
    assert "last events before it:" in out
    assert "replay: bin/keel-sim --seeds 3 --brokers 5 --steps 8\n" in out
    assert "no violation" not in out


def test_keep_going_runs_every_seed_and_names_each_that_violated(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same broken checker for seeds 3 and 6: both are reported with their replays, the
    seeds after them still run, and the summary names the two."""
    acknowledged = Checker.acknowledged

    def broken(self: Checker, ack: Ack) -> None:
        acknowledged(self, ack)
        if ack.value.startswith((b"3:", b"6:")) and not self._found:
            self._found.append(Violation("a test invariant", "broken on purpose"))

    monkeypatch.setattr(Checker, "acknowledged", broken)
    from node.sim.main import main

    status = main(["--seeds", "1-8", "--steps", "8", "--jobs", "2", "--keep-going"])
    captured = capsys.readouterr()
    assert status == 1, captured.out
    assert "replay: bin/keel-sim --seeds 3 --brokers 5 --steps 8\n" in captured.out
    assert "replay: bin/keel-sim --seeds 6 --brokers 5 --steps 8\n" in captured.out
    assert "seeds 1-8: 8 runs, 2 violated (seeds 3, 6)" in captured.out
    assert "seed 8: 8/8 runs" in captured.err


def test_a_restarted_broker_whose_zookeeper_read_fails_on_its_first_leader_and_isr_rejoins_the_isrs() -> None:
    """Chaos seed 205: a broker restarted while cut off read the configs of the topics named
    by its first LeaderAndIsr as ZooKeeper lost its majority; aiozk failed the read in flight
    (TimeoutError), the broker answered the request with that error, and the controller, which
    does not send a LeaderAndIsr again, never told it of those partitions: it did not fetch
    them, and the admin topics' leaders and ISRs never changed again to name them to it."""
    from aiozk import exc

    from node.sim.broker import BrokerSettings, SimBroker
    from node.sim.network import CLIENT
    from wire.api import CreatableTopic, CreateTopicsRequest

    async def main() -> str | None:
        zk = FakeZooKeeper()
        network = SimNetwork(random.Random(205), lambda line, **_: None)
        logs = {b: MemoryLogStore() for b in (1, 2, 3)}
        checker = Checker(zk, logs)
        settings = BrokerSettings()
        brokers: dict[int, tuple[int, SimBroker]] = {}

        def start(broker_id: int) -> SimBroker:
            broker = SimBroker(broker_id, zk, network, logs[broker_id], settings)
            brokers[broker_id] = (len(brokers) + 1, broker)
            broker.start()
            return broker

        async def settled(within_s: float) -> str | None:
            missing = checker.settled(brokers)
            for _ in range(int(within_s / 0.5)):
                await asyncio.sleep(0.5)
                missing = checker.settled(brokers)
                if missing is None:
                    break
            return missing

        for broker_id in (1, 2, 3):
            start(broker_id)
        await asyncio.sleep(1.0)
        # An admin topic of the chaos workload: created, never written to.
        topic = CreatableTopic(name="admin", num_partitions=2, replication_factor=3)
        await network.request(CLIENT, endpoint_of(1), CreateTopicsRequest(topics=[topic]), 10.0, "test")
        assert await settled(10.0) is None
        controller = int(zk.controller.value)  # type: ignore[union-attr,call-overload]
        victim = next(b for b in (1, 2, 3) if b != controller)
        brokers[victim][1].crash()
        # Past its session: the controller takes it out of every ISR.
        await asyncio.sleep(2 * settings.session_timeout_s)
        assert all(victim not in state.isr for state, _, _ in zk.partition_states.values())
        restarted = start(victim)
        restarted.store.fail_next_topic_configs = exc.TimeoutError("127.0.0.1", 2181)
        return await settled(30.0)

    assert run_simulated(main()) is None


def test_a_broker_killed_during_its_controlled_shutdown_asks_the_controller_nothing_more() -> None:
    """Seed 33398 too: broker 2, killed while its controlled shutdown waited for an answer
    that a partition had lost, went on asking (the simulation ran the shutdown outside the
    broker's node, which a crash ends), and the controller stopped its replicas on behalf of
    a process that was gone, queueing a StopReplica its next incarnation was then handed."""
    from node.sim.broker import BrokerSettings, SimBroker

    async def main() -> list[str]:
        zk = FakeZooKeeper()
        delivered: list[str] = []
        network = SimNetwork(random.Random(33398), lambda line, **_: delivered.append(line))
        settings = BrokerSettings()
        brokers = {b: SimBroker(b, zk, network, MemoryLogStore(), settings) for b in (1, 2, 3)}
        for broker in brokers.values():
            broker.start()
        await asyncio.sleep(1.0)
        controller = int(zk.controller.value)  # type: ignore[union-attr,call-overload]
        victim = next(b for b in brokers if b != controller)
        network.partition({victim}, {controller})
        stopping = brokers[victim].terminate()
        await asyncio.sleep(1.0)
        brokers[victim].crash()
        network.heal()
        delivered.clear()
        await asyncio.wait({stopping}, timeout=3 * settings.controlled_shutdown.request_timeout_s)
        assert stopping.done()
        return [line for line in delivered if f"{victim}->" in line]

    assert run_simulated(main()) == []


def _produce(tp: TopicPartition, value: bytes, *, acks: int) -> ProduceRequest:
    batch = records.build_batch([(None, value)], timestamp=0)
    data = ProducePartitionData(index=tp.partition, records=batch)
    return ProduceRequest(
        acks=acks, timeout_ms=3000, topic_data=[ProduceTopicData(name=tp.topic, partition_data=[data])]
    )


def test_a_restarted_broker_refuses_the_controller_requests_sent_to_its_previous_incarnation() -> None:
    """Seed 33398 (5 brokers, every fault kind), found in the 100,000-seed run: a broker
    killed and restarted before its old session expired opened its listener while its
    registration waited for that session to go, and meanwhile handled the LeaderAndIsr and
    StopReplica the controller had queued for its previous incarnation: with no broker epoch
    of its own yet, it could not tell them stale. It applied both (it followed a partition,
    then stopped its fetcher) and, once registered, refused as not newer the controller's
    LeaderAndIsr at the same leader epoch: it never fetched that partition again, nor rejoined
    its ISR. Here a follower cut off from its leader drops out of the ISR, is killed, restarted
    at once, and handed those two requests at its old broker epoch while it waits to register."""
    from node.sim.broker import BrokerSettings, SimBroker
    from node.sim.network import CLIENT
    from wire.api import (
        CreatableReplicaAssignment,
        CreatableTopic,
        CreateTopicsRequest,
        LeaderAndIsrPartitionState,
        LeaderAndIsrRequest,
        LiveLeader,
        StopReplicaPartition,
        StopReplicaRequest,
    )
    from wire.errors import ErrorCode

    async def main() -> None:
        zk = FakeZooKeeper()
        network = SimNetwork(random.Random(33398), lambda line, **_: None)
        logs = {b: MemoryLogStore() for b in (1, 2, 3)}
        checker = Checker(zk, logs)
        settings = BrokerSettings()
        brokers: dict[int, tuple[int, SimBroker]] = {}

        def start(broker_id: int) -> asyncio.Task[None]:
            broker = SimBroker(broker_id, zk, network, logs[broker_id], settings)
            brokers[broker_id] = (len(brokers) + 1, broker)
            return broker.start()

        async def until(condition: Callable[[], object], within_s: float) -> None:
            deadline = asyncio.get_running_loop().time() + within_s
            while not condition():
                assert asyncio.get_running_loop().time() < deadline, "not within the deadline"
                await asyncio.sleep(0.1)

        for broker_id in (1, 2, 3):
            start(broker_id)
        await asyncio.sleep(1.0)
        # The controller, a leader, and the follower the test restarts, three brokers.
        controller = int(zk.controller.value)  # type: ignore[union-attr,call-overload]
        leader, victim = (b for b in (1, 2, 3) if b != controller)
        assignment = CreatableReplicaAssignment(partition=0, broker_ids=[leader, victim, controller])
        topic = CreatableTopic(name="t", assignments=[assignment])
        await network.request(CLIENT, endpoint_of(1), CreateTopicsRequest(topics=[topic]), 10.0, "test")
        await until(lambda: checker.settled(brokers) is None, 10.0)
        network.partition({victim}, {leader})
        # A record it cannot fetch: behind the leader for longer than the lag allowed.
        await network.request(CLIENT, endpoint_of(leader), _produce(TP, b"behind", acks=1), 10.0, "test")
        await until(lambda: victim not in zk.partition_states[TP][0].isr, 10.0)
        state = zk.partition_states[TP][0]
        old_epoch = brokers[victim][1].broker_epoch
        brokers[victim][1].crash()
        registering = start(victim)
        controller_epoch = zk.epoch[0]  # type: ignore[index]
        stale_leader_and_isr = LeaderAndIsrRequest(
            controller_id=controller,
            controller_epoch=controller_epoch,
            broker_epoch=old_epoch,
            partition_states=[
                LeaderAndIsrPartitionState(
                    topic=TP.topic,
                    partition=TP.partition,
                    controller_epoch=controller_epoch,
                    leader=state.leader,
                    leader_epoch=state.leader_epoch,
                    isr=list(state.isr),
                    partition_epoch=state.partition_epoch,
                    replicas=assignment.broker_ids,
                )
            ],
            live_leaders=[LiveLeader(broker_id=leader, host="sim", port=endpoint_of(leader).port)],
        )
        stale_stop_replica = StopReplicaRequest(
            controller_id=controller,
            controller_epoch=controller_epoch,
            broker_epoch=old_epoch,
            partitions=[
                StopReplicaPartition(topic=TP.topic, partition=TP.partition, leader_epoch=state.leader_epoch)
            ],
        )
        # Both while it waits to register, in the order the controller queued them.
        answers = []
        for request in (stale_leader_and_isr, stale_stop_replica):
            answers.append(
                asyncio.ensure_future(network.request(controller, endpoint_of(victim), request, 30.0, "test"))
            )
            await asyncio.sleep(0.1)
        assert not registering.done()
        assert [(await a).error_code for a in answers] == [ErrorCode.STALE_BROKER_EPOCH] * 2
        network.heal()
        await until(lambda: checker.settled(brokers) is None, 30.0)

    run_simulated(main())


def test_a_starting_broker_answers_not_controller_to_what_its_controller_module_would_answer() -> None:
    """A broker waiting to register (here, ZooKeeper unreachable) has no controller module
    yet: an AlterPartition or ElectLeaders sent to it is answered NOT_CONTROLLER, so that the
    sender looks for the controller again, and DescribeController names none. Found in
    the simulation's logs: these failed with an internal error and a traceback logged."""
    from node.sim.broker import BrokerSettings, SimBroker
    from node.sim.network import CLIENT
    from wire.api import AlterPartitionRequest, DescribeControllerRequest, ElectLeadersRequest
    from wire.errors import ErrorCode

    async def main() -> list[int]:
        zk = FakeZooKeeper()
        network = SimNetwork(random.Random(1), lambda line, **_: None)
        broker = SimBroker(1, zk, network, MemoryLogStore(), BrokerSettings())
        broker.store.reachable.clear()
        registering = broker.start()
        await asyncio.sleep(1.0)
        assert not registering.done() and not broker.started
        answers = []
        for request in (
            AlterPartitionRequest(broker_id=2, broker_epoch=100),
            ElectLeadersRequest(election_type=0),
        ):
            answers.append((await network.request(CLIENT, endpoint_of(1), request, 5.0, "test")).error_code)
        described = await network.request(CLIENT, endpoint_of(1), DescribeControllerRequest(), 5.0, "test")
        answers.append(described.controller_id)  # type: ignore[attr-defined]
        broker.store.reachable.set()
        await asyncio.wait_for(registering, 10.0)
        return answers

    assert run_simulated(main()) == [ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_CONTROLLER, -1]


def test_the_standby_path_holds_every_invariant_and_new_controllers_take_over_from_their_views(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--standby`: every broker keeps a standby view (its invariant: once it has applied the
    newest change record, it equals ZooKeeper's states), and new controllers take the states
    over from it; a view that cannot be trusted (not loaded yet) falls back to reading them."""
    from actors.controller import standby

    outcomes: collections.Counter[str] = collections.Counter()
    takeover = standby.StandbyFollower.takeover

    async def counted(self: standby.StandbyFollower, epoch: int, partitions: list[TopicPartition]) -> object:
        found = await takeover(self, epoch, partitions)
        outcomes["fell back" if found is None else "took over"] += 1
        return found

    monkeypatch.setattr(standby.StandbyFollower, "takeover", counted)
    for seed in range(1, 9):
        result = run_seed(RunConfig(seed=seed, standby=True))
        assert result.violation is None, f"seed {seed}: {result.violation}"
    assert outcomes["took over"] > 0 and outcomes["fell back"] > 0, outcomes


def test_a_second_cut_from_zookeeper_neither_restarts_the_session_clock_nor_ends_with_the_first() -> None:
    """Two cuts that overlap (a partition during another, or an outage): the ensemble expires
    the session a session timeout after the first began, since no heartbeat went through
    after it; the broker reaches ZooKeeper again only once the last has healed. The model used
    to start the clock again at each cut, so a broker cut off three times in a row (the
    controller, in seed 22454) held a session the ensemble would have expired, and no other
    broker could take over while a partition's leader was dead."""

    async def main() -> tuple[bool, bool, bool]:
        zk = FakeZooKeeper()
        network = SimNetwork(random.Random(7), lambda line, **_: None)
        settings = BrokerSettings()
        broker = SimBroker(1, zk, network, MemoryLogStore(), settings)
        await broker.start()
        broker.cut_off_from_zookeeper()
        await asyncio.sleep(settings.session_timeout_s / 2)
        broker.cut_off_from_zookeeper()  # the second cut, while the first holds
        await asyncio.sleep(settings.session_timeout_s / 2 + 0.1)
        expired_at_the_first_cuts_timeout = broker.store.expired
        broker.reconnect_to_zookeeper()  # the first heals; the second still holds
        still_cut_off = not broker.store.reachable.is_set()
        broker.reconnect_to_zookeeper()
        return expired_at_the_first_cuts_timeout, still_cut_off, broker.store.reachable.is_set()

    expired, still_cut_off, reachable = run_simulated(main())
    assert expired, "the session outlived a session timeout without a heartbeat"
    assert still_cut_off, "the first heal ended the second cut"
    assert reachable


def test_a_controller_cut_off_three_times_in_a_row_gives_way_to_one_that_leads_the_partitions() -> None:
    """Seed 22454 of the 100,000-seed run on every fault kind: broker 5 lost power while it
    led t1-0; the controller, broker 2, was cut off from ZooKeeper three times in a row (11.6 s
    for 8.8 s, 13.8 s for 9.5 s, 18.9 s for 3.5 s) before it crashed. Each cut started the
    session's clock again, so no broker took over until 6 s after the crash, and t1-0 went
    20 s without a leader while brokers 1 and 4 of its ISR were live (the focused test is
    test_a_second_cut_from_zookeeper_neither_restarts_the_session_clock_nor_ends_with_the_first)."""
    result = run_seed(RunConfig(seed=22454))
    assert result.faults["zk-partition"] >= 3 and result.faults["power-loss"] >= 1
    assert result.violation is None, result.violation


def test_a_controller_on_its_new_session_writes_nothing_its_expired_reign_queued() -> None:
    """Seed 188 of the default run on the fixed model: overlapping outages of ZooKeeper
    expired every session. The controller of epoch 7 reached ZooKeeper on a new session and,
    before its Expire ran, handled a queued AlterPartition that put broker 5 (which had lost
    power, and asked as its old incarnation) back into t1-0's ISR; nobody had been elected
    since, so `/controller_epoch` was still at the version it had won and the write passed.
    The next controller elected broker 5, whose log had lost acknowledged records. Every
    fenced write now also checks that `/controller` exists (the contract tests
    test_a_controller_whose_session_expired_writes_nothing_though_none_was_elected_since and
    test_a_controller_whose_znode_an_operator_deleted_writes_nothing)."""
    result = run_seed(RunConfig(seed=188))
    assert result.faults["zk-outage"] >= 2 and result.faults["power-loss"] >= 1
    assert result.violation is None, result.violation


def test_a_registration_whose_session_expired_while_it_waited_creates_nothing() -> None:
    """The real client fails a call its session did not outlive (node/zk/client.py), and the
    in-memory store fails an ephemeral create so too: it used to create the znode on the dead
    session, which the ensemble never dropped again."""

    async def main() -> tuple[BaseException | None, bool]:
        zk = FakeZooKeeper()
        store = FakeClusterStore(zk)
        store.reachable.clear()  # an outage under way
        registering = asyncio.create_task(store.register_broker(BrokerInfo(5, (endpoint_of(5),))))
        await asyncio.sleep(1)
        store.expired = True  # the ensemble expires the session meanwhile
        zk.drop_session(store.session)
        store.reachable.set()
        await store.renew_session()
        error = (await asyncio.gather(registering, return_exceptions=True))[0]
        return (error if isinstance(error, BaseException) else None), 5 in zk.brokers

    error, registered = run_simulated(main())
    assert isinstance(error, SessionExpiredError), error
    assert not registered, "an ephemeral on a session the ensemble had expired"


def test_a_broker_whose_controlled_shutdown_outlived_an_outage_leaves_its_id_to_the_next_one() -> None:
    """Seed 4557 on the fixed model: broker 5 was shutting down (its controlled shutdown had
    given up) while ZooKeeper was unreachable; its registration on the session being expired
    went through when the outage healed, on that dead session, so the znode was never
    dropped, and broker 5 started at the heal found its id taken for good."""
    result = run_seed(RunConfig(seed=4557))
    assert result.faults["zk-outage"] >= 3 and result.faults["shutdown"] >= 1
    assert result.violation is None, result.violation
