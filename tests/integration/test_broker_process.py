"""The broker process facing bad input: bad configuration, bad bytes on the wire."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import msgpack
import pytest

from node.clients.admin import KeelAdminClient
from node.cluster.zookeeper import free_ports
from tests.integration.conftest import BrokerProcess, Brokers
from tests.support import eventually, open_connection, run_command
from wire.errors import ErrorCode
from wire.frames import encode_frame


def run_node(*args: str) -> subprocess.CompletedProcess[str]:
    return run_command("node.broker.main", *args, timeout=60)


@pytest.mark.parametrize(
    ("content", "overrides", "key"),
    [
        ("zookeeper.connect=127.0.0.1:1\n", [], "broker.id"),
        (
            "broker.id=1\nzookeeper.connect=127.0.0.1:1\n",
            ["--override", "zookeeper.session.timeout.ms=soon"],
            "zookeeper.session.timeout.ms",
        ),
        ("broker.id=1\nzookeeper.connect=127.0.0.1:1\nlisteners=9092\n", [], "listeners"),
    ],
)
def test_bad_configuration_exits_2_naming_the_key(
    tmp_path: Path, content: str, overrides: list[str], key: str
) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(content)
    result = run_node(str(properties), *overrides)
    assert result.returncode == 2
    assert key in result.stderr and "invalid configuration" in result.stderr


def test_missing_properties_file_exits_2(tmp_path: Path) -> None:
    result = run_node(str(tmp_path / "nope.properties"))
    assert result.returncode == 2 and "cannot read" in result.stderr


def test_unreachable_zookeeper_exits_1_with_a_clear_message(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    port = free_ports(1)[0]
    properties.write_text(
        f"broker.id=1\nzookeeper.connect=127.0.0.1:{port}\nzookeeper.connection.timeout.ms=1500\n"
    )
    result = run_node(str(properties))
    assert result.returncode == 1
    assert "no ZooKeeper session" in result.stderr


async def exchange(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        head = await asyncio.wait_for(reader.readexactly(4), 5)
        return await reader.readexactly(int.from_bytes(head, "big"))
    except asyncio.IncompleteReadError:
        return b""  # the broker closed this connection
    finally:
        writer.close()


BAD_INPUTS = {
    "over the frame limit": (b"\x06\x40\x00\x01" + b"x" * 100, None),
    "negative length": (b"\x80\x00\x00\x00", None),
    "not msgpack": (encode_frame(b"\xc1\xff\x00"), None),
    "no correlation id": (encode_frame(msgpack.packb("hello")), None),
    "wrong field types": (encode_frame(msgpack.packb([60, 0, 11, 5, {}])), ErrorCode.INVALID_REQUEST),
    "unknown api key": (encode_frame(msgpack.packb([4242, 0, 12, None, {}])), ErrorCode.INVALID_REQUEST),
    "unknown version": (encode_frame(msgpack.packb([18, 99, 13, None, {}])), ErrorCode.UNSUPPORTED_VERSION),
    "body not a map": (encode_frame(msgpack.packb([60, 0, 14, None, 7])), ErrorCode.INVALID_REQUEST),
}


@pytest.mark.plain_pass_only(
    "writes hand-made plaintext frames on a raw socket: on a SASL_SSL listener they are not TLS, and "
    "before authentication anything but ApiVersions closes the connection (test_sasl_plaintext.py)"
)
async def test_bad_wire_input_is_answered_or_closed_and_the_broker_keeps_serving(brokers: Brokers) -> None:
    (broker,) = brokers.start(1)
    await eventually(broker.describe, timeout=20, message="broker did not come up")
    for name, (data, expected) in BAD_INPUTS.items():
        answer = await exchange(broker.port, data)
        if expected is None:
            assert answer == b"", f"{name}: the connection should be closed"
        else:
            correlation_id, body = msgpack.unpackb(answer)
            assert body["error_code"] == expected, name
            assert correlation_id == msgpack.unpackb(data[4:])[2], name
    # A torn frame followed by a hang-up.
    _, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    writer.write(encode_frame(msgpack.packb([18, 0, 1, None, {}]))[:5])
    writer.close()
    async with KeelAdminClient(f"127.0.0.1:{broker.port}") as admin:
        versions = await admin.api_versions()
    assert {v.api_key for v in versions.api_keys} >= {18, 60}
    assert broker.running
    log = broker.log()
    assert log.count("closing connection from") >= 4 and "Traceback" not in log


async def test_a_flood_of_bad_connections_does_not_grow_memory(brokers: Brokers) -> None:
    (broker,) = brokers.start(1)
    await eventually(broker.describe, timeout=20, message="broker did not come up")
    await flood(broker, 50)  # warm-up: allocator pools, log handlers
    before = broker.rss_kib()
    await flood(broker, 500)
    growth_mib = (broker.rss_kib() - before) / 1024
    assert growth_mib < 16, f"RSS grew {growth_mib:.1f} MiB over 500 bad connections"
    assert await broker.describe() is not None


async def flood(broker: BrokerProcess, rounds: int) -> None:
    # Each declares a 90 MB frame and sends 64 KiB of it, then hangs up; and some garbage.
    chunk = b"\x05\x5d\x4a\x80" + b"\x00" * 65536
    for i in range(rounds):
        data = chunk if i % 2 == 0 else encode_frame(b"\xc1" * 100)
        _, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        writer.write(data)
        await writer.drain()
        writer.close()


async def test_an_orderly_stop_with_connections_open_exits_0_and_logs_no_error(brokers: Brokers) -> None:
    """SIGTERM while a client's connection is open (its server task waiting for the next
    frame): the broker stops with status 0 and its log holds no ERROR and no traceback."""
    (broker,) = brokers.start(1)
    await eventually(broker.describe, timeout=20, message="broker did not come up")
    reader, writer = await open_connection("127.0.0.1", broker.port)
    writer.write(encode_frame(msgpack.packb([18, 0, 1, None, {}])))
    await writer.drain()
    await asyncio.wait_for(reader.readexactly(4), 5)  # the broker serves this connection
    try:
        status = await asyncio.to_thread(broker.stop, 30)
    finally:
        writer.close()
    log = broker.log()
    assert status == 0, log[-4000:]
    assert " ERROR " not in log and "Traceback" not in log, log[-4000:]
