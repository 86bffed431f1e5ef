"""The simulated network: requests between brokers (and from clients) carried in memory, with
the delays, drops and partitions a seed chooses.

It stands where the connection pools stand in a real process (`wire.pool.SenderFactory`), so
everything above it is the production code: the controller's senders
(node/broker/channel_manager.py), the replica link (node/broker/replica_link.py), and on the
receiving side the broker's request handlers (node/broker/apis.py BrokerApis), which call
the replica manager's handle and the controller.

A request is served on the receiving broker's own node (see `node.sim.loop.NODE`), so that a
crash of that broker cancels it mid-way, as a `kill -9` cuts a connection. What the caller sees
is what a socket shows: a broker that is down refuses the connection (NETWORK_EXCEPTION); a
request or answer lost on the way, or a link cut by a partition, is a timeout.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import random
from collections.abc import Callable

from wire.api import API_SPECS, ApiKey, Request, Response
from wire.endpoint import Endpoint
from wire.envelope import RequestHeader, decode_response, encode_request, encode_response, parse_request
from wire.errors import NetworkException, RequestTimedOut
from wire.pool import SenderFactory
from wire.server import Handler, call_handler

# Broker N listens on port BASE_PORT + N of the host "sim".
BASE_PORT = 9000
# Requests too frequent to be worth showing before a violation (they are still hashed).
_ROUTINE = frozenset({ApiKey.FETCH, ApiKey.PRODUCE, ApiKey.OFFSET_FOR_LEADER_EPOCH})
# The node id of clients outside the brokers (the workload's producer and admin).
CLIENT = -1


def endpoint_of(broker_id: int) -> Endpoint:
    return Endpoint("PLAINTEXT", "PLAINTEXT", "sim", BASE_PORT + broker_id)


@dataclasses.dataclass
class LinkFaults:
    """How the network misbehaves: one-way delays drawn between `min_delay_s` and
    `max_delay_s`, a share of messages lost, and directed links cut (a partition)."""

    min_delay_s: float = 0.0005
    max_delay_s: float = 0.005
    drop_rate: float = 0.0
    cut: set[tuple[int, int]] = dataclasses.field(default_factory=set)


@dataclasses.dataclass
class _Server:
    handler: Handler
    context: contextvars.Context


class SimNetwork:
    def __init__(self, rng: random.Random, trace: Callable[..., None]) -> None:
        self._rng = rng
        self._trace = trace
        self.faults = LinkFaults()
        self._servers: dict[int, _Server] = {}
        self.messages = 0

    def serve(self, broker_id: int, handler: Handler) -> None:
        """Broker `broker_id` listens from now on, serving on the node that calls this."""
        self._servers[broker_id] = _Server(handler, contextvars.copy_context())

    def close(self, broker_id: int) -> None:
        """Broker `broker_id` listens no more (stopped or crashed)."""
        self._servers.pop(broker_id, None)

    def senders(self, source: int) -> SenderFactory:
        """What node `source` connects with: the SenderFactory it is built with."""
        return lambda client_id, timeout_s: SimSender(self, source, client_id, timeout_s)

    def partition(self, side: set[int], rest: set[int]) -> None:
        """Cut every link between `side` and `rest`, both ways."""
        for a in side:
            for b in rest:
                self.faults.cut |= {(a, b), (b, a)}

    def heal(self) -> None:
        """Every link whole again, and the usual delays without losses."""
        self.faults = LinkFaults()

    # --- one exchange ---

    async def request(
        self, source: int, endpoint: Endpoint, request: Request, timeout_s: float, client_id: str
    ) -> Response:
        destination = endpoint.port - BASE_PORT
        try:
            return await asyncio.wait_for(
                self._exchange(source, destination, request, client_id), max(timeout_s, 0.0)
            )
        except TimeoutError:
            raise RequestTimedOut(
                f"{type(request).__name__} from {source} to {destination}: no answer within {timeout_s:g} s"
            ) from None

    async def _exchange(self, source: int, destination: int, request: Request, client_id: str) -> Response:
        name = type(request).__name__
        await self._travel(source, destination)
        server = self._servers.get(destination)
        if server is None:
            raise NetworkException(f"broker {destination} refused the connection")
        self.messages += 1
        self._trace(f"{name} {source}->{destination}", notable=request.API_KEY not in _ROUTINE)
        # Through the codec both ways, as on a socket: what cannot be encoded fails here too.
        spec = API_SPECS[request.API_KEY]
        parsed = parse_request(encode_request(RequestHeader(int(request.API_KEY), 0, 0, client_id), request))
        loop = asyncio.get_running_loop()
        served = loop.create_task(call_handler(server.handler, parsed, source), context=server.context)
        await asyncio.wait({served})
        if served.cancelled() or self._servers.get(destination) is not server:
            raise NetworkException(f"broker {destination} closed the connection")
        _, body = decode_response(encode_response(0, served.result()))
        await self._travel(destination, source)
        return spec.response.from_wire(body)

    async def _travel(self, source: int, destination: int) -> None:
        """One message's way: its delay, or for ever when it is lost (the caller times out)."""
        faults = self.faults
        lost = (source, destination) in faults.cut or (
            faults.drop_rate > 0 and source != destination and self._rng.random() < faults.drop_rate
        )
        if lost:
            await asyncio.get_running_loop().create_future()
        delay = 0.0 if source == destination else self._rng.uniform(faults.min_delay_s, faults.max_delay_s)
        await asyncio.sleep(delay)


class SimSender:
    """A connection pool's stand-in (wire.pool.RequestSender) for one client on one node."""

    def __init__(self, network: SimNetwork, source: int, client_id: str, timeout_s: float) -> None:
        self._network = network
        self._source = source
        self._client_id = client_id
        self._timeout_s = timeout_s

    async def send(self, endpoint: Endpoint, request: Request, *, timeout: float | None = None) -> Response:
        return await self._network.request(
            self._source, endpoint, request, timeout or self._timeout_s, self._client_id
        )

    async def close(self) -> None:
        pass


__all__ = ["CLIENT", "LinkFaults", "SimNetwork", "SimSender", "endpoint_of"]
