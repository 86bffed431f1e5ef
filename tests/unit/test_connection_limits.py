"""Kafka's connection limits in the one server, on loopback: max.connections holds the
acceptor back (broker-wide, per listener, never the inter-broker listener), the per-address
limit refuses, connections.max.idle.ms closes idle connections and stalled partial frames but
never one whose request is being handled, and a SASL listener's deadline and frame limit
before authentication. Also the rate-limited refusal log and the properties."""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import AsyncIterator, Callable

import msgpack
import pytest

from node.broker.config import load_config
from node.config.properties import ConfigError
from node.security.connection_limits import connection_limits, default_max_connections
from node.security.settings import SettingError
from node.zk.scram_users import new_credential
from tests.support import eventually
from wire.api import (
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeClusterRequest,
    MetadataRequest,
    Response,
)
from wire.client import RpcClient
from wire.connection_quotas import NO_LIMIT, ConnectionLimits, ConnectionQuotas
from wire.credentials import SCRAM_MECHANISMS
from wire.envelope import ParsedRequest
from wire.errors import NetworkException
from wire.frames import encode_frame
from wire.refusals import RefusalLog
from wire.sasl import SaslCredentials
from wire.security import ClientSecurity, ListenerSecurity
from wire.server import RpcServer

PASSWORD = "alice-secret"
USERS = {("alice", m): new_credential(m, PASSWORD) for m in SCRAM_MECHANISMS}
ALICE = ClientSecurity("SASL_PLAINTEXT", sasl=SaslCredentials("SCRAM-SHA-256", "alice", PASSWORD))


class Handler:
    """Answers ApiVersions at once, DescribeCluster after `hold_s` (as a Fetch waits for
    data)."""

    def __init__(self, hold_s: float = 0.0) -> None:
        self.hold_s = hold_s

    async def __call__(self, request: ParsedRequest) -> Response:
        if isinstance(request.body, DescribeClusterRequest):
            await asyncio.sleep(self.hold_s)
        return request.spec.response()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., object]]:
    servers: list[RpcServer] = []

    async def start(
        quotas: ConnectionQuotas, *, security: ListenerSecurity | None = None, handler: Handler | None = None
    ) -> RpcServer:
        server = RpcServer(
            handler or Handler(),
            "127.0.0.1",
            0,
            security=security or ListenerSecurity(),
            quotas=quotas,
        )
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()


async def connect(server: RpcServer, **kwargs: object) -> RpcClient:
    return await RpcClient.connect("127.0.0.1", server.port, request_timeout=10, **kwargs)  # type: ignore[arg-type]


async def answered(client: RpcClient) -> bool:
    return isinstance(await client.send(ApiVersionsRequest()), ApiVersionsResponse)


async def closed_by_server(reader: asyncio.StreamReader, timeout: float = 10) -> bool:
    """True when the server hangs up (end of stream) within `timeout`."""
    return await asyncio.wait_for(reader.read(), timeout) == b""


def has_log(caplog: pytest.LogCaptureFixture, text: str) -> Callable[[], object]:
    async def probe() -> bool:
        return any(text in record.getMessage() for record in caplog.records)

    return probe


async def test_max_connections_holds_new_connections_until_one_closes(
    serve: Callable[..., object], caplog: pytest.LogCaptureFixture
) -> None:
    quotas = ConnectionQuotas(ConnectionLimits(max_connections=2))
    server: RpcServer = await serve(quotas)  # type: ignore[misc]
    first, second = await connect(server), await connect(server)
    assert await answered(first) and await answered(second)
    with caplog.at_level(logging.WARNING, logger="wire.server"):
        # The TCP connection completes (the kernel's backlog) but nobody reads it yet.
        third = await connect(server)
        waiting = asyncio.create_task(third.send(ApiVersionsRequest()))
        await eventually(has_log(caplog, "max.connections reached"), timeout=5, message="no wait logged")
    assert quotas.count() == 2 and not waiting.done()
    await first.close()
    assert isinstance(await asyncio.wait_for(waiting, 10), ApiVersionsResponse), "served once a slot freed"
    assert quotas.count() == 2
    await second.close()
    await third.close()


async def test_a_listener_limit_holds_only_that_listener_and_the_inter_broker_listener_is_not_held(
    serve: Callable[..., object],
) -> None:
    limits = ConnectionLimits(
        max_connections=1, listener_max_connections={"CLIENT": 1}, protected_listener="INTERNAL"
    )
    quotas = ConnectionQuotas(limits)
    client: RpcServer = await serve(quotas, security=ListenerSecurity("CLIENT"))  # type: ignore[misc]
    internal: RpcServer = await serve(quotas, security=ListenerSecurity("INTERNAL"))  # type: ignore[misc]
    held = await connect(client)
    assert await answered(held)
    # Over the broker-wide limit of 1, the inter-broker listener still takes connections.
    brokers = [await connect(internal) for _ in range(3)]
    assert all([await answered(b) for b in brokers])
    assert quotas.count(listener="CLIENT") == 1 and quotas.count(listener="INTERNAL") == 3
    assert not quotas.slot_available("CLIENT")
    for c in (held, *brokers):
        await c.close()


