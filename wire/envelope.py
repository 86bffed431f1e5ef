"""Request and response envelopes: the msgpack value inside one frame.

A request is `[api_key, api_version, correlation_id, client_id, body]`, a response
`[correlation_id, body]`. Decoding goes as far as it can and says how far it got: an error
raised after the correlation id was read carries it, so the server can answer rather than
hang up.
"""

from __future__ import annotations

import dataclasses

import msgpack

from wire.api import API_SPECS, ApiKey, ApiSpec, Request, Response
from wire.context import ANONYMOUS_CONTEXT, RequestContext
from wire.errors import CorruptMessage, InvalidRequest, UnsupportedVersion, WireError

# Malformed msgpack surfaces as any of these; none of them may escape the codec.
_UNPACK_ERRORS = (ValueError, TypeError, OverflowError, RecursionError, msgpack.UnpackException)
_REQUEST_FIELDS = 5
_RESPONSE_FIELDS = 2


@dataclasses.dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclasses.dataclass(frozen=True)
class ParsedRequest:
    header: RequestHeader
    spec: ApiSpec
    body: Request
    context: RequestContext = ANONYMOUS_CONTEXT


class _Budget:
    """What one frame may unpack to. A msgpack map or array can be one byte, and each becomes
    a Python object of 56 to 64 bytes: a frame of empty maps took 73 times its size in memory
    and a second of the loop per MiB. Keel's requests spend at least 8 bytes of frame per map
    or array (their fields are named) and 4 per array element, so a frame may unpack to at most
    one map or array per 8 of its bytes and one array element or map entry per 4 (past a
    floor for small ones; `_could_overrun` says when they are counted). What is left is the
    scalars: a string of two characters takes 3 bytes of frame and 51 of memory, so a frame
    unpacks to at most about 17 times its size."""

    FLOOR = 10_000

    def __init__(self, size: int) -> None:
        self.containers = self.FLOOR + size // 8
        self.elements = self.FLOOR + size // 4

    def map(self, value: dict[object, object]) -> dict[object, object]:
        self.containers -= 1
        if self.containers < 0:
            raise _OverBudget("maps and arrays")
        return value

    def array(self, value: list[object]) -> list[object]:
        self.containers -= 1
        self.elements -= len(value)
        if self.containers < 0 or self.elements < 0:
            raise _OverBudget("array elements" if self.elements < 0 else "maps and arrays")
        return value


class _OverBudget(Exception):
    pass


# Every msgpack map or array starts with one of these bytes (fixmap, fixarray, array 16/32,
# map 16/32); other bytes may be these too (an integer's or a string's own), so their count is
# an upper bound on the containers a frame can hold.
_CONTAINER_MARKERS = frozenset([*range(0x80, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF])
_NOT_MARKERS = bytes(b for b in range(256) if b not in _CONTAINER_MARKERS)


# The requests made of many small maps and arrays (a controller's, one map and a few arrays per
# partition state), whose frames are worth scanning for `_could_overrun`; for the others, the
# hooks cost little (a produce or a fetch answer is a few maps around its records), less
# than the scan of their record bytes would.
_SCANNED_KEYS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA})
# A request frame starts with the 5-element array and its API key, a positive fixint.
_SCANNED_PREFIXES = frozenset(bytes([0x95, key]) for key in _SCANNED_KEYS)


def _could_overrun(payload: bytes, budget: _Budget) -> bool:
    """Whether the frame could hold more maps and arrays than its budget: only then is each
    one counted as it unpacks (a Python call per map and array, 12 % of a LeaderAndIsr's
    unpacking). Without the hooks, no one map or array may be longer than the budget's
    elements (msgpack checks it), and all of them together are bounded by the frame's bytes
    (each element takes one at least) rather than a quarter of them: a pointer each. Only
    the frames of `_SCANNED_KEYS` are scanned; the others are counted one by one."""
    if len(payload) <= budget.FLOOR or payload[:2] not in _SCANNED_PREFIXES:
        return True
    return len(payload.translate(None, _NOT_MARKERS)) > budget.containers


