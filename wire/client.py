"""The asyncio RPC client: pipelined requests matched to answers by correlation id.

Many requests may be in flight on one connection; each has its own timeout. When the
connection drops, every pending request fails with NETWORK_EXCEPTION naming the peer.

`connect` sets the connection up as its endpoint's security protocol says: TLS first, then
the SASL exchange (SaslHandshake, SaslAuthenticate until done), all within the connect
timeout, before any other request can be sent on it.

Timeouts are `asyncio.timeout` blocks, never `asyncio.wait_for`: Python 3.11's wait_for
returns the result when its task is cancelled just as the awaited answer arrives, losing the
cancellation, and a loop cancelled that way (a replica fetcher when its broker stops) runs on
and holds the broker's shutdown past shutdown.timeout.ms. A cancellation always propagates.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import TypeVar

from wire.api import (
    API_SPECS,
    Request,
    Response,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeResponse,
)
from wire.envelope import RequestHeader, decode_response, encode_request
from wire.errors import (
    BrokerUnreachable,
    NetworkException,
    RequestTimedOut,
    SaslAuthenticationFailed,
    WireError,
    for_code,
)
from wire.frames import DEFAULT_MAX_FRAME_SIZE, NEED_DATA, FrameDecoder, encode_frame
from wire.sasl import SaslClient, SaslCredentials, handshake_error
from wire.security import PLAINTEXT_CLIENT, ClientSecurity, uses_sasl, uses_tls

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Response)
_READ_CHUNK = 256 * 1024
# How long close() waits for the peer to end a TLS session (its close_notify): a live peer
# answers at once; one stopped or gone would otherwise hold close() for asyncio's 30 s SSL
# shutdown timeout, and a broker's shutdown with it. Kafka's clients do not wait at all.
_TLS_CLOSE_WAIT_S = 0.2


class RpcClient:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        address: str,
        client_id: str,
        request_timeout: float,
        max_frame_size: int,
    ) -> None:
        self.address = address
        self._reader = reader
        self._writer = writer
        self._client_id = client_id
        self._request_timeout = request_timeout
        self._decoder = FrameDecoder(max_frame_size)
        self._pending: dict[int, asyncio.Future[dict[str, object]]] = {}
        self._correlation_ids = itertools.count(1)
        self._closed: WireError | None = None
        self._read_task = asyncio.create_task(self._read_loop(), name=f"rpc-client-{address}")

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        client_id: str = "keel",
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        security_protocol: str = "PLAINTEXT",
        security: ClientSecurity = PLAINTEXT_CLIENT,
    ) -> RpcClient:
        """A connection set up as `security_protocol` says, with `security`'s TLS context and
        SASL identity. Raises NetworkException when it cannot be opened (TLS refused
        included), SaslAuthenticationFailed (or UnsupportedSaslMechanism) when the server
        refuses the credentials."""
        address = f"{host}:{port}"
        if uses_sasl(security_protocol) and security.sasl is None:
            raise SaslAuthenticationFailed(
                f"{address} is a {security_protocol} endpoint: set sasl.mechanism and sasl.jaas.config"
            )
        tls = security.tls_context() if uses_tls(security_protocol) else None
        try:
            async with asyncio.timeout(connect_timeout):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=tls, server_hostname=host if tls else None
                )
        except (OSError, TimeoutError) as e:
            raise BrokerUnreachable(f"cannot connect to {address}{' over TLS' if tls else ''}: {e}") from e
        client = cls(
            reader,
            writer,
            address=address,
            client_id=client_id,
            request_timeout=request_timeout,
            max_frame_size=max_frame_size,
        )
        if security.sasl is not None and uses_sasl(security_protocol):
            try:
                async with asyncio.timeout(connect_timeout):
                    await client._authenticate(security.sasl)
            except BaseException as e:
                await client.close()
                if isinstance(e, TimeoutError):
                    raise NetworkException(f"SASL authentication with {address} timed out") from e
                raise
        return client

    async def _authenticate(self, credentials: SaslCredentials) -> None:
        """The client's side of the SASL exchange; raises the server's refusal."""
        sasl = SaslClient(credentials)
        handshake = await self.send(sasl.handshake())
        assert isinstance(handshake, SaslHandshakeResponse)
        if (error := handshake_error(handshake)) is not None:
            raise error
        token: bytes | None = sasl.first_token()
        while token is not None:
            answer = await self.send(SaslAuthenticateRequest(auth_bytes=token))
            assert isinstance(answer, SaslAuthenticateResponse)
            if answer.error_code:
                raise for_code(answer.error_code, f"{self.address}: {answer.error_message or ''}")
            token = sasl.respond(answer.auth_bytes)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def send(self, request: Request, *, version: int = 0, timeout: float | None = None) -> Response:
        """Send one request and return its response body, typed by the API's declaration."""
        spec = API_SPECS[request.API_KEY]
        if self._closed is not None:
            raise NetworkException(self._closed.message)
        correlation_id = next(self._correlation_ids)
        header = RequestHeader(spec.key, version, correlation_id, self._client_id)
        future: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = future
        self._writer.write(encode_frame(encode_request(header, request)))
        try:
            async with asyncio.timeout(timeout or self._request_timeout):
                body = await future
        except TimeoutError:
            raise RequestTimedOut(f"{spec.key.name} to {self.address} timed out") from None
        finally:
            self._pending.pop(correlation_id, None)
        return spec.response.from_wire(body)

    async def call(self, request: Request, response_type: type[R], **kwargs: float) -> R:
        """Send and raise the response's error, if it carries one."""
        response = await self.send(request, **kwargs)  # type: ignore[arg-type]
        if response.error_code:
            raise for_code(response.error_code, response.error_message or "")
        assert isinstance(response, response_type)
        return response

    async def close(self) -> None:
        self._fail_pending(NetworkException(f"connection to {self.address} closed"))
        self._writer.close()
        self._read_task.cancel()
        # Waits for the read loop without taking its CancelledError for this task's own
        # (suppressing it here would also swallow a cancellation of close()'s caller).
        await asyncio.wait([self._read_task])
        try:
            async with asyncio.timeout(_TLS_CLOSE_WAIT_S):
                await self._writer.wait_closed()
        except (ConnectionError, TimeoutError):
            self._writer.transport.abort()

    async def _read_loop(self) -> None:
        try:
            while data := await self._reader.read(_READ_CHUNK):
                self._decoder.feed(data)
                while (frame := self._decoder.next_frame()) is not NEED_DATA:
                    assert isinstance(frame, bytes)
                    correlation_id, body = decode_response(frame)
                    future = self._pending.get(correlation_id)
                    if future is not None and not future.done():
                        future.set_result(body)
            self._fail_pending(NetworkException(f"connection to {self.address} lost"))
        except WireError as e:
            log.warning("closing connection to %s: %s", self.address, e.message)
            self._fail_pending(NetworkException(f"connection to {self.address} sent garbage: {e.message}"))
            self._writer.close()
        except (ConnectionError, OSError) as e:
            self._fail_pending(NetworkException(f"connection to {self.address} lost: {e}"))
        finally:
            # A connection the peer ended is closed here too, so nobody has to remember to.
            self._writer.close()

    def _fail_pending(self, error: NetworkException) -> None:
        if self._closed is None:
            self._closed = error
        for future in self._pending.values():
            if not future.done():
                future.set_exception(NetworkException(error.message))
        self._pending.clear()
