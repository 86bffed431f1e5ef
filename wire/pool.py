"""One connection pool for every client: a pipelined `RpcClient` per peer, opened on first
use, reopened after it closes, and dropped when a request on it fails with a wire error (the
next request to that peer connects anew). The producer, consumer, admin client, the
controller's senders and the follower's replica link all hold one.

Requests to a peer share its connection, so a request that only timed out does not drop it:
the others in flight on it (fetches behind a slow ControlledShutdown, say) go on. Concurrent
first uses share one connection attempt, and a drop closes only the connection that failed,
never a newer one opened meanwhile.

Each connection is set up as its endpoint's security protocol says, with the pool's
`ClientSecurity` (TLS context, SASL identity): a broker's pools reach the inter-broker
listener, a client's the listener its `security.protocol` names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from wire.api import Request, Response
from wire.client import RpcClient
from wire.endpoint import Endpoint
from wire.errors import RequestTimedOut, WireError
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

_Key = tuple[str, int]


class RequestSender(Protocol):
    """What a client holds to reach its peers: a `ConnectionPool`, or a simulation's network."""

    async def send(self, endpoint: Endpoint, request: Request, *, timeout: float | None = None) -> Response:
        """One request to `endpoint`; raises a WireError when no answer comes."""
        ...

    async def close(self) -> None: ...


# Makes the sender of one client (its client id, its request timeout in seconds).
SenderFactory = Callable[[str, float], RequestSender]


def connection_pool(client_id: str, timeout_s: float) -> ConnectionPool:
    """The SenderFactory of a real process: a connection pool that times out connects and
    requests alike."""
    return ConnectionPool(client_id=client_id, request_timeout=timeout_s, connect_timeout=timeout_s)


def secured_connection_pools(security: ClientSecurity) -> SenderFactory:
    """The SenderFactory of a process with an identity: pools that set their connections up
    with `security` (a broker's inter-broker TLS and SASL settings)."""

    def factory(client_id: str, timeout_s: float) -> ConnectionPool:
        return ConnectionPool(
            client_id=client_id, request_timeout=timeout_s, connect_timeout=timeout_s, security=security
        )

    return factory


class ConnectionPool:
    def __init__(
        self,
        *,
        client_id: str,
        request_timeout: float,
        connect_timeout: float,
        security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> None:
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.security = security
        self._clients: dict[_Key, RpcClient] = {}
        self._connecting: dict[_Key, asyncio.Task[RpcClient]] = {}

    async def get(self, endpoint: Endpoint) -> RpcClient:
        """The open connection to `endpoint`, connecting if there is none (one attempt at a
        time per peer: concurrent callers wait for the same one)."""
        key = (endpoint.host, endpoint.port)
        client = self._clients.get(key)
        if client is not None and not client.closed:
            return client
        connecting = self._connecting.get(key)
        if connecting is None:
            connecting = asyncio.create_task(self._connect(key, endpoint), name=f"connect-{key[0]}:{key[1]}")
            self._connecting[key] = connecting
        # Shielded: one caller giving up does not cancel the attempt the others wait for.
        return await asyncio.shield(connecting)

    async def _connect(self, key: _Key, endpoint: Endpoint) -> RpcClient:
        try:
            client = await RpcClient.connect(
                endpoint.host,
                endpoint.port,
                client_id=self.client_id,
                request_timeout=self.request_timeout,
                connect_timeout=self.connect_timeout,
                security_protocol=endpoint.security_protocol,
                security=self.security,
            )
            self._clients[key] = client
            return client
        finally:
            del self._connecting[key]

    async def send(self, endpoint: Endpoint, request: Request, *, timeout: float | None = None) -> Response:
        """One request to `endpoint`; a wire error drops the connection (unless the request
        only timed out) and is raised."""
        client = await self.get(endpoint)
        try:
            return await client.send(request, timeout=timeout or self.request_timeout)
        except RequestTimedOut:
            raise
        except WireError:
            await self.drop(endpoint, client)
            raise

    async def drop(self, endpoint: Endpoint, client: RpcClient | None = None) -> None:
        """Close the connection to `endpoint`; given `client`, only if it is still the one
        held (a newer connection opened since stays)."""
        key = (endpoint.host, endpoint.port)
        held = self._clients.get(key)
        if held is None or (client is not None and held is not client):
            return
        del self._clients[key]
        await held.close()

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.close()
