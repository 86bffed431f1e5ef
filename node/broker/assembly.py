"""A broker's parts, built in one place for its process (node/broker/server.py) and for the
simulation (node/sim/broker.py), so that the simulation runs the wiring the process runs:
the replica link to the leaders and the controller, the replica manager, the admin manager,
the request handlers, and, once the broker is registered, the controller.

What differs between the two stays with them: the process's listeners, authorizer,
dynamic configs, metrics and periodic maintenance; the simulation's network, in-memory
ZooKeeper and logs, and its virtual clock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from actors.admin.partition_limits import PartitionLimits
from actors.base.clock import Clock
from actors.base.ports import BrokerChannel, BrokerInfo, LogStore, TopicAdminStore
from actors.controller import KafkaController
from actors.controller.controller import ControllerConfig
from actors.group.coordinator import GroupConfig, GroupCoordinator
from actors.replica.handle import ReplicaManagerHandle
from actors.replica.replication import ReplicationConfig
from node.broker.acl_apis import AclApis
from node.broker.admin_manager import NO_PARTITION_LIMITS, AdminManager
from node.broker.apis import BrokerApis
from node.broker.group_apis import GroupApis
from node.broker.offsets_topic import OffsetsTopicLog
from node.broker.replica_link import RpcReplicaLink
from node.zk.acl_store import ZkAclStore
from node.zk.producer_ids import ZkProducerIds
from wire.api import MetadataRequest
from wire.context import ANONYMOUS
from wire.pool import SenderFactory

if TYPE_CHECKING:
    from actors.security.authorizer import AclAuthorizer
    from node.broker.config_admin import ConfigAdmin
    from node.broker.log.manager import LogManager
    from node.zk.planner_registry import ZkPlannerRegistry
    from node.zk.store import ZkClusterStore


@dataclasses.dataclass(frozen=True)
class PartsSettings:
    """What the parts are built with, from the broker's properties or a simulation's."""

    request_timeout_s: float
    replication: ReplicationConfig
    controller: ControllerConfig
    default_partitions: int = 1
    default_replication_factor: int = 1
    delete_topic_enable: bool = True
    auto_create_topics_enable: bool = False
    groups: GroupConfig = dataclasses.field(default_factory=GroupConfig)
    offsets_replication_factor: int = 3
    limits: PartitionLimits = NO_PARTITION_LIMITS
    # The listener the controller is reached on (spec: inter.broker.listener.name).
    inter_broker_listener: str = "PLAINTEXT"


class BrokerParts:
    def __init__(
        self,
        broker_id: int,
        *,
        store: ZkClusterStore,
        topic_admin: TopicAdminStore,
        logs: LogStore,
        clock: Clock,
        senders: SenderFactory,
        settings: PartsSettings,
        cluster_id: Callable[[], str],
        propagate_log_dir_event: Callable[[], Awaitable[None]] | None = None,
        config_admin: ConfigAdmin | None = None,
        planners: ZkPlannerRegistry | None = None,
        log_manager: LogManager | None = None,
        authorizer: AclAuthorizer | None = None,
        own_principal: str = ANONYMOUS,
    ) -> None:
        self.broker_id = broker_id
        self.store = store
        self.clock = clock
        self.settings = settings
        self._controller: KafkaController | None = None
        self.link = RpcReplicaLink(
            broker_id,
            controller_id=lambda: -1 if self._controller is None else self._controller.active_controller_id,
            registered_broker=store.registry.registered_broker,
            timeout_s=settings.request_timeout_s,
            senders=senders,
            inter_broker_listener=settings.inter_broker_listener,
        )
        self.replica_manager = ReplicaManagerHandle(
            broker_id,
            logs,
            link=self.link,
            config=settings.replication,
            clock=clock,
            broker_epoch=lambda: self.broker_epoch,
            propagate_log_dir_event=propagate_log_dir_event,
        )
        self.admin = AdminManager(
            store,
            topic_admin,
            default_partitions=settings.default_partitions,
            default_replication_factor=settings.default_replication_factor,
            delete_topic_enable=settings.delete_topic_enable,
            metadata=lambda topics: self.replica_manager.metadata(MetadataRequest(topics=topics)),
            wait_for_metadata=self.replica_manager.wait_for_metadata,
            replica_counts=self.replica_manager.replica_counts,
            limits=settings.limits,
        )
        self.groups = GroupApis(
            broker_id,
            GroupCoordinator(
                OffsetsTopicLog(
                    self.replica_manager, logs, clock, timeout_ms=int(settings.request_timeout_s * 1000)
                ),
                settings.groups,
                clock,
            ),
            self.replica_manager,
            self.admin,
            offsets_replication_factor=settings.offsets_replication_factor,
        )
        self.apis = BrokerApis(
            broker_id=broker_id,
            store=store,
            replica_manager=self.replica_manager,
            admin=self.admin,
            controller=lambda: self.controller,
            broker_epoch=lambda: self.broker_epoch,
            cluster_id=cluster_id,
            config_admin=config_admin,
            planners=planners,
            logs=log_manager,
            authorizer=authorizer,
            own_principal=own_principal,
            clock=clock,
            auto_create_topics=settings.auto_create_topics_enable,
            producer_ids=ZkProducerIds(store.zk, broker_id),
            groups=self.groups,
            acls=AclApis(ZkAclStore(store.zk), enabled=authorizer is not None),
        )

    @property
    def broker_epoch(self) -> int:
        """This broker's epoch (its registration's czxid); -1 until registered."""
        return -1 if self._controller is None else self._controller.broker_epoch

    @property
    def started(self) -> bool:
        return self._controller is not None

    @property
    def controller(self) -> KafkaController:
        assert self._controller is not None, "the controller module starts last"
        return self._controller

    @property
    def controller_or_none(self) -> KafkaController | None:
        return self._controller

    def start_controller(
        self, info: BrokerInfo, broker_epoch: int, channel: BrokerChannel
    ) -> KafkaController:
        """Once registered: the controller module, last (Kafka's KafkaServer starts its
        KafkaController after the registration), then the handlers take requests that need
        the registration."""
        controller = KafkaController(info, self.store, self.clock, channel, self.settings.controller)
        self._controller = controller
        controller.startup(broker_epoch)
        self.apis.registered()
        return controller
