"""A broker's metrics, read from its parts when Prometheus scrapes: the controller module's
(actors/controller/metrics.py), the replica manager's gauges and counts, the request metrics.
Nothing is updated for the exporter's sake but the hot-path counts (actors/replica/broker_stats.py,
node/metrics/requests.py).

Every controller gauge is exported by every broker, as Kafka's are: the ones only the active
controller knows read 0 elsewhere, so `sum(...)` over brokers gives the cluster's value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from actors.controller.events import ControllerState
from actors.replica.replica_gauges import ReplicaGauges, replica_gauges, replica_gauges_in_slices
from node.metrics.names import Exposition, MBean, kafka_camel_case, topic_samples
from node.metrics.requests import RequestMetrics

if TYPE_CHECKING:
    from actors.controller import KafkaController
    from actors.replica.handle import ReplicaManagerHandle

_KAFKA_CONTROLLER_GAUGES = (
    "ActiveControllerCount",
    "OfflinePartitionsCount",
    "PreferredReplicaImbalanceCount",
    "GlobalTopicCount",
    "GlobalPartitionCount",
    "ControllerState",
    "ActiveBrokerCount",
    "TopicsToDeleteCount",
    "ReplicasToDeleteCount",
    "TopicsIneligibleToDeleteCount",
    "ReplicasIneligibleToDeleteCount",
)

# Kafka's ControllerState.rateAndTimeMetricName: the state's name, but for two that kept older names.
_TIMER_NAMES = {
    ControllerState.BROKER_CHANGE: "LeaderElectionRateAndTimeMs",
    ControllerState.ALTER_PARTITION_REASSIGNMENT: "PartitionReassignmentRateAndTimeMs",
}


def controller_timer_name(state: ControllerState) -> str:
    return _TIMER_NAMES.get(state) or f"{kafka_camel_case(state.name)}RateAndTimeMs"


def _controller_bean(type_: str, name: str) -> MBean:
    return MBean("kafka.controller", type_, name)


def _server_bean(type_: str, name: str) -> MBean:
    return MBean("kafka.server", type_, name)


class BrokerMetrics(Collector):
    """The collector of one broker's registry. The controller module starts after the
    listeners, so it is read through a callable (None until then)."""

    def __init__(
        self,
        replica_manager: ReplicaManagerHandle,
        controller: Callable[[], KafkaController | None],
        requests: RequestMetrics,
        default_min_isr: int,
        cleaner: Callable[[], Mapping[tuple[str, str], float]] | None = None,
    ) -> None:
        """`cleaner`: the log cleaner's gauges, by Kafka's MBean type and name in `kafka.log`."""
        self._replica_manager = replica_manager
        self._cleaner = cleaner
        self._controller = controller
        self._requests = requests
        self._default_min_isr = default_min_isr
        self._prepared: ReplicaGauges | None = None

    async def prepare(self) -> None:
        """Before a scrape: the passes over every hosted partition (ReplicaManager's gauges),
        in slices between which the event loop turns, so that a scrape at 200k partitions
        does not hold it for their length. (The controller keeps its partition gauges
        current as it goes: actors/controller/partition_gauges.py.)"""
        state = self._replica_manager.replica_state
        self._prepared = await replica_gauges_in_slices(state, self._default_min_isr)

    def collect(self) -> Iterator[Metric]:
        out = Exposition()
        controller = self._controller()
        if controller is not None:
            self._export_controller(controller, out)
        self._export_replica_manager(out)
        if self._cleaner is not None:
            self._export_cleaner(self._cleaner(), out)
        self._requests.export(out)
        return out.families()

    def _export_cleaner(self, gauges: Mapping[tuple[str, str], float], out: Exposition) -> None:
        for (type_, name), value in gauges.items():
            out.gauge(MBean("kafka.log", type_, name), value)

    def _export_controller(self, controller: KafkaController, out: Exposition) -> None:
        metrics = controller.metrics
        snapshot = metrics.snapshot()
        for name in _KAFKA_CONTROLLER_GAUGES:
            out.gauge(_controller_bean("KafkaController", name), snapshot[name])
        events = metrics.event_manager
        out.gauge(_controller_bean("ControllerEventManager", "EventQueueSize"), events.queue_size)
        queue_time = events.queue_time
        out.histogram(
            _controller_bean("ControllerEventManager", "EventQueueTimeMs"),
            queue_time.count,
            queue_time.recent,
        )
        out.gauge(_controller_bean("ControllerChannelManager", "TotalQueueSize"), snapshot["TotalQueueSize"])
        out.meter(
            _controller_bean("ControllerStats", "UncleanLeaderElectionsPerSec"),
            metrics.unclean_leader_elections,
        )
        out.meter(
            _controller_bean("ControllerStats", "PartitionInitializationFailuresPerSec"),
            metrics.partition_initialization_failures,
        )
        for state in ControllerState:
            if state is ControllerState.IDLE:
                continue
            timer = metrics.timers[state]
            out.histogram(
                _controller_bean("ControllerStats", controller_timer_name(state)),
                timer.count,
                timer.recent,
                total=timer.total_ms,
            )
        out.keel_gauge(
            "keel_controller_epoch",
            "The controller epoch this broker knows (/controller_epoch of the controller it follows)",
            controller.known_controller_epoch,
        )
        out.keel_gauge(
            "keel_server_broker_epoch",
            "This broker's epoch: its registration's czxid in ZooKeeper (-1 until registered)",
            controller.broker_epoch,
        )

    def _export_replica_manager(self, out: Exposition) -> None:
        handle = self._replica_manager
        state = handle.replica_state
        gauges = self._prepared
        if gauges is None:
            gauges = replica_gauges(state, self._default_min_isr)
        self._prepared = None
        for name, value in (
            ("PartitionCount", gauges.partition_count),
            ("LeaderCount", gauges.leader_count),
            ("UnderReplicatedPartitions", gauges.under_replicated),
            ("UnderMinIsrPartitionCount", gauges.under_min_isr),
            ("ReassigningPartitions", gauges.reassigning),
            ("OfflineReplicaCount", gauges.offline_replicas),
        ):
            out.gauge(_server_bean("ReplicaManager", name), value)
        stats = state.stats
        out.meter(_server_bean("ReplicaManager", "IsrShrinksPerSec"), stats.isr_shrinks)
        out.meter(_server_bean("ReplicaManager", "IsrExpandsPerSec"), stats.isr_expands)
        for name, counter in (
            ("BytesInPerSec", "bytes_in"),
            ("MessagesInPerSec", "messages_in"),
            ("BytesOutPerSec", "bytes_out"),
            ("TotalProduceRequestsPerSec", "produce_requests"),
            ("FailedProduceRequestsPerSec", "failed_produce_requests"),
            ("TotalFetchRequestsPerSec", "fetch_requests"),
            ("FailedFetchRequestsPerSec", "failed_fetch_requests"),
        ):
            bean = _server_bean("BrokerTopicMetrics", name)
            for labels, count in topic_samples(getattr(stats, counter), stats.retired[counter]):
                out.meter(bean, count, labels)
        out.meter(_server_bean("BrokerTopicMetrics", "ReplicationBytesInPerSec"), stats.replication_bytes_in)
        out.meter(
            _server_bean("BrokerTopicMetrics", "ReplicationBytesOutPerSec"), stats.replication_bytes_out
        )
        for tp, remaining in handle.bytes_to_copy_now().items():
            out.keel_gauge(
                "keel_server_replicamanager_reassignmentbytestocopy",
                "Per partition led here with replicas being added: the bytes they still lack",
                remaining,
                {"topic": tp.topic, "partition": str(tp.partition)},
            )
