"""Writes sent again after their connection dropped, recognised as this client's own.

`ZooKeeperClient.send` sends a request again when its connection drops before the answer
(Kafka's retryRequestsUntilConnected). A write may have been applied by the send whose answer
was lost: the next send is then refused, NodeExists for a create, BadVersion for a conditional
setData, NoNode for a delete, or a multi-op failed by one of those. Kafka's client resolves its
retried creates by reading the znode back (its checked ephemeral create) and its conditional
updates by reading the data back on BadVersion; here one mechanism does it for every write: it
reads back the znodes the write touched and, when every effect of it is there as this client
wrote it, answers as the first send would have, with the stats read back. Otherwise the refusal
stands and the caller handles it as before.

A znode shows this client's write when it was
- created: it holds exactly the data written, was created after the write was first sent (its
  czxid is past the last zxid the client had seen then), and is owned by this session if
  ephemeral (not owned by any, if persistent);
- set at version v: it is at version v + 1 with exactly the data written, modified after the
  write was first sent;
- deleted: it is gone;
- checked at version v (an op of a multi-op): it is still at version v (exists, for -1).
A multi-op is one transaction: its creates and sets must all carry the same zxid, which is also
how the znode a sequential create made is found among its siblings. Partition states carry
the controller epoch in their data, so "exactly the data written" is also "this controller".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiozk import exc, protocol
from aiozk.retry import RetryPolicy

# The refusals that a send applied before may earn the next one.
REFUSALS = (exc.NodeExists, exc.BadVersion, exc.NoNode)
# What a multi-op's other ops report when one op fails it.
_ROLLED_BACK = (exc.RolledBack, exc.RuntimeInconsistency)
_SENDS = "keel_sends"

# Sends a request (already carrying its chroot) and returns the answer, raising a refusal.
Send = Callable[[Any], Awaitable[Any]]
# A znode as read back: its data and stat, or None when it does not exist.
_Found = tuple[bytes | None, Any] | None
# Reads znodes by their paths (already carrying the chroot), in bulk.
Read = Callable[[list[str]], Awaitable[list[_Found]]]


class CountingRetryPolicy(RetryPolicy):  # type: ignore[misc]
    """aiozk's own policy (`RetryPolicy.forever`: a request whose connection drops is sent
    again at once), which also counts on each request how often it was sent. aiozk asks its
    policy before every send, its own re-sends included, and those are otherwise unseen."""

    def __init__(self) -> None:
        super().__init__(try_limit=None, sleep_func=lambda _: None)

    async def enforce(self, request: Any = None) -> None:
        if request is not None:
            setattr(request, _SENDS, getattr(request, _SENDS, 0) + 1)

    def clear(self, request: Any) -> None:
        pass


def start_counting(request: Any) -> None:
    """Before a write's first send: none so far (a request object may be sent twice by a caller)."""
    setattr(request, _SENDS, 0)


def sent_again(request: Any) -> bool:
    """Whether `request` went out more than once, so that an earlier send may have been applied."""
    return int(getattr(request, _SENDS, 0)) > 1


# Create, delete, setData, multi and create2 (not multiRead, which shares the multi's framing).
_WRITE_OPCODES = frozenset({1, 2, 5, 14, 15})


def is_write(request: Any) -> bool:
    return getattr(request, "opcode", None) in _WRITE_OPCODES


def refused_multi(response: Any) -> bool:
    """Whether a multi-op's answer is a failure by one of the refusals an applied send earns."""
    errors = [r for r in getattr(response, "responses", ()) if isinstance(r, Exception)]
    real = [e for e in errors if not isinstance(e, _ROLLED_BACK)]
    return bool(real) and all(isinstance(e, REFUSALS) for e in real)


@dataclasses.dataclass(frozen=True)
class FirstSend:
    """What the client knew when it first sent the write: its session, and the last zxid it
    had seen, which anything the write made comes after."""

    session_id: int
    seen_zxid: int


@dataclasses.dataclass(frozen=True)
class _Effect:
    """One op's effect as found: the answer the op would have had, and, for a create or a
    set, the zxid of the transaction that made it."""

    response: Any
    zxid: int | None = None


