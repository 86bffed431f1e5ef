"""KeelPlanner: the planner process's start-up, registration and shutdown.

Start-up: the SparkSession is already warm (main starts it first, so a plan request never
pays the JVM start); connect to ZooKeeper, open the listener, then register the ephemeral
`/keel/planner` with the listener's endpoint. While another planner holds that znode this
one stands by: it answers requests but executes nothing, takes no periodic snapshots and
does not heal; it registers as soon as the znode goes. A new ZooKeeper session (the old one
expired, taking the znode with it) registers again the same way.

The active planner writes a Parquet snapshot every `planner.snapshot.interval.ms`.
Shutdown: stop the periodic work, close the executor, close the listener, and close the
ZooKeeper session, which removes `/keel/planner` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors.base.clock import SystemClock
from actors.base.service import Service, Worker
from actors.security.credential_cache import CredentialCache
from node.clients.admin import KeelAdminClient
from node.clients.replica_sizes import ReplicaSizeReader
from node.metrics.http import MetricsServer, registry_of
from node.metrics.loop_lag import LoopLagMonitor
from node.planner.broker_watch import follow_brokers
from node.planner.config import PlannerConfig
from node.planner.healing import SelfHealer
from node.planner.metrics import PlannerMetrics
from node.planner.plan_state import ZkPlanRecord
from node.planner.service import PlannerService
from node.security.settings import LISTENER_DEFAULTS, getter, listener_security
from node.zk import paths
from node.zk.acl_authorizer import ZkAclAuthorizer, authorizer_config
from node.zk.client import ZooKeeperClient
from node.zk.config_store import ZkConfigStore
from node.zk.data import PlannerRegistration
from node.zk.dynamic_config import credential_follower
from node.zk.planner_registry import ZkPlannerRegistry
from node.zk.store import ZkClusterStore
from wire.connection_quotas import ConnectionQuotas
from wire.server import RpcServer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# How often a standing-by planner looks at /keel/planner besides its watch, and how often the
# active one checks it still holds it.
_REGISTRATION_CHECK_S = 2.0
# How often a standing-by planner's snapshot task looks whether it became active.
_STANDBY_POLL_S = 0.5


class KeelPlanner:
    def __init__(self, config: PlannerConfig, spark: SparkSession) -> None:
        self.config = config
        self.spark = spark
        self.clock = SystemClock()
        self.zk = ZooKeeperClient(
            config.get_str("zookeeper.connect"),
            session_timeout_s=config.session_timeout_s,
            connection_timeout_s=config.connection_timeout_s,
            security=config.zookeeper_security,
            max_in_flight_requests=config.get_int("zookeeper.max.in.flight.requests"),
        )
        self.store = ZkClusterStore(self.zk, self.clock)
        self.registry = ZkPlannerRegistry(self.zk)
        # The SCRAM users of `/config/users`, followed as a broker follows them: one
        # identity per user across the cluster, for the brokers and the planner alike.
        self.credential_cache = CredentialCache()
        self.users = credential_follower(ZkConfigStore(self.zk), self.credential_cache, self.clock)
        self.active = False
        self.server: RpcServer | None = None
        self.registration: PlannerRegistration | None = None
        self.executor = self._executor()
        authorization = authorizer_config(config.values)
        self.acl_authorizer = (
            None if authorization is None else ZkAclAuthorizer(self.zk, authorization, self.clock)
        )
        self.service = PlannerService(
            spark=spark,
            store=self.store,
            snapshot_dir=Path(config.get_str("planner.snapshot.dir")),
            request_timeout_s=config.get_int("request.timeout.ms") / 1000,
            is_active=lambda: self.active,
            executor=self.executor,
            self_healing=config.get_bool("planner.self.healing.enable"),
            authorizer=None if self.acl_authorizer is None else self.acl_authorizer.authorizer,
            client_security=config.client_security,
        )
        self.service.snapshot_retention = config.get_int("planner.snapshot.retention.count")
        self._services: list[Service] = []
        self._bootstrap = ""
        self.healer = self._self_healer()
        self.service.healer = self.healer
        # Measured (and logged past its threshold) with or without the endpoint.
        self.loop_lag = LoopLagMonitor()
        self.metrics_server = self._metrics_server()

    def _metrics_server(self) -> MetricsServer | None:
        listener = self.config.metrics_listener
        if listener is None:
            return None
        collector = PlannerMetrics(lambda: self.active, self.service.stats, self.executor, self.healer)
        return MetricsServer(*listener, registry_of(collector, self.loop_lag), self.not_ready)

    def not_ready(self) -> str | None:
        """Why the planner is not ready (/readyz), or None once it is registered in ZooKeeper
        (it holds /keel/planner; a planner standing by is not ready, and says so)."""
        if self.registration is None:
            return "not listening yet"
        if not self.active:
            return "not registered in ZooKeeper (/keel/planner is held by another planner, or not yet)"
        return None

    def _self_healer(self) -> SelfHealer | None:
        """Self-healing, fed the broker registrations; it acts only while this planner is
        active, and only with planner.self.healing.enable (otherwise it reports the absences)."""
        if self.executor is None:
            return None
        return SelfHealer(
            self.clock,
            self.executor,
            threshold_ms=self.config.get_int("planner.self.healing.broker.failure.threshold.ms"),
            on_heal=self.service.heal,
            enabled=self.config.get_bool("planner.self.healing.enable"),
        )

    def _admin(self) -> KeelAdminClient:
        """An admin client on the brokers registered at the last look (for the executor)."""
        return KeelAdminClient(
            self._bootstrap or "127.0.0.1:9092",
            timeout=self.config.get_int("request.timeout.ms") / 1000,
            security=self.config.client_security,
        )

    def _executor(self) -> Any | None:
        """The plan executor (node.planner.executor), when this build has it."""
        try:
            module = importlib.import_module("node.planner.executor")
        except ModuleNotFoundError:
            log.warning("no plan executor in this build: plans are computed, not executed")
            return None
        return module.PlanExecutor(
            self._admin,
            max_moves_per_broker=self.config.get_int("planner.max.concurrent.moves.per.broker"),
            throttle_bytes_per_s=self.config.get_int("planner.execution.throttle.bytes.per.second"),
            state_dir=Path(self.config.get_str("planner.state.dir")),
            clock=self.clock,
            record=ZkPlanRecord(self.zk),
            # Replica sizes come from the brokers as the executor's admin client reaches them.
            size_source_factory=lambda metadata: ReplicaSizeReader(
                metadata, timeout=10.0, security=self.config.client_security
            ),
        )

    async def startup(self) -> None:
        for key in self.config.unknown:
            log.warning("the configuration %s was supplied but isn't a known config", key)
        self.loop_lag.start()
        if self.metrics_server is not None:
            await self.metrics_server.start()
        await self.zk.start()
        if self.acl_authorizer is not None:
            await self.acl_authorizer.startup()
        # Before the listener opens: no client is refused for a user not yet read.
        await self.users.startup()
        listener = self.config.listener
        self.server = RpcServer(
            self.service.handle,
            listener.host or "0.0.0.0",
            listener.port,
            max_frame_size=self.config.get_int("socket.request.max.bytes"),
            quotas=ConnectionQuotas(self.config.connection_limits),
            # The same settings, and the same server, as a broker's listener.
            security=listener_security(
                listener, getter(self.config.values, LISTENER_DEFAULTS), self.credential_cache.credential
            ),
        )
        await self.server.start()
        endpoint = self.config.advertised(self.server.port)
        self.registration = PlannerRegistration(
            endpoint.host, endpoint.port, self.config.spark_master, self.clock.wall_ms()
        )
        await self._refresh_bootstrap()
        if self.config.get_bool("planner.warm.up.enable"):
            self._run(Worker("planner-warm-up", self._warm_up))
        self._run(Worker("planner-registration", self._hold_registration))
        if self.healer is not None:
            self.healer.start()
            healer = self.healer
            self._run(Worker("planner-brokers", lambda: follow_brokers(self.store, healer)))
        interval_ms = self.config.get_int("planner.snapshot.interval.ms")
        if interval_ms > 0:
            self._run(Worker("planner-snapshots", lambda: self._snapshots(interval_ms)))
        log.info(
            "planner listening on %s (Spark master %s, snapshots under %s)",
            endpoint,
            self.config.spark_master,
            self.config.get_str("planner.snapshot.dir"),
        )

    async def _refresh_bootstrap(self) -> None:
        brokers = await self.store.registered_brokers()
        # Each broker's endpoint of the planner's security.protocol, as a client's bootstrap.
        protocol = self.config.client_security.security_protocol
        endpoints = (
            next((e for e in b.info.endpoints if e.security_protocol == protocol), None) for b in brokers
        )
        addresses = [e.address for e in endpoints if e is not None]
        if addresses:
            self._bootstrap = ",".join(addresses)

    async def _hold_registration(self) -> None:
        """Register `/keel/planner`, or stand by until it can; re-register when it goes."""
        assert self.registration is not None
        waiting_logged = False
        while True:
            try:
                holder = await self.registry.planner_holder()
                if holder is not None and holder == self.zk.session_id:
                    if not self.active:
                        self._become_active()
                elif holder is None and await self.registry.register_planner(self.registration):
                    self._become_active()
                    waiting_logged = False
                else:
                    if self.active:
                        log.warning("lost /keel/planner to another planner; standing by")
                        await self._resign()
                    if not waiting_logged:
                        log.info("another planner holds /keel/planner; standing by until it goes")
                        waiting_logged = True
                await self.zk.wait_for_deletion(paths.PLANNER, _REGISTRATION_CHECK_S)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # ZooKeeper away: keep trying, as the session does
                log.warning("checking /keel/planner failed: %s", e)
                if self.active:
                    await self._resign()
                await asyncio.sleep(_REGISTRATION_CHECK_S)

    def _become_active(self) -> None:
        self.active = True
        log.info("registered /keel/planner: this planner is active")
        if self.healer is not None:
            self.healer.set_active(True)
        if self.executor is not None and hasattr(self.executor, "resume"):
            self._run(Worker("planner-resume", self._resume))

    def _run(self, service: Service) -> None:
        self._services.append(service)
        service.start()

    async def _resume(self) -> None:
        executor = self.executor
        if executor is None:
            return
        try:
            await self._refresh_bootstrap()
            await executor.resume()
        except Exception:
            log.exception("resuming the executor's plan failed")

    async def _resign(self) -> None:
        self.active = False
        if self.healer is not None:
            self.healer.set_active(False)
        # Only the planner holding /keel/planner moves partitions: the plan stays saved, and
        # whichever planner becomes active resumes it.
        if self.executor is not None:
            try:
                await self.executor.close()
            except Exception:
                log.exception("stopping the executor on standing down failed")

    async def _warm_up(self) -> None:
        try:
            await self.service.warm_up()
        except Exception:
            log.exception("warming the plan jobs up failed (the first plan will be slower)")

    async def _snapshots(self, interval_ms: int) -> None:
        """The first snapshot as soon as this planner is active (it also runs Spark's first
        jobs, so the first plan request does not pay for their warm-up), then one per interval."""
        while True:
            if not self.active:
                await asyncio.sleep(_STANDBY_POLL_S)
                continue
            try:
                await self._refresh_bootstrap()
                snapshot, directory = await self.service.take_snapshot()
                log.info(
                    "snapshot %s: %d brokers, %d partitions",
                    directory.name,
                    len(snapshot.brokers),
                    len(snapshot.partitions),
                )
            except Exception:
                log.exception("periodic snapshot failed")
            await asyncio.sleep(interval_ms / 1000)

    async def shutdown(self) -> None:
        log.info("planner shutting down")
        await asyncio.gather(*(service.stop() for service in self._services))
        if self.healer is not None:
            await self.healer.close()
        if self.executor is not None:
            with contextlib.suppress(Exception):
                await self.executor.close()
        if self.server is not None:
            await self.server.close()
        await self.users.shutdown()
        if self.acl_authorizer is not None:
            await self.acl_authorizer.shutdown()
        await self.zk.close()
        self.active = False
        if self.metrics_server is not None:
            await self.metrics_server.close()
        self.loop_lag.stop()
        log.info("planner shut down")
