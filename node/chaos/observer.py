"""A ZooKeeper watcher of its own: records every controller and every version of the
workload partitions' state znodes it sees, for the checker.

It polls (every POLL_S) rather than arming one-shot watches: a watch reports that something
changed, not each change, and nothing at all while disconnected; a poll sees the same
versions, and the checker compares versions, not events."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from aiozk.protocol.stat import Stat

from node.chaos.cluster import ChaosCluster
from node.chaos.history import ControllerSeen, ControllerZnode, History, PartitionState
from node.zk import data, paths

POLL_S = 0.1
STOP_WAIT_S = 5.0
# After this long without a successful read, the observer opens a new ZooKeeper session.
RENEW_AFTER_S = 5.0


class Observer:
    def __init__(self, cluster: ChaosCluster, history: History, clock: Callable[[], float]) -> None:
        self.cluster = cluster
        self.history = history
        self.now = clock
        self._versions: dict[tuple[str, int], int] = {}
        self._controller: tuple[int, int] | None = None
        # The /controller znode last seen: its creation's zxid (0: absent).
        self._controller_znode: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.controller_changes = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Ends the polling loop by its flag, not by cancelling it: a cancellation that lands
        just as the poll it waits on ends is lost inside asyncio.wait_for (Python 3.11), and
        the loop went on polling for ever (a run hung after its heal that way)."""
        self._stopping.set()
        if self._task is not None and not self._task.done():
            await asyncio.wait([self._task], timeout=STOP_WAIT_S)
            self._task.cancel()

    async def _run(self) -> None:
        errors: set[str] = set()
        failing_since: float | None = None
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self.poll(), 3.0)
                failing_since = None
            except Exception as e:
                failing_since = failing_since or self.now()
                if self.now() - failing_since > RENEW_AFTER_S:
                    # The ensemble is back but this session may not be for a while.
                    with contextlib.suppress(Exception):
                        await self.cluster.renew_zk()
                    failing_since = None
                # ZooKeeper unreachable (a fault of the run): said once per kind of error.
                why = type(e).__name__
                if why not in errors:
                    errors.add(why)
                    self.history.event(self.now(), "observer", f"cannot read ZooKeeper: {why}: {e}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), POLL_S)

    async def poll(self) -> None:
        zk = self.cluster.zk
        assert zk is not None
        state_paths = [paths.partition_state(t, p) for t, p in self.history.partitions]
        got = await zk.get_many([paths.CONTROLLER, paths.CONTROLLER_EPOCH, *state_paths])
        t = self.now()
        self.history.observed_until_s = t
        self._see_controller_znode(t, got[0])
        self._see_controller(t, got[0], got[1])
        for (topic, partition), znode in zip(self.history.partitions, got[2:], strict=True):
            if znode is None:
                continue
            raw, stat = znode
            if self._versions.get((topic, partition)) == stat.version:
                continue
            self._versions[(topic, partition)] = stat.version
            info = data.decode_partition_state(topic, raw, stat.version)
            state = info.leader_and_isr
            self.history.states.append(
                PartitionState(
                    t,
                    topic,
                    partition,
                    stat.version,
                    info.controller_epoch,
                    state.leader_epoch,
                    state.leader,
                    tuple(state.isr),
                )
            )
            self.history.event(
                t,
                "state",
                f"{topic}-{partition} v{stat.version}: leader {state.leader} epoch {state.leader_epoch} "
                f"isr {list(state.isr)} (controller epoch {info.controller_epoch})",
            )

    def _see_controller_znode(self, t: float, controller: tuple[bytes | None, Stat] | None) -> None:
        """Each /controller znode (told apart by the zxid that created it) and each absence."""
        zxid = 0 if controller is None else controller[1].created_zxid
        if zxid == self._controller_znode:
            return
        self._controller_znode = zxid
        if controller is None:
            self.history.controller_znodes.append(ControllerZnode(t, None, t))
            self.history.event(t, "controller", "/controller is absent (ZooKeeper)")
            return
        # A znode whose data does not decode is held all the same (-1: by whom is not known).
        broker = -1
        with contextlib.suppress(Exception):
            broker = data.decode_controller(controller[0])
        # ctime is the ensemble's wall clock, in ms; the servers run on this machine.
        age = max(0.0, time.time() - controller[1].created / 1000)
        self.history.controller_znodes.append(ControllerZnode(t, broker, max(0.0, t - age)))

    def _see_controller(
        self, t: float, controller: tuple[bytes | None, Stat] | None, epoch: tuple[bytes | None, Stat] | None
    ) -> None:
        if controller is None or epoch is None:
            return
        # The new controller creates /controller and bumps /controller_epoch in one multi: a
        # pair read between a resignation and the next election's bump is not a controller.
        if epoch[1].last_modified_zxid < controller[1].created_zxid:
            return
        seen = (data.decode_controller_epoch(epoch[0]), data.decode_controller(controller[0]))
        if seen == self._controller:
            return
        if self._controller is not None:
            self.controller_changes += 1
        self._controller = seen
        self.history.controllers.append(ControllerSeen(t, "zookeeper", seen[0], seen[1]))
        self.history.event(t, "controller", f"broker {seen[1]} at epoch {seen[0]} (ZooKeeper)")
