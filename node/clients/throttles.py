"""Replication throttles as Kafka's reassignment tool sets them, as config changes for
IncrementalAlterConfigs: shared by `keel reassign` and the planner's executor.

Kafka's tool puts the leader throttle on a moving partition's current replicas and the
follower throttle on the replicas being added (`<topic>.leader|follower.replication.
throttled.replicas`, `partition:broker` lists), and the rates on every broker a moving
replica is on or goes to; once the moves are done it deletes all of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from actors.admin.throttle_configs import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from wire.api import AlterableConfig, AlterConfigsResource
from wire.api.incremental_alter_configs import BROKER_RESOURCE, DELETE_CONFIG, SET_CONFIG, TOPIC_RESOURCE

Partition = tuple[str, int]


# --- throttles (pure) ---


@dataclasses.dataclass(frozen=True)
class ThrottlePlan:
    """Kafka's tool: leader throttle on the current replicas, follower throttle on the adding
    ones, per topic; the rates on every broker a moving replica is on or goes to."""

    topics: dict[str, tuple[str, str]]
    brokers: set[int]


def throttle_plan(
    current: Mapping[Partition, list[int]], targets: Mapping[Partition, list[int]]
) -> ThrottlePlan:
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), target in sorted(targets.items()):
        existing = current.get((topic, partition), [])
        if list(existing) == list(target):
            continue
        leaders.setdefault(topic, []).extend(f"{partition}:{b}" for b in existing)
        followers.setdefault(topic, []).extend(f"{partition}:{b}" for b in target if b not in existing)
        brokers.update(existing, target)
    return ThrottlePlan(
        {t: (",".join(leaders[t]), ",".join(followers.get(t, []))) for t in sorted(leaders)}, brokers
    )


def _resource(resource_type: int, name: str, configs: Mapping[str, str | None]) -> AlterConfigsResource:
    return AlterConfigsResource(
        resource_type=resource_type,
        resource_name=name,
        configs=[
            AlterableConfig(name=k, config_operation=DELETE_CONFIG if v is None else SET_CONFIG, value=v)
            for k, v in configs.items()
        ],
    )


def throttle_resources(plan: ThrottlePlan, rate: int) -> list[AlterConfigsResource]:
    resources = [
        _resource(BROKER_RESOURCE, str(b), {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)})
        for b in sorted(plan.brokers)
    ]
    for topic, (leader, follower) in plan.topics.items():
        resources.append(
            _resource(
                TOPIC_RESOURCE, topic, {LEADER_REPLICAS: leader or None, FOLLOWER_REPLICAS: follower or None}
            )
        )
    return resources


def clear_throttle_resources(brokers: list[int], topics: list[str]) -> list[AlterConfigsResource]:
    """Kafka's clearAllThrottles: the rates on every broker, the lists on the file's topics."""
    resources = [
        _resource(BROKER_RESOURCE, str(b), {LEADER_RATE: None, FOLLOWER_RATE: None}) for b in sorted(brokers)
    ]
    resources += [
        _resource(TOPIC_RESOURCE, t, {LEADER_REPLICAS: None, FOLLOWER_REPLICAS: None})
        for t in sorted(set(topics))
    ]
    return resources


def broker_rate_resources(brokers: Iterable[int], rate: int | None) -> list[AlterConfigsResource]:
    """Both throttle rates on each broker: set to `rate`, or deleted (None)."""
    value = None if rate is None else str(rate)
    return [
        _resource(BROKER_RESOURCE, str(b), {LEADER_RATE: value, FOLLOWER_RATE: value})
        for b in sorted(brokers)
    ]


def topic_list_resources(lists: Mapping[str, tuple[str, str] | None]) -> list[AlterConfigsResource]:
    """Per topic its (leader, follower) throttled-replica lists, an empty list or None deleted."""
    resources = []
    for topic, pair in sorted(lists.items()):
        leader, follower = pair or ("", "")
        resources.append(
            _resource(
                TOPIC_RESOURCE, topic, {LEADER_REPLICAS: leader or None, FOLLOWER_REPLICAS: follower or None}
            )
        )
    return resources
