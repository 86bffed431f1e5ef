"""Whatever bytes arrive, the codec decodes them or raises the wire's own error — nothing else."""

from __future__ import annotations

import contextlib

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from wire.envelope import decode_response, parse_request
from wire.errors import WireError
from wire.frames import NEED_DATA, FrameDecoder, encode_frame

msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=6)
    ),
    max_leaves=30,
)

request_like = st.tuples(
    st.sampled_from([18, 60, 1000, 4, -1, 2**40]) | st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.integers(min_value=-2, max_value=3),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.none() | st.text(max_size=5),
    msgpack_values,
).map(list)


def _parses_or_raises_wire_error(payload: bytes) -> None:
    with contextlib.suppress(WireError):
        parse_request(payload)
    with contextlib.suppress(WireError):
        decode_response(payload)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes(payload: bytes) -> None:
    _parses_or_raises_wire_error(payload)


@settings(max_examples=400, deadline=None)
@given(msgpack_values)
def test_arbitrary_msgpack_values(value: object) -> None:
    _parses_or_raises_wire_error(msgpack.packb(value))


@settings(max_examples=400, deadline=None)
@given(request_like)
def test_request_shaped_values(value: list[object]) -> None:
    _parses_or_raises_wire_error(msgpack.packb(value))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=50), max_size=8), st.lists(st.integers(min_value=1, max_value=7), min_size=1)
)
def test_any_chunking_yields_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(p) for p in payloads)
    decoder = FrameDecoder()
    frames = []
    position, i = 0, 0
    while position < len(stream):
        step = cuts[i % len(cuts)]
        decoder.feed(stream[position : position + step])
        position += step
        i += 1
        while (frame := decoder.next_frame()) is not NEED_DATA:
            frames.append(frame)
    assert frames == payloads


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_decoder_on_garbage_yields_frames_need_data_or_frame_error(garbage: bytes) -> None:
    decoder = FrameDecoder(max_frame_size=32)
    decoder.feed(garbage)
    try:
        while decoder.next_frame() is not NEED_DATA:
            pass
    except WireError:
        pass
