"""A thin layer over aiozk: typed results, multi-ops, watches, and session tracking.

aiozk re-establishes sessions by itself; when the server says a session expired it simply
opens a new one. Kafka needs to know (spec §2.5: resign, register again with a new broker
epoch), so a monitor task watches the session id whenever the client is connected and tells
the registered SessionWatchers of each new one. Requests go straight to the session rather
than through aiozk's helpers, whose per-path stat cache would grow with every znode ever read.

aiozk's repair loop (reconnect, resume or renew the session, re-arm the watches) can wedge
for good: it re-arms the watches by a request that waits for an answer, and a connection
that drops before the answer (a ZooKeeper majority lost again just after the reconnection)
leaves that request pending forever, since aiozk's read loop ends on a closed connection
without failing what is in flight. The client then never reconnects, and its broker never
registers again. `_KeelSession` bounds that request, and the monitor is also a watchdog: a
session not connected for longer than its time-out plus the connection time-out gets a new
repair loop, as Kafka's ZooKeeperClient guarantees that its expiry handler runs.

Security (node/zk/acls.py): a client with credentials authenticates on every connection it
opens, and gives each znode it creates Kafka's ACLs for its path. aiozk 0.32 can set and read
ACLs but neither re-sends authentication after a reconnect nor speaks SASL or TLS; the first
is added here (`_KeelSession`), the others Keel does without.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import aiozk
from aiozk import exc, protocol
from aiozk.connection import Connection
from aiozk.protocol.acl import ACL
from aiozk.protocol.stat import Stat
from aiozk.session import Session
from aiozk.states import States

from actors.base.loop_slices import turn_if_held
from actors.base.ports import SessionExpiredError, SessionWatcher
from node.zk import retried_writes
from node.zk.acls import ZkSecurity, default_acls
from node.zk.in_flight import MAX_IN_FLIGHT_REQUESTS, windowed
from node.zk.multi_codec import FastMulti
from node.zk.read_codec import FastGetData, FastMultiRead, FastSetData
from node.zk.watches import (
    AnyHandler,
    WatchRegistry,
    ZNodeChangeHandler,
    ZNodeChildChangeHandler,
    ZNodeCreationHandler,
)

log = logging.getLogger(__name__)
_AIOZK_SESSION_LOG = logging.getLogger("aiozk.session")

NoNode = exc.NoNode
NoAuth = exc.NoAuth
NotEmpty = exc.NotEmpty
NodeExists = exc.NodeExists
BadVersion = exc.BadVersion
# What the other ops of a failed multi-op report: those before the failure, and those after.
RolledBack = exc.RolledBack
RuntimeInconsistency = exc.RuntimeInconsistency
ZKError = exc.ZKError
# The version a conditional op passes to hold for any version: a check op with it holds
# while the znode exists.
ANY_VERSION = -1

CREATED = protocol.WatchEvent.CREATED
DELETED = protocol.WatchEvent.DELETED
DATA_CHANGED = protocol.WatchEvent.DATA_CHANGED
CHILDREN_CHANGED = protocol.WatchEvent.CHILDREN_CHANGED


# What a process says when ZooKeeper refuses it an operation on a znode Keel created.
# What a broker or the planner says when start-up got no ZooKeeper session in time.
UNREACHABLE_HINT = "(zookeeper.connection.timeout.ms): check zookeeper.connect and that ZooKeeper runs there"
NO_AUTH_HINT = (
    "ZooKeeper refused access (NoAuth): Keel's znodes have ACLs (zookeeper.set.acl) and these "
    "credentials are not the ones that created them; check java.security.auth.login.config"
)


class ZooKeeperUnavailable(Exception):
    pass


# What aiozk raises for a request that met no answer: its connection dropped while the request
# was out (a server killed, a majority lost, a link cut), or its session was lost meanwhile.
# aiozk sends the next request once it has a session again, so trying again is the cure, as
# Kafka's KafkaZkClient retries a request until connected.
_CONNECTION_ERRORS = (
    exc.ConnectError,
    exc.NoServersError,
    exc.SessionLost,
    exc.TimeoutError,
    exc.UnfinishedRead,
    exc.ConnectionLoss,
    exc.OperationTimeout,
    exc.SessionExpired,
)


class SessionExpired(exc.SessionExpired, SessionExpiredError):  # type: ignore[misc]
    """What `send` raises for a request its session did not outlive: aiozk's error, which
    this module's callers know, and the port's, which the controller knows."""


# Of those, what `send` sends again by itself: the session may still be alive.
_RESENDABLE = (exc.TimeoutError, exc.UnfinishedRead, exc.ConnectionLoss, exc.OperationTimeout)


def connection_lost(error: Exception) -> bool:
    """Whether `error` says ZooKeeper could not be reached for a request, rather than that
    it refused it."""
    return isinstance(error, _CONNECTION_ERRORS)


# How often the session monitor looks at the session when its state does not change.
_SESSION_CHECK_INTERVAL_S = 0.5
_SESSION_STATES = (States.CONNECTED, States.SUSPENDED, States.LOST, States.READ_ONLY)

# Reads per multiRead: large enough to amortise a round trip, small enough for jute.maxbuffer.
_READS_PER_REQUEST = 1000


def split_connect(connect: str) -> tuple[str, str | None]:
    """`host:port,host:port/chroot` → (servers, chroot or None)."""
    servers, slash, chroot = connect.partition("/")
    return servers, ("/" + chroot.strip("/")) if slash and chroot.strip("/") else None


class _KeelConnection(Connection):  # type: ignore[misc]
    """aiozk's connection, whose read loop lets the event loop turn between answers once it
    has held it for a while: answers already buffered (a window of multi-ops of a thousand
    results each) are otherwise all parsed in one step (actors/base/loop_slices.py)."""

    async def read_response(self, initial_connect: bool = False) -> Any:
        await turn_if_held()
        return await super().read_response(initial_connect)


class _KeelSession(Session):  # type: ignore[misc]
    """aiozk's session, which also sends the client's auth packet first on each connection it
    opens, and whose repair loop cannot wait forever to re-arm the watches (nor be left
    wedged: `repair_again`)."""

    repair_loop_task: asyncio.Task[None] | None

    def __init__(self, servers: str, timeout: float, auth: tuple[str, bytes] | None) -> None:
        super().__init__(servers, timeout, retried_writes.CountingRetryPolicy(), False, None)
        self._auth = auth

    async def make_connection(self, host: str, port: int) -> _KeelConnection | None:
        # aiozk's, with Keel's connection.
        conn = _KeelConnection(host, port, watch_handler=self.event_dispatch, read_timeout=self.read_timeout)
        try:
            await conn.connect()
        except Exception:
            # Under aiozk's own logger, as aiozk's make_connection reports it: the commands
            # keep library logs out of their one-line errors unless asked (--verbose).
            _AIOZK_SESSION_LOG.exception("Couldn't connect to %s:%s", host, port)
            return None
        return conn

    async def establish_session(self) -> None:
        """ZooKeeper keeps authentication per connection, so after a reconnect it must be sent
        again (the Java client does it when it primes a connection); written before any other
        request, it is in effect for all of them. The server answers it on the special xid -4."""
        await super().establish_session()
        if self._auth is not None:
            scheme, credentials = self._auth
            answer = self.conn.send(protocol.AuthRequest(type=0, scheme=scheme, auth=credentials))
            answer.add_done_callback(_log_auth_failure)

    async def set_existing_watches(self) -> None:
        """Re-arm the watches on the new connection, within the session time-out. aiozk awaits
        this inside its repair loop; unanswered (the connection dropped as it opened), the
        connection is given up and the loop, which the state SUSPENDED sends round again,
        reconnects and re-arms them there."""
        try:
            await asyncio.wait_for(super().set_existing_watches(), self.timeout)
        except (TimeoutError, exc.ZKError) as e:
            log.warning("ZooKeeper watches not re-armed on the new connection (%r); reconnecting", e)
            if self.state.current_state in (States.CONNECTED, States.READ_ONLY):
                self.state.transition_to(States.SUSPENDED)

    def repair_again(self) -> None:
        """Replace the repair loop with a new one: the old one may be wedged (awaiting an answer
        on a connection that is gone). The new one reconnects, resumes the session if the
        ensemble still has it, and opens a new one if not; the old connection is closed by it."""
        stuck = self.repair_loop_task
        if stuck is not None and not stuck.done():
            stuck.remove_done_callback(self._on_repair_loop_done)
            stuck.cancel()
        if self.state.current_state in (States.CONNECTED, States.READ_ONLY):
            self.state.transition_to(States.SUSPENDED)
        self.repair_loop_task = asyncio.create_task(self.repair_loop(), name="zk-repair-loop")
        self.repair_loop_task.add_done_callback(self._on_repair_loop_done)


def _log_auth_failure(answer: asyncio.Future[Any]) -> None:
    """A lost connection is reported by the session; a refused credential only here."""
    if not answer.cancelled() and isinstance(answer.exception(), exc.AuthFailed):
        log.error("ZooKeeper refused this client's credentials (AUTH_FAILED)")


class ZooKeeperClient:
    def __init__(
        self,
        connect: str,
        *,
        session_timeout_s: float,
        connection_timeout_s: float,
        security: ZkSecurity | None = None,
        max_in_flight_requests: int = MAX_IN_FLIGHT_REQUESTS,
    ) -> None:
        servers, chroot = split_connect(connect)
        self.connect_string = connect
        # As aiozk makes it of the connect string's (empty segments dropped).
        self._chroot = "".join(f"/{name}" for name in (chroot or "").split("/") if name)
        # zookeeper.max.in.flight.requests: the window of every bulk read and write.
        self.max_in_flight_requests = max_in_flight_requests
        self.security = security or ZkSecurity()
        self._connection_timeout_s = connection_timeout_s
        # The chroot, created on start if missing, gets the ACLs of the root it is for Keel.
        self._zk = aiozk.ZKClient(
            servers,
            chroot=chroot,
            session_timeout=session_timeout_s,
            default_acl=default_acls("/", self.security.set_acl),
        )
        credentials = self.security.credentials
        self._zk.session = _KeelSession(
            servers, session_timeout_s, None if credentials is None else ("digest", credentials.auth)
        )
        self._session_watchers: list[SessionWatcher] = []
        self._monitor: asyncio.Task[None] | None = None
        self._multi_read = True
        self._watches = WatchRegistry(self._zk.session, functools.partial(self.exists, watch=True))

    @property
    def session_id(self) -> int | None:
        sid: int | None = self._zk.session.session_id
        return sid

    @property
    def session_timeout_s(self) -> float:
        return float(self._zk.session.timeout)

    @property
    def session_password(self) -> bytes:
        return bytes(self._zk.session.password)

    async def start(self) -> None:
        try:
            await asyncio.wait_for(self._zk.start(), self._connection_timeout_s)
        except TimeoutError:
            await self._abandon()
            raise ZooKeeperUnavailable(
                f"no ZooKeeper session with {self.connect_string} within {self._connection_timeout_s:g} s"
            ) from None
        self._monitor = asyncio.create_task(self._monitor_session(), name="zk-session-monitor")

    async def close(self) -> None:
        self._watches.close()
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._monitor
        await self._zk.close()

    async def _abandon(self) -> None:
        with contextlib.suppress(Exception):
            self._zk.session.closing = True
            if self._zk.session.repair_loop_task is not None:
                self._zk.session.repair_loop_task.cancel()

    def path(self, path: str) -> str:
        """`path` under the chroot. Keel's own paths are already normal (absolute, no empty
        segment, no trailing slash): those skip aiozk's split and join, a cost per read that
        a bulk read of a million states would pay a million times."""
        if path[:1] == "/" and "//" not in path and path[-1:] != "/":
            return self._chroot + path
        normalized: str = self._zk.normalize_path(path)
        return normalized

    # --- reads and writes ---

    async def send(self, request: protocol.Request) -> protocol.Response:
        """Send `request`, again if its connection drops before the answer, once connected again
        on the same session (Kafka's retryRequestsUntilConnected): a dropped connection is not
        the caller's failure. If the session is lost meanwhile, the request fails with
        SessionExpired: what was true in the old session (its ephemerals, its controller) is not
        in the new one, so the caller, not this loop, decides what to do again.

        A write sent again may have been applied by the send whose answer was lost, and the
        next send is refused (NodeExists, BadVersion, NoNode, or a multi-op failed by one).
        Such a refusal is checked against the znodes (node/zk/retried_writes.py): when they
        show this client's write, the answer is the one the first send would have had; when
        not, the refusal stands."""
        if not retried_writes.is_write(request):
            return await self._send_until_answered(request)
        session: _KeelSession = self._zk.session
        first = retried_writes.FirstSend(session.session_id or 0, session.last_zxid or 0)
        retried_writes.start_counting(request)
        try:
            response = await self._send_until_answered(request)
        except retried_writes.REFUSALS as refusal:
            own = await self._own_answer(request, refusal, first)
            if own is None:
                raise
            return own
        if isinstance(request, protocol.TransactionRequest) and retried_writes.refused_multi(response):
            own = await self._own_answer(request, response, first)
            if own is not None:
                return own
        return response

    async def _own_answer(
        self, request: protocol.Request, refusal: object, first: retried_writes.FirstSend
    ) -> protocol.Response | None:
        if not retried_writes.sent_again(request):
            return None
        own = await retried_writes.own_answer(
            request, refusal, first, self._read_back, self._send_until_answered
        )
        reason = refusal if isinstance(refusal, Exception) else multi_failure(list(refusal.responses))  # type: ignore[attr-defined]
        log.info(
            "ZooKeeper refused %s sent again after its connection dropped (%s): %s",
            retried_writes.describe(request),
            type(reason).__name__,
            "an earlier send had applied it; answered as that one" if own else "not this client's write",
        )
        return own

    async def _read_back(self, paths: list[str]) -> list[tuple[bytes | None, Stat] | None]:
        """The znodes at these paths as a request names them (the chroot in them): by the
        bulk reads, windowed and by multiRead where the server has it."""
        return await self.get_many([self._zk.denormalize_path(p) for p in paths])

    async def _send_until_answered(self, request: protocol.Request) -> protocol.Response:
        session: _KeelSession = self._zk.session
        sid = session.session_id
        while True:
            try:
                return await session.send(request)
            except _RESENDABLE as e:
                if session.closing:
                    raise
                await session.ensure_safe_state(writing=request.writes_data)
                if session.session_id != sid:
                    raise SessionExpired() from e
                log.debug(
                    "ZooKeeper %s lost with its connection (%r); sending it again", type(request).__name__, e
                )
            except exc.SessionExpired as e:
                # The server's own answer for a session it has expired: the port's error too.
                if isinstance(e, SessionExpired):
                    raise
                raise SessionExpired() from e

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes | None, Stat]:
        response = await self.send(FastGetData(path=self.path(path), watch=watch))
        return response.data, response.stat

    async def get_or_none(self, path: str) -> tuple[bytes | None, Stat] | None:
        try:
            return await self.get(path)
        except NoNode:
            return None

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes | None, Stat] | None]:
        """Unwatched reads of many znodes (None where missing), by pipelined multiReads;
        by pipelined single reads on a server older than 3.6. Either way at most
        `max_in_flight_requests` requests are outstanding (node/zk/in_flight.py)."""
        window = self.max_in_flight_requests
        if self._multi_read:
            chunks = [paths[i : i + _READS_PER_REQUEST] for i in range(0, len(paths), _READS_PER_REQUEST)]
            try:
                reads = (functools.partial(self._multi_read_chunk, c) for c in chunks)
                answers = await windowed(reads, window)
                return [item for answer in answers for item in answer]
            except exc.Unimplemented:
                log.warning("ZooKeeper does not support multiRead; reading one znode at a time")
                self._multi_read = False
        return await windowed((functools.partial(self.get_or_none, p) for p in paths), window)

    async def _multi_read_chunk(self, paths: Sequence[str]) -> list[tuple[bytes | None, Stat] | None]:
        # ZooKeeper 3.6's multiRead (opcode 22): many reads in one request and one answer.
        response = await self.send(FastMultiRead([self.path(p) for p in paths]))
        if not response.failed:
            found: list[tuple[bytes | None, Stat] | None] = response.responses
            return found
        results: list[tuple[bytes | None, Stat] | None] = []
        for item in response.responses:
            if isinstance(item, NoNode):
                results.append(None)
            elif isinstance(item, Exception):
                raise item
            else:
                results.append(item)
        return results

    async def exists(self, path: str, *, watch: bool = False) -> Stat | None:
        try:
            response = await self.send(protocol.ExistsRequest(path=self.path(path), watch=watch))
        except NoNode:
            return None
        stat: Stat = response.stat
        return stat

    async def children(self, path: str, *, watch: bool = False) -> list[str]:
        response = await self.send(protocol.GetChildren2Request(path=self.path(path), watch=watch))
        return list(response.children)

    async def create(self, path: str, data: bytes | None = None, *, ephemeral: bool = False) -> None:
        await self.send(self.create_op(path, data, ephemeral=ephemeral))

    async def delete(self, path: str, version: int = -1) -> None:
        await self.send(protocol.DeleteRequest(path=self.path(path), version=version))

    async def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        response = await self.send(FastSetData(path=self.path(path), data=data, version=version))
        stat: Stat = response.stat
        return stat

    async def create_all_if_missing(self, paths: Iterable[str]) -> None:
        """Create persistent paths, pipelined level by level (parents first)."""
        by_depth: dict[int, list[str]] = {}
        for path in paths:
            by_depth.setdefault(path.count("/"), []).append(path)
        for depth in sorted(by_depth):
            results = await asyncio.gather(*(self.create(p) for p in by_depth[depth]), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException) and not isinstance(result, NodeExists):
                    raise result

    # --- ACLs ---

    async def get_acl(self, path: str) -> list[ACL]:
        response = await self.send(protocol.GetACLRequest(path=self.path(path)))
        return list(response.acl)

    async def set_acl(self, path: str, acl: list[ACL], version: int = -1) -> None:
        await self.send(protocol.SetACLRequest(path=self.path(path), acl=acl, version=version))

    # --- multi-op ---

    def check_op(self, path: str, version: int) -> protocol.Request:
        return protocol.CheckVersionRequest(path=self.path(path), version=version)

    def create_op(
        self, path: str, data: bytes | None = None, *, ephemeral: bool = False, sequential: bool = False
    ) -> protocol.Request:
        request = protocol.Create2Request(
            path=self.path(path), data=data, acl=default_acls(path, self.security.set_acl)
        )
        request.set_flags(ephemeral, sequential, False)
        return request

    def set_op(self, path: str, data: bytes, version: int = -1) -> protocol.Request:
        return protocol.SetDataRequest(path=self.path(path), data=data, version=version)

    def delete_op(self, path: str, version: int = -1) -> protocol.Request:
        return protocol.DeleteRequest(path=self.path(path), version=version)

    async def multi(self, ops: Sequence[protocol.Request]) -> list[Any]:
        """Run ops atomically; each result is a response, or the error of the op that failed
        (the others then carry RolledBack / RuntimeInconsistency)."""
        request = FastMulti()  # encoded and its answer decoded without aiozk's generic parts
        for op in ops:
            request.add(op)
        response = await self.send(request)
        return list(response.responses)

    # --- watches and sessions ---

    def add_watch(self, event_type: int, path: str, callback: Callable[[str], None]) -> None:
        """Register a raw callback for a watch event; arming it is a read with watch=True.
        Keel's own watches go through `register_handler` and the `watch_*` reads instead."""
        self._zk.session.add_watch_callback(event_type, self.path(path), callback)

    def register_handler(self, handler: AnyHandler) -> None:
        """Register a watch handler for its znode (replacing the one there, as Kafka's
        ZooKeeperClient keeps one per path); its watch is armed by the `watch_*` reads."""
        self._watches.register(self.path(handler.path), handler)

    async def watch_existence(
        self, path: str, handler: ZNodeChangeHandler | ZNodeCreationHandler | None = None
    ) -> tuple[bytes | None, Stat] | None:
        """Kafka's registerZNodeChangeHandlerAndCheckExistence, then the data: register
        `handler` (if given), arm the watch by `exists`, which arms it on a missing znode too
        (it fires at the creation), and only then read the data, so that a change after the
        arming fires the watch. None when missing; a deletion between the two reads fires the
        watch. For znodes that may be missing whose creation matters."""
        if handler is not None:
            self.register_handler(handler)
        stat = await self.exists(path, watch=True)
        value = None if stat is None else await self.get_or_none(path)
        self._watches.armed_by_read(self.path(path), stat if value is None else value[1])
        return value

    async def watch_data(
        self, path: str, handler: ZNodeChangeHandler | None = None
    ) -> tuple[bytes | None, Stat] | None:
        """Register `handler` (if given) and arm its watch by `getData`: the data and the
        watch in one answer. None when missing, and then no watch is armed (ZooKeeper leaves
        none after a failed getData): for znodes whose creation another watch reports (their
        parent's children watch)."""
        if handler is not None:
            self.register_handler(handler)
        try:
            return await self.get(path, watch=True)
        except NoNode:
            return None

    async def watch_children(self, path: str, handler: ZNodeChildChangeHandler | None = None) -> list[str]:
        """Register `handler` (if given) and arm its children watch by `getChildren`, whose
        answer this is. NoNode when `path` is missing, which arms nothing."""
        if handler is not None:
            self.register_handler(handler)
        return await self.children(path, watch=True)

    async def wait_for_deletion(self, path: str, timeout: float) -> bool:
        """Wait until `path` is gone; False if it still exists after `timeout` seconds. Each
        wait arms the watch by the `exists` that checks the znode is still there; a change of
        its data uses that watch up as a deletion would, so it is re-armed by checking again."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        fired = asyncio.Event()

        def notified(_: str) -> None:
            fired.set()

        key = self.path(path)
        session = self._zk.session
        for event_type in (DATA_CHANGED, DELETED):
            session.add_watch_callback(event_type, key, notified)
        try:
            while True:
                fired.clear()
                if await self.exists(path, watch=True) is None:
                    return True
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                try:
                    await asyncio.wait_for(fired.wait(), remaining)
                except TimeoutError:
                    return False
        finally:
            for event_type in (DATA_CHANGED, DELETED):
                session.remove_watch_callback(event_type, key, notified)

    def watch_session(self, watcher: SessionWatcher) -> None:
        self._session_watchers.append(watcher)

    async def _monitor_session(self) -> None:
        """Tell the watchers of each new session, and repair a session left unconnected. The
        session is looked at on each change of state and every `_SESSION_CHECK_INTERVAL_S`, so
        that a new session id while connected is noticed however it came (even one that came
        while the watchers were being told of the one before)."""
        session: _KeelSession = self._zk.session
        loop = asyncio.get_running_loop()
        known = self.session_id
        last_connected = loop.time()
        while True:
            if session.state.current_state == States.CONNECTED:
                last_connected = loop.time()
                current = self.session_id
                if current is not None and current != known:
                    log.warning("ZooKeeper session 0x%x expired; new session 0x%x", known or 0, current)
                    known = current
                    await self._tell_watchers()
                    continue
            elif loop.time() - last_connected > self.session_timeout_s + self._connection_timeout_s:
                # The ensemble has expired the session by now, yet aiozk has not reconnected:
                # its repair loop is wedged or has died. A new one gets a new session.
                log.warning(
                    "ZooKeeper session 0x%x not connected for %.1f s; repairing it afresh",
                    known or 0,
                    loop.time() - last_connected,
                )
                session.repair_again()
                last_connected = loop.time()
            await self._state_change_or(_SESSION_CHECK_INTERVAL_S)

    async def _state_change_or(self, timeout_s: float) -> None:
        state = self._zk.session.state
        others = [s for s in _SESSION_STATES if s != state.current_state]
        change = state.wait_for(*others)
        try:
            await asyncio.wait_for(change, timeout_s)
        except TimeoutError:
            pass
        finally:
            # aiozk drops a waiter only when its state comes: a left one would pile up.
            for other in others:
                state.futures[other].discard(change)

    async def _tell_watchers(self) -> None:
        for watcher in list(self._session_watchers):
            try:
                await watcher.before_new_session()
                watcher.after_new_session()
            except Exception:
                log.exception("session watcher failed")


def multi_failure(results: list[Any]) -> Exception | None:
    """The error of the op that failed a multi-op (the others then report rollback)."""
    errors = [r for r in results if isinstance(r, Exception)]
    real = [e for e in errors if not isinstance(e, RolledBack | RuntimeInconsistency)]
    candidates = real or errors
    return candidates[0] if candidates else None
