"""ZooKeeper's multi-op (opcode 14), encoded and decoded in a few struct calls per operation.

aiozk renders a request and parses an answer field by field through a generic `Part` tree.
For the controller's multi-ops of a thousand creates or sets (two creates per new partition,
a set per changed one) that is a third of its processor at 200k partitions, spent on the same
event loop as everything else. The operations Keel puts in a multi (create, set, version
check, delete) and their results are laid out here directly, byte for byte as aiozk lays them
out (jute: big-endian ints and longs, strings and buffers as a length then the bytes, -1 for
none); any other operation, or result, goes through aiozk's own code.

aiozk finds the class that decodes an answer by its opcode, in one registry: `FastMultiResponse`,
defined here, takes the multi-op's place there for the whole process (every multi-op of a
Keel process is Keel's).
"""

from __future__ import annotations

from aiozk import exc, protocol

from node.zk.jute import HEADER, INT, STAT, acls, buffer, made, read_stat, read_string, string


def _operation(request: protocol.Request) -> bytes | None:
    """One operation's body as aiozk renders it; None for one this module does not lay out."""
    kind = type(request)
    if kind is protocol.Create2Request or kind is protocol.CreateRequest:
        return b"".join(
            (string(request.path), buffer(request.data), acls(request.acl), INT.pack(request.flags or 0))
        )
    if kind is protocol.SetDataRequest:
        return string(request.path) + buffer(request.data) + INT.pack(request.version)
    if kind is protocol.CheckVersionRequest or kind is protocol.DeleteRequest:
        return string(request.path) + INT.pack(request.version)
    return None


class FastMulti(protocol.TransactionRequest):  # type: ignore[misc]
    """A multi-op (aiozk's TransactionRequest), encoded here when every operation can be."""

    def serialize(self, xid: int | None = None) -> bytes:
        parts = [] if xid is None else [INT.pack(xid)]
        parts.append(INT.pack(self.opcode))
        for request in self.requests:
            body = _operation(request)
            if body is None:
                serialized: bytes = super().serialize(xid)
                return serialized
            parts += (HEADER.pack(request.opcode, False, -1), body)
        parts.append(HEADER.pack(-1, True, -1))
        return b"".join(parts)


class FastMultiResponse(protocol.TransactionResponse):  # type: ignore[misc]
    """A multi-op's answer (aiozk's TransactionResponse), decoded here result by result."""

    opcode = 14

    @classmethod
    def deserialize(cls, raw_bytes: bytes) -> FastMultiResponse:
        instance = cls()
        responses = instance.responses
        kind, done, _ = HEADER.unpack_from(raw_bytes, 0)
        offset = HEADER.size
        while not done:
            if kind == -1:
                (code,) = INT.unpack_from(raw_bytes, offset)
                offset += 4
                responses.append(exc.get_response_error(code))
            elif kind == protocol.Create2Response.opcode:
                path, offset = read_string(raw_bytes, offset)
                responses.append(made(protocol.Create2Response, path=path, stat=read_stat(raw_bytes, offset)))
                offset += STAT.size
            elif kind == protocol.SetDataResponse.opcode:
                responses.append(made(protocol.SetDataResponse, stat=read_stat(raw_bytes, offset)))
                offset += STAT.size
            elif kind == protocol.CheckVersionResponse.opcode:
                responses.append(made(protocol.CheckVersionResponse))
            elif kind == protocol.DeleteResponse.opcode:
                responses.append(made(protocol.DeleteResponse))
            else:
                response, offset = protocol.response_xref[kind].parse(raw_bytes, offset)
                responses.append(response)
            kind, done, _ = HEADER.unpack_from(raw_bytes, offset)
            offset += HEADER.size
        return instance
