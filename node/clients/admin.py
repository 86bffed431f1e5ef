"""KeelAdminClient: the Python client library behind `bin/keel`, for any program to import.

async with KeelAdminClient("127.0.0.1:9092") as admin:
    cluster = await admin.describe_cluster()
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from actors.base.retry import Retry, retrying
from node.clients.closing import AsyncClosing
from wire.api import (
    AlterConfigsResource,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribableLogDirTopic,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResource,
    DescribeConfigsResponse,
    DescribeControllerRequest,
    DescribeControllerResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ElectLeadersTopicPartitions,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListPartitionReassignmentsTopics,
    MetadataRequest,
    MetadataResponse,
    ReassignablePartition,
    ReassignableTopic,
    ReelectControllerRequest,
    ReelectControllerResponse,
    Request,
    Response,
)
from wire.api.planner import DescribePlannerRequest, DescribePlannerResponse
from wire.endpoint import Endpoint, parse_bootstrap
from wire.errors import (
    BrokerUnreachable,
    ErrorCode,
    NetworkException,
    NotController,
    WireError,
    all_failed,
    for_code,
)
from wire.pool import ConnectionPool
from wire.retry import Backoff
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

R = TypeVar("R", bound=Response)
T = TypeVar("T")


class KeelAdminClient(AsyncClosing):
    """Admin requests go to the first bootstrap broker that answers, over a pooled connection."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout: float = 10.0,
        client_id: str = "keel-admin",
        security: ClientSecurity = PLAINTEXT_CLIENT,
        fail_unreachable: bool = False,
    ) -> None:
        """`fail_unreachable`: a request fails at once with BrokerUnreachable while no broker
        has ever accepted a connection, rather than retrying for the whole timeout (a command
        pointed at no cluster says so at once; a client of a cluster that restarts retries)."""
        self.security = security
        self._fail_unreachable = fail_unreachable
        self._reached = False
        self._servers = parse_bootstrap(bootstrap, security.security_protocol)
        self._timeout = timeout
        self._pool = ConnectionPool(
            client_id=client_id, request_timeout=timeout, connect_timeout=timeout, security=security
        )

    @property
    def timeout(self) -> float:
        """Seconds each request may take (and its retries, together)."""
        return self._timeout

    async def close(self) -> None:
        await self._pool.close()

    async def _any_broker(self) -> Endpoint:
        """The first bootstrap broker that accepts a connection."""
        errors: list[NetworkException] = []
        for server in self._servers:
            try:
                await self._pool.get(server)
                self._reached = True
                return server
            except NetworkException as e:
                errors.append(e)
        raise all_failed(errors, "no broker answered: ")

    async def _controller(self) -> Endpoint:
        """The broker a bootstrap broker names as the active controller."""
        cluster = await self._send(
            await self._any_broker(), DescribeClusterRequest(), DescribeClusterResponse
        )
        named = (b for b in cluster.brokers if b.broker_id == cluster.controller_id)
        endpoint = next((self.security.endpoint(b.host, b.port) for b in named), None)
        if endpoint is None:
            raise NotController("no active controller is known")
        return endpoint

    async def _send(
        self, endpoint: Endpoint, request: Request, response_type: type[R], wait_s: float = 0.0
    ) -> R:
        """One request over the pool (which drops a connection that failed); a top-level
        error code is raised. `wait_s` is added to the client's timeout for requests the
        broker answers late on purpose (they wait for the change to take effect)."""
        response = await self._pool.send(endpoint, request, timeout=self._timeout + wait_s)
        if response.error_code:
            raise for_code(response.error_code, response.error_message or "")
        assert isinstance(response, response_type)
        return response

    async def _call(
        self,
        request: Request,
        response_type: type[R],
        *,
        to_controller: bool = False,
        wait_s: float = 0.0,
        moved: Callable[[R], bool] = lambda _: False,
    ) -> R:
        """Send `request` to any bootstrap broker, or to the active controller. A retriable
        error (a lost connection, no controller yet, NOT_CONTROLLER, or an answer `moved`
        says came from a former controller) is retried, the target looked up again, with
        backoff until the client's timeout runs out, as Kafka's admin client does."""

        async def attempt() -> R:
            target = await (self._controller() if to_controller else self._any_broker())
            answer = await self._send(target, request, response_type, wait_s)
            if moved(answer):
                raise NotController(f"a former controller answered {type(request).__name__}")
            return answer

        return await self._retrying(attempt)

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """`attempt` again after a retriable error, with backoff, until the client's timeout."""
        return await retrying(
            attempt,
            Retry(backoff=Backoff(0.1, 1.0), timeout_s=self._timeout),
            retriable=self._retriable,
        )

    def _retriable(self, error: Exception) -> bool:
        if self._fail_unreachable and not self._reached and isinstance(error, BrokerUnreachable):
            return False
        return isinstance(error, WireError) and error.retriable

    async def api_versions(self) -> ApiVersionsResponse:
        return await self._call(ApiVersionsRequest(), ApiVersionsResponse)

    async def describe_cluster(self) -> DescribeClusterResponse:
        return await self._call(DescribeClusterRequest(), DescribeClusterResponse)

    async def create_topics(
        self, topics: list[CreatableTopic], *, validate_only: bool = False
    ) -> CreateTopicsResponse:
        request = CreateTopicsRequest(topics=topics, validate_only=validate_only)
        return await self._call(request, CreateTopicsResponse)

    async def delete_topics(self, topics: list[str], *, timeout_ms: int = 30000) -> DeleteTopicsResponse:
        """Mark topics for deletion; the answer comes once the broker no longer serves them
        (or REQUEST_TIMED_OUT per topic after `timeout_ms`, while deletion goes on)."""
        request = DeleteTopicsRequest(topic_names=topics, timeout_ms=timeout_ms)
        return await self._call(request, DeleteTopicsResponse, wait_s=timeout_ms / 1000)

    async def create_partitions(
        self, topics: list[CreatePartitionsTopic], *, timeout_ms: int = 30000, validate_only: bool = False
    ) -> CreatePartitionsResponse:
        """Raise partition counts; the answer comes once the new partitions have leaders."""
        request = CreatePartitionsRequest(topics=topics, timeout_ms=timeout_ms, validate_only=validate_only)
        return await self._call(request, CreatePartitionsResponse, wait_s=timeout_ms / 1000)

    async def metadata(self, topics: list[str] | None = None) -> MetadataResponse:
        return await self._call(MetadataRequest(topics=topics), MetadataResponse)

    async def describe_controller(self) -> DescribeControllerResponse:
        return await self._call(DescribeControllerRequest(), DescribeControllerResponse)

    async def reelect_controller(self) -> int:
        """Delete `/controller`; returns the id of the controller that was deposed (-1: none)."""
        response = await self._call(ReelectControllerRequest(), ReelectControllerResponse)
        return response.previous_controller_id

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Iterable[tuple[str, int]] | None = None,
        *,
        timeout_ms: int = 60000,
    ) -> ElectLeadersResponse:
        """Preferred or unclean leader election (ElectLeaders) of these (topic, partition)s,
        or of every partition; sent to the active controller. Results are per partition."""
        topic_partitions = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topic_partitions = [
                ElectLeadersTopicPartitions(topic=t, partitions=sorted(set(p)))
                for t, p in sorted(by_topic.items())
            ]
        request = ElectLeadersRequest(
            election_type=int(election_type), topic_partitions=topic_partitions, timeout_ms=timeout_ms
        )
        return await self._call(
            request,
            ElectLeadersResponse,
            to_controller=True,
            wait_s=timeout_ms / 1000,
            moved=_all_not_controller,
        )

    # --- partition reassignment (KIP-455), answered by the active controller only ---

    async def alter_partition_reassignments(
        self, reassignments: Mapping[tuple[str, int], Sequence[int] | None], *, timeout_ms: int = 60000
    ) -> AlterPartitionReassignmentsResponse:
        """Start, supersede or cancel (None) reassignments: per (topic, partition) the target
        replicas, the first being the preferred leader. Each partition's result carries its
        own error code; the reassignment completes later, once the targets are in sync."""
        by_topic: dict[str, list[ReassignablePartition]] = {}
        for (topic, partition), replicas in reassignments.items():
            by_topic.setdefault(topic, []).append(
                ReassignablePartition(
                    partition_index=partition, replicas=None if replicas is None else list(replicas)
                )
            )
        request = AlterPartitionReassignmentsRequest(
            timeout_ms=timeout_ms,
            topics=[ReassignableTopic(name=t, partitions=p) for t, p in by_topic.items()],
        )
        return await self._call(
            request, AlterPartitionReassignmentsResponse, to_controller=True, wait_s=timeout_ms / 1000
        )

    async def list_partition_reassignments(
        self, partitions: Iterable[tuple[str, int]] | None = None, *, timeout_ms: int = 60000
    ) -> ListPartitionReassignmentsResponse:
        """The reassignments in progress: of these partitions, or all of them (None)."""
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                by_topic.setdefault(topic, []).append(partition)
            topics = [
                ListPartitionReassignmentsTopics(name=t, partition_indexes=p) for t, p in by_topic.items()
            ]
        request = ListPartitionReassignmentsRequest(timeout_ms=timeout_ms, topics=topics)
        return await self._call(
            request, ListPartitionReassignmentsResponse, to_controller=True, wait_s=timeout_ms / 1000
        )

    # --- dynamic configs and log dirs ---

    async def incremental_alter_configs(
        self, resources: list[AlterConfigsResource], *, validate_only: bool = False
    ) -> IncrementalAlterConfigsResponse:
        request = IncrementalAlterConfigsRequest(resources=resources, validate_only=validate_only)
        return await self._call(request, IncrementalAlterConfigsResponse)

    async def describe_configs(self, resources: list[DescribeConfigsResource]) -> DescribeConfigsResponse:
        request = DescribeConfigsRequest(resources=resources)
        return await self._call(request, DescribeConfigsResponse)

    async def describe_log_dirs(
        self, topics: list[DescribableLogDirTopic] | None = None
    ) -> DescribeLogDirsResponse:
        """The replica sizes on the broker this client is connected to."""
        request = DescribeLogDirsRequest(topics=topics)
        return await self._call(request, DescribeLogDirsResponse)

    # --- the planner ---

    async def describe_planner(self) -> DescribePlannerResponse:
        """Where the active planner listens, as the broker reads `/keel/planner`; raises
        BrokerNotAvailable when no planner runs."""
        return await self._call(DescribePlannerRequest(), DescribePlannerResponse)


def _all_not_controller(response: ElectLeadersResponse) -> bool:
    """The broker asked was not the controller (any more): every result says so. (Asked
    for every partition, such a broker answers a top-level NOT_CONTROLLER instead.)"""
    results = [r for topic in response.replica_election_results for r in topic.partition_result]
    if not results:
        return False
    return all(r.error_code == ErrorCode.NOT_CONTROLLER for r in results)
