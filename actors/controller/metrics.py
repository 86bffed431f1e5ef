"""The controller's metrics (spec §13), computed from its state when read.

Gauges that only the active controller can know read 0 elsewhere, as Kafka's do. The gauges
that walk every partition are computed at most once per processed event (Kafka updates them
after each event), so a monitor polling in the middle of a long event does not slow it down.
"""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator

from actors.base.clock import Clock
from actors.base.ports import BrokerChannel
from actors.controller.context import ControllerContext
from actors.controller.event_manager import ControllerEventManager
from actors.controller.events import ControllerState

_RECENT = 1024


class Timer:
    """Rate and time of one kind of event: count, total and recent durations in ms."""

    def __init__(self) -> None:
        self.count = 0
        self.total_ms = 0.0
        self.recent: collections.deque[float] = collections.deque(maxlen=_RECENT)

    def record(self, ms: float) -> None:
        self.count += 1
        self.total_ms += ms
        self.recent.append(ms)

    def percentile(self, q: float) -> float:
        if not self.recent:
            return 0.0
        ordered = sorted(self.recent)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class ControllerMetrics:
    """Reads what it reports from the controller's parts, handed in, not from the controller."""

    def __init__(
        self,
        context: ControllerContext,
        event_manager: ControllerEventManager,
        channel: BrokerChannel,
        is_active: Callable[[], bool],
        clock: Clock,
    ) -> None:
        self._context = context
        self._event_manager = event_manager
        self._channel = channel
        self._is_active = is_active
        self._clock = clock
        self.unclean_leader_elections = 0
        # Partitions whose state znode create failed (Keel's own; counted as Kafka counts its
        # unclean elections): each is read back, adopted, elected or tried again.
        self.partition_initialization_failures = 0
        self.timers: dict[ControllerState, Timer] = collections.defaultdict(Timer)

    @property
    def event_manager(self) -> ControllerEventManager:
        """Its queue (EventQueueSize, EventQueueTimeMs), for an exporter."""
        return self._event_manager

    def _offline_and_imbalanced(self) -> tuple[int, int]:
        context = self._context
        return context.offline_partition_count(), context.preferred_replica_imbalance_count()

    @contextlib.contextmanager
    def timing(self, state: ControllerState) -> Iterator[None]:
        started = self._clock.monotonic()
        try:
            yield
        finally:
            self.timers[state].record((self._clock.monotonic() - started) * 1000)

    def timer_entries(self, name: str, state: ControllerState) -> dict[str, float]:
        """A timer's count and latencies (ms), under Kafka's name for it."""
        timer = self.timers[state]
        return {
            f"{name}.count": timer.count,
            f"{name}.p50": timer.percentile(0.5),
            f"{name}.p99": timer.percentile(0.99),
        }

    def snapshot(self) -> dict[str, float]:
        """Every gauge."""
        context = self._context
        active = self._is_active()
        elections = self.timers[ControllerState.BROKER_CHANGE]
        queue_time = self._event_manager.queue_time
        offline, imbalanced = self._offline_and_imbalanced() if active else (0, 0)
        return {
            "ActiveControllerCount": 1 if active else 0,
            "ControllerState": int(self._event_manager.state),
            "OfflinePartitionsCount": offline,
            "PreferredReplicaImbalanceCount": imbalanced,
            "GlobalTopicCount": len(context.all_topics) if active else 0,
            "GlobalPartitionCount": context.global_partition_count() if active else 0,
            "ActiveBrokerCount": len(context.live_brokers) if active else 0,
            "UncleanLeaderElections": self.unclean_leader_elections,
            "PartitionInitializationFailures": self.partition_initialization_failures,
            "LeaderElectionRateAndTimeMs.count": elections.count,
            "LeaderElectionRateAndTimeMs.p50": elections.percentile(0.5),
            "LeaderElectionRateAndTimeMs.p99": elections.percentile(0.99),
            "LeaderElectionRateAndTimeMs.last": elections.recent[-1] if elections.recent else 0.0,
            **self.timer_entries("AutoLeaderBalanceRateAndTimeMs", ControllerState.AUTO_LEADER_BALANCE),
            **self.timer_entries("ManualLeaderBalanceRateAndTimeMs", ControllerState.MANUAL_LEADER_BALANCE),
            **self._reassignment_metrics(active),
            **self.timer_entries("ControlledShutdownRateAndTimeMs", ControllerState.CONTROLLED_SHUTDOWN),
            "EventQueueSize": self._event_manager.queue_size,
            "TotalQueueSize": self._channel.total_queue_size if active else 0,
            "EventQueueTimeMs.count": queue_time.count,
            "EventQueueTimeMs.max": queue_time.max_ms,
            "EventQueueTimeMs.p99": queue_time.percentile(0.99),
            **self._topic_deletion(active),
        }

    def _topic_deletion(self, active: bool) -> dict[str, float]:
        context = self._context
        timer = self.timers[ControllerState.TOPIC_DELETION]
        return {
            "TopicsToDeleteCount": context.topics_to_delete_count() if active else 0,
            "ReplicasToDeleteCount": context.replicas_to_delete_count() if active else 0,
            "TopicsIneligibleToDeleteCount": context.topics_ineligible_to_delete_count() if active else 0,
            "ReplicasIneligibleToDeleteCount": context.replicas_ineligible_to_delete_count() if active else 0,
            "TopicDeletionRateAndTimeMs.count": timer.count,
            "TopicDeletionRateAndTimeMs.p50": timer.percentile(0.5),
            "TopicDeletionRateAndTimeMs.p99": timer.percentile(0.99),
        }

    def _reassignment_metrics(self, active: bool) -> dict[str, float]:
        """PartitionReassignmentRateAndTimeMs (the AlterPartitionReassignment state's timer)
        and ReassigningPartitions (partitions with a reassignment in progress)."""
        reassigning = len(self._context.partitions_being_reassigned) if active else 0
        return {
            **self.timer_entries(
                "PartitionReassignmentRateAndTimeMs", ControllerState.ALTER_PARTITION_REASSIGNMENT
            ),
            "ReassigningPartitions": reassigning,
        }
