"""ReplicaManager's gauges (Kafka's names), computed from the replica manager's state when an
exporter reads them: one pass over the hosted partitions, nothing kept up to date on the
paths that change them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from actors.base.loop_slices import sliced
from actors.replica.partition import Partition, Role
from actors.replica.replica_state import ReplicaState


@dataclasses.dataclass(frozen=True)
class ReplicaGauges:
    partition_count: int = 0
    leader_count: int = 0
    # Led here with fewer in-sync replicas than the assignment's (replicas being added by a
    # reassignment not counted, as Kafka's replicationFactor leaves them out).
    under_replicated: int = 0
    # Led here with an ISR smaller than the topic's min.insync.replicas.
    under_min_isr: int = 0
    # Led here with replicas being added or removed (ReplicaManager's ReassigningPartitions).
    reassigning: int = 0
    offline_replicas: int = 0


def replica_gauges(state: ReplicaState, default_min_isr: int) -> ReplicaGauges:
    """`default_min_isr`: the broker's min.insync.replicas, for a partition that has no log
    yet (logs are created on first use) and no topic override."""
    counts = _LeaderCounts(state.topic_configs, default_min_isr)
    counts.add(state.partitions.values())
    return counts.gauges(state)


async def replica_gauges_in_slices(state: ReplicaState, default_min_isr: int) -> ReplicaGauges:
    """The same pass, the loop turning between slices (actors/base/loop_slices.py): at 200k hosted
    partitions it takes a tenth of a second or more."""
    counts = _LeaderCounts(state.topic_configs, default_min_isr)
    async for partitions in sliced(list(state.partitions.values())):
        counts.add(partitions)
    return counts.gauges(state)


class _LeaderCounts:
    def __init__(self, configs: dict[str, dict[str, str]], default_min_isr: int) -> None:
        self._configs = configs
        self._default_min_isr = default_min_isr
        self.leaders = self.under_replicated = self.under_min_isr = self.reassigning = 0

    def add(self, partitions: Iterable[Partition]) -> None:
        configs = self._configs
        for partition in partitions:
            if partition.role is not Role.LEADER or partition.stopped:
                continue
            self.leaders += 1
            isr = len(partition.isr)
            if len(partition.replicas) - len(partition.adding_replicas) > isr:
                self.under_replicated += 1
            if partition.adding_replicas or partition.removing_replicas:
                self.reassigning += 1
            log = partition.log
            if log is not None:
                min_isr = log.min_insync_replicas
            else:
                min_isr = int(
                    configs.get(partition.tp.topic, {}).get("min.insync.replicas", self._default_min_isr)
                )
            if isr < min_isr:
                self.under_min_isr += 1

    def gauges(self, state: ReplicaState) -> ReplicaGauges:
        return ReplicaGauges(
            partition_count=len(state.partitions),
            leader_count=self.leaders,
            under_replicated=self.under_replicated,
            under_min_isr=self.under_min_isr,
            reassigning=self.reassigning,
            offline_replicas=len(state.offline),
        )
