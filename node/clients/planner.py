"""PlannerClient: the planner's RPC APIs (wire/api/planner.py), for `keel reassign plan` and
`keel reassign status`. The planner is found through any broker, which reads `/keel/planner`;
`--planner host:port` skips that step.
"""

from __future__ import annotations

from node.clients.admin import KeelAdminClient
from node.clients.closing import AsyncClosing
from wire.api.planner import (
    CancelPlanRequest,
    CancelPlanResponse,
    PlannerStatusRequest,
    PlannerStatusResponse,
    PlanReassignmentRequest,
    PlanReassignmentResponse,
)
from wire.endpoint import Endpoint, parse_bootstrap
from wire.errors import ErrorCode, WireError
from wire.pool import ConnectionPool
from wire.security import PLAINTEXT_CLIENT, ClientSecurity


class PlannerNotRunning(Exception):
    """No planner holds `/keel/planner`, or the one registered does not answer."""


async def find_planner(
    bootstrap: str, *, timeout: float = 10.0, security: ClientSecurity = PLAINTEXT_CLIENT
) -> Endpoint:
    """The active planner's endpoint, asked of the brokers; raises PlannerNotRunning. The
    planner is dialled with the client's security protocol, as the brokers are."""
    async with KeelAdminClient(bootstrap, timeout=timeout, security=security) as admin:
        try:
            answer = await admin.describe_planner()
        except WireError as e:
            if e.code == ErrorCode.BROKER_NOT_AVAILABLE:
                raise PlannerNotRunning("no planner is running (start one with bin/keel-planner)") from None
            raise
    return security.endpoint(answer.host, answer.port)


class PlannerClient(AsyncClosing):
    """Requests to one planner over a pooled connection. A planning request runs Spark jobs:
    its timeout is the client's `plan_timeout`, not the usual request timeout."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeout: float = 10.0,
        plan_timeout: float = 600.0,
        security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> None:
        self.endpoint = endpoint
        self._timeout = timeout
        self._plan_timeout = plan_timeout
        self._pool = ConnectionPool(
            client_id="keel-planner", request_timeout=timeout, connect_timeout=timeout, security=security
        )

    @classmethod
    def at(
        cls, address: str, *, security: ClientSecurity = PLAINTEXT_CLIENT, **kwargs: float
    ) -> PlannerClient:
        return cls(parse_bootstrap(address, security.security_protocol)[0], security=security, **kwargs)

    async def close(self) -> None:
        await self._pool.close()

    async def _call(self, request: object, timeout: float) -> object:
        try:
            client = await self._pool.get(self.endpoint)
        except WireError as e:
            raise PlannerNotRunning(
                f"the planner at {self.endpoint.address} does not answer: {e.message}"
            ) from e
        return await client.send(request, timeout=timeout)  # type: ignore[arg-type]

    async def plan(self, request: PlanReassignmentRequest) -> PlanReassignmentResponse:
        """The plan, or a response whose error_code says why there is none."""
        response = await self._call(request, self._plan_timeout)
        assert isinstance(response, PlanReassignmentResponse)
        return response

    async def status(self) -> PlannerStatusResponse:
        response = await self._call(PlannerStatusRequest(), self._timeout)
        assert isinstance(response, PlannerStatusResponse)
        return response

    async def cancel(self) -> CancelPlanResponse:
        response = await self._call(CancelPlanRequest(), self._timeout)
        assert isinstance(response, CancelPlanResponse)
        return response
