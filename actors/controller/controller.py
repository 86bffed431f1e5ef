"""KafkaController: election, failover and resignation, run one event at a time.

Every broker runs one. ZooKeeper watches and session changes only enqueue events; `process`
dispatches each to one `_on_<event>` method. Election follows spec §2.2: read `/controller`;
if nobody holds it, create it and bump `/controller_epoch` in one multi-op conditional on
the epoch's version. A ControllerMovedError anywhere means another broker won, so this one
maybe-resigns; any other error while taking over makes it give the role up
(triggerControllerMove). Cluster events are acted on only by the active controller; the
workflows they start live in `workflows.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from typing import assert_never

from actors.base.clock import Clock
from actors.base.ports import (
    BrokerChannel,
    BrokerInfo,
    ClusterStore,
    ControllerEpoch,
    ControllerMovedError,
    SessionExpiredError,
    TopicPartition,
)
from actors.base.state_change_log import StateChangeLogger
from actors.controller.acknowledged import AcknowledgedMarker
from actors.controller.alter_partition import alter_partition
from actors.controller.context import ControllerContext
from actors.controller.controlled_shutdown import controlled_shutdown
from actors.controller.event_manager import ControllerEventManager
from actors.controller.events import (
    AlterPartitionReceived,
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    BrokerModifications,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    ControllerState,
    ElectionTrigger,
    Event,
    Expire,
    LeaderAndIsrResponseReceived,
    ListPartitionReassignments,
    LogDirEventNotification,
    MarkAcknowledged,
    PartitionModifications,
    Reelect,
    RegisterBrokerAndReelect,
    ReplicaLeaderElection,
    RetryPartitionInitialization,
    ShutdownEventThread,
    Startup,
    TopicChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
    ZkPartitionReassignment,
)
from actors.controller.initialization_retries import InitializationRetries
from actors.controller.leader_election import (
    FIRST_REBALANCE_DELAY_S,
    AutoRebalanceTask,
    ElectionOutcome,
    LeaderElections,
    failed_outcomes,
)
from actors.controller.log_dir_failure import LogDirFailures
from actors.controller.metrics import ControllerMetrics
from actors.controller.partition_state_machine import PartitionStateMachine
from actors.controller.reassignment import DeletionHooks, PartitionReassignment
from actors.controller.reassignment_api import (
    alter_reassignments_response,
    list_reassignments_response,
    not_controller_alter,
    not_controller_list,
    reassignments_requested,
    requested_partitions,
)
from actors.controller.replica_state_machine import ReplicaStateMachine
from actors.controller.request_batch import RequestBatch
from actors.controller.standby import StandbyFollower
from actors.controller.topic_deletion import TopicDeletionManager, deletion_errors
from actors.controller.workflows import Workflows
from wire.api import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ElectionType,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    Response,
)
from wire.errors import ErrorCode, NotController, RequestTimedOut, UnknownServerError, WireError

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ControllerConfig:
    unclean_leader_election_enable: bool = False
    # Auto preferred-leader rebalance (spec §7.8, §11).
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_s: float = 300.0
    leader_imbalance_per_broker_percentage: int = 10
    delete_topic_enable: bool = True
    # The listener whose endpoints LeaderAndIsr names as the leaders to fetch from (Kafka's
    # inter.broker.listener.name).
    inter_broker_listener: str = "PLAINTEXT"
    # The warm standby (docs/STANDBY.md): this broker records its changes as controller and
    # keeps a view of the partitions' states from every controller's records, which it
    # takes over from when elected (controller.standby.enable; the same on every broker).
    standby_enable: bool = False


class KafkaController:
    def __init__(
        self,
        broker_info: BrokerInfo,
        store: ClusterStore,
        clock: Clock,
        channel: BrokerChannel,
        config: ControllerConfig | None = None,
    ) -> None:
        self.broker_id = broker_info.broker_id
        self._clock = clock
        self._broker_info = broker_info
        self._store = store
        self.channel = channel
        self.config = config or ControllerConfig()
        self.context = ControllerContext()
        self.event_manager = ControllerEventManager(self._process_event, clock)
        self.standby: StandbyFollower | None = None
        if self.config.standby_enable:
            store.change_records = True
            self.standby = StandbyFollower(store)
        self.metrics = ControllerMetrics(
            self.context, self.event_manager, channel, lambda: self.is_active, clock
        )
        self.active_controller_id = -1
        # The epoch of the active controller as last seen by this broker (any broker).
        self.known_controller_epoch = 0
        self.broker_epoch = -1
        state_change_log = StateChangeLogger.for_controller(self.broker_id, lambda: self.context.epoch)
        self._watch = _Watch(self.event_manager)
        self.initialization_retries = InitializationRetries(clock, self._watch.partition_initialization_due)
        self.partition_state_machine = PartitionStateMachine(
            self.context,
            store,
            self._new_batch,
            unclean_default=self.config.unclean_leader_election_enable,
            on_unclean_election=self._count_unclean_election,
            state_change_log=state_change_log,
            retries=self.initialization_retries,
            on_initialization_failures=self._count_initialization_failures,
        )
        self.replica_state_machine = ReplicaStateMachine(
            self.context, store, self._new_batch, state_change_log
        )
        self.topic_deletion = TopicDeletionManager(
            context=self.context,
            store=store,
            partitions=self.partition_state_machine,
            replicas=self.replica_state_machine,
            new_batch=self._new_batch,
            delete_topic_enable=self.config.delete_topic_enable,
        )
        self.reassignment = PartitionReassignment(
            context=self.context,
            store=store,
            partitions=self.partition_state_machine,
            replicas=self.replica_state_machine,
            new_batch=self._new_batch,
            rewatch=self._rewatch_reassignments,
            deletion=DeletionHooks(
                mark_ineligible=self._hold_deletion_of_reassigned_topics,
                resume=self.topic_deletion.resume_deletion_for_topics,
            ),
        )
        self.workflows = Workflows(
            topic_deletion=self.topic_deletion,
            context=self.context,
            store=store,
            channel=channel,
            partitions=self.partition_state_machine,
            replicas=self.replica_state_machine,
            new_batch=self._new_batch,
            clock=clock,
            reassignment=self.reassignment,
            standby=self.standby,
        )
        self.log_dir_failures = LogDirFailures(
            context=self.context,
            store=store,
            replicas=self.replica_state_machine,
            workflows=self.workflows,
            forget_acknowledged=self._forget_acknowledged if self.standby is not None else None,
        )
        self.leader_elections = LeaderElections(
            context=self.context,
            store=store,
            partitions=self.partition_state_machine,
            rearm_zk_trigger=self._watch.preferred_replica_election_created,
        )
        self.auto_rebalance = AutoRebalanceTask(clock, self._watch.auto_rebalance_due)
        self.acknowledged: AcknowledgedMarker | None = None
        if self.standby is not None:
            self.acknowledged = AcknowledgedMarker(
                self.context,
                store,
                channel,
                clock,
                due=self._watch.acknowledged_mark_due,
                queued_events=lambda: self.event_manager.queue_size,
            )

    # --- public API: called by the broker; everything else happens on the event queue ---

    def startup(self, broker_epoch: int) -> None:
        self.broker_epoch = broker_epoch
        self._store.watch_controller(self._watch)
        self._store.watch_cluster(self._watch)
        self._store.watch_topic_deletions(self._watch)
        self._store.watch_reassignments(self._watch)
        self._store.watch_session(self)
        self._store.watch_preferred_replica_election(self._watch)
        self._store.watch_log_dir_events(self._watch)
        self.event_manager.put(Startup())
        self.event_manager.start()
        if self.standby is not None:
            self.standby.start()

    async def alter_partition(self, request: AlterPartitionRequest) -> AlterPartitionResponse:
        """Queue a leader's ISR change and wait for the answer."""
        reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        try:
            answer = await self._answer(AlterPartitionReceived(reply, request=request), reply, None)
        except WireError as e:
            return AlterPartitionResponse(error_code=e.error_code, error_message=e.message)
        assert isinstance(answer, AlterPartitionResponse)
        return answer

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: frozenset[TopicPartition] | None,
        timeout_s: float | None = None,
    ) -> dict[TopicPartition, ElectionOutcome]:
        """Queue an admin election (spec §7.8) and wait, up to `timeout_s`, for a result per
        partition. None asks for every partition: then an error that leaves no partition to
        answer for (NotController, RequestTimedOut, UnknownServerError) is raised."""
        reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        trigger = ElectionTrigger.ADMIN_CLIENT_TRIGGERED
        event = ReplicaLeaderElection(partitions, election_type, trigger, reply)
        try:
            outcomes = await self._answer(event, reply, timeout_s)
        except WireError as e:
            if partitions is None:
                raise
            return failed_outcomes(partitions, e)
        assert isinstance(outcomes, dict)
        return outcomes

    async def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest
    ) -> AlterPartitionReassignmentsResponse:
        """Queue an AlterPartitionReassignments and wait, up to its timeout, for the answer."""
        reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        event = ApiPartitionReassignment(reply, reassignments=reassignments_requested(request))
        try:
            answer = await self._answer(event, reply, request.timeout_ms / 1000)
        except WireError as e:
            return AlterPartitionReassignmentsResponse(error_code=e.error_code, error_message=e.message)
        assert isinstance(answer, AlterPartitionReassignmentsResponse)
        return answer

    async def list_partition_reassignments(
        self, request: ListPartitionReassignmentsRequest
    ) -> ListPartitionReassignmentsResponse:
        """Queue a ListPartitionReassignments and wait, up to its timeout, for the answer."""
        reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        event = ListPartitionReassignments(reply, partitions=requested_partitions(request))
        try:
            answer = await self._answer(event, reply, request.timeout_ms / 1000)
        except WireError as e:
            return ListPartitionReassignmentsResponse(error_code=e.error_code, error_message=e.message)
        assert isinstance(answer, ListPartitionReassignmentsResponse)
        return answer

    async def controlled_shutdown(self, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
        """Queue a broker's controlled shutdown and wait for the answer (spec §7.3); the
        event answers every failure itself (`ControlledShutdown.fail`)."""
        reply: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        event = ControlledShutdown(reply, broker_id=request.broker_id, broker_epoch=request.broker_epoch)
        answer = await self._answer(event, reply, None)
        assert isinstance(answer, ControlledShutdownResponse)
        return answer

    async def _answer(
        self, event: ControllerEvent, reply: asyncio.Future[object], timeout_s: float | None
    ) -> object:
        """Enqueue `event` and wait for its reply, up to `timeout_s` (None: no bound). Raises
        the WireError it was failed with, or RequestTimedOut."""
        self.event_manager.put(event)
        try:
            # Not wait_for, which in Python 3.11 loses a cancellation landing with the reply.
            async with asyncio.timeout(timeout_s):
                return await reply
        except TimeoutError:
            raise RequestTimedOut(f"{type(event).__name__} not answered within {timeout_s:.1f} s") from None

    async def shutdown(self) -> None:
        if self.standby is not None:
            await self.standby.stop()
        await self.event_manager.close()
        if self.is_active:
            await self._on_controller_resignation()
        self.active_controller_id = -1

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id

    @property
    def state(self) -> ControllerState:
        return self.event_manager.state

    def _new_batch(self) -> RequestBatch:
        return RequestBatch(
            self.context,
            self.channel,
            self.broker_id,
            inter_broker_listener=self.config.inter_broker_listener,
            on_deletion_response=self._on_deletion_response,
            on_leader_and_isr_response=self._on_leader_and_isr_response,
        )

    def _on_leader_and_isr_response(self, broker_id: int, response: Response) -> None:
        """A LeaderAndIsr answer (in the channel's callback): only enqueue."""
        self.event_manager.put(LeaderAndIsrResponseReceived(broker_id, response))

    def _on_deletion_response(
        self, broker_id: int, broker_epoch: int, response: Response, partitions: tuple[TopicPartition, ...]
    ) -> None:
        """A StopReplica-with-delete answer (in the channel's callback): only enqueue."""
        errors = deletion_errors(response, partitions)
        self.event_manager.put(
            TopicDeletionStopReplicaResponseReceived(broker_id, broker_epoch, response.error_code, errors)
        )

    def _hold_deletion_of_reassigned_topics(self, topics: set[str]) -> None:
        self.topic_deletion.mark_topic_ineligible(topics, "a partition is being reassigned")

    def _rewatch_reassignments(self) -> None:
        self.event_manager.put(ZkPartitionReassignment())

    def _count_unclean_election(self, tp: TopicPartition) -> None:
        self.metrics.unclean_leader_elections += 1

    def _count_initialization_failures(self, partitions: int) -> None:
        self.metrics.partition_initialization_failures += partitions

    # --- SessionWatcher (spec §2.5) ---

    async def before_new_session(self) -> None:
        queued = self.event_manager.clear_and_put(Expire())
        await queued.await_processing()

    def after_new_session(self) -> None:
        self.event_manager.put(RegisterBrokerAndReelect())

    # --- event processing ---

    async def _process_event(self, event: Event) -> None:
        assert isinstance(event, ControllerEvent)
        name = type(event).__name__
        try:
            with self.metrics.timing(event.state):
                await self._dispatch(event)
        except ControllerMovedError as e:
            log.info("controller moved to another broker while processing %s: %s", name, e)
            # Fenced out mid-way: a waiting caller hears NOT_CONTROLLER, as Kafka's does.
            event.fail(NotController(f"the controller moved while processing {name}"))
            await self._follow_moved_controller()
        except SessionExpiredError as e:
            # The session watcher queues Expire and then RegisterBrokerAndReelect for the new
            # session, which resign and register again; this event is only given up.
            log.info("ZooKeeper session expired while processing %s: %s", name, e)
            event.fail(NotController(f"the ZooKeeper session expired while processing {name}"))
        except Exception as e:
            event.fail(UnknownServerError(f"{name} failed: {e!r}"))
            raise
        else:
            event.fail(UnknownServerError(f"{name} was processed without an answer"))
        finally:
            if self.acknowledged is not None and self.is_active:
                self.acknowledged.poke()

    # One arm per event, as Kafka's process(); the closed set has outgrown the statement limit.
    async def _dispatch(self, event: ControllerEvent) -> None:  # noqa: PLR0915
        match event:
            case Startup():
                await self._elect(await self._read_active_controller())
            case ControllerChange() | Reelect():
                await self._follow_controller()
            case Expire():
                await self._on_expire()
            case RegisterBrokerAndReelect():
                await self._on_register_broker_and_reelect()
            case ShutdownEventThread():
                pass
            case BrokerChange():
                if self.is_active:
                    await self.workflows.on_broker_change()
            case BrokerModifications(broker_id=broker_id):
                if self.is_active:
                    await self.workflows.on_broker_modifications(broker_id)
            case TopicChange():
                if self.is_active:
                    await self.workflows.on_topic_change()
            case PartitionModifications(topic=topic):
                if self.is_active:
                    await self.workflows.on_partition_modifications(topic)
            case RetryPartitionInitialization():
                if self.is_active:
                    await self.partition_state_machine.retry_initialization()
            case TopicDeletion():
                if self.is_active:
                    await self.topic_deletion.on_topic_deletion_event()
            case TopicDeletionStopReplicaResponseReceived(
                broker_id=broker_id, broker_epoch=broker_epoch, error_code=error_code, partition_errors=errors
            ):
                if not self.is_active:
                    return
                if broker_epoch != self.context.broker_epoch(broker_id):
                    # Asked of an incarnation the broker has since replaced (a bounce handled
                    # after the request was built): its refusal is not a failed deletion, and
                    # the new incarnation's start-up resumed the deletion with fresh requests.
                    log.info(
                        "ignoring a StopReplica answer from broker %d at broker epoch %d (now %d)",
                        broker_id,
                        broker_epoch,
                        self.context.broker_epoch(broker_id),
                    )
                    return
                await self.topic_deletion.on_stop_replica_response(broker_id, error_code, dict(errors))
            case AlterPartitionReceived(request=request, reply=reply):
                if not self.is_active:
                    answer = AlterPartitionResponse(
                        error_code=ErrorCode.NOT_CONTROLLER,
                        error_message=f"broker {self.broker_id} is not the controller",
                    )
                else:
                    answer = await alter_partition(self.context, self._store, self._new_batch, request)
                if not reply.done():
                    reply.set_result(answer)
                if self.is_active:
                    await self.reassignment.maybe_complete(_accepted(answer))
            case ReplicaLeaderElection():
                await self._on_replica_leader_election(event)
            case AutoPreferredReplicaLeaderElection():
                if self.is_active:
                    await self._on_auto_preferred_replica_leader_election()
            case ZkPartitionReassignment() | ApiPartitionReassignment() | ListPartitionReassignments():
                await self._on_reassignment_event(event)
            case ControlledShutdown(broker_id=broker_id, broker_epoch=broker_epoch, reply=reply):
                await self._on_controlled_shutdown(broker_id, broker_epoch, reply)
            case LogDirEventNotification():
                if self.is_active:
                    await self.log_dir_failures.on_log_dir_event_notification()
            case LeaderAndIsrResponseReceived(broker_id=broker_id, response=response):
                if self.is_active:
                    await self.log_dir_failures.on_leader_and_isr_response(broker_id, response)
            case MarkAcknowledged():
                if self.is_active and self.acknowledged is not None:
                    await self.acknowledged.mark()
            case _:
                assert_never(event)

    # --- preferred and unclean leader elections (spec §7.8) ---

    async def _on_replica_leader_election(self, event: ReplicaLeaderElection) -> None:
        reply = event.reply
        if not self.is_active:
            event.fail(NotController(f"broker {self.broker_id} is not the controller"))
        elif event.trigger == ElectionTrigger.ADMIN_CLIENT_TRIGGERED:
            outcomes = await self.leader_elections.on_admin(event.election_type, event.partitions)
            if reply is not None and not reply.done():
                reply.set_result(outcomes)
        else:
            await self.leader_elections.on_zk_trigger()

    async def _on_auto_preferred_replica_leader_election(self) -> None:
        try:
            await self.leader_elections.on_auto_rebalance(self.config.leader_imbalance_per_broker_percentage)
        finally:
            self.auto_rebalance.schedule(self.config.leader_imbalance_check_interval_s)

    async def _on_failover_elections(self) -> None:
        """Failover steps 10 and 11: pending preferred elections, then the rebalance task."""
        await self.leader_elections.on_zk_trigger()
        if self.config.auto_leader_rebalance_enable:
            self.auto_rebalance.schedule(FIRST_REBALANCE_DELAY_S)

    # --- partition reassignment (spec §7.7) ---

    async def _on_reassignment_event(
        self, event: ZkPartitionReassignment | ApiPartitionReassignment | ListPartitionReassignments
    ) -> None:
        not_active = f"broker {self.broker_id} is not the controller"
        answer: object
        match event:
            case ZkPartitionReassignment():
                if self.is_active:
                    await self.reassignment.on_zk_reassignment()
                return
            case ApiPartitionReassignment(reassignments=reassignments):
                if not self.is_active:
                    answer = not_controller_alter(not_active)
                else:
                    outcomes = await self.reassignment.on_api_reassignment(reassignments)
                    answer = alter_reassignments_response(outcomes)
            case ListPartitionReassignments(partitions=partitions):
                if not self.is_active:
                    answer = not_controller_list(not_active)
                else:
                    answer = list_reassignments_response(self.reassignment.list_reassignments(partitions))
        if not event.reply.done():
            event.reply.set_result(answer)

    async def _on_controlled_shutdown(
        self, broker_id: int, broker_epoch: int, reply: asyncio.Future[object]
    ) -> None:
        if not self.is_active:
            # Kafka's ControllerMovedException, which goes on the wire as STALE_CONTROLLER_EPOCH.
            answer = ControlledShutdownResponse(
                error_code=ErrorCode.STALE_CONTROLLER_EPOCH,
                error_message=f"broker {self.broker_id} is not the controller",
            )
        else:
            answer = await controlled_shutdown(
                self.context,
                self.partition_state_machine,
                self.replica_state_machine,
                broker_id,
                broker_epoch,
                clock=self._clock,
            )
        if not reply.done():
            reply.set_result(answer)

    async def _on_expire(self) -> None:
        # Resignation is idempotent, so it runs whether or not this broker was controller.
        was_active = self.is_active
        self.active_controller_id = -1
        await self._on_controller_resignation(log_line=was_active)

    async def _on_register_broker_and_reelect(self) -> None:
        self.broker_epoch = await self._store.register_broker(self._broker_info)
        log.info("broker %d registered again with broker epoch %d", self.broker_id, self.broker_epoch)
        await self._follow_controller()

    # --- election (spec §2.2) ---

    async def _read_active_controller(self) -> ControllerEpoch | None:
        """Re-arm the `/controller` watch and read who holds it, and the epoch, in one round trip."""
        view = await self._store.read_controller()
        holder = view.controller_id
        if holder == self.broker_id and view.epoch is not None and not self._reigns_at(view.epoch):
            await self._give_up_stale_registration(view.epoch)
            holder = None
        self.active_controller_id = -1 if holder is None else holder
        if view.epoch is not None and holder is not None:
            self.known_controller_epoch = view.epoch.epoch
        return view.epoch

    def _reigns_at(self, epoch: ControllerEpoch) -> bool:
        """Whether this broker took over as controller at `epoch` and has not resigned since."""
        return self.context.epoch == epoch.epoch and self.context.epoch_zk_version == epoch.zk_version

    async def _give_up_stale_registration(self, epoch: ControllerEpoch) -> None:
        """`/controller` names this broker, but not a reign it is in: it won an election on
        a new ZooKeeper session before it heard that its old session had expired, and the
        Expire that followed made it resign. While that znode stands no other broker runs
        for the role, and this one no longer acts in it: delete it, so an election follows.
        (Kafka cannot get here: its client opens the new session only once Expire has run.)"""
        log.info(
            "broker %d: /controller names it from before its session expired; giving it up", self.broker_id
        )
        # Fenced by the epoch read: if another broker has been elected since, its znode stands.
        with contextlib.suppress(ControllerMovedError):
            await self._store.delete_controller(epoch.zk_version)

    async def _follow_controller(self) -> None:
        """What every notification about `/controller` leads to, whatever it said (created,
        changed, deleted, a new session): re-read it, which re-arms the watch; resign if this
        broker no longer holds it; run for it if it is absent. The notification only says
        that something changed since the last read: by the time it is handled `/controller`
        may have been created and deleted again (an operator's `rmr /controller` right after
        an election), and this broker's own create used up its one-shot watch."""
        await self._elect(await self._maybe_resign())

    async def _follow_moved_controller(self) -> None:
        """After this broker was fenced out: follow `/controller` until that ends. The takeover
        it may run can itself be fenced out (`/controller` deleted and won by another broker
        meanwhile), which only means following it again."""
        while True:
            try:
                await self._follow_controller()
                return
            except ControllerMovedError as e:
                log.info("controller moved again while broker %d took over: %s", self.broker_id, e)

    async def _elect(self, seen_epoch: ControllerEpoch | None) -> None:
        """Run right after `_read_active_controller`, whose answer it takes rather than reading
        it again: the epoch write is fenced by the version seen, so a stale read only loses.

        It ends in one of two states: this broker is the controller, or its last read saw
        `/controller` held by another broker, and that read left a watch on an existing
        znode, which fires when it goes. A lost election reads again; if the winner's znode
        is already gone, this broker runs again rather than wait for a notification that
        may never come (every broker may have seen the winner's znode only as a creation,
        which fires a watch once, and then found it gone)."""
        while self.active_controller_id == -1:
            try:
                won = await self._store.register_controller_and_increment_epoch(self.broker_id, seen_epoch)
            except ControllerMovedError:
                log.debug("broker %d lost the election", self.broker_id)
                seen_epoch = await self._maybe_resign()
                continue
            await self._take_over(won)
            return
        if self.active_controller_id != self.broker_id:
            log.debug("broker %d sees broker %d as controller", self.broker_id, self.active_controller_id)

    async def _take_over(self, won: ControllerEpoch) -> None:
        self.context.epoch = won.epoch
        self.context.epoch_zk_version = won.zk_version
        self.active_controller_id = self.broker_id
        self.known_controller_epoch = won.epoch
        log.info("broker %d is controller at epoch %d", self.broker_id, won.epoch)
        try:
            await self.log_dir_failures.on_failover()
            await self.workflows.on_failover()
            await self._on_failover_elections()
        except ControllerMovedError:
            raise
        except Exception as e:
            log.error("broker %d failed to take over as controller: %r", self.broker_id, e, exc_info=e)
            await self._trigger_controller_move()

    async def _maybe_resign(self) -> ControllerEpoch | None:
        was_active = self.is_active
        epoch = await self._read_active_controller()
        if was_active and not self.is_active:
            await self._on_controller_resignation()
        return epoch

    async def _trigger_controller_move(self) -> None:
        """Give the role up after an unexpected error in a takeover, so that another broker
        can take it: resign what was taken over, then delete `/controller`, whose deletion
        every broker watching it hears (this one too) and runs for. If it is gone already,
        that deletion may have been heard by none (each watch used up by the creation before
        it), so this broker runs again itself, after what is queued."""
        epoch_zk_version = self.context.epoch_zk_version
        await self._read_active_controller()
        held = self.is_active
        if held:
            self.active_controller_id = -1
        await self._on_controller_resignation()
        if held:
            try:
                await self._store.delete_controller(epoch_zk_version)
            except ControllerMovedError:
                log.info("broker %d: /controller already belongs to another broker", self.broker_id)
        elif self.active_controller_id == -1:
            self.event_manager.put(Reelect())

    async def _forget_acknowledged(self) -> None:
        if self.acknowledged is not None:
            await self.acknowledged.clear()

    async def _on_controller_resignation(self, *, log_line: bool = True) -> None:
        if log_line:
            log.info("broker %d resigned as controller", self.broker_id)
        self.auto_rebalance.cancel()
        if self.acknowledged is not None:
            self.acknowledged.reset()
        self.initialization_retries.reset()
        await self.channel.close()
        self.context.reset()


def _accepted(answer: AlterPartitionResponse) -> list[TopicPartition]:
    """The partitions whose ISR change an AlterPartition answer accepted."""
    return [
        TopicPartition(topic.topic_name, result.partition_index)
        for topic in answer.topics
        for result in topic.partitions
        if result.error_code == ErrorCode.NONE
    ]


class _Watch:
    """ZooKeeper watch callbacks: they only enqueue (spec §2.2, §3.2)."""

    def __init__(self, event_manager: ControllerEventManager) -> None:
        self._event_manager = event_manager

    def controller_changed(self) -> None:
        self._event_manager.put(ControllerChange())

    def controller_deleted(self) -> None:
        self._event_manager.put(Reelect())

    def brokers_changed(self) -> None:
        self._event_manager.put(BrokerChange())

    def broker_modified(self, broker_id: int) -> None:
        self._event_manager.put(BrokerModifications(broker_id))

    def topics_changed(self) -> None:
        self._event_manager.put(TopicChange())

    def topic_modified(self, topic: str) -> None:
        self._event_manager.put(PartitionModifications(topic))

    def auto_rebalance_due(self) -> None:
        self._event_manager.put(AutoPreferredReplicaLeaderElection())

    def acknowledged_mark_due(self) -> None:
        self._event_manager.put(MarkAcknowledged())

    def partition_initialization_due(self) -> None:
        self._event_manager.put(RetryPartitionInitialization())

    def preferred_replica_election_created(self) -> None:
        self._event_manager.put(
            ReplicaLeaderElection(None, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED)
        )

    def topic_deletions_changed(self) -> None:
        self._event_manager.put(TopicDeletion())

    def partition_reassignment_created(self) -> None:
        self._event_manager.put(ZkPartitionReassignment())

    def log_dir_events_changed(self) -> None:
        self._event_manager.put(LogDirEventNotification())
