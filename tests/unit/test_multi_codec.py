"""The multi-op codec lays out every operation and result byte for byte as aiozk does: the same
request bytes for creates (with and without data, ACLs, flags), sets, version checks and
deletes, aiozk's own encoding for anything else; the same results, errors included, decoded
from an answer as aiozk decodes it."""

from __future__ import annotations

import struct
from typing import Any

from aiozk import exc, protocol
from aiozk.protocol.stat import Stat
from aiozk.protocol.transaction import MultiHeader

from node.zk.acls import default_acls
from node.zk.multi_codec import FastMulti, FastMultiResponse
from tests.unit.jute_samples import rendered, sample_stat, stat_fields


def _create(path: str, data: bytes | None, *, secured: bool = False, ephemeral: bool = False) -> Any:
    request = protocol.Create2Request(path=path, data=data, acl=default_acls(path, secured))
    request.set_flags(ephemeral, False, False)
    return request


OPERATIONS: list[Any] = [
    protocol.CheckVersionRequest(path="/controller_epoch", version=7),
    _create("/brokers/topics/t/partitions", None),
    _create("/brokers/topics/t/partitions/0/state", b'{"leader":1}'),
    _create("/brokers/topics/t\u00e9/partitions/1/state", b"", secured=True),
    _create("/controller", b'{"brokerid":2}', ephemeral=True),
    protocol.SetDataRequest(path="/brokers/topics/t/partitions/0/state", data=b'{"leader":2}', version=3),
    protocol.DeleteRequest(path="/admin/delete_topics/t", version=-1),
]


def _pair(operations: list[Any]) -> tuple[FastMulti, protocol.TransactionRequest]:
    fast, plain = FastMulti(), protocol.TransactionRequest()
    for op in operations:
        fast.add(op)
        plain.add(op)
    return fast, plain


def test_every_operation_is_encoded_as_aiozk_encodes_it() -> None:
    fast, plain = _pair(OPERATIONS)
    assert fast.serialize(42) == plain.serialize(42)
    assert fast.serialize() == plain.serialize()


def test_an_operation_it_does_not_lay_out_goes_through_aiozk() -> None:
    fast, plain = _pair([*OPERATIONS[:2], protocol.GetDataRequest(path="/x", watch=False)])
    assert fast.serialize(9) == plain.serialize(9)


def _answer() -> bytes:
    header = MultiHeader
    return b"".join(
        (
            rendered(header(type=13, done=False, error=0)),
            rendered(header(type=15, done=False, error=0)),
            rendered(
                protocol.Create2Response(path="/brokers/topics/t\u00e9/partitions", stat=sample_stat(0))
            ),
            rendered(header(type=5, done=False, error=0)),
            rendered(protocol.SetDataResponse(stat=sample_stat(5))),
            rendered(header(type=2, done=False, error=0)),
            rendered(header(type=-1, done=False, error=-110)),
            struct.pack("!i", -110),  # NodeExists
            rendered(header(type=-1, done=False, error=-2)),
            struct.pack("!i", -2),  # RuntimeInconsistency: rolled back after a failure
            rendered(header(type=-1, done=True, error=-1)),
        )
    )


def _fields(result: Any) -> Any:
    if isinstance(result, Exception):
        return type(result)
    # aiozk's class, where Keel's codec registers a subclass of it (node/zk/read_codec.py).
    kind = next(k for k in type(result).__mro__ if k.__module__.startswith("aiozk."))
    return kind, {k: (stat_fields(v) if isinstance(v, Stat) else v) for k, v in vars(result).items()}


def test_an_answer_is_decoded_as_aiozk_decodes_it() -> None:
    raw = _answer()
    ours = FastMultiResponse.deserialize(raw)
    aiozks = protocol.TransactionResponse.deserialize(raw)
    assert [_fields(r) for r in ours.responses] == [_fields(r) for r in aiozks.responses]
    assert isinstance(ours.responses[4], exc.NodeExists)
    assert ours.responses[2].stat.version == 5


def test_the_multi_op_answers_of_the_process_are_decoded_here() -> None:
    assert protocol.response_xref[FastMulti.opcode] is FastMultiResponse
