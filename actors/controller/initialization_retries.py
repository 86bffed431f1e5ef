"""Partitions whose state znode could not be created, tried again (spec §5.1, NewPartition to
OnlinePartition).

Kafka's controller logs a failed initialisation and leaves the partition New until some other
event drives it (a broker starting, a failover); a create that failed on its own (ZooKeeper
unreachable for a while, a write that timed out) then leaves a topic partly offline for good,
with nothing to say so. Keel's controller tries again: the partitions whose create failed are
put back on the controller's queue, as one `RetryPartitionInitialization` event, after a pause
that doubles up to a bound (taken on the Clock port, so tests and the simulation drive it); the
event moves whichever of them are still New to Online. Nothing here holds the queue: the
controller handles other events between the tries. The pending set and its timer end with the
controller's reign: the next controller initialises every New partition at its failover.

A partition with no live assigned replica is not tried again here, as in Kafka: it stays New
until one of its replicas' brokers starts, whose start-up drives it Online.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from actors.base.clock import Cancellable, Clock
from actors.base.ports import TopicPartition
from wire.retry import Backoff

# The first pause and its bound: short enough that a topic comes online soon after ZooKeeper
# answers again, long enough not to hammer an ensemble that is struggling.
FIRST_RETRY_S = 0.5
MAX_RETRY_S = 10.0


class InitializationRetries:
    def __init__(self, clock: Clock, enqueue: Callable[[], None], backoff: Backoff | None = None) -> None:
        self._clock = clock
        self._enqueue = enqueue
        self._backoff = backoff or Backoff(FIRST_RETRY_S, MAX_RETRY_S)
        self._pending: set[TopicPartition] = set()
        self._timer: Cancellable | None = None
        self._due = 0.0

    @property
    def pending(self) -> frozenset[TopicPartition]:
        return frozenset(self._pending)

    @property
    def scheduled(self) -> bool:
        return self._timer is not None

    def failed(self, partitions: Iterable[TopicPartition]) -> float:
        """Try `partitions` again at the next retry, scheduled now if none is; the seconds
        until it."""
        self._pending.update(partitions)
        if self._timer is None:
            delay = self._backoff.next_delay()
            self._due = self._clock.monotonic() + delay
            self._timer = self._clock.call_later(delay, self._fire)
        return max(self._due - self._clock.monotonic(), 0.0)

    def succeeded(self, partitions: Iterable[TopicPartition]) -> None:
        """Initialised, by a retry or by another path (a broker's start-up, a failover)."""
        self._pending.difference_update(partitions)

    def take_due(self) -> list[TopicPartition]:
        """What the retry event tries now: every pending partition, in order."""
        due = sorted(self._pending)
        self._pending.clear()
        return due

    def round_done(self) -> None:
        """After a retry: once nothing failed again, the next failure pauses the shortest time."""
        if not self._pending and self._timer is None:
            self._backoff.reset()

    def reset(self) -> None:
        """The controller resigned: nothing is pending any more."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending.clear()
        self._backoff.reset()

    def _fire(self) -> None:
        # A timer callback only enqueues; the event itself takes what is due.
        self._timer = None
        self._enqueue()