async def own_answer(request: Any, refusal: Any, first: FirstSend, read: Read, send: Send) -> Any | None:
    """The answer the first send of `request` would have had, when `refusal` (an exception,
    or a failed multi-op's answer) refused a write that an earlier send of it had applied;
    None when the znodes do not show this client's write. `read` reads the znodes back in
    bulk; `send` lists the siblings of a sequential create's."""
    if isinstance(request, protocol.TransactionRequest):
        if not refused_multi(refusal):
            return None
        ops = list(request.requests)
    elif isinstance(refusal, REFUSALS):
        ops = [request]
    else:
        return None
    paths = [op.path for op in ops if not _is_sequential(op)]
    found = dict(zip(paths, await read(paths), strict=True))
    # A sequential create is found later, among its siblings, by the zxid of the rest.
    effects = [_Effect(None) if _is_sequential(op) else _effect(op, found[op.path], first) for op in ops]
    zxids = {e.zxid for e in effects if e is not None and e.zxid is not None}
    if any(e is None for e in effects) or len(zxids) > 1:
        # Not there, or not one transaction: someone else's write, or none at all.
        return None
    if not isinstance(request, protocol.TransactionRequest):
        return effects[0].response if effects[0] is not None else None
    zxid = next(iter(zxids), None)
    for i, op in enumerate(ops):
        if _is_sequential(op):
            effects[i] = None if zxid is None else await _sequential(op, first, zxid, read, send)
            if effects[i] is None:
                return None
    answer = protocol.TransactionResponse()
    answer.responses = [e.response for e in effects if e is not None]
    return answer


def _is_sequential(op: Any) -> bool:
    return isinstance(op, protocol.CreateRequest) and bool(op.flags & protocol.CreateRequest.SEQUENTIAL_FLAG)


def _effect(op: Any, found: _Found, first: FirstSend) -> _Effect | None:
    match op:
        case protocol.CreateRequest():
            return _created(op, op.path, found, first)
        case protocol.SetDataRequest():
            return _set(op, found, first)
        case protocol.DeleteRequest():
            return _Effect(protocol.DeleteResponse()) if found is None else None
        case protocol.CheckVersionRequest():
            checked = found is not None and op.version in (-1, found[1].version)
            return _Effect(protocol.CheckVersionResponse()) if checked else None
    return None


def _created(op: Any, path: str, found: _Found, first: FirstSend) -> _Effect | None:
    if found is None:
        return None
    data, stat = found
    ephemeral = bool(op.flags & protocol.CreateRequest.EPHEMERAL_FLAG)
    if (
        not _same_data(data, op.data)
        or stat.ephemeral_owner != (first.session_id if ephemeral else 0)
        or stat.created_zxid <= first.seen_zxid
    ):
        return None
    if isinstance(op, protocol.Create2Request):
        return _Effect(protocol.Create2Response(path=path, stat=stat), stat.created_zxid)
    return _Effect(protocol.CreateResponse(path=path), stat.created_zxid)


def _set(op: Any, found: _Found, first: FirstSend) -> _Effect | None:
    if found is None:
        return None
    data, stat = found
    if op.version != -1 and stat.version != op.version + 1:
        return None
    if not _same_data(data, op.data) or stat.last_modified_zxid <= first.seen_zxid:
        return None
    return _Effect(protocol.SetDataResponse(stat=stat), stat.last_modified_zxid)


async def _sequential(op: Any, first: FirstSend, zxid: int, read: Read, send: Send) -> _Effect | None:
    """The znode a sequential create of the multi-op made: a sibling with the create's name
    prefix, created by the multi-op's transaction."""
    parent, _, prefix = op.path.rpartition("/")
    try:
        listed = await send(protocol.GetChildren2Request(path=parent or "/", watch=False))
    except exc.NoNode:
        return None
    paths = [f"{parent}/{name}" for name in sorted(listed.children) if name.startswith(prefix)]
    for path, found in zip(paths, await read(paths), strict=True):
        effect = _created(op, path, found, first)
        if effect is not None and effect.zxid == zxid:
            return effect
    return None


def _same_data(found: bytes | None, written: bytes | str | None) -> bool:
    # ZooKeeper keeps no difference between no data and empty data once read back.
    if isinstance(written, str):
        written = written.encode()
    return (found or b"") == (written or b"")


def describe(request: Any) -> str:
    """A write for the log: its kind and the paths it touches."""
    ops: Sequence[Any] = request.requests if isinstance(request, protocol.TransactionRequest) else [request]
    paths = [getattr(op, "path", "?") for op in ops]
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return f"{type(request).__name__} ({shown})"
