"""One connection pool for every client: a pipelined `RpcClient` per peer, opened on first
use, reopened after it closes, and dropped when a request on it fails with a wire error (the
next request to that peer connects anew). The producer, consumer, admin client, the
controller's senders and the follower's replica link all hold one.
"""

from __future__ import annotations

from wire.api import Request, Response
from wire.client import RpcClient
from wire.endpoint import Endpoint
from wire.errors import WireError


class ConnectionPool:
    def __init__(self, *, client_id: str, request_timeout: float, connect_timeout: float) -> None:
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self._clients: dict[tuple[str, int], RpcClient] = {}

    async def get(self, endpoint: Endpoint) -> RpcClient:
        """The open connection to `endpoint`, connecting if there is none."""
        key = (endpoint.host, endpoint.port)
        client = self._clients.get(key)
        if client is None or client.closed:
            client = await RpcClient.connect(
                endpoint.host,
                endpoint.port,
                client_id=self.client_id,
                request_timeout=self.request_timeout,
                connect_timeout=self.connect_timeout,
            )
            self._clients[key] = client
        return client

    async def send(self, endpoint: Endpoint, request: Request, *, timeout: float | None = None) -> Response:
        """One request to `endpoint`; a wire error drops the connection and is raised."""
        client = await self.get(endpoint)
        try:
            return await client.send(request, timeout=timeout or self.request_timeout)
        except WireError:
            await self.drop(endpoint)
            raise

    async def drop(self, endpoint: Endpoint) -> None:
        client = self._clients.pop((endpoint.host, endpoint.port), None)
        if client is not None:
            await client.close()

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