def _unpack(payload: bytes) -> object:
    budget = _Budget(len(payload))
    counted = _could_overrun(payload, budget)
    try:
        return msgpack.unpackb(
            payload,
            raw=False,
            strict_map_key=True,
            use_list=True,
            object_hook=budget.map if counted else None,
            list_hook=budget.array if counted else None,
            max_map_len=budget.elements,
            max_array_len=budget.elements,
        )
    except _OverBudget as e:
        raise CorruptMessage(f"a frame of {len(payload)} bytes holding more {e} than it may") from None
    except ValueError as e:
        if "exceeds max_" in str(e):  # msgpack's own check of max_map_len, max_array_len
            too_many = f"a frame of {len(payload)} bytes holding more elements than it may"
            raise CorruptMessage(too_many) from None
        raise CorruptMessage(f"not a msgpack value: {e}") from e
    except _UNPACK_ERRORS as e:
        raise CorruptMessage(f"not a msgpack value: {e}") from e


def encode_request(header: RequestHeader, body: Request) -> bytes:
    value = [header.api_key, header.api_version, header.correlation_id, header.client_id, body.to_wire()]
    return msgpack.packb(value, use_bin_type=True)  # type: ignore[no-any-return]


def decode_request_header(payload: bytes) -> tuple[RequestHeader, object]:
    """The header and the still-unchecked body of a request frame."""
    value = _unpack(payload)
    if type(value) is not list:
        raise InvalidRequest(f"request must be a list, got {type(value).__name__}")
    correlation_id = value[2] if len(value) > 2 and type(value[2]) is int else None
    if len(value) != _REQUEST_FIELDS:
        raise InvalidRequest(f"request must have {_REQUEST_FIELDS} fields, got {len(value)}", correlation_id)
    api_key, api_version, _, client_id, body = value
    if correlation_id is None:
        raise InvalidRequest("correlation_id must be an int")
    if type(api_key) is not int or type(api_version) is not int:
        raise InvalidRequest("api_key and api_version must be ints", correlation_id)
    if client_id is not None and type(client_id) is not str:
        raise InvalidRequest("client_id must be a string or nil", correlation_id)
    return RequestHeader(api_key, api_version, correlation_id, client_id), body


def parse_request(payload: bytes, context: RequestContext = ANONYMOUS_CONTEXT) -> ParsedRequest:
    """Decode and validate a whole request frame against the API it names; `context` says
    who sent it (the connection's principal and listener)."""
    header, body = decode_request_header(payload)
    spec = API_SPECS.get(header.api_key)
    if spec is None:
        raise InvalidRequest(f"unknown api key {header.api_key}", header.correlation_id)
    if not spec.min_version <= header.api_version <= spec.max_version:
        raise UnsupportedVersion(
            f"{spec.key.name} version {header.api_version} not in {spec.min_version}..{spec.max_version}",
            header.correlation_id,
        )
    try:
        parsed = spec.request.from_wire(body)
    except WireError as e:
        e.correlation_id = header.correlation_id
        raise
    return ParsedRequest(header, spec, parsed, context)


def encode_response(correlation_id: int, body: Response) -> bytes:
    return msgpack.packb([correlation_id, body.to_wire()], use_bin_type=True)  # type: ignore[no-any-return]


def error_response(error: WireError) -> Response:
    return Response(error_code=int(error.code), error_message=error.message)


def decode_response(payload: bytes) -> tuple[int, dict[str, object]]:
    """The correlation id and the unchecked body map of a response frame."""
    value = _unpack(payload)
    if (
        type(value) is not list
        or len(value) != _RESPONSE_FIELDS
        or type(value[0]) is not int
        or type(value[1]) is not dict
    ):
        raise CorruptMessage("response must be [correlation_id, body map]")
    return value[0], value[1]
