"""KeelBroker: one broker's start-up and shutdown, in Kafka's order (KafkaServer).

Start-up: connect to ZooKeeper, create the persistent paths, get or create the cluster id,
start the replica manager, open the listeners (so the real ports are known), register the
broker (checked ephemeral, spec §2.1), then start the controller module. The controller's
requests wait for the registration (`BrokerApis.registered`); clients are answered from the
moment the listeners open. Shutdown reverses
it: the controller resigns, listeners close, the replica manager stops, and closing the
ZooKeeper session removes the ephemerals at once.

Security: each listener is served with its own TLS and SASL settings (node/security); SCRAM
users are those of `/config/users`, kept in the credential cache by the dynamic config
manager, as Kafka's are; the controller's channel, the fetchers and the requests to the
controller all use the inter-broker listener with the broker's own identity, which is also
the principal of the requests the controller hands its own broker in process.
"""

from __future__ import annotations

import asyncio
import logging
import os

from actors.admin.partition_limits import PartitionLimits
from actors.base.clock import SystemClock
from actors.base.ports import BrokerInfo
from actors.base.service import Periodic, Service, Worker
from actors.controller import KafkaController
from actors.controller.controller import ControllerConfig
from actors.group.coordinator import GroupConfig
from actors.replica.replication import ReplicationConfig
from actors.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from actors.security.credential_cache import CredentialCache
from node.broker.assembly import BrokerParts, PartsSettings
from node.broker.channel_manager import ControllerChannelManager
from node.broker.config import BrokerConfig
from node.broker.config_admin import ConfigAdmin
from node.broker.controlled_shutdown import ControlledShutdownConfig, controlled_shutdown
from node.broker.dynamic_config import broker_dynamic_config
from node.broker.log.cleaner import LogCleaner
from node.broker.log.config import LogConfig
from node.broker.log.manager import LogManager
from node.metrics.broker import BrokerMetrics
from node.metrics.http import MetricsServer, registry_of
from node.metrics.loop_lag import LoopLagMonitor
from node.metrics.requests import RequestMetrics
from node.security.settings import LISTENER_DEFAULTS, getter, listener_security
from node.zk.acl_authorizer import ZkAclAuthorizer, authorizer_config
from node.zk.client import ZooKeeperClient
from node.zk.config_store import ZkConfigStore
from node.zk.planner_registry import ZkPlannerRegistry
from node.zk.store import ZkClusterStore
from node.zk.topic_admin_store import ZkTopicAdminStore
from wire.connection_quotas import ConnectionQuotas
from wire.context import RequestContext
from wire.kafka.listener import KafkaWireFormat
from wire.pool import secured_connection_pools
from wire.server import MSGPACK, RpcServer

log = logging.getLogger(__name__)


def log_config(config: BrokerConfig) -> LogConfig:
    """The broker's defaults for every log, before per-topic overrides."""
    return LogConfig(
        segment_bytes=config.get_int("log.segment.bytes"),
        internal_segment_bytes=config.get_int("log.internal.segment.bytes"),
        index_interval_bytes=config.get_int("log.index.interval.bytes"),
        retention_ms=config.get_int("log.retention.ms"),
        retention_bytes=config.get_int("log.retention.bytes"),
        flush_messages=config.get_int("log.flush.interval.messages"),
        flush_ms=config.get_int("log.flush.interval.ms"),
        max_message_bytes=config.get_int("message.max.bytes"),
        min_insync_replicas=config.get_int("min.insync.replicas"),
        compression_type=str(config.get_str("compression.type")),
        cleanup_policy=config.get_str("log.cleanup.policy") or "delete",
        delete_retention_ms=config.get_int("log.cleaner.delete.retention.ms"),
        min_cleanable_dirty_ratio=config.get_float("log.cleaner.min.cleanable.ratio"),
        min_compaction_lag_ms=config.get_int("log.cleaner.min.compaction.lag.ms"),
    )


def partition_limits(config: BrokerConfig) -> PartitionLimits:
    return PartitionLimits(
        max_partitions=config.get_int("max.partitions"),
        max_broker_partitions=config.get_int("max.broker.partitions"),
        jute_max_buffer=config.get_int("zookeeper.jute.maxbuffer"),
    )


