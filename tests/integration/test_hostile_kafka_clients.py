"""Crafted frames on a Kafka listener: counts that promise more elements than the frame holds,
and a frame packed with the smallest elements a request can hold. Each closes its own
connection (Kafka's broker closes a request it cannot read), the broker's memory stays
bounded, and a real client is served right after."""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from tests.integration.conftest import BrokerProcess, Brokers
from tests.integration.test_kafka_listener import start_with_kafka_listeners
from tests.integration.test_partition_leadership import controller_of

pytestmark = [
    pytest.mark.hostile,
    pytest.mark.plain_pass_only("it writes raw frames to a plaintext Kafka listener"),
]

_MAX_INT32 = 2**31 - 1


def _compact_count(n: int) -> bytes:
    """An unsigned varint of n + 1: a flexible version's array length."""
    value, out = n + 1, bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _v1(api_key: int, version: int) -> bytes:
    return struct.pack(">hhih", api_key, version, 7, 6) + b"hostil"


def _v2(api_key: int, version: int) -> bytes:
    return _v1(api_key, version) + b"\x00"  # no tagged fields


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


# Requests whose first array claims about 2^31 elements, with nothing after the count.
HUGE_COUNTS = {
    "Metadata v9, topics": _v2(3, 9) + _compact_count(_MAX_INT32 - 1),
    "Produce v9, topic_data": _v2(0, 9)
    + b"\x00"
    + struct.pack(">hi", -1, 30_000)
    + _compact_count(_MAX_INT32 - 1),
    "JoinGroup v5, protocols": _v1(11, 5)
    + _string("g")
    + struct.pack(">ii", 10_000, 10_000)
    + _string("")
    + struct.pack(">h", -1)
    + _string("consumer")
    + struct.pack(">i", _MAX_INT32),
    "OffsetCommit v8, topics": _v2(8, 8)
    + b"\x02g"
    + struct.pack(">i", -1)
    + b"\x01"
    + b"\x00"
    + _compact_count(_MAX_INT32 - 1),
    "DescribeGroups v5, groups": _v2(15, 5) + _compact_count(_MAX_INT32 - 1),
}


def _send(port: int, frame: bytes) -> bytes:
    """Write one frame and read until the broker closes; what came back (b"" if nothing)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
        return got


def _peak_rss_kib(broker: BrokerProcess) -> int:
    for line in Path(f"/proc/{broker.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _served(bootstrap: str) -> int:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return len(admin.describe_cluster()["brokers"])
    finally:
        admin.close()


async def test_counts_beyond_the_frame_close_the_connection_and_the_broker_serves_on(
    brokers: Brokers,
) -> None:
    bootstrap = start_with_kafka_listeners(brokers, 1)
    await controller_of(brokers)
    (broker,) = brokers.all
    port = int(bootstrap.split(":")[1])
    peak_before = _peak_rss_kib(broker)
    for name, frame in HUGE_COUNTS.items():
        answer = await asyncio.wait_for(asyncio.to_thread(_send, port, frame), 30)
        assert answer == b"", f"{name}: closed unanswered"
    growth_mib = (_peak_rss_kib(broker) - peak_before) / 1024
    assert growth_mib < 16, f"peak memory grew {growth_mib:.0f} MiB for frames of a few bytes"
    assert await asyncio.to_thread(_served, bootstrap) == 1, "a real client is served right after"


async def test_a_frame_packed_with_the_smallest_elements_is_refused_with_bounded_memory(
    brokers: Brokers,
) -> None:
    """4 MiB of OffsetFetch v1 topics of a one-letter name and no partitions (7 bytes each,
    600,000 of them), which read into objects would take some hundreds of MiB: the elements
    are counted over the bytes first, the request refused and its connection closed, and
    peak memory grows by a few times the frame at most."""
    bootstrap = start_with_kafka_listeners(brokers, 1)
    await controller_of(brokers)
    (broker,) = brokers.all
    port = int(bootstrap.split(":")[1])
    count = (4 << 20) // 7
    frame = (
        _v1(9, 1) + _string("g") + struct.pack(">i", count) + (_string("a") + struct.pack(">i", 0)) * count
    )
    peak_before = _peak_rss_kib(broker)
    assert await asyncio.wait_for(asyncio.to_thread(_send_and_close, port, frame), 60) == b"", "closed"
    growth_mib = (_peak_rss_kib(broker) - peak_before) / 1024
    assert growth_mib < 32, f"peak memory grew {growth_mib:.0f} MiB for a 4 MiB frame"
    assert "holds over 100000 elements" in broker.log()
    assert await asyncio.to_thread(_served, bootstrap) == 1


def _send_and_close(port: int, frame: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        prefix = sock.recv(4, socket.MSG_WAITALL)
        if len(prefix) < 4:
            return b""
        (length,) = struct.unpack(">i", prefix)
        return sock.recv(length, socket.MSG_WAITALL)
