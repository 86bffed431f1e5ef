"""The sans-I/O frame decoder: golden bytes, any chunking, and bad lengths."""

from __future__ import annotations

import pytest

from wire.errors import FrameError
from wire.frames import NEED_DATA, FrameDecoder, encode_frame


def test_encode_frame_golden_bytes() -> None:
    assert encode_frame(b"\x93\x01\x02\x03") == b"\x00\x00\x00\x04\x93\x01\x02\x03"
    assert encode_frame(b"") == b"\x00\x00\x00\x00"


def test_whole_frames_come_out_in_order() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"one") + encode_frame(b"") + encode_frame(b"three"))
    assert [decoder.next_frame(), decoder.next_frame(), decoder.next_frame()] == [b"one", b"", b"three"]
    assert decoder.next_frame() is NEED_DATA
    assert decoder.buffered == 0


def test_fed_one_byte_at_a_time() -> None:
    stream = encode_frame(b"hello") + encode_frame(b"world!")
    decoder = FrameDecoder()
    frames = []
    for i in range(len(stream)):
        decoder.feed(stream[i : i + 1])
        while (frame := decoder.next_frame()) is not NEED_DATA:
            frames.append(frame)
    assert frames == [b"hello", b"world!"]


def test_partial_frame_waits_and_reports_what_is_buffered() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"abcdef")[:7])
    assert decoder.next_frame() is NEED_DATA
    assert decoder.buffered == 7


@pytest.mark.parametrize("length", [b"\x00\x00\x01\x01", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff"])
def test_length_over_the_limit_or_negative_is_refused_before_buffering_the_body(length: bytes) -> None:
    decoder = FrameDecoder(max_frame_size=256)
    decoder.feed(length)
    with pytest.raises(FrameError):
        decoder.next_frame()


def test_frame_exactly_at_the_limit_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_size=4)
    decoder.feed(encode_frame(b"four"))
    assert decoder.next_frame() == b"four"
