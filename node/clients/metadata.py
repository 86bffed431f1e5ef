"""What producers and consumers share: the cluster's metadata, where each partition's leader
is, and one pipelined connection per broker. Metadata is refreshed from any bootstrap or
known broker when a leader moves or a connection fails.
"""

from __future__ import annotations

import asyncio
import logging

from node.clients.admin import parse_bootstrap
from wire.api import MetadataRequest, MetadataResponse, Request, Response
from wire.client import RpcClient
from wire.errors import NetworkException, WireError

log = logging.getLogger(__name__)


class ClusterClient:
    def __init__(self, bootstrap: str, *, timeout: float, client_id: str) -> None:
        self._bootstrap = parse_bootstrap(bootstrap)
        self.timeout = timeout
        self._client_id = client_id
        self._clients: dict[tuple[str, int], RpcClient] = {}
        self.brokers: dict[int, tuple[str, int]] = {}
        # (topic, partition) → (leader, leader epoch); leader -1 while it has none.
        self.leaders: dict[tuple[str, int], tuple[int, int]] = {}
        self.partition_counts: dict[str, int] = {}

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()

    async def _client(self, address: tuple[str, int], timeout: float | None = None) -> RpcClient:
        client = self._clients.get(address)
        if client is None or client.closed:
            client = await RpcClient.connect(
                *address,
                client_id=self._client_id,
                request_timeout=timeout or self.timeout,
                connect_timeout=self.timeout,
            )
            self._clients[address] = client
        return client

    async def send_to(self, broker_id: int, request: Request, timeout: float | None = None) -> Response:
        address = self.brokers.get(broker_id)
        if address is None:
            raise NetworkException(f"broker {broker_id} is not in the metadata")
        try:
            client = await self._client(address, timeout)
            return await client.send(request, timeout=timeout or self.timeout)
        except WireError:
            stale = self._clients.pop(address, None)
            if stale is not None:
                await stale.close()
            raise

    async def refresh(self, topics: list[str]) -> MetadataResponse:
        """Metadata for `topics` from the first broker that answers."""
        errors = []
        candidates = list(dict.fromkeys([*self.brokers.values(), *self._bootstrap]))
        for address in candidates:
            try:
                client = await self._client(address)
                response = await client.send(MetadataRequest(topics=topics))
            except WireError as e:
                stale = self._clients.pop(address, None)
                if stale is not None:
                    await stale.close()
                errors.append(f"{address[0]}:{address[1]}: {e.message}")
                continue
            assert isinstance(response, MetadataResponse)
            self.brokers = {b.broker_id: (b.host, b.port) for b in response.brokers}
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
        while True:
            await self.refresh([topic])
            count = self.partition_counts.get(topic, 0)
            if count and all(self.leaders.get((topic, p), (-1, -1))[0] >= 0 for p in range(count)):
                return count
            if loop.time() > end:
                raise NetworkException(f"topic {topic} has no leader for some partition")
            await asyncio.sleep(0.1)
