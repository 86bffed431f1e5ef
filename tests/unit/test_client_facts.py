"""Clients fail fast on facts and wait within one deadline: a topic or partition the metadata
says does not exist is an error at once (once every broker that answers agrees, since one
broker's cache may lag a create), and a delivery that cannot succeed ends when
`delivery_timeout` runs out, however many retries or hung requests it meets."""

from __future__ import annotations

import asyncio
import time

import pytest

from node.clients.metadata import ClusterClient, UnknownPartitionError, UnknownTopicError
from node.clients.producer import KeelProducer, ProduceFailed
from wire.api import (
    MetadataBroker,
    MetadataPartition,
    MetadataRequest,
    MetadataResponse,
    MetadataTopic,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
    Request,
    Response,
)
from wire.endpoint import Endpoint
from wire.errors import ErrorCode, LeaderNotAvailable

BROKERS = [MetadataBroker(broker_id=b, host="127.0.0.1", port=9000 + b) for b in (1, 2)]


def metadata(partitions: int | None, leader: int = 1) -> MetadataResponse:
    """Brokers 1 and 2; topic `t` with `partitions` led by `leader`, or unknown (None)."""
    if partitions is None:
        topic = MetadataTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name="t")
    else:
        topic = MetadataTopic(
            error_code=0,
            name="t",
            partitions=[
                MetadataPartition(
                    error_code=0,
                    partition=p,
                    leader=leader,
                    leader_epoch=0,
                    replicas=[1],
                    isr=[1],
                    offline_replicas=[],
                )
                for p in range(partitions)
            ],
        )
    return MetadataResponse(brokers=BROKERS, topics=[topic])


class _Pool:
    """Answers Metadata per broker port (a list: one answer per request, the last kept), and
    Produce with `produce` (None: never answers)."""

    def __init__(
        self,
        by_port: dict[int, MetadataResponse | list[MetadataResponse]],
        produce: ErrorCode | None = ErrorCode.NONE,
    ) -> None:
        self.by_port = {port: a if isinstance(a, list) else [a] for port, a in by_port.items()}
        self.produce = produce
        self.sent: list[tuple[int, str]] = []

    async def send(self, endpoint: Endpoint, request: Request, *, timeout: float | None = None) -> Response:
        self.sent.append((endpoint.port, type(request).__name__))
        if isinstance(request, MetadataRequest):
            answers = self.by_port[endpoint.port]
            return answers.pop(0) if len(answers) > 1 else answers[0]
        assert isinstance(request, ProduceRequest)
        if self.produce is None:
            await asyncio.Event().wait()
        (data,) = request.topic_data
        return ProduceResponse(
            responses=[
                ProduceTopicResponse(
                    name=data.name,
                    partition_responses=[
                        ProducePartitionResponse(index=p.index, error_code=self.produce, base_offset=0)
                        for p in data.partition_data
                    ],
                )
            ]
        )

    async def close(self) -> None:
        return None


def cluster_with(pool: _Pool) -> ClusterClient:
    cluster = ClusterClient("127.0.0.1:9001", timeout=5.0, client_id="test", unknown_topic_wait_s=0.3)
    cluster._pool = pool  # type: ignore[assignment]
    return cluster


async def test_a_topic_no_broker_knows_is_unknown_without_waiting_for_leaders() -> None:
    pool = _Pool({9001: metadata(None), 9002: metadata(None)})
    started = time.monotonic()
    with pytest.raises(UnknownTopicError, match="topic 't' does not exist"):
        await cluster_with(pool).wait_for_leaders("t", 30)
    assert time.monotonic() - started < 2, "unknown_topic_wait_s (0.3 s), not the 30 s for leaders"
    assert {port for port, _ in pool.sent} == {9001, 9002}, "every broker was asked before giving up"


async def test_one_broker_whose_cache_lags_a_create_is_not_believed() -> None:
    pool = _Pool({9001: metadata(None), 9002: metadata(3)})
    assert await cluster_with(pool).partition_count("t") == 3


async def test_a_topic_that_reaches_the_caches_a_moment_late_is_found() -> None:
    """CreateTopics answers before the brokers' metadata holds the topic."""
    pool = _Pool({9001: [metadata(None), metadata(None), metadata(2)], 9002: metadata(None)})
    assert await cluster_with(pool).partition_count("t") == 2


async def test_a_partition_past_the_count_is_unknown() -> None:
    cluster = cluster_with(_Pool({9001: metadata(2), 9002: metadata(2)}))
    with pytest.raises(UnknownPartitionError, match="topic 't' has no partition 5: it has 2"):
        await cluster.check_partitions("t", [5])
    assert await cluster.check_partitions("t", [0, 1]) == 2


async def test_leaders_are_awaited_only_until_the_deadline() -> None:
    cluster = cluster_with(_Pool({9001: metadata(2, leader=-1), 9002: metadata(2, leader=-1)}))
    started = time.monotonic()
    with pytest.raises(LeaderNotAvailable, match=r"partition 0, 1 had no leader within 0\.5 s"):
        await cluster.wait_for_leaders("t", 0.5)
    assert time.monotonic() - started < 2


def producer_with(pool: _Pool, delivery_timeout: float) -> KeelProducer:
    producer = KeelProducer("127.0.0.1:9001", request_timeout=30, delivery_timeout=delivery_timeout)
    producer._cluster._pool = pool  # type: ignore[assignment]
    return producer


@pytest.mark.parametrize(
    ("produce", "last_error"),
    [(ErrorCode.NOT_LEADER_OR_FOLLOWER, "NOT_LEADER_OR_FOLLOWER"), (None, "no answer")],
    ids=["retried", "hung"],
)
async def test_one_deadline_bounds_a_delivery_with_its_retries(
    produce: ErrorCode | None, last_error: str
) -> None:
    """Retries after a moved leader, or a request that never answers (its own timeout 30 s):
    either way the delivery ends when its 0.5 s are over, saying why."""
    producer = producer_with(_Pool({9001: metadata(1), 9002: metadata(1)}, produce), 0.5)
    started = time.monotonic()
    with pytest.raises(ProduceFailed, match=rf"not delivered within 0\.5 s; last error: .*{last_error}"):
        await producer.send_many("t", [(None, b"v")])
    assert time.monotonic() - started < 2


async def test_a_refused_batch_names_the_partition_and_why() -> None:
    producer = producer_with(_Pool({9001: metadata(1), 9002: metadata(1)}, ErrorCode.MESSAGE_TOO_LARGE), 5)
    with pytest.raises(ProduceFailed, match="topic 't' partition 0 refused") as refused:
        await producer.send_many("t", [(None, b"v")])
    assert refused.value.code == ErrorCode.MESSAGE_TOO_LARGE


async def test_a_missing_topic_is_named_within_a_short_delivery_timeout() -> None:
    producer = producer_with(_Pool({9001: metadata(None), 9002: metadata(None)}), 0.4)
    with pytest.raises(UnknownTopicError):
        await producer.send_many("t", [(None, b"v")])


async def test_the_producer_checks_topic_and_partition_before_sending() -> None:
    pool = _Pool({9001: metadata(2), 9002: metadata(2)})
    producer = producer_with(pool, 5)
    assert await producer.check_topic("t", 1) == 2
    with pytest.raises(UnknownPartitionError):
        await producer.send_many("t", [(None, b"v")], partition=2)
    assert not any(kind == "ProduceRequest" for _, kind in pool.sent)
