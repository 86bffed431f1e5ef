"""The passes a new controller makes over every partition after its failover's UpdateMetadata,
in process (no ZooKeeper, no brokers), at up to 1M partitions.

A context of N partitions (replication factor 3 on brokers 1-3, each led by its first replica,
every broker live) is built once; each run then times:

- the imbalance count of the leadership loaded whole (`Leadership.recount_in_slices`);
- the partition state machine's startup: every partition's state from its leadership;
- the online-partition trigger with nothing to elect (its pass to find what to elect).

Baseline in the same run: a bare pass over the leadership map reading each leader, the least
any of these passes can cost.

    .venv/bin/python -m bench.controller_passes [--partitions 1000000] [--runs 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import uvloop

from actors.base.ports import (
    BrokerInfo,
    LeaderAndIsr,
    LeadershipInfo,
    RegisteredBroker,
    ReplicaAssignment,
    TopicPartition,
)
from actors.controller.context import ControllerContext
from actors.controller.partition_state_machine import PartitionStateMachine
from bench.election import cpu_model
from node.broker.gc_tuning import tune_gc

PER_TOPIC = 1000


def context_of(partitions: int) -> ControllerContext:
    context = ControllerContext(epoch=1, epoch_zk_version=1)
    states = {}
    for t in range(partitions // PER_TOPIC):
        topic = f"topic-{t:04d}"
        assignment = {
            p: ReplicaAssignment(tuple(1 + (p + i) % 3 for i in range(3))) for p in range(PER_TOPIC)
        }
        context.set_topic_assignment(topic, assignment)
        for p, replicas in assignment.items():
            leader = replicas.replicas[0]
            states[TopicPartition(topic, p)] = LeadershipInfo(LeaderAndIsr(leader, 1, replicas.replicas), 1)
    context.leadership.load(states)
    context.live_brokers = {b: RegisteredBroker(BrokerInfo(b, ()), broker_epoch=b) for b in (1, 2, 3)}
    return context


def state_machine(context: ControllerContext) -> PartitionStateMachine:
    async def nothing_to_elect(*_: object, **__: object) -> dict[TopicPartition, object]:
        return {}

    machine = PartitionStateMachine.__new__(PartitionStateMachine)
    machine._context = context
    machine.handle_state_changes = nothing_to_elect  # type: ignore[method-assign,assignment]
    return machine


async def bare_pass(context: ControllerContext) -> None:
    leaders = 0
    for info in context.leadership.values():
        leaders += info.leader_and_isr.leader


async def timed(step: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await step()
    return time.perf_counter() - started


async def measure(partitions: int, runs: int) -> dict[str, list[float]]:
    context = context_of(partitions)
    machine = state_machine(context)
    gc.collect()
    gc.freeze()  # as a broker does after a bulk load (node/broker/gc_tuning.py)
    times: dict[str, list[float]] = {"bare pass": [], "imbalance count": [], "startup": [], "trigger": []}

    async def recount() -> None:
        context.leadership.load(dict(context.leadership))
        await context.leadership.recount_in_slices()

    for _ in range(runs):
        times["bare pass"].append(await timed(lambda: bare_pass(context)))
        times["imbalance count"].append(await timed(recount))
        times["startup"].append(await timed(machine.startup))
        times["trigger"].append(await timed(machine.trigger_online_partition_state_change))
    assert context.preferred_replica_imbalance_count() == 0 and context.offline_partition_count() == 0
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tune_gc()
    print(f"machine: {cpu_model()}, python {sys.version.split()[0]}, {args.partitions} partitions")
    times = uvloop.run(measure(args.partitions, args.runs))
    bare = statistics.median(times["bare pass"])
    for name, runs in times.items():
        median = statistics.median(runs)
        print(
            f"{name}: median {median:.3f} s ({median / bare:.1f}x the bare pass;"
            f" runs {', '.join(f'{x:.3f}' for x in runs)})"
        )


if __name__ == "__main__":
    main()
