"""Metadata (3): what clients ask any broker: brokers, controller, and per partition the
leader, leader epoch, replicas, ISR and offline replicas, answered from the metadata cache.

`topics` nil asks for every topic. Errors per topic: UNKNOWN_TOPIC_OR_PARTITION (3). Per
partition: LEADER_NOT_AVAILABLE (5) while it has no live leader.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class MetadataRequest(Request):
    API_KEY = ApiKey.METADATA

    topics: list[str] | None = None
    # Kafka's: create the topics named that do not exist (auto.create.topics.enable).
    allow_auto_topic_creation: bool = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class MetadataBroker(Struct):
    broker_id: int
    host: str
    port: int
    rack: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class MetadataPartition(Struct):
    error_code: int
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]


@dataclasses.dataclass(frozen=True, kw_only=True)
class MetadataTopic(Struct):
    error_code: int
    name: str
    partitions: list[MetadataPartition] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MetadataResponse(Response):
    cluster_id: str = ""
    controller_id: int = -1
    # Keel's addition: the epoch of the newest controller whose orders this broker accepted.
    controller_epoch: int = 0
    brokers: list[MetadataBroker] = dataclasses.field(default_factory=list)
    topics: list[MetadataTopic] = dataclasses.field(default_factory=list)