def replication_config(config: BrokerConfig) -> ReplicationConfig:
    listener = config.inter_broker_listener
    return ReplicationConfig(
        inter_broker_listener=(listener, config.security_protocols[listener]),
        lag_time_max_ms=config.get_int("replica.lag.time.max.ms"),
        fetch_wait_max_ms=config.get_int("replica.fetch.wait.max.ms"),
        fetch_min_bytes=config.get_int("replica.fetch.min.bytes"),
        fetch_max_bytes=config.get_int("replica.fetch.max.bytes"),
        fetch_response_max_bytes=config.get_int("replica.fetch.response.max.bytes"),
        fetch_backoff_ms=config.get_int("replica.fetch.backoff.ms"),
        answer_max_bytes=config.get_int("fetch.max.bytes"),
    )


def parts_settings(config: BrokerConfig) -> PartsSettings:
    return PartsSettings(
        request_timeout_s=config.get_int("request.timeout.ms") / 1000,
        replication=replication_config(config),
        controller=ControllerConfig(
            unclean_leader_election_enable=config.get_bool("unclean.leader.election.enable"),
            auto_leader_rebalance_enable=config.get_bool("auto.leader.rebalance.enable"),
            leader_imbalance_check_interval_s=config.get_int("leader.imbalance.check.interval.seconds"),
            leader_imbalance_per_broker_percentage=config.get_int("leader.imbalance.per.broker.percentage"),
            delete_topic_enable=config.get_bool("delete.topic.enable"),
            inter_broker_listener=config.inter_broker_listener,
            standby_enable=config.get_bool("controller.standby.enable"),
        ),
        default_partitions=config.get_int("num.partitions"),
        default_replication_factor=config.get_int("default.replication.factor"),
        delete_topic_enable=config.get_bool("delete.topic.enable"),
        auto_create_topics_enable=config.get_bool("auto.create.topics.enable"),
        groups=GroupConfig(
            offsets_partitions=config.get_int("offsets.topic.num.partitions"),
            min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            max_size=config.get_int("group.max.size"),
            offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
            offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
            offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        ),
        offsets_replication_factor=config.get_int("offsets.topic.replication.factor"),
        limits=partition_limits(config),
        inter_broker_listener=config.inter_broker_listener,
    )


