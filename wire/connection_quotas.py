"""How many connections a process's listeners hold, as Kafka's ConnectionQuotas: a
broker-wide `max.connections`, one per listener (`listener.name.<l>.max.connections`), and
one per client address (`max.connections.per.ip`, `max.connections.per.ip.overrides`).

The two kinds of limit act as Kafka's acceptor makes them act:
- `max.connections` (broker-wide or the listener's) holds the acceptor back: no connection is
  accepted until one closes, and the waiting ones stay in the kernel's listen backlog (Kafka
  accepts one socket, then blocks; Keel waits before accepting it, so a waiting connection
  costs no file descriptor). The inter-broker listener is not held back by the broker-wide
  limit when there are other listeners, so that the controller and the replica fetchers can
  always connect (Kafka's "protected" listener; Kafka also closes the least recently used
  connection of another listener to make room, Keel does not).
- `max.connections.per.ip` refuses: the connection is accepted and closed at once.

A refusal or a wait is logged through `RefusalLog`: a few lines per kind and interval, then
the count of those not logged, so a flood of refusals cannot flood the log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import Counter
from collections.abc import Mapping

from wire.refusals import RefusalLog
from wire.request_memory import NO_LIMIT as REQUEST_MEMORY_NO_LIMIT
from wire.request_memory import RequestMemoryPool

# Kafka's default for the connection limits: Int.MaxValue, i.e. none.
NO_LIMIT = 2**31 - 1
# Kafka's connections.max.idle.ms default.
CONNECTIONS_MAX_IDLE_MS = 600_000


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    """Kafka's properties of the same names; listener names are upper case, as in
    `listeners`."""

    max_connections: int = NO_LIMIT
    listener_max_connections: Mapping[str, int] = dataclasses.field(default_factory=dict)
    max_connections_per_ip: int = NO_LIMIT
    max_connections_per_ip_overrides: Mapping[str, int] = dataclasses.field(default_factory=dict)
    connections_max_idle_ms: int = CONNECTIONS_MAX_IDLE_MS
    # The inter-broker listener (None on a process without one, such as the planner).
    protected_listener: str | None = None
    # Bytes of requests read and not yet answered, over all connections (-1: no limit).
    queued_max_request_bytes: int = REQUEST_MEMORY_NO_LIMIT

    def per_ip(self, host: str) -> int:
        return self.max_connections_per_ip_overrides.get(host, self.max_connections_per_ip)


class ConnectionQuotas:
    """The counts of one process's connections, shared by all its listeners. The accept
    loop awaits `wait_for_slot`, then asks `admit` for the client's address; every admitted
    connection is `release`d when it closes."""

    def __init__(self, limits: ConnectionLimits | None = None, refusals: RefusalLog | None = None) -> None:
        self.limits = limits or ConnectionLimits()
        # The server's log: every line is about a connection it refused or closed.
        self.refusals = refusals or RefusalLog(logging.getLogger("wire.server"))
        self.total = 0
        self._per_listener: Counter[str] = Counter()
        self._per_ip: Counter[str] = Counter()
        self._listeners: set[str] = set()
        self._freed: list[asyncio.Future[None]] = []
        # Shared, as the connection counts are, by every listener of the process.
        self.request_memory = RequestMemoryPool(self.limits.queued_max_request_bytes)

    def register_listener(self, listener: str) -> None:
        self._listeners.add(listener)

    def count(self, *, listener: str | None = None, host: str | None = None) -> int:
        if listener is not None:
            return self._per_listener[listener]
        if host is not None:
            return self._per_ip[host]
        return self.total

    def slot_available(self, listener: str) -> bool:
        """Kafka's rule: under the listener's limit, and under the broker-wide one unless
        this is the inter-broker listener of a process with several."""
        limit = self.limits.listener_max_connections.get(listener, NO_LIMIT)
        if self._per_listener[listener] >= limit:
            return False
        if listener == self.limits.protected_listener and len(self._listeners) > 1:
            return True
        return self.total < self.limits.max_connections

    async def wait_for_slot(self, listener: str) -> None:
        if self.slot_available(listener):
            return
        self.refusals.report(
            "max.connections",
            "listener %s holds %d connections (broker-wide %d): max.connections reached,"
            " accepting no more until one closes",
            listener,
            self._per_listener[listener],
            self.total,
        )
        loop = asyncio.get_running_loop()
        while not self.slot_available(listener):
            freed = loop.create_future()
            self._freed.append(freed)
            try:
                await freed
            finally:
                if freed in self._freed:
                    self._freed.remove(freed)

    def admit(self, listener: str, host: str) -> bool:
        """Count a new connection, unless its address already has its maximum (then it is
        to be closed, and this logs why)."""
        limit = self.limits.per_ip(host)
        if self._per_ip[host] >= limit:
            self.refusals.report(
                "max.connections.per.ip",
                "refused a connection from %s on %s: the address already has the maximum of %d"
                " connections (max.connections.per.ip)",
                host,
                listener,
                limit,
            )
            return False
        self._per_ip[host] += 1
        self._per_listener[listener] += 1
        self.total += 1
        return True

    def release(self, listener: str, host: str) -> None:
        self._per_ip[host] -= 1
        if self._per_ip[host] <= 0:
            del self._per_ip[host]
        self._per_listener[listener] -= 1
        self.total -= 1
        for freed in self._freed:
            if not freed.done():
                freed.set_result(None)
        self._freed.clear()
