"""The dynamic configs a broker applies (node/zk/dynamic_config.py follows them): the
replication throttles, this broker's rates (its own `/config/brokers/<id>`, else
`/config/brokers/<default>`) and each topic's throttled-replicas lists, handed to the replica
manager (Kafka's BrokerConfigHandler and TopicConfigHandler); and the SCRAM credentials of
`/config/users/<name>`, kept in the credential cache that the SASL listeners ask.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from actors.admin.config_admin import BROKERS, DEFAULT_ENTITY, TOPICS, USERS, throttle_rates
from actors.base.clock import Clock
from actors.replica.handle import ReplicaManagerHandle
from actors.security.credential_cache import CredentialCache
from node.zk.config_store import ZkConfigStore
from node.zk.dynamic_config import DynamicConfigManager, UserConfigHandler

log = logging.getLogger(__name__)


class BrokerConfigHandler:
    """This broker's replication rates: its own config over the cluster's default."""

    def __init__(self, broker_id: int, configs: ZkConfigStore, replica_manager: ReplicaManagerHandle) -> None:
        self._own = (DEFAULT_ENTITY, str(broker_id))
        self._configs = configs
        self._replica_manager = replica_manager

    async def process_config_changes(self, configs: Mapping[str, dict[str, str]]) -> None:
        if not any(name in self._own for name in configs):
            return
        # Both are read again: a change of one can uncover the other.
        defaults, _ = await self._configs.entity_config(BROKERS, DEFAULT_ENTITY)
        own, _ = await self._configs.entity_config(BROKERS, self._own[1])
        await self._replica_manager.set_throttles(rates=throttle_rates(own, defaults))


# A change names its topics in the log, up to this many.
_NAMED_IN_LOG = 10


class TopicConfigHandler:
    """Each topic's throttled-replicas lists."""

    def __init__(self, replica_manager: ReplicaManagerHandle) -> None:
        self._replica_manager = replica_manager

    async def process_config_changes(self, configs: Mapping[str, dict[str, str]]) -> None:
        if configs:
            await self._replica_manager.set_throttles(topic_configs=dict(configs))
            if len(configs) <= _NAMED_IN_LOG:
                for topic in sorted(configs):
                    log.info("applied the config of topic %s", topic)
            else:  # start-up reads every topic's: one line, not one per topic
                log.info("applied the config of %d topics", len(configs))


def broker_dynamic_config(
    broker_id: int,
    configs: ZkConfigStore,
    replica_manager: ReplicaManagerHandle,
    credentials: CredentialCache,
    clock: Clock,
) -> DynamicConfigManager:
    return DynamicConfigManager(
        configs,
        {
            BROKERS: BrokerConfigHandler(broker_id, configs, replica_manager),
            TOPICS: TopicConfigHandler(replica_manager),
            USERS: UserConfigHandler(credentials),
        },
        clock,
    )