class KeelBroker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.settings = getter(config.values, LISTENER_DEFAULTS)
        # The SCRAM users of `/config/users`, which every SASL listener authenticates against.
        self.credential_cache = CredentialCache()
        self.principal = config.inter_broker_principal
        self.broker_id = config.broker_id
        self.clock = SystemClock()
        self.zk = ZooKeeperClient(
            str(config.get_str("zookeeper.connect")),
            session_timeout_s=config.session_timeout_s,
            connection_timeout_s=config.connection_timeout_s,
            security=config.zookeeper_security,
            max_in_flight_requests=config.get_int("zookeeper.max.in.flight.requests"),
        )
        self.store = ZkClusterStore(self.zk, self.clock)
        self.configs = ZkConfigStore(self.zk)
        self.servers: list[RpcServer] = []
        self.cluster_id = ""
        self.info: BrokerInfo | None = None
        self.logs = LogManager(config.log_dirs, log_config(config))
        self.cleaner = LogCleaner(self.logs, wall_ms=self.clock.wall_ms)
        authorization = authorizer_config(config.values)
        # With `authorizer.class.name`: every request is checked against the ACLs in ZooKeeper.
        self.acl_authorizer = (
            None if authorization is None else ZkAclAuthorizer(self.zk, authorization, self.clock)
        )
        secured = sorted({listener.security_protocol for listener in config.listeners} - {"PLAINTEXT"})
        if authorization is None and secured:
            # Authentication without authorization: every authenticated user may do anything.
            log.warning(
                "listeners use %s but no authorizer.class.name is set: every client that "
                "authenticates may do anything, the controller's requests included",
                ", ".join(secured),
            )
        self.parts = BrokerParts(
            self.broker_id,
            store=self.store,
            topic_admin=ZkTopicAdminStore(self.zk),
            logs=self.logs,
            clock=self.clock,
            senders=secured_connection_pools(config.inter_broker_security),
            settings=parts_settings(config),
            cluster_id=lambda: self.cluster_id,
            propagate_log_dir_event=lambda: self.store.propagate_log_dir_event(self.broker_id),
            config_admin=ConfigAdmin(
                self.configs,
                self.store.topics,
                broker_id=config.broker_id,
                static_broker=config.described(),
                topic_defaults=config.topic_config_defaults(),
            ),
            planners=ZkPlannerRegistry(self.zk),
            log_manager=self.logs,
            authorizer=None if self.acl_authorizer is None else self.acl_authorizer.authorizer,
            own_principal=self.principal,
        )
        self.replica_link = self.parts.link
        self.replica_manager = self.parts.replica_manager
        self.admin = self.parts.admin
        self.apis = self.parts.apis
        self.dynamic_config = broker_dynamic_config(
            self.broker_id, self.configs, self.replica_manager, self.credential_cache, self.clock
        )
        self._periodic: list[Service] = []
        # RequestMetrics of every listener; the endpoint only with metrics.http.listener.
        self.request_metrics = RequestMetrics()
        # Measured (and logged past its threshold) with or without the endpoint.
        self.loop_lag = LoopLagMonitor()
        self.metrics_server = self._metrics_server()

    def _metrics_server(self) -> MetricsServer | None:
        listener = self.config.metrics_listener
        if listener is None:
            return None
        collector = BrokerMetrics(
            self.replica_manager,
            lambda: self._controller,
            self.request_metrics,
            default_min_isr=self.config.get_int("min.insync.replicas"),
            cleaner=self.cleaner.gauges,
        )
        return MetricsServer(
            *listener, registry_of(collector, self.loop_lag), self.not_ready, prepare=collector.prepare
        )

    def not_ready(self) -> str | None:
        """Why this broker is not ready for clients yet (/readyz), or None: it must be
        registered in ZooKeeper and know itself alive from the controller's metadata."""
        if self._controller is None:
            return "not registered in ZooKeeper yet"
        if self.broker_id not in self.replica_manager.replica_state.metadata.live_brokers:
            return "no metadata from the controller yet"
        return None

    @property
    def broker_epoch(self) -> int:
        """This broker's epoch (its znode's czxid); -1 until registered."""
        return self.parts.broker_epoch

    @property
    def controller(self) -> KafkaController:
        return self.parts.controller

    @property
    def _controller(self) -> KafkaController | None:
        return self.parts.controller_or_none

    async def startup(self) -> None:
        for key in self.config.unknown:
            log.warning("the configuration %s was supplied but isn't a known config", key)
        self.loop_lag.start()
        if self.metrics_server is not None:
            # First, so that /healthz and /readyz answer while the rest starts.
            await self.metrics_server.start()
        await self.zk.start()
        await self.store.ensure_persistent_paths()
        self.cluster_id = await self.store.get_or_create_cluster_id()
        if self.acl_authorizer is not None:
            # Before the listeners open: no request is ever judged on an empty cache.
            await self.acl_authorizer.startup()
        self.logs.load()
        self.replica_manager.start()
        await self.dynamic_config.startup()
        self._start_periodic_tasks()
        endpoints = []
        # One count for all the listeners: max.connections is broker-wide.
        quotas = ConnectionQuotas(self.config.connection_limits)
        kafka = KafkaWireFormat()
        for listener in (*self.config.listeners, *self.config.kafka_listeners):
            server = RpcServer(
                self.request_metrics.timed(self.apis.handle),
                listener.host or "0.0.0.0",
                listener.port,
                max_frame_size=self.config.get_int("socket.request.max.bytes"),
                security=listener_security(listener, self.settings, self.credential_cache.credential),
                quotas=quotas,
                wire_format=kafka if listener in self.config.kafka_listeners else MSGPACK,
            )
            await server.start()
            self.servers.append(server)
            endpoints.append(self.config.endpoint(listener, server.port))
        self.info = BrokerInfo(self.broker_id, tuple(endpoints), self.config.rack)
        self._check_own_principal()
        broker_epoch = await self.store.registry.register_broker(self.info)
        channel = ControllerChannelManager(
            self.broker_id,
            timeout_s=self.config.get_int("controller.socket.timeout.ms") / 1000,
            local=self.apis.handle_in_process,
            senders=secured_connection_pools(self.config.inter_broker_security),
            inter_broker_listener=self.config.inter_broker_listener,
        )
        self.parts.start_controller(self.info, broker_epoch, channel)
        log.info(
            "broker %d started: cluster id %s, broker epoch %d, listening on %s",
            self.broker_id,
            self.cluster_id,
            broker_epoch,
            ", ".join(str(e) for e in endpoints),
        )

    def _check_own_principal(self) -> None:
        """The other brokers refuse this broker's controller requests, fetches and
        AlterPartition unless its principal may ClusterAction on the cluster (Kafka's
        advice: make the brokers super users); say so at start-up rather than leave the
        cluster to stall. The ACLs may still be added later, so this only warns."""
        if self.acl_authorizer is None or self.info is None:
            return
        listener = self.config.inter_broker_listener
        host = next(e.host for e in self.info.endpoints if e.listener == listener)
        context = RequestContext(principal=self.principal, client_host=host)
        if not self.acl_authorizer.authorizer.authorize(
            context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            log.warning(
                "this broker's principal %s on its inter-broker listener %s may not ClusterAction on "
                "the cluster: the other brokers will refuse its controller requests and fetches; "
                "add it to super.users",
                self.principal,
                listener,
            )

    def _start_periodic_tasks(self) -> None:
        """Kafka's scheduler: ISR expiration every half replica.lag.time.max.ms, the
        high-watermark and recovery-point checkpoints, retention, and time-based flushes."""
        config = self.config

        async def isr_expiration() -> None:
            await self.replica_manager.maintain(shrink=True)

        async def checkpoint_high_watermarks() -> None:
            await self.replica_manager.maintain(checkpoint=True, shrink=False)

        async def retention() -> None:
            await self.logs.cleanup(self.clock.wall_ms())

        async def flush() -> None:
            await self.logs.flush_due()

        async def checkpoint_recovery_points() -> None:
            await self.logs.checkpoint_recovery_points()

        async def scrub() -> None:
            await self.replica_manager.scrub(config.get_int("log.scrub.bytes"))

        for interval_ms, work in (
            (max(1, config.get_int("replica.lag.time.max.ms") // 2), isr_expiration),
            (config.get_int("replica.high.watermark.checkpoint.interval.ms"), checkpoint_high_watermarks),
            (config.get_int("log.retention.check.interval.ms"), retention),
            (config.get_int("log.flush.scheduler.interval.ms"), flush),
            (config.get_int("log.flush.offset.checkpoint.interval.ms"), checkpoint_recovery_points),
            (config.get_int("log.scrub.interval.ms"), scrub),
        ):
            self._periodic.append(Periodic(work.__name__, interval_ms / 1000, work))
        if config.get_bool("log.cleaner.enable"):
            # Kafka's LogCleaner thread: clean what is due, then back off.
            async def log_cleaner() -> None:
                await self.cleaner.clean_due()

            backoff_ms = config.get_int("log.cleaner.backoff.ms")
            self._periodic.append(Periodic("log-cleaner", backoff_ms / 1000, log_cleaner))
        self._periodic.append(Worker("log-dir-failures", self._handle_log_dir_failures))
        for service in self._periodic:
            service.start()

    async def _handle_log_dir_failures(self) -> None:
        """Kafka's LogDirFailureHandler: take each failed directory offline, once. Its
        replicas stop and answer KAFKA_STORAGE_ERROR, and the controller is told (spec
        §7.11). With no directory left the broker halts, as Kafka's does."""
        while True:
            directory = await self.logs.failures.take_next_offline_log_dir()
            partitions = self.logs.handle_log_dir_failure(directory)
            log.error(
                "the log directory %s is offline: its %d replica(s) stop until the broker restarts",
                directory,
                len(partitions),
            )
            if not self.logs.online_dirs:
                log.critical("every log directory in %s is offline: halting", self.config.log_dirs)
                os._exit(1)
            await self.replica_manager.log_dir_failed(partitions)

    async def controlled_shutdown(self, deadline: float) -> bool:
        """Ask the controller to move this broker's leaders away before it stops (spec §7.3);
        `deadline` on `time.monotonic()`'s clock. True when it did."""
        if self._controller is None:
            return False
        try:
            return await controlled_shutdown(
                self.broker_id,
                lambda: self.broker_epoch,
                self.replica_link.controlled_shutdown,
                ControlledShutdownConfig.from_broker_config(self.config),
                deadline,
            )
        except Exception:
            log.exception("controlled shutdown failed; stopping anyway")
            return False

    async def shutdown(self) -> None:
        log.info("broker %d shutting down", self.broker_id)
        if self._controller is not None:
            await self._controller.shutdown()
        for server in self.servers:
            await server.close()
        await asyncio.gather(*(service.stop() for service in self._periodic))
        if self.replica_manager.running:  # not when start-up failed before it
            await self.replica_manager.maintain(checkpoint=True, shrink=False)
        await self.dynamic_config.shutdown()
        if self.acl_authorizer is not None:
            await self.acl_authorizer.shutdown()
        await self.replica_manager.stop()
        await self.replica_link.close()
        await self.logs.close()
        await self.zk.close()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        self.loop_lag.stop()
        log.info("broker %d shut down", self.broker_id)
