"""ZooKeeper at the protocol level, in memory, with lost answers on demand: what stands under a
real `ZooKeeperClient` and its real aiozk session in the tests of node/zk/retried_writes.py.

`ZNodeTree` applies the requests Keel sends (creates, sequential and ephemeral ones included,
sets, deletes, checks, multi-ops as one transaction with one zxid, reads) with ZooKeeper's
stats. `LossyConnection` takes the place of aiozk's connection: it applies each request and
answers it, except the write a test names, whose answer it loses as a dropped connection does
(aiozk's send then fails with TimeoutError, and the client sends it again); it can also lose
the request itself before it is applied, and let another client write in between.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Callable
from typing import Any

from aiozk import exc, protocol
from aiozk.protocol.stat import Stat
from aiozk.states import States

from node.zk.client import ZooKeeperClient
from node.zk.read_codec import FastMultiRead, FastMultiReadResponse
from node.zk.retried_writes import is_write

SESSION_ID = 0x1234
OTHER_SESSION_ID = 0x9999


@dataclasses.dataclass
class _ZNode:
    data: bytes | None
    czxid: int
    mzxid: int
    version: int = 0
    owner: int = 0
    sequence: int = 0

    def stat(self) -> Stat:
        return Stat(
            created_zxid=self.czxid,
            last_modified_zxid=self.mzxid,
            created=0,
            modified=0,
            version=self.version,
            child_version=0,
            acl_version=0,
            ephemeral_owner=self.owner,
            data_length=len(self.data or b""),
            num_children=0,
            last_modified_children=0,
        )


class ZNodeTree:
    def __init__(self) -> None:
        self.nodes: dict[str, _ZNode] = {"/": _ZNode(None, 0, 0)}
        self._zxids = itertools.count(1)
        self.last_zxid = 0

    def apply(self, request: Any, session_id: int) -> Any:
        """The answer to `request`, raising its refusal; a multi-op's failure is its answer."""
        if isinstance(request, FastMultiRead):
            answer = FastMultiReadResponse()
            reads = [self._read_or_error(protocol.GetDataRequest(path=p, watch=False)) for p in request.paths]
            answer.responses = [r if isinstance(r, Exception) else (r.data, r.stat) for r in reads]
            answer.failed = sum(isinstance(r, Exception) for r in reads)
            return answer
        if isinstance(request, protocol.TransactionRequest):
            return self._multi(request, session_id)
        if is_write(request):
            zxid = self._next_zxid()
            return self._write(request, session_id, zxid, self.nodes)
        return self._read(request)

    def _next_zxid(self) -> int:
        self.last_zxid = next(self._zxids)
        return self.last_zxid

    def _multi(self, request: Any, session_id: int) -> Any:
        staged = {path: dataclasses.replace(node) for path, node in self.nodes.items()}
        zxid = self._next_zxid()
        answers: list[Any] = []
        for i, op in enumerate(request.requests):
            try:
                answers.append(self._write(op, session_id, zxid, staged))
            except exc.ResponseError as refusal:
                failed = protocol.TransactionResponse()
                failed.responses = [
                    *(exc.RolledBack() for _ in range(i)),
                    refusal,
                    *(exc.RuntimeInconsistency() for _ in range(len(request.requests) - i - 1)),
                ]
                return failed
        self.nodes = staged
        answer = protocol.TransactionResponse()
        answer.responses = answers
        return answer

    def _write(self, op: Any, session_id: int, zxid: int, nodes: dict[str, _ZNode]) -> Any:
        match op:
            case protocol.CreateRequest():
                path = op.path
                parent_path = path.rpartition("/")[0] or "/"
                parent = nodes.get(parent_path)
                if parent is None:
                    raise exc.NoNode()
                if op.flags & protocol.CreateRequest.SEQUENTIAL_FLAG:
                    path = f"{path}{parent.sequence:010d}"
                    parent.sequence += 1
                if path in nodes:
                    raise exc.NodeExists()
                ephemeral = op.flags & protocol.CreateRequest.EPHEMERAL_FLAG
                nodes[path] = _ZNode(op.data, zxid, zxid, owner=session_id if ephemeral else 0)
                if isinstance(op, protocol.Create2Request):
                    return protocol.Create2Response(path=path, stat=nodes[path].stat())
                return protocol.CreateResponse(path=path)
            case protocol.SetDataRequest():
                node = self._versioned(op, nodes)
                node.data, node.mzxid, node.version = op.data, zxid, node.version + 1
                return protocol.SetDataResponse(stat=node.stat())
            case protocol.DeleteRequest():
                self._versioned(op, nodes)
                del nodes[op.path]
                return protocol.DeleteResponse()
            case protocol.CheckVersionRequest():
                self._versioned(op, nodes)
                return protocol.CheckVersionResponse()
        raise AssertionError(f"not a write: {op!r}")

    @staticmethod
    def _versioned(op: Any, nodes: dict[str, _ZNode]) -> _ZNode:
        node = nodes.get(op.path)
        if node is None:
            raise exc.NoNode()
        if op.version not in (-1, node.version):
            raise exc.BadVersion()
        return node

    def _read_or_error(self, request: Any) -> Any:
        try:
            return self._read(request)
        except exc.ResponseError as error:
            return error

    def _read(self, request: Any) -> Any:
        match request:
            case protocol.GetDataRequest():
                node = self.nodes.get(request.path)
                if node is None:
                    raise exc.NoNode()
                return protocol.GetDataResponse(data=node.data, stat=node.stat())
            case protocol.GetChildren2Request():
                if request.path not in self.nodes:
                    raise exc.NoNode()
                prefix = request.path.rstrip("/") + "/"
                children = [
                    p[len(prefix) :]
                    for p in self.nodes
                    if p.startswith(prefix) and "/" not in p[len(prefix) :]
                ]
                return protocol.GetChildren2Response(children=children, stat=self.nodes[request.path].stat())
            case protocol.ExistsRequest():
                node = self.nodes.get(request.path)
                if node is None:
                    raise exc.NoNode()
                return protocol.ExistsResponse(stat=node.stat())
        raise AssertionError(f"not a request this fake knows: {request!r}")


