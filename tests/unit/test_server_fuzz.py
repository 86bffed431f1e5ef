"""The server on loopback, fed by hypothesis: arbitrary bytes cut into arbitrary chunks, and
arbitrary sequences of SaslHandshake, SaslAuthenticate (random tokens, and real SCRAM
messages made with wrong passwords) and other requests. Whatever arrives, the server neither
fails (no error logged, no exception escaping a connection's task) nor lets a request past
SASL without alice's password, and it keeps answering another client.

`tests/unit/test_sasl.py` fuzzes the SASL state machine alone and `test_wire_fuzz.py` the
codec; this is the same input through the socket, the frame decoder and the SASL exchange
as the server runs them. The server runs on its own event loop in a thread so that each
example is plain blocking socket I/O.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Iterator

import msgpack
import pytest
import scramp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.zk.scram_users import new_credential
from wire.api import (
    API_SPECS,
    ApiVersionsRequest,
    MetadataRequest,
    ProduceRequest,
    Request,
    Response,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    StopReplicaRequest,
)
from wire.connection_quotas import ConnectionQuotas
from wire.context import ANONYMOUS
from wire.credentials import SCRAM_MECHANISMS
from wire.envelope import ParsedRequest, RequestHeader, encode_request
from wire.frames import NEED_DATA, FrameDecoder, encode_frame
from wire.security import ListenerSecurity
from wire.server import RpcServer

PASSWORD = "alice-secret"
USERS = {("alice", m): new_credential(m, PASSWORD) for m in SCRAM_MECHANISMS}
_IO_TIMEOUT_S = 10.0


class Served:
    """A PLAINTEXT and a SASL_PLAINTEXT listener on one loop in a thread; what reached the
    handler, and every error the loop or the server logged."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []  # (api name, principal)
        self.errors: list[str] = []
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(lambda _, context: self.errors.append(str(context.get("message"))))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        quotas = ConnectionQuotas()
        sasl = ListenerSecurity(
            "SASL_PLAINTEXT",
            "SASL_PLAINTEXT",
            credentials=lambda user, mechanism: USERS.get((user, mechanism)),
            failed_authentication_delay_ms=0,
        )
        self.plaintext = RpcServer(self._handle, "127.0.0.1", 0, max_frame_size=4096, quotas=quotas)
        self.sasl = RpcServer(self._handle, "127.0.0.1", 0, max_frame_size=4096, security=sasl, quotas=quotas)
        self.quotas = quotas
        for server in (self.plaintext, self.sasl):
            asyncio.run_coroutine_threadsafe(server.start(), self.loop).result(_IO_TIMEOUT_S)

    async def _handle(self, request: ParsedRequest) -> Response:
        self.seen.append((request.spec.key.name, request.context.principal))
        return request.spec.response()

    def close(self) -> None:
        for server in (self.plaintext, self.sasl):
            asyncio.run_coroutine_threadsafe(server.close(), self.loop).result(_IO_TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(_IO_TIMEOUT_S)
        self.loop.close()


class ErrorRecords(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Served, ErrorRecords]]:
    errors = ErrorRecords()
    logging.getLogger().addHandler(errors)
    served = Served()
    yield served, errors
    served.close()
    logging.getLogger().removeHandler(errors)


class Connection:
    """A blocking client that writes requests and reads whatever frames come back."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=_IO_TIMEOUT_S)
        self.decoder = FrameDecoder(1 << 20)
        self.correlation_id = 0
        self.closed = False

    def send(self, request: Request) -> dict[str, object] | None:
        """The response's body, or None once the server has closed the connection."""
        self.correlation_id += 1
        header = RequestHeader(API_SPECS[request.API_KEY].key, 0, self.correlation_id, "fuzz")
        return self.send_raw(encode_frame(encode_request(header, request)))

    def send_raw(self, data: bytes) -> dict[str, object] | None:
        try:
            self.sock.sendall(data)
        except OSError:
            self.closed = True
            return None
        while not self.closed:
            frame = self.decoder.next_frame()
            if frame is not NEED_DATA:
                assert isinstance(frame, bytes)
                _, body = msgpack.unpackb(frame)
                return body  # type: ignore[no-any-return]
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                raise AssertionError("the server neither answered nor closed the connection") from None
            except OSError:
                data = b""
            if not data:
                self.closed = True
            self.decoder.feed(data)
        return None


def bystander_is_served(port: int) -> bool:
    connection = Connection(port)
    try:
        body = connection.send(ApiVersionsRequest())
        return body is not None and body.get("error_code") == 0
    finally:
        connection.sock.close()


def fresh(served: tuple[Served, ErrorRecords]) -> tuple[Served, ErrorRecords]:
    """The module's server, with the errors of earlier examples forgotten (each example
    is judged on its own, so that hypothesis can shrink a failure)."""
    server, errors = served
    server.errors.clear()
    errors.messages.clear()
    return server, errors


