"""Kafka's znode contents, encoded and decoded exactly as Kafka writes them (spec §1)."""

from __future__ import annotations

import base64
import dataclasses
import uuid
from collections.abc import Iterable

import msgpack
import orjson

from actors.base.ports import (
    AcknowledgedChanges,
    BrokerInfo,
    ChangeRecord,
    LeaderAndIsr,
    LeadershipInfo,
    PartitionChange,
    ReplicaAssignment,
    TopicAssignment,
    TopicPartition,
)
from actors.security.acl import (
    AclEntry,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    check_principal,
    parse_name,
)
from wire.endpoint import Endpoint


class ZNodeDataError(ValueError):
    """A znode holds something Kafka would not have written there."""


def _json(data: bytes | None, what: str) -> dict[str, object]:
    try:
        value = orjson.loads(data or b"")
    except orjson.JSONDecodeError as e:
        raise ZNodeDataError(f"{what}: not JSON: {e}") from e
    if not isinstance(value, dict):
        raise ZNodeDataError(f"{what}: not a JSON object")
    return value


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    # timestamp is a string of epoch ms, as Kafka writes it.
    return orjson.dumps(
        {"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms), "kraftControllerEpoch": -1}
    )


def decode_controller(data: bytes | None) -> int:
    broker_id = _json(data, "/controller").get("brokerid")
    if type(broker_id) is not int:
        raise ZNodeDataError("/controller: brokerid is not an int")
    return broker_id


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise ZNodeDataError(f"/controller_epoch: not an int: {data!r}") from e


def encode_broker(info: BrokerInfo, timestamp_ms: int) -> bytes:
    """Registration JSON version 5 (IBP >= 2.7-IV0)."""
    plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
    value: dict[str, object] = {
        "version": 5,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "jmx_port": -1,
        "timestamp": str(timestamp_ms),
        "endpoints": [str(e) for e in info.endpoints],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in info.endpoints},
        "features": {},
    }
    if info.rack is not None:
        value["rack"] = info.rack
    return orjson.dumps(value)


def decode_broker(broker_id: int, data: bytes | None) -> BrokerInfo:
    value = _json(data, f"/brokers/ids/{broker_id}")
    protocols = value.get("listener_security_protocol_map") or {}
    endpoints = []
    raw_endpoints = value.get("endpoints")
    if not isinstance(raw_endpoints, list) or not isinstance(protocols, dict):
        raise ZNodeDataError(f"/brokers/ids/{broker_id}: bad endpoints")
    for raw in raw_endpoints:
        name, sep, address = str(raw).partition("://")
        host, _, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise ZNodeDataError(f"/brokers/ids/{broker_id}: bad endpoint {raw!r}")
        endpoints.append(Endpoint(name, str(protocols.get(name, name)), host.strip("[]"), int(port)))
    rack = value.get("rack")
    return BrokerInfo(broker_id, tuple(endpoints), rack if isinstance(rack, str) else None)


