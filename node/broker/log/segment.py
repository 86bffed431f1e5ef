"""One log segment: `<base offset>.log` holding whole record batches back to back, and
`<base offset>.index`, a sparse offset index (one entry every `index.interval.bytes`).

The index is kept in memory and appended to its file as it grows; a segment whose index file
is missing or damaged rebuilds it by scanning batch headers.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from wire import records
from wire.errors import CorruptMessage

log = logging.getLogger(__name__)

INDEX_ENTRY = struct.Struct(">II")  # offset relative to the base, position
# The most an offset may lie past its segment's base: a relative offset is 32 bits in the
# index (Kafka's int). The log rolls a new segment before an append would pass it.
MAX_RELATIVE_OFFSET = 2**31 - 1


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int) -> None:
        self.base_offset = base_offset
        self.path = directory / segment_name(base_offset, ".log")
        self.index_path = directory / segment_name(base_offset, ".index")
        self._interval = index_interval_bytes
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self._fd).st_size
        self._index_offsets: list[int] = []
        self._index_positions: list[int] = []
        self._index_fd = os.open(self.index_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._bytes_since_index = 0
        # The largest timestamp of any batch here (retention by time and ListOffsets by time
        # go by it); None when not known since a load or truncation read only the tail.
        self._max_timestamp: int | None = records.NO_TIMESTAMP
        # The offset after the last batch; known once recovered or appended to.
        self.next_offset = base_offset

    # --- loading ---

    def load_index(self) -> None:
        """Trust the index file when it is whole; otherwise rebuild it from batch headers."""
        raw = os.pread(self._index_fd, os.fstat(self._index_fd).st_size, 0)
        if len(raw) % INDEX_ENTRY.size == 0 and (raw or self.size == 0):
            positions = []
            for relative, position in INDEX_ENTRY.iter_unpack(raw):
                self._index_offsets.append(self.base_offset + relative)
                positions.append(position)
            self._index_positions = positions
            if all(p < self.size for p in positions):
                self.next_offset = self._scan_last_offset()
                return
        self.recover(check_crc=False)

    def _scan_last_offset(self) -> int:
        start = self._index_positions[-1] if self._index_positions else 0
        next_offset, largest = self.base_offset, records.NO_TIMESTAMP
        for _, header in self.headers(start):
            next_offset = header.next_offset
            largest = max(largest, header.max_timestamp)
        # From the last index entry on, the batches before it are unread: the largest
        # timestamp is known only when the scan began at the first batch.
        self._max_timestamp = largest if start == 0 else None
        return next_offset

    @property
    def max_timestamp(self) -> int:
        if self._max_timestamp is None:
            self._max_timestamp = max(
                (header.max_timestamp for _, header in self.headers()), default=records.NO_TIMESTAMP
            )
        return self._max_timestamp

    def recover(self, *, check_crc: bool = True) -> int:
        """Scan every batch, rebuild the index, and cut the file after the last good batch.
        Returns how many bytes were cut."""
        self._index_offsets, self._index_positions = [], []
        os.ftruncate(self._index_fd, 0)
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        self._max_timestamp = records.NO_TIMESTAMP
        position = 0
        data = os.pread(self._fd, self.size, 0)
        while position < len(data):
            try:
                if check_crc:
                    header = records.validate(data, position)
                else:
                    header = records.read_header(data, position)
                    if position + header.size > len(data):
                        raise CorruptMessage("batch cut short")
                if header.base_offset < self.next_offset:
                    raise CorruptMessage(
                        f"batch at offset {header.base_offset} does not follow offset {self.next_offset - 1}"
                    )
                if header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    raise CorruptMessage(
                        f"batch ending at offset {header.last_offset} is past this segment's"
                    )
            except CorruptMessage as e:
                log.warning(
                    "%s: truncating %d bytes at position %d after the last good batch: %s",
                    self.path,
                    len(data) - position,
                    position,
                    e.message,
                )
                break
            self._maybe_index(header.base_offset, position, header.size)
            self.next_offset = header.next_offset
            self._max_timestamp = max(self._max_timestamp, header.max_timestamp)
            position += header.size
        cut = self.size - position
        if cut:
            os.ftruncate(self._fd, position)
            self.size = position
        return cut

    # --- writing ---

    def append(
        self,
        data: bytes | bytearray | memoryview,
        first: records.BatchHeader,
        last: records.BatchHeader,
        max_timestamp: int,
    ) -> None:
        """Append whole batches; `first` and `last` are the first and last batch's headers,
        `max_timestamp` the largest timestamp of them all.
        On any exception `size`, `next_offset` and the index still describe the file: what
        cannot be indexed is refused before a byte is written, and a torn write is cut off."""
        if (
            not 0
            <= first.base_offset - self.base_offset
            <= last.last_offset - self.base_offset
            <= MAX_RELATIVE_OFFSET
        ):
            raise ValueError(
                f"offsets {first.base_offset}-{last.last_offset} do not fit segment {self.base_offset}"
            )
        position = self.size
        written = os.write(self._fd, data)
        if written != len(data):
            # A full disk may take part of a write: cut it off (and should that fail too, the
            # torn tail goes at the next recovery).
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, position)
            raise OSError(errno.ENOSPC, f"wrote {written} of {len(data)} bytes to {self.path}")
        self.size += len(data)
        self.next_offset = last.next_offset
        if self._max_timestamp is not None:
            self._max_timestamp = max(self._max_timestamp, max_timestamp)
        self._maybe_index(first.base_offset, position, len(data))

    def _maybe_index(self, offset: int, position: int, size: int) -> None:
        if not self._index_offsets or self._bytes_since_index >= self._interval:
            self._index_offsets.append(offset)
            self._index_positions.append(position)
            self._bytes_since_index = 0
            # A failed write leaves the file an entry short: loading finds it damaged and
            # rebuilds it from the batch headers.
            os.write(self._index_fd, INDEX_ENTRY.pack(offset - self.base_offset, position))
        self._bytes_since_index += size

    def truncate_to(self, offset: int) -> None:
        """Keep only the batches wholly before `offset` (a batch holding it goes too)."""
        position = self.position_of(offset)
        if position is None:
            return
        os.ftruncate(self._fd, position)
        self.size = position
        keep = bisect.bisect_left(self._index_positions, position)
        del self._index_offsets[keep:], self._index_positions[keep:]
        os.ftruncate(self._index_fd, keep * INDEX_ENTRY.size)
        self._bytes_since_index = self._interval  # index the next append
        self.next_offset = self._scan_last_offset()

    # --- reading ---

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def headers(self, position: int = 0) -> Iterator[tuple[int, records.BatchHeader]]:
        """(position, header) of each batch from `position` on, reading headers only."""
        while position < self.size:
            header = records.read_header(self.read(position, records.HEADER_SIZE))
            yield position, header
            position += header.size

    def position_of(self, offset: int) -> int | None:
        """The position of the batch holding `offset` (or the first after it), or None when
        the segment ends before it."""
        slot = bisect.bisect_right(self._index_offsets, offset) - 1
        start = self._index_positions[slot] if slot >= 0 else 0
        return next((p for p, header in self.headers(start) if header.last_offset >= offset), None)

    def indexed_offset_before(self, offset: int) -> int:
        """The offset of the index entry a scan for `offset` starts from (the segment's base
        offset when none is at or before it)."""
        slot = bisect.bisect_right(self._index_offsets, offset) - 1
        return self._index_offsets[slot] if slot >= 0 else self.base_offset

    def first_batch_at_or_after_timestamp(self, timestamp: int) -> records.BatchHeader | None:
        return next((header for _, header in self.headers() if header.max_timestamp >= timestamp), None)

    # --- lifecycle ---

    def flush(self) -> None:
        os.fsync(self._fd)
        os.fsync(self._index_fd)

    def close(self) -> None:
        os.close(self._fd)
        os.close(self._index_fd)

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
        self.index_path.unlink(missing_ok=True)
