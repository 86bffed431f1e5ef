"""The read codec lays out multiRead, getData and setData byte for byte as aiozk does, and
decodes their answers to what aiozk decodes: every read's data (none, empty, bytes) and Stat,
and a read's error (NoNode) in its place."""

from __future__ import annotations

import struct
from typing import Any

from aiozk import exc, protocol
from aiozk.protocol.stat import Stat
from aiozk.protocol.transaction import MultiHeader

from node.zk.read_codec import (
    FastGetData,
    FastGetDataResponse,
    FastMultiRead,
    FastMultiReadResponse,
    FastSetData,
    FastSetDataResponse,
)

PATHS = ["/brokers/topics/t/partitions/0/state", "/brokers/topics/t\u00e9/partitions/1/state", "/x"]


def _rendered(*parts: Any) -> bytes:
    formats, data = [], []
    for part in parts:
        fmt, values = part.render()
        formats.append(fmt)
        data += values
    return struct.pack("!" + "".join(formats), *data)


def _stat(version: int) -> Stat:
    return Stat(
        created_zxid=0x100000001 + version,
        last_modified_zxid=0x100000002,
        created=1_700_000_000_000,
        modified=1_700_000_000_001,
        version=version,
        child_version=0,
        acl_version=0,
        ephemeral_owner=0x1234 if version % 2 else 0,
        data_length=12,
        num_children=3,
        last_modified_children=0x100000003,
    )


def test_a_multi_read_is_encoded_as_aiozk_encodes_its_get_datas() -> None:
    plain = protocol.TransactionRequest()
    plain.opcode = 22
    for path in PATHS:
        plain.add(protocol.GetDataRequest(path=path, watch=False))
    fast = FastMultiRead(PATHS)
    assert fast.serialize(42) == plain.serialize(42)
    assert fast.serialize() == plain.serialize()
    assert FastMultiRead([]).serialize(1) == b"\x00\x00\x00\x01\x00\x00\x00\x16" + _rendered(
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


def _stat_fields(stat: Stat) -> dict[str, int]:
    return {name: getattr(stat, name) for name, _ in Stat.parts}


def _fields(result: Any) -> Any:
    if isinstance(result, Exception):
        return type(result)
    data, stat = result
    return data, _stat_fields(stat)


def test_a_multi_read_answer_is_decoded_to_each_reads_data_and_stat_or_its_error() -> None:
    raw = b"".join(
        (
            _rendered(MultiHeader(type=4, done=False, error=0)),
            _rendered(protocol.GetDataResponse(data=b'{"leader":1}', stat=_stat(4))),
            _rendered(MultiHeader(type=-1, done=False, error=-101)),
            struct.pack("!i", -101),  # NoNode
            _rendered(MultiHeader(type=4, done=False, error=0)),
            _rendered(protocol.GetDataResponse(data=b"", stat=_stat(1))),
            _rendered(MultiHeader(type=4, done=False, error=0)),
            _rendered(protocol.GetDataResponse(data=None, stat=_stat(2))),
            _rendered(MultiHeader(type=-1, done=True, error=-1)),
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
        raw = _rendered(protocol.GetDataResponse(data=data, stat=_stat(9)))
        ours, aiozks = FastGetDataResponse.deserialize(raw), protocol.GetDataResponse.deserialize(raw)
        assert (ours.data, _stat_fields(ours.stat)) == (aiozks.data, _stat_fields(aiozks.stat))
    raw = _rendered(protocol.SetDataResponse(stat=_stat(3)))
    assert _stat_fields(FastSetDataResponse.deserialize(raw).stat) == _stat_fields(
        protocol.SetDataResponse.deserialize(raw).stat
    )


def test_the_answers_of_the_process_are_decoded_here() -> None:
    assert protocol.response_xref[22] is FastMultiReadResponse
    assert protocol.response_xref[4] is FastGetDataResponse
    assert protocol.response_xref[5] is FastSetDataResponse
