"""The read codec lays out multiRead, getData and setData byte for byte as aiozk does, and
decodes their answers to what aiozk decodes: every read's data (none, empty, bytes) and Stat,
and a read's error (NoNode) in its place."""

from __future__ import annotations

import struct
from typing import Any

from aiozk import exc, protocol
from aiozk.protocol.transaction import MultiHeader

from node.zk.read_codec import (
    FastGetData,
    FastGetDataResponse,
    FastMultiRead,
    FastMultiReadResponse,
    FastSetData,
    FastSetDataResponse,
)
from tests.unit.jute_samples import rendered, sample_stat, stat_fields

PATHS = ["/brokers/topics/t/partitions/0/state", "/brokers/topics/t\u00e9/partitions/1/state", "/x"]


def test_a_multi_read_is_encoded_as_aiozk_encodes_its_get_datas() -> None:
    plain = protocol.TransactionRequest()
    plain.opcode = 22
    for path in PATHS:
        plain.add(protocol.GetDataRequest(path=path, watch=False))
    fast = FastMultiRead(PATHS)
    assert fast.serialize(42) == plain.serialize(42)
    assert fast.serialize() == plain.serialize()
    assert FastMultiRead([]).serialize(1) == b"\x00\x00\x00\x01\x00\x00\x00\x16" + rendered(
        MultiHeader(type=-1, done=True, error=-1)
    )


def test_single_reads_and_sets_are_encoded_as_aiozk_encodes_them() -> None:
    for watch in (False, True):
        fast, plain = (
            FastGetData(path=PATHS[1], watch=watch),
            protocol.GetDataRequest(path=PATHS[1], watch=watch),
        )
        assert fast.serialize(7) == plain.serialize(7)
    for data in (b'{"leader":2}', b"", None):
        fast_set = FastSetData(path=PATHS[0], data=data, version=3)
        plain_set = protocol.SetDataRequest(path=PATHS[0], data=data, version=3)
        assert fast_set.serialize(8) == plain_set.serialize(8)


def _fields(result: Any) -> Any:
    if isinstance(result, Exception):
        return type(result)
    data, stat = result
    return data, stat_fields(stat)


def test_a_multi_read_answer_is_decoded_to_each_reads_data_and_stat_or_its_error() -> None:
    raw = b"".join(
        (
            rendered(MultiHeader(type=4, done=False, error=0)),
            rendered(protocol.GetDataResponse(data=b'{"leader":1}', stat=sample_stat(4))),
            rendered(MultiHeader(type=-1, done=False, error=-101)),
            struct.pack("!i", -101),  # NoNode
            rendered(MultiHeader(type=4, done=False, error=0)),
            rendered(protocol.GetDataResponse(data=b"", stat=sample_stat(1))),
            rendered(MultiHeader(type=4, done=False, error=0)),
            rendered(protocol.GetDataResponse(data=None, stat=sample_stat(2))),
            rendered(MultiHeader(type=-1, done=True, error=-1)),
        )
    )
    ours = FastMultiReadResponse.deserialize(raw)
    aiozks = protocol.TransactionResponse.deserialize(raw)
    expected = [r if isinstance(r, Exception) else (r.data, r.stat) for r in aiozks.responses]
    assert [_fields(r) for r in ours.responses] == [_fields(r) for r in expected]
    assert isinstance(ours.responses[1], exc.NoNode) and ours.failed == 1
    assert ours.responses[0][1].version == 4 and ours.responses[2][0] == b""
    assert ours.responses[3][0] in (None, b"")  # jute's -1 length: aiozk reads it as it reads it


def test_single_answers_are_decoded_as_aiozk_decodes_them() -> None:
    for data in (b'{"a":1}', b""):
        raw = rendered(protocol.GetDataResponse(data=data, stat=sample_stat(9)))
        ours, aiozks = FastGetDataResponse.deserialize(raw), protocol.GetDataResponse.deserialize(raw)
        assert (ours.data, stat_fields(ours.stat)) == (aiozks.data, stat_fields(aiozks.stat))
    raw = rendered(protocol.SetDataResponse(stat=sample_stat(3)))
    assert stat_fields(FastSetDataResponse.deserialize(raw).stat) == stat_fields(
        protocol.SetDataResponse.deserialize(raw).stat
    )


def test_the_answers_of_the_process_are_decoded_here() -> None:
    assert protocol.response_xref[22] is FastMultiReadResponse
    assert protocol.response_xref[4] is FastGetDataResponse
    assert protocol.response_xref[5] is FastSetDataResponse
