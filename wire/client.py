"""The asyncio RPC client: pipelined requests matched to answers by correlation id.

Many requests may be in flight on one connection; each has its own timeout. When the
connection drops, every pending request fails with NETWORK_EXCEPTION naming the peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from typing import TypeVar

from wire.api import API_SPECS, Request, Response
from wire.envelope import RequestHeader, decode_response, encode_request
from wire.errors import NetworkException, RequestTimedOut, WireError, for_code
from wire.frames import DEFAULT_MAX_FRAME_SIZE, NEED_DATA, FrameDecoder, encode_frame

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Response)
_READ_CHUNK = 256 * 1024


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
    ) -> RpcClient:
        address = f"{host}:{port}"
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), connect_timeout)
        except (OSError, TimeoutError) as e:
            raise NetworkException(f"cannot connect to {address}: {e}") from e
        return cls(
            reader,
            writer,
            address=address,
            client_id=client_id,
            request_timeout=request_timeout,
            max_frame_size=max_frame_size,
        )

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
            body = await asyncio.wait_for(future, timeout or self._request_timeout)
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
        with contextlib.suppress(asyncio.CancelledError):
            await self._read_task
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()

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