class LossyConnection:
    """aiozk's connection, as far as a session's `send` uses it."""

    def __init__(self, tree: ZNodeTree, session_id: int) -> None:
        self.tree = tree
        self.session_id = session_id
        self.closing = False
        self.writes = 0
        self.reads = 0
        # The nth write (1-based) whose answer is lost after it is applied, or which is lost
        # itself before it reaches the tree.
        self.lose_answer_of: int | None = None
        self.lose_request_of: int | None = None
        # What another client does once the loss happened (before the write is sent again).
        self.meanwhile: Callable[[ZNodeTree], None] | None = None

    def send(self, request: Any, xid: int | None = None) -> asyncio.Future[Any]:
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        lost = False
        if not is_write(request):
            self.reads += 1
        if is_write(request):
            self.writes += 1
            lost = self.writes in (self.lose_answer_of, self.lose_request_of)
            if self.writes == self.lose_request_of:
                self._lost(answer)
                return answer
        try:
            response = self.tree.apply(request, self.session_id)
        except exc.ResponseError as refusal:
            answer.set_exception(refusal)
            return answer
        if lost:
            self._lost(answer)
        else:
            answer.set_result((self.tree.last_zxid, response))
        return answer

    def _lost(self, answer: asyncio.Future[Any]) -> None:
        if self.meanwhile is not None:
            self.meanwhile(self.tree)
        # What aiozk's session meets when the connection is closed under a pending request.
        answer.set_exception(exc.TimeoutError())


def client_on(tree: ZNodeTree, session_id: int = SESSION_ID) -> tuple[ZooKeeperClient, LossyConnection]:
    """A real client whose session is connected to `tree` through a LossyConnection."""
    client = ZooKeeperClient("127.0.0.1:1", session_timeout_s=3600, connection_timeout_s=1)
    session = client._zk.session
    connection = LossyConnection(tree, session_id)
    session.conn = connection
    session.session_id = session_id
    session.state.transition_to(States.CONNECTED)
    return client, connection


def close(client: ZooKeeperClient) -> None:
    handle = client._zk.session.heartbeat_handle
    if handle is not None:
        handle.cancel()
