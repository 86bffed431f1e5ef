"""Kafka's requests as Keel's, and Keel's answers as Kafka's, API by API.

Keel's APIs carry Kafka's fields under Kafka's names, so a translation mostly renames: each
API has `to_keel`, from kio's request of any version to Keel's request, and `to_kafka`, from
Keel's answer to a mapping of the Kafka response's fields that `codec.build` makes into the
request's version. Fields of later versions that Keel has no use for keep their defaults;
a Kafka client may not pose as a follower here (`replica_id` is always a consumer's).

When the handler answered with an error alone (the bare `Response` of a refused or failed
request), `to_kafka` puts that error where the Kafka response has room for it: on every
topic or partition the request named.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from wire.api import (
    ApiKey,
    ApiVersionsRequest,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
    MetadataRequest,
    MetadataResponse,
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
    Request,
    Response,
)
from wire.kafka.versions import ADVERTISED

Fields = dict[str, object]
_CONSUMER = -1


@dataclasses.dataclass(frozen=True)
class Translation:
    to_keel: Callable[[Any, int], Request]
    to_kafka: Callable[[Any, Response], Fields]


def _timeout_ms(value: object) -> int:
    """kio gives Kafka's millisecond durations as timedeltas."""
    seconds = getattr(value, "total_seconds", None)
    return int(seconds() * 1000) if seconds is not None else int(value)  # type: ignore[call-overload]


# --- ApiVersions (18): answered from the listener's table, not the handler's ---


def api_versions_fields(error_code: int = 0) -> Fields:
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": int(key), "min_version": low, "max_version": high}
            for key, (low, high) in sorted(ADVERTISED.items())
        ],
        "throttle_time": 0,
    }


def _api_versions_to_keel(body: Any, version: int) -> Request:
    return ApiVersionsRequest()


def _api_versions_to_kafka(body: Any, answer: Response) -> Fields:
    return api_versions_fields()


# --- Metadata (3) ---


def _metadata_to_keel(body: Any, version: int) -> Request:
    topics = body.topics
    if topics is None or (version == 0 and not topics):  # v0 asks for every topic with []
        return MetadataRequest(topics=None)
    return MetadataRequest(topics=[t.name for t in topics])


def _metadata_to_kafka(body: Any, answer: Response) -> Fields:
    if not isinstance(answer, MetadataResponse):
        named = [t.name for t in body.topics or ()]
        return {"throttle_time": 0, "brokers": [], "topics": [_topic_error(n, answer) for n in named]}
    return {
        "throttle_time": 0,
        "brokers": [
            {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack} for b in answer.brokers
        ],
        "cluster_id": answer.cluster_id or None,
        "controller_id": answer.controller_id,
        "topics": [
            {
                "error_code": t.error_code,
                "name": t.name,
                "partitions": [
                    {
                        "error_code": p.error_code,
                        "partition_index": p.partition,
                        "leader_id": p.leader,
                        "leader_epoch": p.leader_epoch,
                        "replica_nodes": p.replicas,
                        "isr_nodes": p.isr,
                        "offline_replicas": p.offline_replicas,
                    }
                    for p in t.partitions
                ],
            }
            for t in answer.topics
        ],
    }


def _topic_error(name: str, answer: Response) -> Fields:
    return {"error_code": answer.error_code, "name": name, "partitions": []}


# --- Produce (0) ---


def _produce_to_keel(body: Any, version: int) -> Request:
    return ProduceRequest(
        acks=body.acks,
        timeout_ms=_timeout_ms(body.timeout),
        topic_data=[
            ProduceTopicData(
                name=t.name,
                partition_data=[
                    ProducePartitionData(index=p.index, records=bytes(p.records or b""))
                    for p in t.partition_data
                ],
            )
            for t in body.topic_data
        ],
    )


