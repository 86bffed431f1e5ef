"""Log-directory failures on brokers, as the controller handles them (spec §7.11).

A broker whose log directory fails (or, in Keel, whose leader log holds a damaged batch)
writes a log-dir event notification. The controller resends LeaderAndIsr for every replica
on the brokers named, by moving them to OnlineReplica; the broker answers
KAFKA_STORAGE_ERROR for the replicas it can no longer host. Those answers, like any
LeaderAndIsr answer, come back as LeaderAndIsrResponseReceived: each KAFKA_STORAGE_ERROR
marks the replica offline although its broker is up (NONE marks it online again), and
newly offline replicas go through onReplicasBecomeOffline (§7.2): their partitions elect
another leader from the ISR, and they leave the ISR.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from actors.base.ports import ClusterStore, TopicPartition
from actors.controller.context import ControllerContext, PartitionReplica, ReplicaState
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.workflows import Workflows
from wire.api import LeaderAndIsrResponse, Response
from wire.errors import ErrorCode

log = logging.getLogger(__name__)


class LogDirFailures:
    def __init__(
        self,
        *,
        context: ControllerContext,
        store: ClusterStore,
        replicas: ReplicaStateMachine,
        workflows: Workflows,
        forget_acknowledged: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._context = context
        self._store = store
        self._replicas = replicas
        self._workflows = workflows
        # With the warm standby: clears the mark of what brokers acknowledged, so that a
        # successor resends every LeaderAndIsr, whose answers are how it learns which
        # replicas sit on failed directories (actors/controller/acknowledged.py).
        self._forget_acknowledged = forget_acknowledged

    async def on_failover(self) -> None:
        """Spec §4.1 steps 2 and 3: watch the notifications and drop those already there
        (the failover's LeaderAndIsr to every replica finds the offline ones anyway; with the
        standby's mark cleared first, so that it is to every replica)."""
        events = await self._store.log_dir_events(watch=True)
        if events:
            if self._forget_acknowledged is not None:
                await self._forget_acknowledged()
            await self._store.delete_log_dir_events(list(events), self._context.epoch_zk_version)

    async def on_log_dir_event_notification(self) -> None:
        events = await self._store.log_dir_events(watch=True)
        if events and self._forget_acknowledged is not None:
            await self._forget_acknowledged()
        try:
            brokers = sorted({b for b in events.values() if b is not None})
            if brokers:
                log.info("log directories failed on brokers %s: resending their LeaderAndIsr", brokers)
                hosted = await self._context.replicas_on_brokers(set(brokers))
                await self._replicas.handle_state_changes(hosted, ReplicaState.ONLINE)
        finally:
            if events:
                await self._store.delete_log_dir_events(list(events), self._context.epoch_zk_version)

    async def on_leader_and_isr_response(self, broker_id: int, response: Response) -> None:
        assert isinstance(response, LeaderAndIsrResponse)
        if response.error_code:
            return  # a refusal of the whole request: logged when it arrived
        if broker_id not in self._context.live_brokers:
            return
        previous = self._context.replicas_on_offline_dirs.get(broker_id, set())
        offline = set()
        online = set()
        for error in response.partition_errors:
            if error.error_code == ErrorCode.KAFKA_STORAGE_ERROR:
                offline.add(TopicPartition(error.topic, error.partition))
            elif previous and error.error_code == ErrorCode.NONE:
                online.add(TopicPartition(error.topic, error.partition))
        current = (previous - online) | offline
        if current:
            self._context.replicas_on_offline_dirs[broker_id] = current
        else:
            self._context.replicas_on_offline_dirs.pop(broker_id, None)
        newly = sorted(current - previous)
        if newly:
            log.warning(
                "broker %d cannot host %d replica(s) (KAFKA_STORAGE_ERROR), e.g. %s: electing other leaders",
                broker_id,
                len(newly),
                newly[0],
            )
            if self._forget_acknowledged is not None:
                await self._forget_acknowledged()
            offline_replicas = [PartitionReplica(tp, broker_id) for tp in newly]
            await self._workflows.on_replicas_become_offline(offline_replicas)
