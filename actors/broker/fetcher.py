"""A replica fetcher (Kafka's ReplicaFetcherThread): one per source broker, fetching every
partition this broker follows on it in one request.

Each round asks the replica manager for a plan: first OffsetsForLeaderEpoch for partitions
that must truncate after a leader change, then Fetch for the rest. Answers go back to the
replica manager, which appends and truncates. When nothing follows the source any more the
fetcher ends; a failed round backs off `replica.fetch.backoff.ms`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from actors.broker.replication import FetchPlan
from actors.ports import ReplicaLink
from wire.api import FetchResponse, OffsetsForLeaderEpochResponse
from wire.errors import WireError

log = logging.getLogger(__name__)


class FetchTarget(Protocol):
    """The replica manager, as a fetcher sees it."""

    async def plan_fetch(self, source: int) -> FetchPlan | None: ...

    async def fetched(self, source: int, plan: FetchPlan, response: FetchResponse) -> bool: ...

    async def epoch_ends_fetched(
        self, source: int, plan: FetchPlan, response: OffsetsForLeaderEpochResponse
    ) -> bool: ...


class ReplicaFetcher:
    def __init__(self, source: int, target: FetchTarget, link: ReplicaLink, *, backoff_s: float) -> None:
        self.source = source
        self._target = target
        self._link = link
        self._backoff_s = backoff_s
        self._failures = 0
        self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{source}")

    @property
    def running(self) -> bool:
        return not self._task.done()

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        log.info("fetcher for broker %d started", self.source)
        while True:
            plan = await self._target.plan_fetch(self.source)
            if plan is None:
                log.info("fetcher for broker %d stopped: nothing follows it", self.source)
                return
            try:
                if plan.epoch_request is not None:
                    epochs = await self._link.offsets_for_leader_epoch(plan.endpoint, plan.epoch_request)
                    failed = await self._target.epoch_ends_fetched(self.source, plan, epochs)
                else:
                    assert plan.fetch_request is not None
                    response = await self._link.fetch(plan.endpoint, plan.fetch_request)
                    failed = await self._target.fetched(self.source, plan, response)
            except WireError as e:
                self._connection_failed(plan, e)
                failed = True
            else:
                if self._failures:
                    log.info(
                        "fetching from broker %d again after %d failed attempts", self.source, self._failures
                    )
                    self._failures = 0
            if failed:
                await asyncio.sleep(self._backoff_s)

    def _connection_failed(self, plan: FetchPlan, error: WireError) -> None:
        """One warning when a leader stops answering, not one per retry while it is down
        (until the controller moves its partitions, that is one per backoff)."""
        self._failures += 1
        level = logging.WARNING if self._failures == 1 else logging.DEBUG
        log.log(
            level,
            "fetch from broker %d at %s failed: %s; retrying",
            self.source,
            plan.endpoint,
            error.message,
        )
