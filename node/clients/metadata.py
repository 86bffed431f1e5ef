"""What producers and consumers share: the cluster's metadata, where each partition's leader
is, and one pipelined connection per broker. Metadata is refreshed from any bootstrap or
known broker when a leader moves or a connection fails.
"""

from __future__ import annotations

import asyncio
import logging

from wire.api import MetadataRequest, MetadataResponse, Request, Response
from wire.endpoint import Endpoint, parse_bootstrap
from wire.errors import NetworkException, WireError
from wire.pool import ConnectionPool
from wire.retry import Backoff

log = logging.getLogger(__name__)


class ClusterClient:
    def __init__(self, bootstrap: str, *, timeout: float, client_id: str) -> None:
        self._bootstrap = parse_bootstrap(bootstrap)
        self.timeout = timeout
        self._pool = ConnectionPool(client_id=client_id, request_timeout=timeout, connect_timeout=timeout)
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
        errors = []
        candidates = list(dict.fromkeys([*self.brokers.values(), *self._bootstrap]))
        for endpoint in candidates:
            try:
                response = await self._pool.send(endpoint, MetadataRequest(topics=topics))
            except WireError as e:
                errors.append(f"{endpoint.address}: {e.message}")
                continue
            assert isinstance(response, MetadataResponse)
            self.brokers = {b.broker_id: Endpoint.plaintext(b.host, b.port) for b in response.brokers}
            for topic in response.topics:
                if topic.error_code:
                    continue
                self.partition_counts[topic.name] = len(topic.partitions)
                for p in topic.partitions:
                    self.leaders[(topic.name, p.partition)] = (p.leader, p.leader_epoch)
            return response
        raise NetworkException("no broker answered Metadata: " + "; ".join(errors))

    async def wait_for_leaders(self, topic: str, deadline_s: float) -> int:
        """Refresh until every partition of `topic` has a leader; returns the partition count."""
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        backoff = Backoff(0.05, 0.5)
        while True:
            await self.refresh([topic])
            count = self.partition_counts.get(topic, 0)
            if count and all(self.leaders.get((topic, p), (-1, -1))[0] >= 0 for p in range(count)):
                return count
            if loop.time() > end:
                raise NetworkException(f"topic {topic} has no leader for some partition")
            await asyncio.sleep(backoff.next_delay())
