"""KeelAdminClient's one retrying path, over a stand-in pool: any broker or the active
controller, retriable errors retried with the target looked up again, others raised."""

from __future__ import annotations

import pytest

from node.clients.admin import KeelAdminClient
from wire.api import (
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribedBroker,
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    Request,
    Response,
)
from wire.endpoint import Endpoint
from wire.errors import ErrorCode, InvalidRequest, NetworkException


class _Pool:
    """Answers each request type from a script; records (port, request type) per send."""

    def __init__(self, script: dict[type[Request], list[Response | Exception]]) -> None:
        self.script = script
        self.sent: list[tuple[int, str]] = []

    async def get(self, endpoint: Endpoint) -> object:
        return object()

    async def send(self, endpoint: Endpoint, request: Request, *, timeout: float | None = None) -> Response:
        self.sent.append((endpoint.port, type(request).__name__))
        answers = self.script[type(request)]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def close(self) -> None:
        return None


def cluster_naming(controller: int) -> DescribeClusterResponse:
    return DescribeClusterResponse(
        controller_id=controller,
        brokers=[DescribedBroker(broker_id=b, host="127.0.0.1", port=9000 + b) for b in (1, 2)],
    )


def admin_with(pool: _Pool) -> KeelAdminClient:
    admin = KeelAdminClient("127.0.0.1:9001", timeout=5.0)
    admin._pool = pool  # type: ignore[assignment]
    return admin


async def test_a_request_to_any_broker_is_retried_after_a_lost_connection() -> None:
    pool = _Pool({DeleteTopicsRequest: [NetworkException("lost"), DeleteTopicsResponse()]})
    assert await admin_with(pool).delete_topics(["t"]) == DeleteTopicsResponse()
    assert pool.sent == [(9001, "DeleteTopicsRequest")] * 2


async def test_a_controller_request_follows_the_controller_when_it_moves() -> None:
    pool = _Pool(
        {
            DescribeClusterRequest: [cluster_naming(1), cluster_naming(2)],
            ElectLeadersRequest: [
                ElectLeadersResponse(error_code=ErrorCode.NOT_CONTROLLER),
                ElectLeadersResponse(),
            ],
        }
    )
    assert (await admin_with(pool).elect_leaders(ElectionType.PREFERRED)).error_code == 0
    assert [s for s in pool.sent if s[1] == "ElectLeadersRequest"] == [
        (9001, "ElectLeadersRequest"),
        (9002, "ElectLeadersRequest"),
    ]


async def test_an_error_that_is_not_retriable_is_raised_at_once() -> None:
    pool = _Pool({DescribeConfigsRequest: [Response(error_code=ErrorCode.INVALID_REQUEST)]})
    with pytest.raises(InvalidRequest):
        await admin_with(pool).describe_configs([])
    assert len(pool.sent) == 1
