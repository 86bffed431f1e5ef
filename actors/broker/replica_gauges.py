"""ReplicaManager's gauges (Kafka's names), computed from the replica manager's state when an
exporter reads them: one pass over the hosted partitions, nothing kept up to date on the
paths that change them."""

from __future__ import annotations

import dataclasses

from actors.broker.partition import Role
from actors.broker.replica_state import ReplicaState


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
    leaders = under_replicated = under_min_isr = reassigning = 0
    configs = state.topic_configs
    for partition in state.partitions.values():
        if partition.role is not Role.LEADER or partition.stopped:
            continue
        leaders += 1
        isr = len(partition.isr)
        if len(partition.replicas) - len(partition.adding_replicas) > isr:
            under_replicated += 1
        if partition.adding_replicas or partition.removing_replicas:
            reassigning += 1
        log = partition.log
        if log is not None:
            min_isr = log.min_insync_replicas
        else:
            min_isr = int(configs.get(partition.tp.topic, {}).get("min.insync.replicas", default_min_isr))
        if isr < min_isr:
            under_min_isr += 1
    return ReplicaGauges(
        partition_count=len(state.partitions),
        leader_count=leaders,
        under_replicated=under_replicated,
        under_min_isr=under_min_isr,
        reassigning=reassigning,
        offline_replicas=len(state.offline),
    )