def _produce_to_kafka(body: Any, answer: Response) -> Fields:
    if not isinstance(answer, ProduceResponse):
        return {
            "throttle_time": 0,
            "responses": [
                {
                    "name": t.name,
                    "partition_responses": [
                        _produce_partition(p.index, answer.error_code, answer.error_message)
                        for p in t.partition_data
                    ],
                }
                for t in body.topic_data
            ],
        }
    return {
        "throttle_time": 0,
        "responses": [
            {
                "name": t.name,
                "partition_responses": [
                    {
                        **_produce_partition(p.index, p.error_code, p.error_message),
                        "base_offset": p.base_offset,
                        "log_start_offset": p.log_start_offset,
                    }
                    for p in t.partition_responses
                ],
            }
            for t in answer.responses
        ],
    }


def _produce_partition(index: int, error_code: int, message: str | None) -> Fields:
    return {
        "index": index,
        "error_code": error_code,
        "base_offset": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


# --- Fetch (1): always without a fetch session (session id 0, which Kafka allows) ---


def _fetch_to_keel(body: Any, version: int) -> Request:
    return FetchRequest(
        replica_id=_CONSUMER,
        max_wait_ms=_timeout_ms(body.max_wait),
        min_bytes=body.min_bytes,
        max_bytes=getattr(body, "max_bytes", FetchRequest.max_bytes),
        topics=[
            FetchTopic(
                topic=t.topic,
                partitions=[
                    FetchPartition(
                        partition=p.partition,
                        fetch_offset=p.fetch_offset,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                        partition_max_bytes=p.partition_max_bytes,
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ],
    )


def _fetch_to_kafka(body: Any, answer: Response) -> Fields:
    if not isinstance(answer, FetchResponse):
        return {
            "throttle_time": 0,
            "error_code": answer.error_code,
            "session_id": 0,
            "responses": [
                {
                    "topic": t.topic,
                    "partitions": [_fetch_partition(p.partition, answer.error_code) for p in t.partitions],
                }
                for t in body.topics
            ],
        }
    return {
        "throttle_time": 0,
        "error_code": answer.error_code,
        "session_id": 0,
        "responses": [
            {
                "topic": t.topic,
                "partitions": [
                    {
                        **_fetch_partition(p.partition_index, p.error_code),
                        "high_watermark": p.high_watermark,
                        # No transactions: everything below the high watermark is stable.
                        "last_stable_offset": p.high_watermark,
                        "log_start_offset": p.log_start_offset,
                        "records": p.records,
                    }
                    for p in t.partitions
                ],
            }
            for t in answer.responses
        ],
    }


def _fetch_partition(index: int, error_code: int) -> Fields:
    return {
        "partition_index": index,
        "error_code": error_code,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": [],
        "preferred_read_replica": -1,
        "records": b"",
    }


# --- ListOffsets (2) ---


def _list_offsets_to_keel(body: Any, version: int) -> Request:
    return ListOffsetsRequest(
        replica_id=_CONSUMER,
        topics=[
            ListOffsetsTopic(
                name=t.name,
                partitions=[
                    ListOffsetsPartition(
                        partition_index=p.partition_index,
                        current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                        timestamp=p.timestamp,
                    )
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ],
    )


def _list_offsets_to_kafka(body: Any, answer: Response) -> Fields:
    if not isinstance(answer, ListOffsetsResponse):
        return {
            "throttle_time": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": p.partition_index,
                            "error_code": answer.error_code,
                            "timestamp": -1,
                            "offset": -1,
                        }
                        for p in t.partitions
                    ],
                }
                for t in body.topics
            ],
        }
    return {
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": p.error_code,
                        "timestamp": p.timestamp,
                        "offset": p.offset,
                        "leader_epoch": p.leader_epoch,
                    }
                    for p in t.partitions
                ],
            }
            for t in answer.topics
        ],
    }


TRANSLATIONS: dict[int, Translation] = {
    ApiKey.API_VERSIONS: Translation(_api_versions_to_keel, _api_versions_to_kafka),
    ApiKey.METADATA: Translation(_metadata_to_keel, _metadata_to_kafka),
    ApiKey.PRODUCE: Translation(_produce_to_keel, _produce_to_kafka),
    ApiKey.FETCH: Translation(_fetch_to_keel, _fetch_to_kafka),
    ApiKey.LIST_OFFSETS: Translation(_list_offsets_to_keel, _list_offsets_to_kafka),
}
