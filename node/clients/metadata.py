"""What producers and consumers share: the cluster's metadata, where each partition's leader
is, and one pipelined connection per broker. Metadata is refreshed from any bootstrap or
known broker when a leader moves or a connection fails.

A topic or partition the metadata says does not exist is a fact, not a wait: the clients raise
`UnknownTopicError` or `UnknownPartitionError` instead of retrying until a timeout, once every
broker has said so for a moment (`unknown_topic_wait_s`, what a new topic takes to reach the
brokers' metadata caches).
"""

from __future__ import annotations

import logging

from actors.base.retry import Retry
from wire.api import MetadataRequest, MetadataResponse, Request, Response
from wire.endpoint import Endpoint, parse_bootstrap
from wire.errors import ErrorCode, LeaderNotAvailable, NetworkException, WireError, all_failed
from wire.pool import ConnectionPool
from wire.retry import Backoff
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

log = logging.getLogger(__name__)

# How long a topic every broker calls unknown is asked about again before it is believed
# missing: a new topic reaches the brokers' metadata caches a moment after CreateTopics answers.
UNKNOWN_TOPIC_WAIT_S = 2.0


class UnknownTopicError(LookupError):
    """Every broker asked says the topic does not exist."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"topic '{topic}' does not exist (keel topic list shows the topics)")
        self.topic = topic


class UnknownPartitionError(LookupError):
    """The topic exists, with fewer partitions than the one asked for."""

    def __init__(self, topic: str, partition: int, count: int) -> None:
        super().__init__(
            f"topic '{topic}' has no partition {partition}: it has {count} (partitions 0 to {count - 1})"
        )
        self.topic = topic
        self.partition = partition
        self.count = count


class ClusterClient:
    def __init__(
        self,
        bootstrap: str,
        *,
        timeout: float,
        client_id: str,
        unknown_topic_wait_s: float = UNKNOWN_TOPIC_WAIT_S,
        security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> None:
        self._security = security
        self._bootstrap = parse_bootstrap(bootstrap, security.security_protocol)
        self.timeout = timeout
        self.unknown_topic_wait_s = unknown_topic_wait_s
        self._pool = ConnectionPool(
            client_id=client_id, request_timeout=timeout, connect_timeout=timeout, security=security
        )
        self.brokers: dict[int, Endpoint] = {}
        # (topic, partition) → (leader, leader epoch); leader -1 while it has none.
        self.leaders: dict[tuple[str, int], tuple[int, int]] = {}
        self.partition_counts: dict[str, int] = {}

    async def close(self) -> None:
        await self._pool.close()

    async def send_to(self, broker_id: int, request: Request, timeout: float | None = None) -> Response:
        endpoint = self.brokers.get(broker_id)
        if endpoint is None:
            raise NetworkException(f"broker {broker_id} is not in the metadata")
        return await self._pool.send(endpoint, request, timeout=timeout)

    async def refresh(self, topics: list[str]) -> MetadataResponse:
        """Metadata for `topics` from the first broker that answers."""
        errors: list[WireError] = []
        candidates = self._candidates()
        for endpoint in candidates:
            try:
                return await self._refresh_from(endpoint, topics)
            except WireError as e:
                errors.append(e)
        raise all_failed(errors, "no broker answered Metadata: ")

    def _candidates(self) -> list[Endpoint]:
        return list(dict.fromkeys([*self.brokers.values(), *self._bootstrap]))

    async def _refresh_from(self, endpoint: Endpoint, topics: list[str]) -> MetadataResponse:
        response = await self._pool.send(endpoint, MetadataRequest(topics=topics))
        assert isinstance(response, MetadataResponse)
        self.brokers = {b.broker_id: self._security.endpoint(b.host, b.port) for b in response.brokers}
        for topic in response.topics:
            if topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                self.partition_counts.pop(topic.name, None)
            if topic.error_code:
                continue
            self.partition_counts[topic.name] = len(topic.partitions)
            for p in topic.partitions:
                self.leaders[(topic.name, p.partition)] = (p.leader, p.leader_epoch)
        return response

    async def partition_count(self, topic: str) -> int:
        """How many partitions `topic` has, from fresh metadata. Raises UnknownTopicError once
        every broker that answers has said for `unknown_topic_wait_s` that it does not exist:
        CreateTopics answers before the brokers' metadata caches hold the new topic, so a
        moment's "unknown" is not yet a fact."""
        retry = Retry(backoff=Backoff(0.05, 0.5), timeout_s=self.unknown_topic_wait_s)
        while not await self._known_anywhere(topic):
            if not await retry.pause():
                raise UnknownTopicError(topic)
        return self.partition_counts[topic]

    async def _known_anywhere(self, topic: str) -> bool:
        """Ask the brokers in turn until one knows `topic`; one broker's cache may lag."""
        errors: list[WireError] = []
        candidates = self._candidates()
        for endpoint in candidates:
            try:
                await self._refresh_from(endpoint, [topic])
            except WireError as e:
                errors.append(e)
                continue
            if topic in self.partition_counts:
                return True
        if len(errors) == len(candidates):
            raise all_failed(errors, "no broker answered Metadata: ")
        return False

    async def check_partitions(self, topic: str, partitions: list[int]) -> int:
        """The partition count of `topic`, once each of `partitions` is one of them."""
        count = self.partition_counts.get(topic)
        if count is None or any(p >= count for p in partitions):
            count = await self.partition_count(topic)
        for p in partitions:
            if not 0 <= p < count:
                raise UnknownPartitionError(topic, p, count)
        return count

    async def wait_for_leaders(self, topic: str, deadline_s: float) -> int:
        """Refresh until every partition of `topic` has a leader; returns the partition count.
        A topic that does not exist is an UnknownTopicError (see partition_count), not a wait."""
        retry = Retry(backoff=Backoff(0.05, 0.5), timeout_s=deadline_s)
        while True:
            count = await self.partition_count(topic)
            leaderless = [p for p in range(count) if self.leaders.get((topic, p), (-1, -1))[0] < 0]
            if not leaderless:
                return count
            if not await retry.pause():
                raise LeaderNotAvailable(
                    f"topic '{topic}' partition {', '.join(map(str, leaderless))} had no leader within "
                    f"{deadline_s:.1f} s (keel topic describe --unavailable-partitions lists them)"
                )
