"""The admin's writes of topics, as Kafka's AdminZkClient makes them (spec §1, §7.5, §7.6): a
new topic's config and then its assignment, partitions added to an assignment read at a
version, a topic marked for deletion. The controller picks each up from its watches; the
TopicAdminStore port (actors/base/ports.py), which the simulation's fake shares."""

from __future__ import annotations

import logging

from actors.base.ports import (
    TopicAlreadyMarkedForDeletionError,
    TopicAssignment,
    TopicExistsError,
    TopicVersionConflict,
    UnknownTopicError,
)
from node.zk import data, paths
from node.zk.client import BadVersion, NodeExists, NoNode, ZooKeeperClient

log = logging.getLogger(__name__)


class ZkTopicAdminStore:
    def __init__(self, zk: ZooKeeperClient) -> None:
        self.zk = zk

    async def create_topic(self, assignment: TopicAssignment, config: dict[str, str]) -> None:
        """Write `/config/topics/<T>`, then create `/brokers/topics/<T>`, as Kafka's admin
        code does; the controller picks the topic up from the children watch."""
        config_path = paths.topic_config(assignment.topic)
        try:
            await self.zk.create(config_path, data.encode_topic_config(config))
        except NodeExists:
            await self.zk.set(config_path, data.encode_topic_config(config))
        try:
            await self.zk.create(paths.topic(assignment.topic), data.encode_topic(assignment))
        except NodeExists:
            raise TopicExistsError(f"topic {assignment.topic} already exists") from None

    async def topic_assignment_and_version(self, topic: str) -> tuple[TopicAssignment, int] | None:
        """`/brokers/topics/<T>` and its data version, for a conditional `add_partitions`;
        None when it does not exist (or cannot be read)."""
        value = await self.zk.get_or_none(paths.topic(topic))
        if value is None:
            return None
        try:
            return data.decode_topic(topic, value[0]), value[1].version
        except data.ZNodeDataError as e:
            log.warning("ignoring unreadable topic: %s", e)
            return None

    async def add_partitions(self, assignment: TopicAssignment, expected_version: int = -1) -> None:
        """Rewrite `/brokers/topics/<T>` with the old partitions plus the new ones, as
        AdminZkClient.addPartitions does; the controller's data watch sees the new ones.
        Conditional on the version read (`topic_assignment_and_version`; -1: any): a topic
        changed meanwhile (a reassignment started, say) raises TopicVersionConflict."""
        try:
            await self.zk.set(paths.topic(assignment.topic), data.encode_topic(assignment), expected_version)
        except NoNode:
            raise UnknownTopicError(f"topic {assignment.topic} does not exist") from None
        except BadVersion:
            raise TopicVersionConflict(f"topic {assignment.topic} changed since it was read") from None

    async def mark_topic_for_deletion(self, topic: str) -> None:
        """Create `/admin/delete_topics/<T>` (AdminZkClient.deleteTopic): the topic must exist."""
        if await self.zk.exists(paths.topic(topic)) is None:
            raise UnknownTopicError(f"topic {topic} does not exist")
        try:
            await self.zk.create(paths.delete_topic_marker(topic))
        except NodeExists:
            raise TopicAlreadyMarkedForDeletionError(
                f"topic {topic} is already marked for deletion"
            ) from None
