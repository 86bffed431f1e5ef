"""Kafka's MBeans under the names the JMX exporter with Strimzi's rules gives them: one test per
shape of rule (gauge, meter, histogram/timer; with and without keys), checked on the text
prometheus_client renders, which is what Prometheus scrapes."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from actors.controller.events import ControllerState
from node.metrics.broker import controller_timer_name
from node.metrics.names import Exposition, MBean, kafka_camel_case, quantiles, topic_samples


class _Fixed(Collector):
    def __init__(self, out: Exposition) -> None:
        self._out = out

    def collect(self) -> list[Metric]:
        return list(self._out.families())


def rendered(out: Exposition) -> list[str]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(out))
    return [line for line in generate_latest(registry).decode().splitlines() if not line.startswith("#")]


def test_a_gauge_is_domain_type_and_name_in_lower_case() -> None:
    out = Exposition()
    out.gauge(MBean("kafka.controller", "KafkaController", "ActiveControllerCount"), 1)
    out.gauge(MBean("kafka.server", "ReplicaManager", "UnderReplicatedPartitions"), 3)
    assert rendered(out) == [
        "kafka_controller_kafkacontroller_activecontrollercount 1.0",
        "kafka_server_replicamanager_underreplicatedpartitions 3.0",
    ]


def test_a_gauge_keeps_its_other_keys_as_labels() -> None:
    out = Exposition()
    bean = MBean("kafka.log", "Log", "Size")
    out.gauge(bean, 10, {"topic": "t", "partition": "0"})
    out.gauge(bean, 20, {"topic": "t", "partition": "1"})
    assert rendered(out) == [
        'kafka_log_log_size{partition="0",topic="t"} 10.0',
        'kafka_log_log_size{partition="1",topic="t"} 20.0',
    ]


def test_a_meter_loses_per_sec_and_becomes_a_total() -> None:
    out = Exposition()
    out.meter(MBean("kafka.controller", "ControllerStats", "UncleanLeaderElectionsPerSec"), 2)
    out.meter(MBean("kafka.server", "ReplicaManager", "IsrShrinksPerSec"), 5)
    assert rendered(out) == [
        "kafka_controller_controllerstats_uncleanleaderelections_total 2.0",
        "kafka_server_replicamanager_isrshrinks_total 5.0",
    ]


def test_a_per_topic_meter_has_a_topic_label_beside_the_all_topics_one() -> None:
    out = Exposition()
    bean = MBean("kafka.server", "BrokerTopicMetrics", "BytesInPerSec")
    for labels, count in topic_samples({"a": 10, "b": 5}):
        out.meter(bean, count, labels)
    assert rendered(out) == [
        'kafka_server_brokertopicmetrics_bytesin_total{topic="a"} 10.0',
        'kafka_server_brokertopicmetrics_bytesin_total{topic="b"} 5.0',
        "kafka_server_brokertopicmetrics_bytesin_total 15.0",
    ]


def test_request_metrics_carry_kafka_s_request_name() -> None:
    out = Exposition()
    out.meter(MBean("kafka.network", "RequestMetrics", "RequestsPerSec"), 7, {"request": "Produce"})
    assert rendered(out) == ['kafka_network_requestmetrics_requests_total{request="Produce"} 7.0']
    assert kafka_camel_case("LEADER_AND_ISR") == "LeaderAndIsr"
    assert kafka_camel_case("OFFSET_FOR_LEADER_EPOCH") == "OffsetForLeaderEpoch"
    assert kafka_camel_case("API_VERSIONS") == "ApiVersions"


def test_a_histogram_is_a_summary_of_kafka_s_percentiles_and_a_count() -> None:
    out = Exposition()
    bean = MBean("kafka.network", "RequestMetrics", "TotalTimeMs")
    out.histogram(bean, 100, [float(i) for i in range(1, 101)], {"request": "Fetch"}, total=5050.0)
    name = "kafka_network_requestmetrics_totaltimems"
    assert rendered(out) == [
        f'{name}{{quantile="0.50",request="Fetch"}} 51.0',
        f'{name}{{quantile="0.75",request="Fetch"}} 76.0',
        f'{name}{{quantile="0.95",request="Fetch"}} 96.0',
        f'{name}{{quantile="0.98",request="Fetch"}} 99.0',
        f'{name}{{quantile="0.99",request="Fetch"}} 100.0',
        f'{name}{{quantile="0.999",request="Fetch"}} 100.0',
        f'{name}_count{{request="Fetch"}} 100.0',
        f'{name}_sum{{request="Fetch"}} 5050.0',
    ]


def test_a_timer_without_keys_and_without_values() -> None:
    out = Exposition()
    bean = MBean("kafka.controller", "ControllerStats", controller_timer_name(ControllerState.BROKER_CHANGE))
    out.histogram(bean, 0, [])
    lines = rendered(out)
    assert 'kafka_controller_controllerstats_leaderelectionrateandtimems{quantile="0.99"} 0.0' in lines
    assert "kafka_controller_controllerstats_leaderelectionrateandtimems_count 0.0" in lines


def test_controller_timers_have_kafka_s_names() -> None:
    assert controller_timer_name(ControllerState.BROKER_CHANGE) == "LeaderElectionRateAndTimeMs"
    assert (
        controller_timer_name(ControllerState.ALTER_PARTITION_REASSIGNMENT)
        == "PartitionReassignmentRateAndTimeMs"
    )
    assert controller_timer_name(ControllerState.TOPIC_DELETION) == "TopicDeletionRateAndTimeMs"
    assert controller_timer_name(ControllerState.ISR_CHANGE) == "IsrChangeRateAndTimeMs"


def test_keel_s_own_names() -> None:
    out = Exposition()
    out.keel_gauge("keel_controller_epoch", "the controller epoch", 4)
    out.keel_counter("keel_planner_moves", "moves", 3, {"state": "done"})
    assert rendered(out) == ["keel_controller_epoch 4.0", 'keel_planner_moves_total{state="done"} 3.0']


def test_a_name_without_per_sec_is_not_a_meter() -> None:
    with pytest.raises(ValueError, match="PerSec"):
        _ = MBean("kafka.server", "ReplicaManager", "LeaderCount").meter_name


def test_quantiles_of_nothing_are_zero() -> None:
    assert quantiles([]) == [0.0] * 6
    assert quantiles([3.0]) == [3.0] * 6
