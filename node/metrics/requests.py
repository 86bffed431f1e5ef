"""Kafka's RequestMetrics: requests handled and their total time, per API, counted around the
request handler of every listener (RequestsPerSec and TotalTimeMs, `request` label). Fetches
count under Fetch and, as Kafka splits them, FetchConsumer or FetchFollower.

Counting costs two clock reads and a few adds per request; the percentiles are the scrape's.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from node.metrics.names import Exposition, MBean, RecentHistogram, kafka_camel_case
from wire.api import ApiKey, FetchRequest, Response
from wire.envelope import ParsedRequest

Handler = Callable[[ParsedRequest], Awaitable[Response]]

REQUESTS = MBean("kafka.network", "RequestMetrics", "RequestsPerSec")
TOTAL_TIME = MBean("kafka.network", "RequestMetrics", "TotalTimeMs")


class RequestMetrics:
    def __init__(self) -> None:
        self._by_name: dict[str, RecentHistogram] = {}
        self._names = {key: kafka_camel_case(key.name) for key in ApiKey}

    def _histogram(self, name: str) -> RecentHistogram:
        histogram = self._by_name.get(name)
        if histogram is None:
            histogram = self._by_name[name] = RecentHistogram()
        return histogram

    def timed(self, handler: Handler) -> Handler:
        """`handler`, counting each request it handles (failed ones too, as Kafka does)."""

        async def handle(request: ParsedRequest) -> Response:
            started = time.monotonic()
            try:
                return await handler(request)
            finally:
                ms = (time.monotonic() - started) * 1000
                key = request.spec.key
                self._histogram(self._names[key]).record(ms)
                if key is ApiKey.FETCH:
                    body = request.body
                    follower = isinstance(body, FetchRequest) and body.replica_id >= 0
                    self._histogram("FetchFollower" if follower else "FetchConsumer").record(ms)

        return handle

    def export(self, out: Exposition) -> None:
        for name, histogram in sorted(self._by_name.items()):
            labels = {"request": name}
            out.meter(REQUESTS, histogram.count, labels)
            out.histogram(TOTAL_TIME, histogram.count, histogram.recent, labels, histogram.total)
