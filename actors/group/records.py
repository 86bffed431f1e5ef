"""What the group coordinator writes to `__consumer_offsets`, in Kafka's own record formats,
so that the topic reads the same as Kafka's (kafka-console-consumer's offsets formatter,
kafka-dump-log's offsets decoder).

A record's key says what it is: key version 0 or 1 an offset commit (group, topic,
partition), version 2 a group's metadata (group). The value is the newest version Kafka 3.x
writes (OffsetCommitValue 3, GroupMetadataValue 3); a null value is a tombstone: the offset,
or the whole group, is gone, and compaction removes the older records of that key.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator

from wire.errors import CorruptMessage

_OFFSET_KEY_VERSION = 1
_GROUP_KEY_VERSION = 2
_OFFSET_VALUE_VERSION = 3
_GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclasses.dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclasses.dataclass(frozen=True)
class GroupKey:
    group: str


@dataclasses.dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1


@dataclasses.dataclass(frozen=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclasses.dataclass(frozen=True)
class StoredGroup:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[StoredMember, ...]


# --- writing ---


def _string(out: bytearray, value: str | None) -> None:
    if value is None:
        out += _I16.pack(-1)
        return
    data = value.encode()
    out += _I16.pack(len(data))
    out += data


def _bytes(out: bytearray, value: bytes) -> None:
    out += _I32.pack(len(value))
    out += value


def offset_key(key: OffsetKey) -> bytes:
    out = bytearray(_I16.pack(_OFFSET_KEY_VERSION))
    _string(out, key.group)
    _string(out, key.topic)
    out += _I32.pack(key.partition)
    return bytes(out)


def group_key(group: str) -> bytes:
    out = bytearray(_I16.pack(_GROUP_KEY_VERSION))
    _string(out, group)
    return bytes(out)


def offset_value(committed: CommittedOffset) -> bytes:
    out = bytearray(_I16.pack(_OFFSET_VALUE_VERSION))
    out += _I64.pack(committed.offset)
    out += _I32.pack(committed.leader_epoch)
    _string(out, committed.metadata)
    out += _I64.pack(committed.commit_timestamp)
    return bytes(out)


def group_value(group: StoredGroup) -> bytes:
    out = bytearray(_I16.pack(_GROUP_VALUE_VERSION))
    _string(out, group.protocol_type)
    out += _I32.pack(group.generation)
    _string(out, group.protocol)
    _string(out, group.leader)
    out += _I64.pack(group.current_state_timestamp)
    out += _I32.pack(len(group.members))
    for m in group.members:
        _string(out, m.member_id)
        _string(out, m.group_instance_id)
        _string(out, m.client_id)
        _string(out, m.client_host)
        out += _I32.pack(m.rebalance_timeout_ms)
        out += _I32.pack(m.session_timeout_ms)
        _bytes(out, m.subscription)
        _bytes(out, m.assignment)
    return bytes(out)


# --- reading ---


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def _take(self, layout: struct.Struct) -> int:
        if self.at + layout.size > len(self.data):
            raise CorruptMessage("a __consumer_offsets record ends early")
        (value,) = layout.unpack_from(self.data, self.at)
        self.at += layout.size
        return int(value)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def nullable_string(self) -> str | None:
        length = self.i16()
        if length < 0:
            return None
        return self._raw(length).decode()

    def string(self) -> str:
        return self.nullable_string() or ""

    def blob(self) -> bytes:
        length = self.i32()
        return b"" if length < 0 else self._raw(length)

    def _raw(self, length: int) -> bytes:
        if self.at + length > len(self.data):
            raise CorruptMessage("a __consumer_offsets record ends early")
        value = self.data[self.at : self.at + length]
        self.at += length
        return value


def read_key(data: bytes) -> OffsetKey | GroupKey | None:
    """The key of a record; None for a key version Keel does not know (Kafka's transaction
    markers and newer record types), which loading skips."""
    reader = _Reader(data)
    version = reader.i16()
    if version in (0, 1):
        return OffsetKey(reader.string(), reader.string(), reader.i32())
    if version == _GROUP_KEY_VERSION:
        return GroupKey(reader.string())
    return None


def read_offset(data: bytes) -> CommittedOffset:
    """OffsetCommitValue, versions 0 to 3."""
    reader = _Reader(data)
    version = reader.i16()
    if not 0 <= version <= _OFFSET_VALUE_VERSION:
        raise CorruptMessage(f"unknown offset commit value version {version}")
    offset = reader.i64()
    leader_epoch = reader.i32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.i64()
    return CommittedOffset(offset, leader_epoch, metadata, commit_timestamp)


def read_group(data: bytes) -> StoredGroup:
    """GroupMetadataValue, versions 0 to 3."""
    reader = _Reader(data)
    version = reader.i16()
    if not 0 <= version <= _GROUP_VALUE_VERSION:
        raise CorruptMessage(f"unknown group metadata value version {version}")
    protocol_type = reader.string()
    generation = reader.i32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    current_state_timestamp = reader.i64() if version >= 2 else -1
    members = []
    for _ in range(reader.i32()):
        member_id = reader.string()
        instance = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance = reader.i32() if version >= 1 else -1
        session = reader.i32()
        subscription = reader.blob()
        assignment = reader.blob()
        members.append(
            StoredMember(
                member_id, instance, client_id, client_host, rebalance, session, subscription, assignment
            )
        )
    return StoredGroup(protocol_type, generation, protocol, leader, current_state_timestamp, tuple(members))


def replay(
    records: Iterator[tuple[bytes | None, bytes | None]],
) -> tuple[dict[str, StoredGroup], dict[str, dict[tuple[str, int], CommittedOffset]]]:
    """The groups and committed offsets a partition's records leave, the last record of each
    key winning and a tombstone removing (Kafka's GroupMetadataManager load)."""
    groups: dict[str, StoredGroup] = {}
    offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
    for key_bytes, value in records:
        if key_bytes is None:
            continue
        key = read_key(key_bytes)
        if isinstance(key, OffsetKey):
            of_group = offsets.setdefault(key.group, {})
            if value is None:
                of_group.pop((key.topic, key.partition), None)
            else:
                of_group[(key.topic, key.partition)] = read_offset(value)
        elif isinstance(key, GroupKey):
            if value is None:
                groups.pop(key.group, None)
                offsets.pop(key.group, None)
            else:
                groups[key.group] = read_group(value)
    return groups, {g: o for g, o in offsets.items() if o}
