"""`metrics.http.listener`: the HTTP endpoint of a broker or the planner, on the process's own
event loop (aiohttp).

- `/metrics`: Prometheus's text format, rendered by prometheus_client from the process's
  collector, which reads the process's state at that moment (on the loop, between requests:
  nothing is locked, and a scrape holds the loop only while it renders; what would hold it
  longer, the passes over every partition, is done just before, in slices);
- `/healthz`: 200 while the process runs;
- `/readyz`: 200 once the process is ready (for a broker: registered in ZooKeeper and its
  metadata loaded), else 503 with the reason in one line.

The listener is plain HTTP with no authentication, as the JMX exporter's agent is: bind it to
an address only the monitoring network reaches.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, ProcessCollector, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from node.metrics.listener import LISTENER_KEY
from wire.server import ListenerUnavailable

log = logging.getLogger(__name__)

# What a not-ready process says: None when ready, else why not.
Readiness = Callable[[], str | None]
# What a scrape awaits before rendering: the long passes, in slices (node/metrics/broker.py).
Preparation = Callable[[], Awaitable[None]]


class MetricsListenerUnavailable(ListenerUnavailable):
    """The metrics listener's address cannot be bound."""


class MetricsServer:
    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        ready: Readiness,
        prepare: Preparation | None = None,
    ) -> None:
        self._host = host
        self._port = port
        self._registry = registry
        self._ready = ready
        self._prepare = prepare
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked for)."""
        if self._runner is None or not self._runner.addresses:
            return self._port
        return int(self._runner.addresses[0][1])

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self._host or None, self._port)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            raise MetricsListenerUnavailable(
                f"cannot listen on {LISTENER_KEY} {self._host}:{self._port}: {e.strerror or e}"
            ) from e
        self._runner, self._site = runner, site
        log.info("metrics on http://%s:%d/metrics", self._host or "0.0.0.0", self.port)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = self._site = None

    async def _metrics(self, request: web.Request) -> web.Response:
        if self._prepare is not None:
            await self._prepare()
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        reason = self._ready()
        if reason is None:
            return web.Response(text="ready\n")
        return web.Response(status=503, text=f"not ready: {reason}\n")


def registry_of(*collectors: Collector) -> CollectorRegistry:
    """The process's own registry (not prometheus_client's global one): its collectors (its
    own metrics, its event loop's lag), and the process's CPU time and memory (`process_*`),
    which the JMX exporter also exports."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    ProcessCollector(registry=registry)
    return registry
