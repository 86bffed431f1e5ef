"""In-memory stand-ins for the unit tests: the broker channel here, and the ZooKeeper that the
simulation shares (node/sim/zookeeper.py), re-exported under the names the tests know.
"""

from __future__ import annotations

import asyncio

from actors.base.ports import RegisteredBroker, ResponseCallback, TopicPartition
from node.sim.zookeeper import INVALID_JSON, FakeClusterStore, FakeZooKeeper, _Ephemeral
from wire.api import (
    API_SPECS,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionError,
    Request,
    Response,
    StopReplicaRequest,
    StopReplicaResponse,
)
from wire.errors import ErrorCode

__all__ = ["INVALID_JSON", "FakeBrokerChannel", "FakeClusterStore", "FakeZooKeeper", "_Ephemeral"]


class FakeBrokerChannel:
    """Records what the controller sends; answers each request with its API's empty success
    response on the next loop turn, as a healthy broker would."""

    def __init__(self) -> None:
        self.brokers: set[int] = set()
        # Brokers that do not answer: their requests wait, in order, as the real retries do.
        self.down: set[int] = set()
        self._waiting: dict[int, list[tuple[Request, ResponseCallback | None]]] = {}
        self.sent: list[tuple[int, Request]] = []
        self.closed = False
        self.stop_replica_errors: dict[tuple[int, TopicPartition], int] = {}
        # Replicas a broker cannot host (a failed log directory): LeaderAndIsr answers
        # KAFKA_STORAGE_ERROR for them, NONE for its other partitions.
        self.storage_errors: set[tuple[int, TopicPartition]] = set()

    def add_broker(self, broker: RegisteredBroker) -> None:
        self.brokers.add(broker.info.broker_id)

    def remove_broker(self, broker_id: int) -> None:
        self.brokers.discard(broker_id)
        self._waiting.pop(broker_id, None)

    def send(self, broker_id: int, request: Request, on_response: ResponseCallback | None = None) -> None:
        if broker_id not in self.brokers:
            return
        if broker_id in self.down:
            self._waiting.setdefault(broker_id, []).append((request, on_response))
            return
        self._deliver(broker_id, request, on_response)

    @property
    def total_queue_size(self) -> int:
        return sum(len(waiting) for waiting in self._waiting.values())

    def bring_up(self, broker_id: int) -> None:
        self.down.discard(broker_id)
        for request, on_response in self._waiting.pop(broker_id, []):
            self._deliver(broker_id, request, on_response)

    def _deliver(self, broker_id: int, request: Request, on_response: ResponseCallback | None) -> None:
        self.sent.append((broker_id, request))
        if on_response is not None:
            response = self._answer(broker_id, request)
            asyncio.get_running_loop().call_soon(on_response, response)

    def _answer(self, broker_id: int, request: Request) -> Response:
        """StopReplica is answered per partition, with the errors a test set in
        `stop_replica_errors` (broker, partition) -> code; every other API with its empty success."""
        if isinstance(request, LeaderAndIsrRequest) and self.storage_errors:
            return LeaderAndIsrResponse(
                partition_errors=[
                    PartitionError(
                        topic=s.topic,
                        partition=s.partition,
                        error_code=ErrorCode.KAFKA_STORAGE_ERROR
                        if (broker_id, TopicPartition(s.topic, s.partition)) in self.storage_errors
                        else ErrorCode.NONE,
                    )
                    for s in request.partition_states
                ]
            )
        if isinstance(request, StopReplicaRequest):
            return StopReplicaResponse(
                partition_errors=[
                    PartitionError(
                        topic=p.topic,
                        partition=p.partition,
                        error_code=self.stop_replica_errors.get(
                            (broker_id, TopicPartition(p.topic, p.partition)), 0
                        ),
                    )
                    for p in request.partitions
                ]
            )
        return API_SPECS[request.API_KEY].response()

    async def close(self) -> None:
        self.closed = True
        self.brokers.clear()

    def received(self, broker_id: int) -> list[Request]:
        return [request for b, request in self.sent if b == broker_id]

    def take(self) -> list[tuple[int, Request]]:
        sent, self.sent = self.sent, []
        return sent
