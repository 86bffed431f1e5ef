"""KeelBroker: one broker's start-up and shutdown, in Kafka's order (KafkaServer).

Start-up: connect to ZooKeeper, create the persistent paths, get or create the cluster id,
start the replica manager, open the listeners (so the real ports are known), register the
broker (checked ephemeral, spec §2.1), then start the controller module. Shutdown reverses
it: the controller resigns, listeners close, the replica manager stops, and closing the
ZooKeeper session removes the ephemerals at once.
"""

from __future__ import annotations

import logging

from actors.broker.replica_manager import ReplicaManagerHandle
from actors.clock import SystemClock
from actors.controller import KafkaController
from actors.controller.controller import ControllerConfig
from actors.ports import BrokerInfo
from node.admin_manager import AdminManager
from node.apis import BrokerApis
from node.channel_manager import ControllerChannelManager
from node.config import BrokerConfig
from node.zk.client import ZooKeeperClient
from node.zk.store import ZkClusterStore
from wire.server import RpcServer

log = logging.getLogger(__name__)


class KeelBroker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.clock = SystemClock()
        self.zk = ZooKeeperClient(
            str(config.get_str("zookeeper.connect")),
            session_timeout_s=config.session_timeout_s,
            connection_timeout_s=config.connection_timeout_s,
        )
        self.store = ZkClusterStore(self.zk, self.clock)
        self.admin = AdminManager(
            self.store,
            default_partitions=config.get_int("num.partitions"),
            default_replication_factor=config.get_int("default.replication.factor"),
        )
        self.apis = BrokerApis(self)
        self.servers: list[RpcServer] = []
        self.cluster_id = ""
        self.info: BrokerInfo | None = None
        self._controller: KafkaController | None = None
        self.replica_manager = ReplicaManagerHandle(self.broker_id)

    @property
    def broker_epoch(self) -> int:
        """This broker's epoch (its znode's czxid); -1 until registered."""
        return -1 if self._controller is None else self._controller.broker_epoch

    @property
    def controller(self) -> KafkaController:
        assert self._controller is not None, "the controller module starts last"
        return self._controller

    async def startup(self) -> None:
        for key in self.config.unknown:
            log.warning("the configuration %s was supplied but isn't a known config", key)
        await self.zk.start()
        await self.store.ensure_persistent_paths()
        self.cluster_id = await self.store.get_or_create_cluster_id()
        self.replica_manager.start()
        endpoints = []
        for listener in self.config.listeners:
            server = RpcServer(
                self.apis.handle,
                listener.host or "0.0.0.0",
                listener.port,
                max_frame_size=self.config.get_int("socket.request.max.bytes"),
            )
            await server.start()
            self.servers.append(server)
            endpoints.append(self.config.endpoint(listener, server.port))
        self.info = BrokerInfo(self.broker_id, tuple(endpoints), self.config.rack)
        broker_epoch = await self.store.register_broker(self.info)
        self._controller = KafkaController(
            self.info,
            self.store,
            self.clock,
            ControllerChannelManager(
                self.broker_id,
                timeout_s=self.config.get_int("controller.socket.timeout.ms") / 1000,
                local=self.apis.handle,
            ),
            ControllerConfig(
                unclean_leader_election_enable=self.config.get_bool("unclean.leader.election.enable")
            ),
        )
        self._controller.startup(broker_epoch)
        log.info(
            "broker %d started: cluster id %s, broker epoch %d, listening on %s",
            self.broker_id,
            self.cluster_id,
            broker_epoch,
            ", ".join(str(e) for e in endpoints),
        )

    async def shutdown(self) -> None:
        log.info("broker %d shutting down", self.broker_id)
        if self._controller is not None:
            await self._controller.shutdown()
        for server in self.servers:
            await server.close()
        await self.replica_manager.stop()
        await self.zk.close()
        log.info("broker %d shut down", self.broker_id)
