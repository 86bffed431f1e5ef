"""Forced re-elections on real broker processes (spec §2.2): `/controller` deleted from outside
200 times in a row, each time the moment a broker has created it at the next epoch, as an
operator running `zookeeper-shell delete /controller` in a loop might. Every deletion brings a new
controller within a second, and no epoch has two, in ZooKeeper or in the brokers' controller.log."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import orjson
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import Callback, WatchedEvent

from node.broker.logs import CONTROLLER_LOG
from node.chaos.logs import elections
from node.cluster.zookeeper import EmbeddedZooKeeper
from tests.integration.conftest import SESSION_TIMEOUT_MS, Brokers
from tests.support import eventually, eventually_sync

CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DELETIONS = 200
ELECTION_BUDGET_S = 1.0
# A controller still missing this long after a deletion is missing for good: two session
# timeouts have passed, and nothing a broker waits for in ZooKeeper is still to come.
STALL_S = 2 * SESSION_TIMEOUT_MS / 1000 + 1
# The 200 deletions together; a stall fails after STALL_S, far sooner.
RUN_DEADLINE_S = 60.0
# A watch sends the next burst at once; this only bounds each wait, should a notification be lost.
RECHECK_S = 0.1


class WatchesOnConnectionThread(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler, except that a watch callback runs on the connection thread
    that heard the event rather than on a worker thread: what it sends leaves at once, as soon
    after a creation as the brokers' own reads do. Such a callback must not block: it only
    queues requests (kazoo's `*_async` calls)."""

    def dispatch_callback(self, callback: Callback) -> None:
        if callback.type == "watch":
            callback.func(*callback.args)
        else:
            super().dispatch_callback(callback)


@pytest.fixture
def operator_zk(zookeeper: EmbeddedZooKeeper, chroot: str, kazoo: KazooClient) -> Iterator[KazooClient]:
    """A second independent client on the test's chroot (which the `kazoo` fixture made), its
    watch callbacks run on its connection thread."""
    client = KazooClient(hosts=zookeeper.connect_string + chroot, handler=WatchesOnConnectionThread())
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


@dataclasses.dataclass(frozen=True)
class Holder:
    """A /controller znode: the broker it names, the epoch it was created at, when the test asked
    for it (told of its creation, or looking again), and whether the test deleted it."""

    broker: int
    epoch: int
    seen_at: float
    deleted: bool


@dataclasses.dataclass(frozen=True)
class Burst:
    """Requests sent back to back on one session, which ZooKeeper answers in order: reads of
    /controller and /controller_epoch, maybe the delete of /controller, the watch armed again."""

    sent: float
    znode: IAsyncResult
    epoch: IAsyncResult
    deleted: IAsyncResult | None
    armed: IAsyncResult


class Deleter:
    """Deletes /controller the moment a broker creates it, until told to stop. The watch armed
    with each deletion fires on the next creation, and its callback sends the next burst at once;
    the test's loop reads the answers. The reads come before the delete, so they are of the znode
    deleted."""

    def __init__(self, zk: KazooClient, loop: asyncio.AbstractEventLoop) -> None:
        self.zk = zk
        self.loop = loop
        self.deleting = threading.Event()
        self.deleting.set()
        self.bursts: asyncio.Queue[Burst] = asyncio.Queue()
        self.deleted_at = 0.0
        # Epoch to every broker /controller named at it.
        self.seen: dict[int, set[int]] = defaultdict(set)

    def _fired(self, _event: WatchedEvent) -> None:
        burst = self.send()
        # The test's loop is woken once the burst is answered, not before: woken at once, it
        # would hold the interpreter while the connection thread is still to send the delete.
        burst.armed.rawlink(lambda _answered: self._answered(burst))

    def _answered(self, burst: Burst) -> None:
        # A burst answered once the test is over finds its loop closed.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.bursts.put_nowait, burst)

    def send(self) -> Burst:
        return Burst(
            time.monotonic(),
            self.zk.get_async(CONTROLLER),
            self.zk.get_async(CONTROLLER_EPOCH),
            self.zk.delete_async(CONTROLLER) if self.deleting.is_set() else None,
            self.zk.exists_async(CONTROLLER, watch=self._fired),
        )

    def answers(self, burst: Burst) -> Holder | None:
        """Who held /controller when `burst` read it (None: nobody)."""
        try:
            data, stat = burst.znode.get(timeout=10)
        except NoNodeError:
            data, stat = None, None
        epoch_data, epoch_stat = burst.epoch.get(timeout=10)
        removed = False
        if burst.deleted is not None:
            with contextlib.suppress(NoNodeError):
                removed = burst.deleted.get(timeout=10)
        if burst.armed.get(timeout=10) is not None and burst.deleted is not None:
            # Created again between the delete and the watch, which then waits for a deletion.
            self.bursts.put_nowait(self.send())
        if data is None or stat is None:
            # Absent; or created after the read, when the delete removed a znode not read, which
            # the next burst's reads find the brokers' answer to.
            return None
        # One multi writes the znode and the epoch: the znode's czxid is the epoch's mzxid.
        assert stat.czxid == epoch_stat.mzxid, (
            f"/controller (czxid {stat.czxid:#x}) was not created by the election that wrote "
            f"/controller_epoch {int(epoch_data)} (mzxid {epoch_stat.mzxid:#x})"
        )
        held = Holder(int(orjson.loads(data)["brokerid"]), int(epoch_data), burst.sent, removed)
        self.seen[held.epoch].add(held.broker)
        if removed:
            self.deleted_at = burst.sent
        return held

    async def next_holder(self, after: int, deadline: float) -> Holder | None:
        """The first holder of /controller at an epoch past `after` that the test deleted, or
        did not try to (once told to stop), or None at `deadline`."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                burst = await asyncio.wait_for(self.bursts.get(), min(remaining, RECHECK_S))
            except TimeoutError:
                # No watch fired: look again all the same.
                burst = self.send()
            held = self.answers(burst)
            if held is not None and held.epoch > after and (held.deleted or burst.deleted is None):
                return held


async def views(brokers: Brokers) -> dict[int, tuple[int, int] | None]:
    """Each running broker's (controller id, epoch), as it answers DescribeCluster."""
    return {
        broker_id: None if view is None else (view.controller_id, view.controller_epoch)
        for broker_id, view in (await brokers.views()).items()
    }


