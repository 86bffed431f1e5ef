"""The replica manager's handle: typed entry points, and the tasks around the actor that do
the waiting and the I/O (fetchers, the AlterPartition sender) so that the actor never does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from actors.admin.partition_limits import ReplicaCounts
from actors.base.clock import Clock
from actors.base.ports import LogStore, ReplicaLink, TopicPartition
from actors.base.runtime import ActorHandle
from actors.replica.alter_partition_manager import AlterPartitionManager
from actors.replica.fetcher import ReplicaFetcher
from actors.replica.partition import PendingIsr
from actors.replica.replica_manager import ReplicaManager
from actors.replica.replica_messages import (
    ApplyLeaderAndIsr,
    ApplyStopReplica,
    ApplyUpdateMetadata,
    BytesToCopy,
    CountReplicas,
    DeleteRecords,
    EpochEndsFetched,
    Fetched,
    IsrChangeAnswered,
    LeaderEpochEnds,
    ListOffsets,
    LogDirFailed,
    Maintain,
    MetadataFor,
    PlanFetch,
    Produce,
    Read,
    ReplicaMessage,
    Scrub,
    SetThrottles,
    Snapshot,
    TakeSnapshot,
)
from actors.replica.replica_state import ReplicaState
from actors.replica.replication import (
    FetchPlan,
    NoReplication,
    ReplicationConfig,
    ReplicationEffects,
)
from wire.api import (
    AlterPartitionResult,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from wire.errors import ErrorCode

log = logging.getLogger(__name__)


class ReplicaManagerHandle(ActorHandle[ReplicaMessage]):
    """Each request is applied whole, one at a time, on the actor's task. Without a `link`
    the broker does not replicate: no fetchers, no ISR changes sent (tests, benchmarks of
    the control path)."""

    def __init__(
        self,
        broker_id: int,
        logs: LogStore,
        *,
        link: ReplicaLink | None = None,
        config: ReplicationConfig | None = None,
        clock: Clock | None = None,
        broker_epoch: Callable[[], int] = lambda: -1,
        propagate_log_dir_event: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`propagate_log_dir_event` writes a log-dir event notification for this broker
        (spec §7.11) when replicas here go offline."""
        # With a link, this handle performs the actor's effects (fetchers, ISR changes); it
        # calls the actor only once both exist.
        effects: ReplicationEffects = self if link is not None else NoReplication()
        actor = ReplicaManager(broker_id, logs, config=config, clock=clock, effects=effects)
        super().__init__(actor, name=f"replica-manager-{broker_id}")
        self.broker_id = broker_id
        self._config = actor.state.config
        self._clock = actor.state.clock
        self._link = link
        self._broker_epoch = broker_epoch
        self._fetchers: dict[int, ReplicaFetcher] = {}
        self._alter_partition: AlterPartitionManager | None = None
        self._propagate_log_dir_event = propagate_log_dir_event
        self._notifications: set[asyncio.Task[None]] = set()
        # Set, then replaced, each time a control request has been applied (wait_for_metadata).
        self._metadata_applied = asyncio.Event()

    @property
    def replica_state(self) -> ReplicaState:
        """The actor's state, for observers that read it between messages (the simulation's
        checks); everything that changes it goes through the mailbox."""
        actor = self._actor
        assert isinstance(actor, ReplicaManager)
        return actor.state

    def bytes_to_copy_now(self) -> dict[TopicPartition, int]:
        """What `bytes_to_copy` answers, read between messages for an exporter that must not
        wait behind the mailbox (a scrape during a LeaderAndIsr of thousands)."""
        actor = self._actor
        assert isinstance(actor, ReplicaManager)
        return actor.leader_path.bytes_to_copy()

    async def stop(self) -> None:
        for task in self._notifications:
            task.cancel()
        tasks = [f.stop() for f in self._fetchers.values()]
        if self._alter_partition is not None:
            tasks.append(self._alter_partition.stop())
        await asyncio.gather(*tasks)
        self._fetchers.clear()
        await super().stop()

    # --- controller requests ---

    async def leader_and_isr(
        self,
        request: LeaderAndIsrRequest,
        broker_epoch: int,
        topic_configs: dict[str, dict[str, str]] | None = None,
    ) -> LeaderAndIsrResponse:
        response = await self.ask(ApplyLeaderAndIsr(request, broker_epoch, topic_configs or {}))
        self._signal_metadata_applied()
        return response

    async def stop_replica(self, request: StopReplicaRequest, broker_epoch: int) -> StopReplicaResponse:
        response = await self.ask(ApplyStopReplica(request, broker_epoch))
        self._signal_metadata_applied()
        return response

    async def update_metadata(
        self, request: UpdateMetadataRequest, broker_epoch: int
    ) -> UpdateMetadataResponse:
        response = await self.ask(ApplyUpdateMetadata(request, broker_epoch))
        self._signal_metadata_applied()
        return response

    def _signal_metadata_applied(self) -> None:
        applied, self._metadata_applied = self._metadata_applied, asyncio.Event()
        applied.set()

    async def wait_for_metadata(self, ready: Callable[[], Awaitable[bool]], timeout_s: float) -> bool:
        """Ask `ready` (which reads this broker's metadata) now and again after each control
        request applied here, until it says True or `timeout_s` passes; its last answer. What
        Kafka's delayed operations do (DelayedElectLeader, DelayedDeleteTopics,
        DelayedCreatePartitions), without polling."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        while True:
            # Taken before asking, so that a change applied meanwhile is not missed.
            applied = self._metadata_applied
            if await ready():
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await applied.wait()

    async def metadata(self, request: MetadataRequest, listener: str | None = None) -> MetadataResponse:
        return await self.ask(MetadataFor(request, listener))

    async def replica_counts(self) -> ReplicaCounts:
        """Partition replicas in the cluster and per broker, from the metadata cache: what
        CreateTopics and CreatePartitions hold to max.partitions and max.broker.partitions."""
        return await self.ask(CountReplicas())

    async def snapshot(self) -> Snapshot:
        return await self.ask(TakeSnapshot())

    # --- clients ---

    async def produce(self, request: ProduceRequest) -> ProduceResponse:
        outcome = await self.ask(Produce(request))
        answers = dict(outcome.answers)
        waited = [*outcome.flushing.items(), *outcome.waiting.items()]
        if waited:
            await asyncio.wait([w for _, w in waited], timeout=max(request.timeout_ms, 0) / 1000)
            for tp, waiter in waited:
                if waiter.done():
                    code = waiter.result()
                else:
                    waiter.cancel()
                    code = ErrorCode.REQUEST_TIMED_OUT
                if code and not answers[tp].error_code:
                    answers[tp] = ProducePartitionResponse(
                        index=tp.partition, error_code=code, base_offset=answers[tp].base_offset
                    )
        by_topic: dict[str, list[ProducePartitionResponse]] = {}
        for tp, answer in answers.items():
            by_topic.setdefault(tp.topic, []).append(answer)
        return ProduceResponse(
            responses=[ProduceTopicResponse(name=t, partition_responses=a) for t, a in by_topic.items()]
        )

    async def fetch(self, request: FetchRequest, owner: tuple[str, int] = ("", 0)) -> FetchResponse:
        """`owner`: the principal and connection it came from, which a fetch session it
        opens is bound to."""
        outcome = await self.ask(Read(request, wait=request.max_wait_ms > 0, owner=owner))
        if outcome.waiter is None:
            return outcome.response
        timeout_s = request.max_wait_ms / 1000
        if outcome.retry_s is not None:
            # A throttled partition was held back: look again once the leader quota frees,
            # not only at the end of the long poll, or the rate falls short of the quota.
            timeout_s = min(timeout_s, outcome.retry_s)
        try:
            # Not wait_for: Python 3.11's loses a cancellation (the connection's, when the
            # listener closes) that lands as the waiter is set, and the connection serves on.
            async with asyncio.timeout(timeout_s):
                await outcome.waiter
        except TimeoutError:
            if outcome.retry_s is None or not outcome.session_id:
                return outcome.response
        again = await self.ask(Read(request, wait=False, reread=outcome.session_id, owner=owner))
        return again.response

    async def list_offsets(self, request: ListOffsetsRequest) -> ListOffsetsResponse:
        return await self.ask(ListOffsets(request))

    async def delete_records(self, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
        return await self.ask(DeleteRecords(request))

    async def offsets_for_leader_epoch(
        self, request: OffsetsForLeaderEpochRequest
    ) -> OffsetsForLeaderEpochResponse:
        return await self.ask(LeaderEpochEnds(request))

    async def set_throttles(
        self,
        rates: tuple[int | None, int | None] | None = None,
        topic_configs: dict[str, dict[str, str]] | None = None,
    ) -> None:
        """Apply replication throttle configs: (leader, follower) rates in bytes/s (None:
        unlimited), and topics' configs (their throttled-replicas lists)."""
        await self.ask(SetThrottles(rates, topic_configs or {}))

    async def bytes_to_copy(self, topics: set[str] | None = None) -> dict[TopicPartition, int]:
        """Per partition led here with replicas being added: the bytes they still lack."""
        return await self.ask(BytesToCopy(None if topics is None else frozenset(topics)))

    async def maintain(self, *, checkpoint: bool = False, shrink: bool = True) -> None:
        await self.ask(Maintain(checkpoint=checkpoint, shrink=shrink))

    async def scrub(self, max_bytes: int) -> None:
        """Check the CRC of about `max_bytes` of the hosted logs (see ReplicaManager.scrub)."""
        await self.ask(Scrub(max_bytes))

    async def log_dir_failed(self, partitions: list[TopicPartition]) -> None:
        """These partitions' log directory went offline: they stop, the controller is told."""
        await self.ask(LogDirFailed(tuple(partitions)))

    # --- the actor's effects (ReplicationEffects), called on the actor's task ---

    def start_fetcher(self, source: int) -> None:
        fetcher = self._fetchers.get(source)
        if fetcher is None or not fetcher.running:
            assert self._link is not None
            fetcher = ReplicaFetcher(
                source, self, self._link, backoff_s=self._config.fetch_backoff_ms / 1000, clock=self._clock
            )
            self._fetchers[source] = fetcher
            fetcher.start()

    def propose_isr(self, tp: TopicPartition, proposal: PendingIsr) -> None:
        if self._alter_partition is None:
            assert self._link is not None
            self._alter_partition = AlterPartitionManager(
                self.broker_id, self._broker_epoch, self._link, self._isr_change_answered, clock=self._clock
            )
            self._alter_partition.start()
        self._alter_partition.submit(tp, proposal)

    def report_offline_replicas(self) -> None:
        if self._propagate_log_dir_event is None:
            return
        task = asyncio.create_task(self._propagate(self._propagate_log_dir_event))
        self._notifications.add(task)
        task.add_done_callback(self._notifications.discard)

    @staticmethod
    async def _propagate(propagate: Callable[[], Awaitable[None]]) -> None:
        try:
            await propagate()
        except Exception:
            # Without it the controller learns of the offline replicas only at its next
            # LeaderAndIsr to this broker (a failover, a restart).
            log.exception("could not write the log-dir event notification")

    # --- what the fetchers ask (FetchTarget), and the answers to ISR changes ---

    async def plan_fetch(self, source: int) -> FetchPlan | None:
        return await self.ask(PlanFetch(source, self._broker_epoch()))

    async def fetched(self, source: int, plan: FetchPlan, response: FetchResponse) -> bool:
        return await self.ask(Fetched(source, plan, response))

    async def epoch_ends_fetched(
        self, source: int, plan: FetchPlan, response: OffsetsForLeaderEpochResponse
    ) -> bool:
        return await self.ask(EpochEndsFetched(source, plan, response))

    async def _isr_change_answered(
        self, tp: TopicPartition, proposal: PendingIsr, result: AlterPartitionResult
    ) -> None:
        if self.running:
            await self.tell(IsrChangeAnswered(tp, proposal, result))