def check_server_still_well(served: Served, errors: ErrorRecords) -> None:
    assert bystander_is_served(served.plaintext.port), "another client is still answered"
    assert not served.errors, f"the loop reported: {served.errors}"
    assert not errors.messages, f"the server logged errors: {errors.messages}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.binary(min_size=1, max_size=64), min_size=1, max_size=12),
    st.sampled_from(["plaintext", "sasl"]),
)
def test_arbitrary_bytes_in_arbitrary_chunks(
    served: tuple[Served, ErrorRecords], chunks: list[bytes], listener: str
) -> None:
    server, errors = fresh(served)
    port = server.plaintext.port if listener == "plaintext" else server.sasl.port
    before = len(server.seen)
    connection = Connection(port)
    for chunk in chunks:
        try:
            connection.sock.sendall(chunk)
        except OSError:
            break
    connection.sock.close()
    check_server_still_well(server, errors)
    if listener == "sasl":
        # Only ApiVersions passes an unauthenticated SASL connection.
        assert all(name == "API_VERSIONS" for name, _ in server.seen[before:])


# Passwords a SCRAM client takes (SASLprep refuses control characters).
wrong_passwords = st.text(
    st.characters(min_codepoint=33, max_codepoint=126)
    | st.characters(min_codepoint=0xC0, max_codepoint=0xFF),
    max_size=20,
).filter(lambda p: p != PASSWORD)
# One step of a client on the SASL listener.
steps = st.one_of(
    st.tuples(st.just("handshake"), st.sampled_from([*SCRAM_MECHANISMS, "PLAIN", "GSSAPI", ""])),
    st.tuples(st.just("token"), st.binary(max_size=200)),
    # A real SCRAM client-first, then its client-final for whatever server-first came back,
    # made with a password that is not alice's.
    st.tuples(st.just("scram"), wrong_passwords),
    st.tuples(st.just("plain"), wrong_passwords),
    st.tuples(st.just("request"), st.sampled_from(["api_versions", "metadata", "produce", "stop_replica"])),
    st.tuples(st.just("raw"), st.binary(max_size=40)),
)
_REQUESTS: dict[str, Request] = {
    "api_versions": ApiVersionsRequest(),
    "metadata": MetadataRequest(),
    "produce": ProduceRequest(),
    "stop_replica": StopReplicaRequest(controller_id=1, controller_epoch=2**31 - 1),
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(steps, min_size=1, max_size=8))
def test_sasl_exchanges_never_let_a_stranger_in(
    served: tuple[Served, ErrorRecords], sequence: list[tuple[str, object]]
) -> None:
    server, errors = fresh(served)
    before = len(server.seen)
    connection = Connection(server.sasl.port)
    mechanism = "SCRAM-SHA-256"
    try:
        for kind, value in sequence:
            if connection.closed:
                break
            if kind == "handshake":
                mechanism = str(value)
                connection.send(SaslHandshakeRequest(mechanism=mechanism))
            elif kind == "token":
                connection.send(SaslAuthenticateRequest(auth_bytes=bytes(value)))  # type: ignore[arg-type]
            elif kind == "scram":
                _scram_with_password(connection, mechanism, str(value))
            elif kind == "plain":
                connection.send(SaslAuthenticateRequest(auth_bytes=f"\0alice\0{value}".encode()))
            elif kind == "request":
                connection.send(_REQUESTS[str(value)])
            else:
                # The stream may now be mid-frame, so nothing after it is meaningful; the
                # server answers, closes, or waits for the rest until we hang up.
                connection.sock.sendall(bytes(value))  # type: ignore[arg-type]
                break
    finally:
        connection.sock.close()
    reached = server.seen[before:]
    assert all(principal == ANONYMOUS for _, principal in reached), "nobody authenticated"
    assert all(name == "API_VERSIONS" for name, _ in reached), f"got past SASL: {reached}"
    check_server_still_well(server, errors)


def _scram_with_password(connection: Connection, mechanism: str, password: str) -> None:
    if mechanism not in SCRAM_MECHANISMS:
        mechanism = "SCRAM-SHA-256"
    client = scramp.ScramClient([mechanism], "alice", password)
    first = connection.send(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
    if first is None or first.get("error_code") or not first.get("auth_bytes"):
        return
    try:
        client.set_server_first(bytes(first["auth_bytes"]).decode())  # type: ignore[arg-type]
    except (scramp.ScramException, UnicodeDecodeError):
        return
    final = connection.send(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
    assert final is None or final.get("error_code") != 0, "a wrong password must not authenticate"


def test_the_right_password_does_get_in(served: tuple[Served, ErrorRecords]) -> None:
    """The control: the same client with alice's password is let in, so the properties
    above are not true merely because nothing can authenticate."""
    server, _ = served
    connection = Connection(server.sasl.port)
    connection.send(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", PASSWORD)
    first = connection.send(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
    assert first is not None
    client.set_server_first(bytes(first["auth_bytes"]).decode())  # type: ignore[arg-type]
    final = connection.send(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
    assert final is not None and final["error_code"] == 0
    assert connection.send(MetadataRequest()) is not None
    connection.sock.close()
    assert server.seen[-1] == ("METADATA", "User:alice")
