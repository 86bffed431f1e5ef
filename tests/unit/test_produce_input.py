"""`keel produce`'s stdin: lines read in linear time, grouped into record batches that stay
within --max-request-size, and a line too large for one record refused before anything of it
is sent."""

from __future__ import annotations

import io
import random
import time

import pytest

from node.cli.console_commands import BATCH_LINES, RecordTooLarge, _refused, read_lines, to_batches
from node.command.entry import EXIT_PARTIAL, EXIT_USAGE
from wire import records


class _Stream:
    """Hands out `data` in reads of at most `size` bytes, counting what was read."""

    def __init__(self, data: bytes, size: int) -> None:
        self._data = io.BytesIO(data)
        self._size = size
        self.read = 0

    def read1(self, size: int = -1, /) -> bytes:
        chunk = self._data.read(self._size)
        self.read += len(chunk)
        return chunk


def lines_of(data: bytes, read_size: int = 7, max_line: int = 1 << 30) -> list[bytes]:
    return [line for chunk in read_lines(_Stream(data, read_size), max_line=max_line) for line in chunk]


def test_lines_across_reads_with_empty_ones_and_an_unfinished_last() -> None:
    data = b"first\n\nthird line spans reads\r\n" + b"x" * 50 + b"\nlast"
    assert lines_of(data) == data.split(b"\n")
    assert lines_of(b"") == []
    assert lines_of(b"one\n") == [b"one"]


def test_a_long_line_is_read_in_linear_time() -> None:
    """32 MiB in 1 KiB reads: copying the unfinished line on each read, as a reader that joins
    what it holds with every new chunk does, moves about 500 GB; held in pieces it is a moment."""
    line = b"B" * (32 << 20)
    started = time.monotonic()
    assert lines_of(line + b"\nnext\n", read_size=1024) == [line, b"next"]
    assert time.monotonic() - started < 5


def test_a_line_past_the_limit_is_refused_without_reading_the_rest() -> None:
    stream = _Stream(b"ok\n" + b"B" * (10 << 20) + b"\n", 1 << 16)
    handed: list[bytes] = []
    with pytest.raises(RecordTooLarge, match="line 2 of stdin is longer than"):
        for chunk in read_lines(stream, max_line=1 << 20):
            handed.extend(chunk)
    assert handed == [b"ok"], "the lines before it are handed out first"
    assert stream.read < (1 << 20) + 2 * (1 << 16)


def batches_of(
    lines: list[bytes], limit: int, separator: bytes | None = None
) -> list[list[tuple[bytes | None, bytes | None]]]:
    return list(to_batches([lines], separator=separator, max_request_size=limit))


def test_records_are_split_at_the_separator_and_lose_a_carriage_return() -> None:
    assert batches_of([b"k:v:w\r", b"no key"], 1 << 20, b":") == [[(b"k", b"v:w"), (None, b"no key")]]


def test_batches_hold_at_most_so_many_lines_and_bytes() -> None:
    rng = random.Random(7)
    lines = [b"x" * rng.randrange(0, 3000) for _ in range(3000)]
    limit = 64 << 10
    batches = batches_of(lines, limit)
    assert [value for batch in batches for _, value in batch] == lines, "every line, in order"
    assert all(len(batch) <= BATCH_LINES for batch in batches)
    assert all(records.batch_size(batch) <= limit for batch in batches)
    small = batches_of([b"v"] * (BATCH_LINES + 1), 1 << 20)
    assert [len(b) for b in small] == [BATCH_LINES, 1]


def test_a_line_too_large_for_a_batch_of_its_own_is_refused_with_its_size() -> None:
    limit = 1000
    fits = b"x" * max(n for n in range(limit) if records.batch_size([(None, b"x" * n)]) <= limit)
    handed = []
    with pytest.raises(
        RecordTooLarge,
        match=r"line 3 of stdin makes a record batch of 100[1-9] bytes, over the 1000",
    ):
        for batch in to_batches([[b"a", fits], [fits + b"yy"]], separator=None, max_request_size=limit):
            handed.append(batch)
    assert [len(b) for b in handed] == [1, 1], "what came before it is handed out first"


def test_the_lines_before_one_cut_off_while_read_are_handed_out() -> None:
    stream = _Stream(b"a\nb\n" + b"B" * 5000, 100)
    handed = []
    with pytest.raises(RecordTooLarge, match="line 3 of stdin is longer than"):
        for batch in to_batches(read_lines(stream, max_line=1000), separator=None, max_request_size=1000):
            handed.extend(batch)
    assert handed == [(None, b"a"), (None, b"b")]


def test_refusing_a_line_is_a_usage_error_until_records_were_sent() -> None:
    error = RecordTooLarge(1, "is longer than the 1000-byte record limit")
    nothing_sent = _refused(error, 0)
    assert nothing_sent.status == EXIT_USAGE and str(nothing_sent).endswith("nothing was sent")
    some_sent = _refused(error, 500)
    assert some_sent.status == EXIT_PARTIAL and str(some_sent).startswith(
        "sent 500 records, then stopped: line 1"
    )
