"""Length-prefixed frames, without I/O.

`FrameDecoder` is fed bytes as they arrive and hands out whole frames, or `NEED_DATA`;
`encode_frame` prefixes a payload with its 4-byte big-endian length. The decoder never
allocates more than it has been fed, so a nonsense length costs nothing until bytes arrive,
and a length over the limit is refused before a byte of its body is buffered.
"""

from __future__ import annotations

import struct
from typing import Final

from wire.errors import FrameError

# Kafka's socket.request.max.bytes.
DEFAULT_MAX_FRAME_SIZE: Final = 104_857_600

_LENGTH = struct.Struct(">i")


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()


def encode_frame(payload: bytes) -> bytes:
    return _LENGTH.pack(len(payload)) + payload


class FrameDecoder:
    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size <= 0:
            raise ValueError("max_frame_size must be positive")
        self.max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._start = 0

    @property
    def buffered(self) -> int:
        """Bytes fed but not yet handed out; non-zero at end of stream means a torn frame."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def pending_length(self) -> int | None:
        """The declared length of the frame being assembled, once its length has arrived."""
        if len(self._buffer) - self._start < _LENGTH.size:
            return None
        (length,) = _LENGTH.unpack_from(self._buffer, self._start)
        return int(length)

    def next_frame(self) -> bytes | _NeedData:
        """The next whole frame's payload, or NEED_DATA; raises FrameError on a bad length."""
        available = len(self._buffer) - self._start
        if available < _LENGTH.size:
            self._compact()
            return NEED_DATA
        (length,) = _LENGTH.unpack_from(self._buffer, self._start)
        if length < 0 or length > self.max_frame_size:
            raise FrameError(f"frame length {length} outside 0..{self.max_frame_size}")
        if available < _LENGTH.size + length:
            self._compact()
            return NEED_DATA
        begin = self._start + _LENGTH.size
        payload = bytes(self._buffer[begin : begin + length])
        self._start = begin + length
        return payload

    def _compact(self) -> None:
        # Drop consumed bytes only when waiting for more, so a burst of small frames is
        # sliced out of one buffer without copying the tail after every frame.
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