def last_lines(brokers: Brokers, count: int = 3) -> str:
    """The last lines of each running broker's controller.log."""
    return "".join(
        f"\n  broker {broker.broker_id}: " + f"\n  broker {broker.broker_id}: ".join(lines)
        for broker in brokers.running()
        if (lines := broker.broker_log(CONTROLLER_LOG).splitlines()[-count:])
    )


def claims(brokers: Brokers) -> dict[int, set[int]]:
    """Epoch to the brokers whose controller.log says "broker N is controller at epoch E"."""
    claimed: dict[int, set[int]] = defaultdict(set)
    for broker in brokers.all:
        for won in elections(broker.log_dir, f"broker {broker.broker_id}", 0.0):
            claimed[won.epoch].add(won.broker)
    return claimed


@pytest.mark.parametrize("size", [3, 5], ids=["3-brokers", "5-brokers"])
async def test_controller_deleted_200_times_in_a_row_is_elected_anew_within_a_second_each_time(
    size: int, brokers: Brokers, operator_zk: KazooClient
) -> None:
    brokers.start(*range(1, size + 1))
    await eventually(brokers.agreed_controller, timeout=30, message="brokers did not agree on a controller")
    deleter = Deleter(operator_zk, asyncio.get_running_loop())
    current = await deleter.next_holder(0, time.monotonic() + 10)
    assert current is not None and current.deleted, "no broker holds /controller once they agree on one"
    run_deadline = time.monotonic() + RUN_DEADLINE_S
    slowest = 0.0
    deletion = 1
    while True:
        assert time.monotonic() < run_deadline, (
            f"only {deletion} of {DELETIONS} deletions within {RUN_DEADLINE_S:g} s "
            f"(slowest election {slowest:.3f} s)"
        )
        if deletion >= DELETIONS:
            deleter.deleting.clear()
        deleted_at = deleter.deleted_at
        elected = await deleter.next_holder(current.epoch, deleted_at + STALL_S)
        if elected is None:
            deleter.deleting.clear()
            there = deleter.answers(deleter.send())
            absent = time.monotonic() - deleted_at
            state = (
                f"/controller absent for {absent:.2f} s"
                if there is None
                else f"/controller back at epoch {there.epoch} (broker {there.broker}) after {absent:.2f} s"
            )
            raise AssertionError(
                f"deletion {deletion} of {DELETIONS} stalled: no new controller within "
                f"{ELECTION_BUDGET_S:g} s; {state}; last epoch {current.epoch}, held by broker "
                f"{current.broker}; the brokers' (controller, epoch): {await views(brokers)}; "
                f"slowest election before it: {slowest:.3f} s; the end of each controller.log:"
                f"{last_lines(brokers)}"
            )
        elapsed = elected.seen_at - deleted_at
        assert elapsed <= ELECTION_BUDGET_S, (
            f"deletion {deletion} of {DELETIONS}: the election after epoch {current.epoch} (broker "
            f"{current.broker}) took {elapsed:.3f} s (at most {ELECTION_BUDGET_S:g} s): broker "
            f"{elected.broker} at epoch {elected.epoch}"
        )
        slowest = max(slowest, elapsed)
        current = elected
        if not elected.deleted:
            break
        deletion += 1
    # A burst already on its way when the deletions stopped may have made one more.
    assert deletion >= DELETIONS, f"only {deletion} of {DELETIONS} deletions"

    seen = deleter.seen
    two = {epoch: sorted(ids) for epoch, ids in seen.items() if len(ids) > 1}
    assert not two, f"/controller named two brokers at one epoch: {two}"
    eventually_sync(
        lambda: set(seen) <= set(claims(brokers)),
        timeout=10,
        message="an election seen in ZooKeeper is missing from every controller.log",
    )
    claimed = claims(brokers)
    two = {epoch: sorted(ids) for epoch, ids in claimed.items() if len(ids) > 1}
    assert not two, f"epochs claimed by two brokers in their controller.log: {two}"
    differ = {e: (sorted(seen[e]), sorted(claimed[e])) for e in seen if seen[e] != claimed[e]}
    assert not differ, f"ZooKeeper's holder and controller.log's differ, by epoch (zk, log): {differ}"

    async def settled() -> bool:
        return await brokers.agreed_controller() == (current.broker, current.epoch)

    await eventually(
        settled,
        timeout=10,
        message=f"brokers did not agree on broker {current.broker} at epoch {current.epoch}",
    )
