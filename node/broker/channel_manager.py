"""ControllerChannelManager: the controller's senders, one per broker (spec §8.1).

Each broker gets a FIFO and a task that sends one request at a time over its own RPC
connection, waits for the answer, and on any failure closes the connection, backs off
(100 ms at first, growing to 1 s, with jitter) and retries the same request, until it is
answered or the broker is removed.

The controller's own broker is served in process: its sender hands each request to the
local request handler, in the same order and with the same checks, without encoding a
request of tens of thousands of partition states only to decode it again on the same cores.
"""

from __future__ import annotations

import asyncio
import collections
import logging

from actors.base.clock import Clock, SystemClock
from actors.base.ports import RegisteredBroker, ResponseCallback
from actors.base.retry import Retry, retrying
from actors.base.service import Service
from wire.api import API_SPECS, Request, Response
from wire.envelope import ParsedRequest, RequestHeader, error_response
from wire.errors import InvalidRequest, WireError
from wire.pool import SenderFactory, connection_pool
from wire.retry import Backoff
from wire.server import Handler, call_handler

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_MAX_S = 1.0


class _BrokerSender(Service):
    def __init__(
        self,
        broker: RegisteredBroker,
        *,
        client_id: str,
        timeout_s: float,
        local: Handler | None,
        clock: Clock,
        senders: SenderFactory,
        listener: str,
    ) -> None:
        super().__init__(f"controller-sender-{broker.info.broker_id}")
        self.broker = broker
        self._listener = listener
        self._local = local
        self._client_id = client_id
        self._queue: collections.deque[tuple[Request, ResponseCallback | None]] = collections.deque()
        self._ready = asyncio.Event()
        self._pool = senders(client_id, timeout_s)
        # Until the broker answers or is removed: no deadline.
        self._retry = Retry(clock, Backoff(RETRY_BACKOFF_S, RETRY_BACKOFF_MAX_S))

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    def enqueue(self, request: Request, on_response: ResponseCallback | None) -> None:
        self._queue.append((request, on_response))
        self._ready.set()

    async def stop(self) -> None:
        self._queue.clear()
        await super().stop()
        await self._pool.close()

    async def run(self) -> None:
        while True:
            while not self._queue:
                self._ready.clear()
                await self._ready.wait()
            request, on_response = self._queue[0]
            response = await self._send_until_answered(request)
            if self.stopped:
                # Stopped while this request was out (the queue is already dropped); a
                # handler served in process may have finished before the cancellation.
                return
            self._queue.popleft()
            if on_response is not None:
                try:
                    on_response(response)
                except Exception:
                    log.exception("response callback for broker %d failed", self.broker.info.broker_id)

    async def _send_until_answered(self, request: Request) -> Response:
        if self._local is not None:
            header = RequestHeader(int(request.API_KEY), 0, 0, self._client_id)
            return await call_handler(
                self._local, ParsedRequest(header, API_SPECS[request.API_KEY], request), "local"
            )
        endpoint = self.broker.info.endpoint_for(self._listener)
        if endpoint is None:
            # A broker registered without the inter-broker listener (a misconfigured one):
            # nothing to retry, the request is answered with the error.
            error = InvalidRequest(f"broker {self.broker.info.broker_id} has no {self._listener} listener")
            log.warning("%s not sent: %s", type(request).__name__, error.message)
            return error_response(error)

        def failed(error: Exception, failures: int) -> None:
            log.warning(
                "%s to broker %d failed (%s); retrying",
                type(request).__name__,
                self.broker.info.broker_id,
                error,
                exc_info=not isinstance(error, WireError),
            )

        # Whatever the error, as Kafka's RequestSendThread: ended by an unexpected one, this
        # sender would leave every later request to the broker queued for good.
        return await retrying(
            lambda: self._pool.send(endpoint, request),
            self._retry,
            retriable=lambda e: True,
            on_failure=failed,
        )


class ControllerChannelManager:
    def __init__(
        self,
        controller_id: int,
        *,
        timeout_s: float = 30.0,
        local: Handler | None = None,
        clock: Clock | None = None,
        senders: SenderFactory = connection_pool,
        inter_broker_listener: str = "PLAINTEXT",
    ) -> None:
        """`local`, when given, serves the controller's own broker in process; `clock` times
        the pauses between retries; `senders` makes each sender's connection pool (a
        simulation passes its network's, a secured broker its inter-broker TLS and SASL
        settings'); requests go to each broker's `inter_broker_listener` endpoint."""
        self._controller_id = controller_id
        self._clock = clock or SystemClock()
        self._local = local
        self._client_id = f"controller-{controller_id}"
        self._timeout_s = timeout_s
        self._make_sender = senders
        self._listener = inter_broker_listener
        self._senders: dict[int, _BrokerSender] = {}
        self._stopping: set[asyncio.Task[None]] = set()

    @property
    def total_queue_size(self) -> int:
        return sum(s.queue_size for s in self._senders.values())

    def add_broker(self, broker: RegisteredBroker) -> None:
        if broker.info.broker_id not in self._senders:
            broker_id = broker.info.broker_id
            sender = _BrokerSender(
                broker,
                client_id=self._client_id,
                timeout_s=self._timeout_s,
                local=self._local if broker_id == self._controller_id else None,
                clock=self._clock,
                senders=self._make_sender,
                listener=self._listener,
            )
            self._senders[broker_id] = sender
            sender.start()

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            task = asyncio.create_task(sender.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    def send(self, broker_id: int, request: Request, on_response: ResponseCallback | None = None) -> None:
        sender = self._senders.get(broker_id)
        if sender is None:
            log.warning("dropping %s for broker %d: no channel to it", type(request).__name__, broker_id)
            return
        sender.enqueue(request, on_response)

    async def close(self) -> None:
        senders, self._senders = list(self._senders.values()), {}
        await asyncio.gather(*(s.stop() for s in senders), *self._stopping)