def new_cluster_id() -> str:
    """A random 22-character URL-safe base64 UUID, like Kafka's Uuid.randomUuid()."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def encode_cluster_id(cluster_id: str) -> bytes:
    # "version" is a string here, unlike every other Kafka znode.
    return orjson.dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    cluster_id = _json(data, "/cluster/id").get("id")
    if not isinstance(cluster_id, str):
        raise ZNodeDataError("/cluster/id: id is not a string")
    return cluster_id


def encode_topic(assignment: TopicAssignment) -> bytes:
    """Topic assignment JSON version 3; reassignment maps list only reassigning partitions."""
    value: dict[str, object] = {
        "version": 3,
        "partitions": {str(p): list(a.replicas) for p, a in sorted(assignment.partitions.items())},
        "adding_replicas": {
            str(p): list(a.adding) for p, a in sorted(assignment.partitions.items()) if a.adding
        },
        "removing_replicas": {
            str(p): list(a.removing) for p, a in sorted(assignment.partitions.items()) if a.removing
        },
    }
    if assignment.topic_id is not None:
        value["topic_id"] = assignment.topic_id
    return orjson.dumps(value)


def _int_list(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        raise ZNodeDataError(f"{what}: not a list of ints")
    return tuple(value)


def decode_topic(topic: str, data: bytes | None) -> TopicAssignment:
    what = f"/brokers/topics/{topic}"
    value = _json(data, what)
    partitions = value.get("partitions")
    adding = value.get("adding_replicas") or {}
    removing = value.get("removing_replicas") or {}
    if not isinstance(partitions, dict) or not isinstance(adding, dict) or not isinstance(removing, dict):
        raise ZNodeDataError(f"{what}: partitions are not a map")
    assignment = {}
    # Equal assignments as one object: a topic's partitions mostly share a few replica lists,
    # and a controller holds an assignment for every partition of the cluster.
    shared: dict[ReplicaAssignment, ReplicaAssignment] = {}
    for key, replicas in partitions.items():
        if not str(key).isdigit():
            raise ZNodeDataError(f"{what}: partition {key!r} is not a number")
        decoded = ReplicaAssignment(
            _int_list(replicas, what),
            _int_list(adding.get(key, []), what),
            _int_list(removing.get(key, []), what),
        )
        assignment[int(key)] = shared.setdefault(decoded, decoded)
    topic_id = value.get("topic_id")
    return TopicAssignment(topic, assignment, topic_id if isinstance(topic_id, str) else None)


def encode_partition_state(state: LeaderAndIsr, controller_epoch: int) -> bytes:
    value: dict[str, object] = {
        "version": 1,
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "controller_epoch": controller_epoch,
        "isr": list(state.isr),
    }
    if state.recovering:
        value["leader_recovery_state"] = 1  # RECOVERED (0) is never written
    return orjson.dumps(value)


def decode_partition_state(what: object, data: bytes | None, version: int) -> LeadershipInfo:
    """`what` names the partition in errors only (a failover decodes 100k of these)."""
    try:
        value = orjson.loads(data or b"")
        leader, epoch, controller_epoch = value["leader"], value["leader_epoch"], value["controller_epoch"]
        isr = value["isr"]
        if (
            type(leader) is not int
            or type(epoch) is not int
            or type(controller_epoch) is not int
            or type(isr) is not list
            or not all(type(r) is int for r in isr)
        ):
            raise TypeError("leader, leader_epoch, controller_epoch and isr must be ints")
    except (orjson.JSONDecodeError, KeyError, TypeError) as e:
        raise ZNodeDataError(f"{what} state: {e}") from None
    recovering = value.get("leader_recovery_state") == 1
    return LeadershipInfo(LeaderAndIsr(leader, epoch, tuple(isr), version, recovering), controller_epoch)


def encode_topic_config(config: dict[str, str]) -> bytes:
    return orjson.dumps({"version": 1, "config": config})


def decode_topic_config(topic: str, data: bytes | None) -> dict[str, str]:
    config = _json(data, f"/config/topics/{topic}").get("config") or {}
    if not isinstance(config, dict):
        raise ZNodeDataError(f"/config/topics/{topic}: config is not a map")
    return {str(k): str(v) for k, v in config.items()}


def encode_preferred_replica_election(partitions: list[TopicPartition]) -> bytes:
    return orjson.dumps(
        {"version": 1, "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]}
    )


def decode_preferred_replica_election(data: bytes | None) -> list[TopicPartition]:
    """The partitions named, each once, in the order given."""
    what = "/admin/preferred_replica_election"
    items = _json(data, what).get("partitions")
    if not isinstance(items, list):
        raise ZNodeDataError(f"{what}: partitions is not a list")
    partitions: dict[TopicPartition, None] = {}
    for item in items:
        topic = item.get("topic") if isinstance(item, dict) else None
        partition = item.get("partition") if isinstance(item, dict) else None
        if not isinstance(topic, str) or type(partition) is not int:
            raise ZNodeDataError(f"{what}: {item!r} is not a topic and partition")
        partitions[TopicPartition(topic, partition)] = None
    return list(partitions)


def encode_partition_reassignment(reassignments: dict[TopicPartition, tuple[int, ...]]) -> bytes:
    return orjson.dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                for tp, replicas in sorted(reassignments.items())
            ],
        }
    )


def decode_partition_reassignment(data: bytes | None) -> dict[TopicPartition, tuple[int, ...]]:
    what = "/admin/reassign_partitions"
    entries = _json(data, what).get("partitions")
    if not isinstance(entries, list):
        raise ZNodeDataError(f"{what}: partitions is not a list")
    reassignments = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise ZNodeDataError(f"{what}: an entry is not an object")
        topic, partition = entry.get("topic"), entry.get("partition")
        if not isinstance(topic, str) or type(partition) is not int:
            raise ZNodeDataError(f"{what}: an entry has no topic and partition")
        reassignments[TopicPartition(topic, partition)] = _int_list(entry.get("replicas"), what)
    return reassignments


def encode_entity_config(config: dict[str, str]) -> bytes:
    """`/config/<type>/<name>`: the same JSON for topics, brokers and the others."""
    return encode_topic_config(config)


def decode_entity_config(path: str, data: bytes | None) -> dict[str, str]:
    config = _json(data, path).get("config") or {}
    if not isinstance(config, dict):
        raise ZNodeDataError(f"{path}: config is not a map")
    return {str(k): str(v) for k, v in config.items()}


def encode_config_change(entity_path: str) -> bytes:
    """A change notification, version 2: `{"version":2,"entity_path":"brokers/1"}`."""
    return orjson.dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes | None) -> str:
    """The entity path a notification names; version 1 (`entity_type` and `entity_name`,
    topics only in old Kafka) is read too."""
    value = _json(data, "config change notification")
    if value.get("version") == 2 and isinstance(value.get("entity_path"), str):
        return str(value["entity_path"])
    if value.get("version") == 1 and isinstance(value.get("entity_name"), str):
        return f"{value.get('entity_type', 'topics')}/{value['entity_name']}"
    raise ZNodeDataError(f"config change notification: unknown content {value!r}")


# --- log-dir event notifications (spec §7.11) ---

LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    """Kafka's LogDirEventNotificationSequenceZNode: `{"version":1,"broker":1,"event":1}`."""
    return orjson.dumps({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes | None) -> int:
    """The broker a log-dir event names."""
    value = _json(data, "log dir event notification")
    broker = value.get("broker")
    if value.get("version") != 1 or not isinstance(broker, int):
        raise ZNodeDataError(f"log dir event notification: unknown content {value!r}")
    return broker


# --- Keel's own: the planner's registration (/keel/planner) ---


@dataclasses.dataclass(frozen=True)
class PlannerRegistration:
    host: str
    port: int
    spark_master: str = ""
    timestamp_ms: int = 0


def encode_planner(registration: PlannerRegistration) -> bytes:
    return orjson.dumps(
        {
            "version": 1,
            "host": registration.host,
            "port": registration.port,
            "spark_master": registration.spark_master,
            "timestamp": str(registration.timestamp_ms),
        }
    )


def decode_planner(data: bytes | None) -> PlannerRegistration:
    value = _json(data, "/keel/planner")
    host, port, master = value.get("host"), value.get("port"), value.get("spark_master", "")
    if type(host) is not str or type(port) is not int or type(master) is not str:
        raise ZNodeDataError("/keel/planner: host, port or spark_master has the wrong type")
    timestamp = str(value.get("timestamp", "0"))
    return PlannerRegistration(host, port, master, int(timestamp) if timestamp.isdigit() else 0)


# --- ACLs (Kafka's ResourceZNode and AclEntry JSON, the ACL change notifications) ---


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    """`{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
    "operation":"Read","host":"*"}]}`, entries in a stable order."""
    return orjson.dumps(
        {
            "version": 1,
            "acls": [
                {
                    "principal": e.principal,
                    "permissionType": e.permission.kafka_name,
                    "operation": e.operation.kafka_name,
                    "host": e.host,
                }
                for e in sorted(
                    entries, key=lambda e: (e.principal, e.permission.name, e.operation.name, e.host)
                )
            ],
        }
    )


def decode_acls(path: str, data: bytes | None) -> frozenset[AclEntry]:
    """The entries of an ACL znode; empty data is no entries, as Kafka reads it."""
    if not data:
        return frozenset()
    value = _json(data, path)
    items = value.get("acls")
    if value.get("version") != 1 or not isinstance(items, list):
        raise ZNodeDataError(f"{path}: not version 1 ACLs")
    entries = set()
    for item in items:
        try:
            entries.add(
                AclEntry(
                    check_principal(str(item["principal"])),
                    str(item["host"]),
                    parse_name(AclOperation, str(item["operation"])),
                    parse_name(AclPermissionType, str(item["permissionType"])),
                )
            )
        except (TypeError, KeyError, AclError) as e:
            raise ZNodeDataError(f"{path}: bad ACL entry {item!r}: {e}") from None
    return frozenset(entries)


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """A literal pattern's notification is `TOPIC:orders` (the resource type as Java's enum
    prints it); a prefixed one's is JSON (Kafka's ExtendedAclChangeEvent)."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return orjson.dumps(
        {
            "version": 1,
            "resourceType": pattern.resource_type.name,
            "name": pattern.name,
            "patternType": pattern.pattern_type.name,
        }
    )


def decode_acl_change(data: bytes | None, *, prefixed: bool) -> ResourcePattern:
    what = "ACL change notification"
    try:
        if not prefixed:
            kind, sep, name = (data or b"").decode().partition(":")
            if not sep:
                raise ZNodeDataError(f"{what}: {data!r} is not ResourceType:name")
            return ResourcePattern(parse_name(ResourceType, kind), name)
        value = _json(data, what)
        if value.get("version") != 1 or not isinstance(value.get("name"), str):
            raise ZNodeDataError(f"{what}: unknown content {value!r}")
        return ResourcePattern(
            parse_name(ResourceType, str(value.get("resourceType"))),
            str(value["name"]),
            parse_name(PatternType, str(value.get("patternType"))),
        )
    except (UnicodeDecodeError, AclError) as e:
        raise ZNodeDataError(f"{what}: {e}") from None


# --- the controller's change records (docs/STANDBY.md) ---

_CHANGE_RECORD_VERSION = 1


def encode_change_record(record: ChangeRecord) -> bytes:
    """msgpack, compact: [1, controller epoch, [[topic, partition, version before, state or
    nil], ...]], a state as [leader, leader epoch, isr, version after, recovering, its
    controller epoch], and the topics whose assignment it set after them where there are
    any. 500 partitions take about 30 KB."""
    changes = [
        [
            tp.topic,
            tp.partition,
            before,
            None
            if after is None
            else [
                after.leader_and_isr.leader,
                after.leader_and_isr.leader_epoch,
                list(after.leader_and_isr.isr),
                after.leader_and_isr.partition_epoch,
                after.leader_and_isr.recovering,
                after.controller_epoch,
            ],
        ]
        for tp, before, after in record.changes
    ]
    fields = [_CHANGE_RECORD_VERSION, record.controller_epoch, changes]
    if record.topics:
        fields.append(list(record.topics))
    packed: bytes = msgpack.packb(fields)
    return packed


def decode_change_record(what: object, data: bytes | None) -> ChangeRecord:
    """ZNodeDataError for anything but a record as `encode_change_record` writes it."""
    try:
        version, controller_epoch, raw_changes, *rest = msgpack.unpackb(data or b"", strict_map_key=True)
        if version != _CHANGE_RECORD_VERSION or type(controller_epoch) is not int:
            raise TypeError(f"version {version!r}, controller epoch {controller_epoch!r}")
        topics = rest[0] if rest else []
        if len(rest) > 1 or type(topics) is not list or not all(type(t) is str for t in topics):
            raise TypeError("the topics whose assignment was set")
        changes = []
        for topic, partition, before, raw_state in raw_changes:
            if type(topic) is not str or type(partition) is not int or type(before) is not int:
                raise TypeError("topic, partition and version before")
            after = None
            if raw_state is not None:
                leader, leader_epoch, isr, partition_epoch, recovering, state_epoch = raw_state
                if not all(
                    type(v) is int for v in (leader, leader_epoch, partition_epoch, state_epoch)
                ) or not (
                    type(isr) is list and all(type(r) is int for r in isr) and type(recovering) is bool
                ):
                    raise TypeError("a state's fields")
                after = LeadershipInfo(
                    LeaderAndIsr(leader, leader_epoch, tuple(isr), partition_epoch, recovering), state_epoch
                )
            changes.append(PartitionChange(TopicPartition(topic, partition), before, after))
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ZNodeDataError(f"{what}: not a change record: {e}") from None
    return ChangeRecord(controller_epoch, tuple(changes), tuple(topics))


_ACKNOWLEDGED_VERSION = 1


def encode_acknowledged_changes(mark: AcknowledgedChanges | None) -> bytes:
    """msgpack: [1, controller epoch, generation, sequence, [[broker, broker epoch], ...]];
    no mark is empty data."""
    if mark is None:
        return b""
    brokers = [[b, e] for b, e in sorted(mark.brokers.items())]
    packed: bytes = msgpack.packb(
        [_ACKNOWLEDGED_VERSION, mark.controller_epoch, mark.generation, mark.sequence, brokers]
    )
    return packed


def decode_acknowledged_changes(data: bytes | None) -> AcknowledgedChanges | None:
    """None for empty data; ZNodeDataError for anything but what the encoding writes."""
    if not data:
        return None
    try:
        version, epoch, generation, sequence, raw = msgpack.unpackb(data, strict_map_key=True)
        if version != _ACKNOWLEDGED_VERSION or not all(type(v) is int for v in (epoch, generation, sequence)):
            raise TypeError(f"version {version!r}")
        brokers = {}
        for broker, broker_epoch in raw:
            if type(broker) is not int or type(broker_epoch) is not int:
                raise TypeError("a broker and its epoch")
            brokers[broker] = broker_epoch
    except (ValueError, TypeError, msgpack.UnpackException) as e:
        raise ZNodeDataError(f"not a mark of acknowledged changes: {e}") from None
    return AcknowledgedChanges(epoch, generation, sequence, brokers)
