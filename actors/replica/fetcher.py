"""A replica fetcher (Kafka's ReplicaFetcherThread): one per source broker, fetching every
partition this broker follows on it in one request.

Each round asks the replica manager for a plan: first OffsetsForLeaderEpoch for partitions
that must truncate after a leader change, then Fetch for the rest. Answers go back to the
replica manager, which appends and truncates. When nothing follows the source any more the
fetcher ends; a failed round backs off `replica.fetch.backoff.ms`.
"""

from __future__ import annotations

import logging
from typing import Protocol

from actors.base.clock import Clock
from actors.base.ports import ReplicaLink
from actors.base.retry import Retry
from actors.base.service import Service
from actors.replica.replication import FetchPlan
from wire.api import FetchResponse, OffsetsForLeaderEpochResponse
from wire.errors import WireError
from wire.retry import Backoff

log = logging.getLogger(__name__)


class FetchTarget(Protocol):
    """The replica manager, as a fetcher sees it."""

    async def plan_fetch(self, source: int) -> FetchPlan | None: ...

    async def fetched(self, source: int, plan: FetchPlan, response: FetchResponse) -> bool: ...

    async def epoch_ends_fetched(
        self, source: int, plan: FetchPlan, response: OffsetsForLeaderEpochResponse
    ) -> bool: ...


class ReplicaFetcher(Service):
    def __init__(
        self,
        source: int,
        target: FetchTarget,
        link: ReplicaLink,
        *,
        backoff_s: float,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(f"replica-fetcher-{source}")
        self.source = source
        self._target = target
        self._link = link
        # Kafka's replica.fetch.backoff.ms is one fixed pause, and a fetcher never gives up:
        # it runs until nothing follows its source.
        self._retry = Retry(clock, Backoff(backoff_s, backoff_s, multiplier=1, jitter=0))
        self._failures = 0

    async def run(self) -> None:
        log.info("fetcher for broker %d started", self.source)
        while True:
            try:
                plan = await self._target.plan_fetch(self.source)
                if plan is None:
                    log.info("fetcher for broker %d stopped: nothing follows it", self.source)
                    return
                failed = await self._fetch(plan)
            except Exception:
                # Kafka's fetcher threads log and go on: ended by one unexpected error, this
                # fetcher would leave its partitions unreplicated, with nothing logged.
                log.exception("fetch from broker %d failed unexpectedly; retrying", self.source)
                failed = True
            if failed:
                await self._retry.pause()

    async def _fetch(self, plan: FetchPlan) -> bool:
        """One round; True when it failed."""
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
            return True
        if self._failures:
            log.info("fetching from broker %d again after %d failed attempts", self.source, self._failures)
            self._failures = 0
        return failed

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
