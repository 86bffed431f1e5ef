"""KafkaApis: turns each parsed request into a response, by API key."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from node.broker.leader_election import elect_leaders
from node.broker.log_dirs import describe_log_dirs
from wire.api import (
    API_SPECS,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    ApiKey,
    ApiVersionRange,
    ApiVersionsResponse,
    ControlledShutdownRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterResponse,
    DescribeControllerResponse,
    DescribedBroker,
    ElectLeadersRequest,
    Endpoint,
    FetchRequest,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    OffsetsForLeaderEpochRequest,
    ProduceRequest,
    ReelectControllerResponse,
    Response,
    StopReplicaRequest,
    UpdateMetadataRequest,
)
from wire.api.describe_configs import DescribeConfigsRequest
from wire.api.describe_log_dirs import DescribeLogDirsRequest
from wire.api.incremental_alter_configs import IncrementalAlterConfigsRequest
from wire.api.planner import DescribePlannerResponse
from wire.envelope import ParsedRequest
from wire.errors import BrokerNotAvailable, InvalidRequest

if TYPE_CHECKING:
    from actors.broker.handle import ReplicaManagerHandle
    from actors.controller import KafkaController
    from node.broker.admin_manager import AdminManager
    from node.broker.config_admin import ConfigAdmin
    from node.broker.log.manager import LogManager
    from node.zk.store import ZkClusterStore


class BrokerApis:
    """KafkaApis: each request goes to the part of the broker that owns it.

    The collaborators come in one by one; the controller module starts after the listeners
    open, so it, the cluster id and the broker epoch are read when a request needs them.
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
        logs: LogManager | None = None,
    ) -> None:
        self._broker_id = broker_id
        self._store = store
        self._replica_manager = replica_manager
        self._admin = admin
        self._controller = controller
        self._broker_epoch = broker_epoch
        self._cluster_id = cluster_id
        self._known_topic_configs: dict[str, dict[str, str]] = {}
        self._config_admin = config_admin
        self._logs = logs

    async def handle(self, request: ParsedRequest) -> Response:
        match request.spec.key:
            case ApiKey.API_VERSIONS:
                return self._api_versions()
            case ApiKey.DESCRIBE_CLUSTER:
                return await self._describe_cluster(request.context.listener_name)
            case ApiKey.REELECT_CONTROLLER:
                return await self._reelect_controller()
            case ApiKey.LEADER_AND_ISR:
                assert isinstance(request.body, LeaderAndIsrRequest)
                return await self._replica_manager.leader_and_isr(
                    request.body, self._broker_epoch(), await self._topic_configs(request.body)
                )
            case ApiKey.PRODUCE:
                assert isinstance(request.body, ProduceRequest)
                return await self._replica_manager.produce(request.body)
            case ApiKey.FETCH:
                assert isinstance(request.body, FetchRequest)
                return await self._replica_manager.fetch(request.body)
            case ApiKey.LIST_OFFSETS:
                assert isinstance(request.body, ListOffsetsRequest)
                return await self._replica_manager.list_offsets(request.body)
            case ApiKey.OFFSET_FOR_LEADER_EPOCH:
                assert isinstance(request.body, OffsetsForLeaderEpochRequest)
                return await self._replica_manager.offsets_for_leader_epoch(request.body)
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
                stopped = await self._replica_manager.stop_replica(request.body, self._broker_epoch())
                self._forget_deleted_topic_configs(request.body, stopped)
                return stopped
            case ApiKey.UPDATE_METADATA:
                assert isinstance(request.body, UpdateMetadataRequest)
                return await self._replica_manager.update_metadata(request.body, self._broker_epoch())
            case ApiKey.DESCRIBE_CONTROLLER:
                controller = self._controller()
                return DescribeControllerResponse(
                    broker_id=self._broker_id,
                    controller_id=controller.active_controller_id,
                    controller_epoch=controller.known_controller_epoch,
                    metrics=controller.metrics.snapshot(),
                )
            case ApiKey.CREATE_TOPICS:
                assert isinstance(request.body, CreateTopicsRequest)
                return await self._admin.create_topics(request.body)
            case ApiKey.ELECT_LEADERS:
                assert isinstance(request.body, ElectLeadersRequest)
                return await elect_leaders(self._controller(), self._replica_manager, request.body)
            case ApiKey.DELETE_TOPICS:
                assert isinstance(request.body, DeleteTopicsRequest)
                return await self._admin.delete_topics(request.body)
            case ApiKey.CREATE_PARTITIONS:
                assert isinstance(request.body, CreatePartitionsRequest)
                return await self._admin.create_partitions(request.body)
            case ApiKey.INCREMENTAL_ALTER_CONFIGS if self._config_admin is not None:
                assert isinstance(request.body, IncrementalAlterConfigsRequest)
                return await self._config_admin.incremental_alter_configs(request.body)
            case ApiKey.DESCRIBE_CONFIGS if self._config_admin is not None:
                assert isinstance(request.body, DescribeConfigsRequest)
                return await self._config_admin.describe_configs(request.body)
            case ApiKey.DESCRIBE_LOG_DIRS if self._logs is not None:
                assert isinstance(request.body, DescribeLogDirsRequest)
                topics = None if request.body.topics is None else {t.topic for t in request.body.topics}
                remaining = await self._replica_manager.bytes_to_copy(topics)
                return describe_log_dirs(self._logs, request.body, remaining)
            case ApiKey.METADATA:
                assert isinstance(request.body, MetadataRequest)
                # Brokers named by their endpoints on the listener the request came in on.
                answer = await self._replica_manager.metadata(request.body, request.context.listener_name)
                return dataclasses.replace(answer, cluster_id=self._cluster_id())
        return await self._keel_own(request)

    async def _keel_own(self, request: ParsedRequest) -> Response:
        """Keel's own APIs that brokers answer beside the planner's: DescribePlanner, where the
        active planner listens, as `/keel/planner` says."""
        if request.spec.key != ApiKey.DESCRIBE_PLANNER:
            raise InvalidRequest(f"{request.spec.key.name} is not served by brokers")
        registration = await self._store.planner()
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
        """The configs of topics this broker has not seen yet, for the logs it may create."""
        known = self._known_topic_configs
        new = {s.topic for s in request.partition_states} - known.keys()
        if new:
            known.update(await self._store.topic_configs(new))
            for topic in new:
                known.setdefault(topic, {})
        return {t: known[t] for t in new}

    def _api_versions(self) -> ApiVersionsResponse:
        return ApiVersionsResponse(
            api_keys=[
                ApiVersionRange(api_key=int(s.key), min_version=s.min_version, max_version=s.max_version)
                for s in API_SPECS.values()
            ]
        )

    async def _describe_cluster(self, listener: str) -> DescribeClusterResponse:
        """Each broker's host and port are those of `listener`, the one the request came in
        on (else its first), so that a client can dial them as it dialled this one."""
        registered = await self._store.registered_brokers()
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
        controller = self._controller()
        controller_id = controller.active_controller_id
        return DescribeClusterResponse(
            cluster_id=self._cluster_id(),
            controller_id=controller_id,
            controller_epoch=controller.known_controller_epoch if controller_id != -1 else 0,
            brokers=described,
        )

    async def _reelect_controller(self) -> ReelectControllerResponse:
        previous = await self._store.force_delete_controller()
        return ReelectControllerResponse(previous_controller_id=-1 if previous is None else previous)
