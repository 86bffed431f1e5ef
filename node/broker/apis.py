"""KafkaApis: turns each parsed request into a response, by API key, once the authorizer
(when `authorizer.class.name` is set) has allowed the caller what the API does."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from actors.base.clock import Clock, SystemClock
from actors.base.retry import Retry, retrying
from actors.base.state_change_log import StateChangeLogger
from actors.security import api_authorization as authz
from actors.security.acl import AclOperation, ResourceType
from actors.security.api_authorization import CLUSTER_OPERATIONS, Check
from node.broker.leader_election import elect_leaders
from node.broker.log_dirs import describe_log_dirs
from node.zk.client import connection_lost
from wire.api import (
    API_SPECS,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    ApiKey,
    ApiVersionRange,
    ApiVersionsResponse,
    ControlledShutdownRequest,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterResponse,
    DescribeControllerResponse,
    DescribedBroker,
    ElectLeadersRequest,
    Endpoint,
    FetchRequest,
    FetchResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    MetadataResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    ProduceRequest,
    ProduceResponse,
    ReelectControllerResponse,
    Response,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from wire.api.describe_configs import DescribeConfigsRequest
from wire.api.describe_log_dirs import DescribeLogDirsRequest
from wire.api.incremental_alter_configs import IncrementalAlterConfigsRequest
from wire.api.planner import DescribePlannerResponse
from wire.context import ANONYMOUS, RequestContext
from wire.envelope import ParsedRequest
from wire.errors import (
    BrokerNotAvailable,
    ClusterAuthorizationFailed,
    ErrorCode,
    InvalidRequest,
    NotController,
)
from wire.refusals import RefusalLog
from wire.retry import Backoff

if TYPE_CHECKING:
    from actors.base.ports import RegisteredBroker
    from actors.controller import KafkaController
    from actors.replica.handle import ReplicaManagerHandle
    from actors.security.authorizer import AclAuthorizer
    from node.broker.acl_apis import AclApis
    from node.broker.admin_manager import AdminManager
    from node.broker.config_admin import ConfigAdmin
    from node.broker.group_apis import GroupApis
    from node.broker.log.manager import LogManager
    from node.zk.planner_registry import ZkPlannerRegistry
    from node.zk.store import ZkClusterStore

log = logging.getLogger(__name__)
_refusals = RefusalLog(log)
# How long DescribeCluster reuses its read of the brokers' registrations.
REGISTERED_BROKERS_TTL_S = 1.0

# The pauses between reads of topic configs that ZooKeeper left unanswered.
TOPIC_CONFIGS_BACKOFF_S = 0.1
TOPIC_CONFIGS_BACKOFF_MAX_S = 1.0

R = TypeVar("R", bound=Response)

# The controller's requests to a broker, which carry the broker epoch they are meant for.
CONTROLLER_REQUESTS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA})
# The APIs the broker's controller module answers, which it only has once registered: before
# then the broker is no controller, and says so (the sender looks for the controller again).
CONTROLLER_MODULE_REQUESTS = frozenset(
    {
        ApiKey.ALTER_PARTITION,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.ELECT_LEADERS,
    }
)


def _allow_everything(operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    return True


def _log_refusal(request: ParsedRequest, what: str) -> None:
    """One line per refusal, at most a few per API and interval (RefusalLog): a client
    repeating a refused request over and over does not fill the log."""
    context = request.context
    _refusals.report(
        request.spec.key.name,
        "refused %s from %s at %s: %s",
        request.spec.key.name,
        context.principal,
        context.client_host,
        what,
    )


def _with_refused(request: ParsedRequest, response: R, field: str, refused: Sequence[object]) -> R:
    """The response with the refused entries added to its list `field` (and one log line)."""
    if not refused:
        return response
    _log_refusal(request, f"{len(refused)} entries answered with an authorization failure")
    merged: dict[str, Any] = {field: [*getattr(response, field), *refused]}
    return dataclasses.replace(response, **merged)


class ProducerIdSource(Protocol):
    async def generate(self) -> int: ...


class BrokerApis:
    """KafkaApis: each request goes to the part of the broker that owns it.

    The collaborators come in one by one; the controller module starts after the listeners
    open, so it, the cluster id and the broker epoch are read when a request needs them.
    `authorizer` None (no `authorizer.class.name`) allows everything, as Kafka without one;
    `own_principal` is the broker's identity on the requests it hands itself in process.
    """

    def __init__(
        self,
        *,
        broker_id: int,
        store: ZkClusterStore,
        replica_manager: ReplicaManagerHandle,
        admin: AdminManager,
        controller: Callable[[], KafkaController],
        broker_epoch: Callable[[], int],
        cluster_id: Callable[[], str],
        config_admin: ConfigAdmin | None = None,
        planners: ZkPlannerRegistry | None = None,
        logs: LogManager | None = None,
        authorizer: AclAuthorizer | None = None,
        own_principal: str = ANONYMOUS,
        clock: Clock | None = None,
        auto_create_topics: bool = False,
        producer_ids: ProducerIdSource | None = None,
        groups: GroupApis | None = None,
        acls: AclApis | None = None,
    ) -> None:
        self._groups = groups
        self._acls = acls
        self._authorizer = authorizer
        self._auto_create_topics = auto_create_topics
        self._producer_ids = producer_ids
        # Only handle_in_process hands this object on: nothing from the network carries it.
        self.own_context = RequestContext(principal=own_principal, client_host="in-process")
        self._broker_id = broker_id
        self._state_change_log = StateChangeLogger.for_broker(broker_id)
        self._store = store
        self._planners = planners
        self._replica_manager = replica_manager
        self._admin = admin
        self._controller = controller
        self._broker_epoch = broker_epoch
        self._cluster_id = cluster_id
        self._known_topic_configs: dict[str, dict[str, str]] = {}
        self._config_admin = config_admin
        self._logs = logs
        self._clock = clock or SystemClock()
        self._registered = asyncio.Event()
        # DescribeCluster's read of the registrations, shared (`_registered_brokers`).
        self._registered_read: asyncio.Future[list[RegisteredBroker]] | None = None
        self._registered_read_at = 0.0

    def registered(self) -> None:
        """The broker is registered and knows its broker epoch: its controller requests are
        handled from now on.

        Kafka handles no request before the broker is registered. Keel opens its listeners
        first (the registration names their ports) and answers clients meanwhile, but holds the
        controller's requests until then: a restarted broker's registration may wait for the
        session of its previous incarnation to expire, and in that time the controller, which
        has not seen it go, delivers the requests it queued for that incarnation. Only the
        broker epoch they carry tells them stale (spec §2.6), and it needs the broker's own."""
        self._registered.set()

    async def handle(self, request: ParsedRequest) -> Response:
        """A request from the network: the caller's principal and address must be allowed
        what the API does (actors/security/api_authorization.py) before anything is read or changed."""
        return await self._handle(request, self._check(request.context))

    async def handle_in_process(self, request: ParsedRequest) -> Response:
        """A request of this broker's own controller module, handed over without the network
        (node/broker/channel_manager.py): it carries the broker's own identity, which only
        this path can give, so it passes whatever the ACLs say."""
        return await self.handle(dataclasses.replace(request, context=self.own_context))

    def _check(self, context: RequestContext) -> Check:
        authorizer = self._authorizer
        if authorizer is None or context is self.own_context:
            return _allow_everything

        def check(operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
            return authorizer.authorize(context, operation, resource_type, name)

        return check

    async def _handle(self, request: ParsedRequest, check: Check) -> Response:
        try:
            return await self._dispatch(request, check)
        except ClusterAuthorizationFailed as e:
            _log_refusal(request, e.message)
            raise

    def _log_handling(
        self,
        kind: str,
        request: ParsedRequest,
        body: LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest,
        partitions: int,
    ) -> None:
        """A controller request's line in the state-change log, in Kafka's words."""
        self._state_change_log.info(
            f"Handling {kind} request correlationId {request.header.correlation_id} from controller "
            f"{body.controller_id} epoch {body.controller_epoch} for {partitions} partitions"
        )

    async def _dispatch(self, request: ParsedRequest, check: Check) -> Response:
        key = request.spec.key
        needed = CLUSTER_OPERATIONS.get(key)
        if needed is not None:
            authz.require_cluster(check, needed, key.name)
        elif (named := authz.named_topics(request.body)) > authz.MAX_TOPICS_PER_REQUEST and not (
            # A follower's Fetch and OffsetsForLeaderEpoch name what it follows, which can be
            # more: a replica with ClusterAction is not held to the cap.
            getattr(request.body, "replica_id", -1) >= 0
            and authz.cluster_allowed(check, AclOperation.CLUSTER_ACTION)
        ):
            refusal = f"it names {named} topics, more than {authz.MAX_TOPICS_PER_REQUEST}"
            _log_refusal(request, refusal)
            raise InvalidRequest(refusal)
        if key in CONTROLLER_REQUESTS:
            await self._registered.wait()
        elif key in CONTROLLER_MODULE_REQUESTS and not self._registered.is_set():
            raise NotController(f"broker {self._broker_id} is starting and is not the controller")
        match key:
            case ApiKey.API_VERSIONS:
                return self._api_versions()
            case ApiKey.DESCRIBE_CLUSTER:
                return await self._describe_cluster(request.context.listener_name)
            case ApiKey.REELECT_CONTROLLER:
                return await self._reelect_controller()
            case ApiKey.LEADER_AND_ISR:
                assert isinstance(request.body, LeaderAndIsrRequest)
                return await self._leader_and_isr(request, request.body)
            case ApiKey.ALTER_PARTITION:
                assert isinstance(request.body, AlterPartitionRequest)
                return await self._controller().alter_partition(request.body)
            case ApiKey.ALTER_PARTITION_REASSIGNMENTS:
                # Answered by the active controller only; any other broker's controller
                # module answers NOT_CONTROLLER and the client goes to the controller.
                assert isinstance(request.body, AlterPartitionReassignmentsRequest)
                return await self._controller().alter_partition_reassignments(request.body)
            case ApiKey.LIST_PARTITION_REASSIGNMENTS:
                assert isinstance(request.body, ListPartitionReassignmentsRequest)
                return await self._controller().list_partition_reassignments(request.body)
            case ApiKey.CONTROLLED_SHUTDOWN:
                # Any broker hands it to its controller module; only the active one acts.
                assert isinstance(request.body, ControlledShutdownRequest)
                return await self._controller().controlled_shutdown(request.body)
            case ApiKey.STOP_REPLICA:
                assert isinstance(request.body, StopReplicaRequest)
                return await self._stop_replica(request, request.body)
            case ApiKey.UPDATE_METADATA:
                return await self._update_metadata(request)
            case ApiKey.DESCRIBE_CONTROLLER:
                if not self._registered.is_set():
                    return DescribeControllerResponse(broker_id=self._broker_id, controller_id=-1)
                controller = self._controller()
                return DescribeControllerResponse(
                    broker_id=self._broker_id,
                    controller_id=controller.active_controller_id,
                    controller_epoch=controller.known_controller_epoch,
                    metrics=controller.metrics.snapshot(),
                )
            case ApiKey.ELECT_LEADERS:
                assert isinstance(request.body, ElectLeadersRequest)
                refused = authz.elect_leaders(check, request.body)
                if refused is not None:
                    _log_refusal(request, refused.error_message or "")
                    return refused
                return await elect_leaders(self._controller(), self._replica_manager, request.body)
            case ApiKey.DESCRIBE_LOG_DIRS if self._logs is not None:
                assert isinstance(request.body, DescribeLogDirsRequest)
                topics = None if request.body.topics is None else {t.topic for t in request.body.topics}
                remaining = await self._replica_manager.bytes_to_copy(topics)
                return describe_log_dirs(self._logs, request.body, remaining)
        answer = await self._per_topic(request, check)
        if answer is None and self._acls is not None:
            answer = await self._acls.handle(request.body)
        if answer is None and self._groups is not None:
            client_id = request.header.client_id or ""
            answer = await self._groups.handle(request.body, request.context, client_id, check)
        return answer if answer is not None else await self._keel_own(request)

    async def _leader_and_isr(self, request: ParsedRequest, body: LeaderAndIsrRequest) -> Response:
        self._log_handling("LeaderAndIsr", request, body, len(body.partition_states))
        # The configs first: they may wait for ZooKeeper, and the request is then held to
        # the broker epoch of that moment (a session renewed meanwhile fences it).
        configs = await self._topic_configs(body)
        applied = await self._replica_manager.leader_and_isr(body, self._broker_epoch(), configs)
        if self._groups is not None:
            self._groups.leadership_changed(body, applied)
        return applied

    async def _stop_replica(self, request: ParsedRequest, body: StopReplicaRequest) -> Response:
        self._log_handling("StopReplica", request, body, len(body.partitions))
        stopped = await self._replica_manager.stop_replica(body, self._broker_epoch())
        self._forget_deleted_topic_configs(body, stopped)
        if self._groups is not None and not stopped.error_code:
            self._groups.replicas_stopped(body)
        return stopped

    async def _per_topic(self, request: ParsedRequest, check: Check) -> Response | None:
        """The APIs checked topic by topic: the allowed part is served, the rest is answered
        with an authorization failure beside it; None for an API that is not one of them."""
        rm, admin, configs = self._replica_manager, self._admin, self._config_admin
        match request.body:
            case ProduceRequest():
                produce, refused = authz.produce(check, request.body)
                answer: Response = await rm.produce(produce) if produce.topic_data else ProduceResponse()
                return _with_refused(request, answer, "responses", refused)
            case FetchRequest():
                fetch, refused_fetch = authz.fetch(check, request.body)
                owner = (request.context.principal, request.context.connection_id)
                answer = (
                    await rm.fetch(fetch, owner) if fetch.topics or not refused_fetch else FetchResponse()
                )
                return _with_refused(request, answer, "responses", refused_fetch)
            case ListOffsetsRequest():
                offsets, refused_offsets = authz.list_offsets(check, request.body)
                answer = await rm.list_offsets(offsets) if offsets.topics else ListOffsetsResponse()
                return _with_refused(request, answer, "topics", refused_offsets)
            case OffsetsForLeaderEpochRequest():
                epochs, refused_epochs = authz.offsets_for_leader_epoch(check, request.body)
                answer = (
                    await rm.offsets_for_leader_epoch(epochs)
                    if epochs.topics or not refused_epochs
                    else OffsetsForLeaderEpochResponse()
                )
                return _with_refused(request, answer, "topics", refused_epochs)
            case DeleteRecordsRequest():
                deleting, refused_delete_records = authz.delete_records(check, request.body)
                answer = await rm.delete_records(deleting) if deleting.topics else DeleteRecordsResponse()
                return _with_refused(request, answer, "topics", refused_delete_records)
            case InitProducerIdRequest():
                return await self._init_producer_id(request.body)
            case CreateTopicsRequest():
                create, refused_create = authz.create_topics(check, request.body)
                answer = await admin.create_topics(create) if create.topics else CreateTopicsResponse()
                return _with_refused(request, answer, "topics", refused_create)
            case DeleteTopicsRequest():
                delete, refused_delete = authz.delete_topics(check, request.body)
                answer = await admin.delete_topics(delete) if delete.topic_names else DeleteTopicsResponse()
                return _with_refused(request, answer, "responses", refused_delete)
            case CreatePartitionsRequest():
                grow, refused_grow = authz.create_partitions(check, request.body)
                answer = await admin.create_partitions(grow) if grow.topics else CreatePartitionsResponse()
                return _with_refused(request, answer, "results", refused_grow)
            case IncrementalAlterConfigsRequest() if configs is not None:
                alter, refused_alter = authz.incremental_alter_configs(check, request.body)
                answer = await configs.incremental_alter_configs(alter)
                return _with_refused(request, answer, "responses", refused_alter)
            case DescribeConfigsRequest() if configs is not None:
                describe, refused_describe = authz.describe_configs(check, request.body)
                answer = await configs.describe_configs(describe)
                return _with_refused(request, answer, "results", refused_describe)
            case MetadataRequest():
                return await self._metadata(request, request.body, check)
        return None

    async def _metadata(self, request: ParsedRequest, body: MetadataRequest, check: Check) -> Response:
        """Topics the caller may not describe are left out of a listing of every topic, and
        answered TOPIC_AUTHORIZATION_FAILED when named, whether they exist or not (Kafka).
        Brokers are named by their endpoints on the listener the request came in on."""
        if body.topics is None:
            every = await self._replica_manager.metadata(body, request.context.listener_name)
            return dataclasses.replace(
                authz.metadata_of_every_topic(check, every), cluster_id=self._cluster_id()
            )
        names, refused = authz.metadata_topics(check, body.topics)
        answer = await self._replica_manager.metadata(
            dataclasses.replace(body, topics=names), request.context.listener_name
        )
        if body.allow_auto_topic_creation and self._auto_create_topics:
            answer = await self._auto_create(answer, check)
        answer = dataclasses.replace(answer, cluster_id=self._cluster_id())
        return _with_refused(request, answer, "topics", refused)

    async def _init_producer_id(self, body: InitProducerIdRequest) -> InitProducerIdResponse:
        """A new producer id at epoch 0 for an idempotent producer; transactions are not
        served, so a transactional id is refused (Kafka's clients then fail with that error)."""
        if body.transactional_id is not None:
            return InitProducerIdResponse(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"transactions are not supported (transactional id {body.transactional_id!r})",
            )
        if self._producer_ids is None:
            raise InvalidRequest("this broker hands out no producer ids")
        return InitProducerIdResponse(producer_id=await self._producer_ids.generate(), producer_epoch=0)

    async def _auto_create(self, answer: MetadataResponse, check: Check) -> MetadataResponse:
        """Kafka's auto.create.topics.enable: the topics named that do not exist are created
        with the broker's defaults by a caller who may create them (else they stay unknown),
        and answered LEADER_NOT_AVAILABLE until their leaders are known, as Kafka answers."""
        missing = [t.name for t in answer.topics if t.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        if not missing:
            return answer
        create, _ = authz.create_topics(
            check, CreateTopicsRequest(topics=[CreatableTopic(name=n) for n in missing])
        )
        if not create.topics:
            return answer
        created = await self._admin.create_topics(create)
        outcome = {r.name: r.error_code for r in created.topics}
        for name in (n for n, code in outcome.items() if code == ErrorCode.NONE):
            log.info("auto-created topic %s (auto.create.topics.enable)", name)
        being_created = (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
        topics = [
            t
            if t.name not in outcome
            else dataclasses.replace(
                t,
                error_code=ErrorCode.LEADER_NOT_AVAILABLE
                if outcome[t.name] in being_created
                else outcome[t.name],
            )
            for t in answer.topics
        ]
        return dataclasses.replace(answer, topics=topics)

    async def _keel_own(self, request: ParsedRequest) -> Response:
        """Keel's own APIs that brokers answer beside the planner's: DescribePlanner, where the
        active planner listens, as `/keel/planner` says."""
        if request.spec.key != ApiKey.DESCRIBE_PLANNER:
            raise InvalidRequest(f"{request.spec.key.name} is not served by brokers")
        registration = None if self._planners is None else await self._planners.planner()
        if registration is None:
            raise BrokerNotAvailable("no planner is running (/keel/planner does not exist)")
        return DescribePlannerResponse(
            host=registration.host, port=registration.port, spark_master=registration.spark_master
        )

    def _forget_deleted_topic_configs(self, request: StopReplicaRequest, response: Response) -> None:
        """A topic whose partitions are deleted may come back with other configs: read them
        again then."""
        if not response.error_code:
            for topic in {p.topic for p in request.partitions if p.delete_partition}:
                self._known_topic_configs.pop(topic, None)

    async def _topic_configs(self, request: LeaderAndIsrRequest) -> dict[str, dict[str, str]]:
        """The configs of topics this broker has not seen yet, for the logs it may create.

        Read until ZooKeeper answers, as Kafka's broker reads them (KafkaZkClient retries a
        request until connected). The controller never sends again a LeaderAndIsr that was
        answered with an error: failed here because ZooKeeper was out of reach, the first one
        after a restart left the broker following none of the partitions it named, and out of
        their ISRs until the controller next sent it their state (for an idle topic, never)."""
        known = self._known_topic_configs
        new = {s.topic for s in request.partition_states} - known.keys()
        if new:

            def failed(error: Exception, failures: int) -> None:
                log.warning(
                    "reading the configs of %d topic(s) for a LeaderAndIsr failed (%r); retrying",
                    len(new),
                    error,
                )

            known.update(
                await retrying(
                    lambda: self._store.topic_configs(new),
                    Retry(self._clock, Backoff(TOPIC_CONFIGS_BACKOFF_S, TOPIC_CONFIGS_BACKOFF_MAX_S)),
                    retriable=connection_lost,
                    on_failure=failed,
                )
            )
            for topic in new:
                known.setdefault(topic, {})
        return {t: known[t] for t in new}

    async def _update_metadata(self, request: ParsedRequest) -> Response:
        assert isinstance(request.body, UpdateMetadataRequest)
        self._log_handling("UpdateMetadata", request, request.body, len(request.body.partition_states))
        # The controller sends UpdateMetadata when a broker comes or goes: the next
        # DescribeCluster reads the registrations afresh rather than within the second.
        self._registered_read = None
        return await self._replica_manager.update_metadata(request.body, self._broker_epoch())

    def _api_versions(self) -> ApiVersionsResponse:
        return ApiVersionsResponse(
            api_keys=[
                ApiVersionRange(api_key=int(s.key), min_version=s.min_version, max_version=s.max_version)
                for s in API_SPECS.values()
            ]
        )

    async def _registered_brokers(self) -> list[RegisteredBroker]:
        """The registered brokers as ZooKeeper lists them, read at most once a second (or once
        per UpdateMetadata) and once at a time however many DescribeClusters come: a client
        asking in a loop would otherwise cost ZooKeeper, which every broker shares, a read of
        every registration each time."""
        now = self._clock.monotonic()
        if self._registered_read is not None and (
            not self._registered_read.done() or now - self._registered_read_at < REGISTERED_BROKERS_TTL_S
        ):
            return await asyncio.shield(self._registered_read)
        self._registered_read_at = now
        self._registered_read = asyncio.ensure_future(self._store.registered_brokers())
        try:
            return await asyncio.shield(self._registered_read)
        except Exception:
            self._registered_read = None  # the next call reads again
            raise

    async def _describe_cluster(self, listener: str) -> DescribeClusterResponse:
        """Each broker's host and port are those of `listener`, the one the request came in
        on (else its first), so that a client can dial them as it dialled this one."""
        registered = await self._registered_brokers()
        described = []
        for b in registered:
            endpoints = [
                Endpoint(listener=e.listener, security_protocol=e.security_protocol, host=e.host, port=e.port)
                for e in b.info.endpoints
            ]
            first = next(
                (e for e in endpoints if e.listener == listener),
                endpoints[0] if endpoints else Endpoint(listener="", security_protocol="", host="", port=-1),
            )
            described.append(
                DescribedBroker(
                    broker_id=b.info.broker_id,
                    host=first.host,
                    port=first.port,
                    rack=b.info.rack,
                    endpoints=endpoints,
                )
            )
        # A broker still starting knows no controller yet.
        controller = self._controller() if self._registered.is_set() else None
        controller_id = -1 if controller is None else controller.active_controller_id
        epoch = 0 if controller is None or controller_id == -1 else controller.known_controller_epoch
        return DescribeClusterResponse(
            cluster_id=self._cluster_id(),
            controller_id=controller_id,
            controller_epoch=epoch,
            brokers=described,
        )

    async def _reelect_controller(self) -> ReelectControllerResponse:
        previous = await self._store.force_delete_controller()
        return ReelectControllerResponse(previous_controller_id=-1 if previous is None else previous)