async def test_max_connections_per_ip_refuses_at_once_and_overrides_raise_it(
    serve: Callable[..., object], caplog: pytest.LogCaptureFixture
) -> None:
    quotas = ConnectionQuotas(ConnectionLimits(max_connections_per_ip=1))
    server: RpcServer = await serve(quotas)  # type: ignore[misc]
    kept = await connect(server)
    assert await answered(kept)
    with caplog.at_level(logging.WARNING, logger="wire.server"):
        for _ in range(20):
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            assert await closed_by_server(reader), "a second connection from the address is closed"
            writer.close()
    refusals = [r for r in caplog.records if "max.connections.per.ip" in r.getMessage()]
    assert len(refusals) == 5, "twenty refusals of one kind are five log lines (the burst)"
    assert await answered(kept) and quotas.count(host="127.0.0.1") == 1
    await kept.close()

    overridden = ConnectionQuotas(
        ConnectionLimits(max_connections_per_ip=1, max_connections_per_ip_overrides={"127.0.0.1": 3})
    )
    server = await serve(overridden)  # type: ignore[misc]
    clients = [await connect(server) for _ in range(3)]
    assert all([await answered(c) for c in clients])
    for c in clients:
        await c.close()


async def test_idle_connections_and_stalled_partial_frames_are_closed(
    serve: Callable[..., object], caplog: pytest.LogCaptureFixture
) -> None:
    quotas = ConnectionQuotas(ConnectionLimits(connections_max_idle_ms=300))
    server: RpcServer = await serve(quotas)  # type: ignore[misc]
    with caplog.at_level(logging.WARNING, logger="wire.server"):
        idle_reader, idle_writer = await asyncio.open_connection("127.0.0.1", server.port)
        stalled_reader, stalled_writer = await asyncio.open_connection("127.0.0.1", server.port)
        # A frame that declares 1000 bytes and sends 10 of them, then nothing.
        stalled_writer.write((1000).to_bytes(4, "big") + b"x" * 10)
        await stalled_writer.drain()
        assert await closed_by_server(idle_reader)
        assert await closed_by_server(stalled_reader)
    assert any("14 bytes of a frame, then nothing" in r.getMessage() for r in caplog.records)
    await eventually(_count_is(quotas, 0), timeout=5, message="closed connections still counted")
    for writer in (idle_writer, stalled_writer):
        writer.close()


async def test_a_request_being_handled_is_not_idle(serve: Callable[..., object]) -> None:
    # The handler holds the request for three idle periods.
    quotas = ConnectionQuotas(ConnectionLimits(connections_max_idle_ms=200))
    server: RpcServer = await serve(quotas, handler=Handler(hold_s=0.6))  # type: ignore[misc]
    client = await connect(server)
    assert (await client.send(DescribeClusterRequest())).error_code == 0
    assert await answered(client), "the connection is still open"
    await client.close()


def _count_is(quotas: ConnectionQuotas, expected: int) -> Callable[[], object]:
    async def probe() -> bool:
        return quotas.count() == expected

    return probe


def sasl_listener(**kwargs: int) -> ListenerSecurity:
    return ListenerSecurity(
        "SASL_PLAINTEXT", "SASL_PLAINTEXT", credentials=lambda u, m: USERS.get((u, m)), **kwargs
    )


async def test_a_sasl_connection_must_authenticate_within_the_deadline_even_if_busy(
    serve: Callable[..., object], caplog: pytest.LogCaptureFixture
) -> None:
    quotas = ConnectionQuotas()
    server: RpcServer = await serve(quotas, security=sasl_listener(authentication_timeout_ms=400))  # type: ignore[misc]
    authenticated = await connect(server, security_protocol="SASL_PLAINTEXT", security=ALICE)
    with caplog.at_level(logging.WARNING, logger="wire.server"):
        # ApiVersions is allowed before authentication, but does not extend the deadline.
        lingering = await connect(server)

        async def cut_off() -> bool:
            try:
                await lingering.send(ApiVersionsRequest())
            except NetworkException:
                return True
            return False

        await eventually(cut_off, timeout=10, message="an unauthenticated connection outlived its deadline")
    assert any("not authenticated within 400 ms" in r.getMessage() for r in caplog.records)
    assert await answered(authenticated), "the deadline ends with authentication"
    await authenticated.close()
    await lingering.close()


async def test_frames_before_authentication_are_bounded_by_sasl_server_max_receive_size(
    serve: Callable[..., object],
) -> None:
    server: RpcServer = await serve(ConnectionQuotas(), security=sasl_listener(sasl_max_receive_size=1000))  # type: ignore[misc]
    frame = encode_frame(msgpack.packb([ApiKey.API_VERSIONS, 0, 1, "x" * 2000, {}]))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(frame)
    assert await closed_by_server(reader), "a 2000-byte frame before authentication is refused"
    writer.close()
    # Once authenticated, the listener's socket.request.max.bytes applies.
    client = await connect(server, security_protocol="SASL_PLAINTEXT", security=ALICE)
    assert (await client.send(MetadataRequest(topics=["t" * 2000]))).error_code == 0
    await client.close()


def test_refusal_log_is_a_few_lines_per_kind_and_interval() -> None:
    now = [0.0]
    records: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("test.refusals")
    logger.addHandler(Capture())
    log = RefusalLog(logger, burst=2, interval_s=10, clock=lambda: now[0])
    for i in range(1000):
        log.report("idle", "closing %s", i)
        log.report("max.connections.per.ip", "refused %s", i)
        now[0] += 0.001
    assert records == ["closing 0", "refused 0", "closing 1", "refused 1"]
    now[0] += 10
    log.report("idle", "closing %s", "c")
    assert records[-1] == "closing c (and 998 more like it not logged)"


def test_properties() -> None:
    base = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}
    config = load_config(
        base
        | {
            "listeners": "CLIENT://:9092,INTERNAL://:9093",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "max.connections": "100",
            "listener.name.client.max.connections": "80",
            "max.connections.per.ip": "10",
            "max.connections.per.ip.overrides": "127.0.0.1:50,[::1]:60,localhost:70",
            "connections.max.idle.ms": "5000",
        }
    )
    limits = config.connection_limits
    assert (limits.max_connections, limits.max_connections_per_ip, limits.connections_max_idle_ms) == (
        100,
        10,
        5000,
    )
    assert limits.listener_max_connections == {"CLIENT": 80}
    assert limits.protected_listener == "INTERNAL"
    assert limits.per_ip("127.0.0.1") == 70, "localhost resolves to 127.0.0.1; the last entry wins"
    assert limits.per_ip("::1") in (60, 70) and limits.per_ip("10.0.0.1") == 10
    assert "listener.name.client.max.connections" not in config.unknown
    defaults = load_config(base).connection_limits
    assert defaults == ConnectionLimits(max_connections=default_max_connections()), (
        "Kafka's defaults but for max.connections (half the open-file limit): 10 minutes idle"
    )


@pytest.mark.parametrize(
    ("key", "value", "phrase"),
    [
        ("max.connections", "-2", "outside -1.."),
        ("max.connections.per.ip.overrides", "127.0.0.1", "is not host:count"),
        ("max.connections.per.ip.overrides", "127.0.0.1:many", "not an integer"),
        ("max.connections.per.ip.overrides", "no-such-host.invalid:3", "cannot resolve"),
        ("connections.max.idle.ms", "0", "outside 1.."),
        ("listener.name.plaintext.max.connections", "x", "not an integer"),
        ("max.connections.per.ip", "0", "refuses every client"),
        ("sasl.server.authentication.timeout.ms", "0", "whole number"),
        ("sasl.server.max.receive.size", "big", "whole number"),
    ],
)
def test_bad_limits_name_their_key(key: str, value: str, phrase: str) -> None:
    with pytest.raises(ConfigError, match=phrase) as raised:
        load_config({"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", key: value})
    assert raised.value.key == key


def test_zero_per_ip_with_overrides_admits_only_those() -> None:
    limits = connection_limits(
        {"max.connections.per.ip": 0, "max.connections.per.ip.overrides": {"10.0.0.1": 2}}, [], None
    )
    assert (limits.per_ip("10.0.0.1"), limits.per_ip("10.0.0.2")) == (2, 0)
    with pytest.raises(SettingError):
        connection_limits({"max.connections.per.ip": 0}, [], None)


def test_by_default_connections_leave_half_the_descriptors_to_the_logs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Idle connections up to the open-file limit left no descriptor for a segment roll or a
    checkpoint (issue 31): unset, max.connections is half the soft limit."""
    monkeypatch.setattr(resource, "getrlimit", lambda _: (65536, 1048576))
    assert connection_limits({}, [], None).max_connections == 32768
    assert connection_limits({"max.connections": -1}, [], None).max_connections == 32768
    assert connection_limits({"max.connections": 100000}, [], None).max_connections == 100000
    config = load_config({"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"})
    assert config.connection_limits.max_connections == 32768
    monkeypatch.setattr(resource, "getrlimit", lambda _: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert connection_limits({}, [], None).max_connections == NO_LIMIT
