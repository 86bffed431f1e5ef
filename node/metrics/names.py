"""Kafka's MBeans under the names Prometheus sees them by: the JMX exporter with Strimzi's rules
(`kafka-metrics.yaml`, `lowercaseOutputName: true`), so that Kafka's dashboards and alerts work.

The rules, one per kind of MBean attribute:

- a gauge's Value: `kafka.<d>:type=<T>,name=<N>[,k=v...]` -> `kafka_<d>_<t>_<n>{k="v"}`;
- a meter's Count (its name ends in PerSec): the name without `PerSec`, as a counter,
  `kafka_<d>_<t>_<n>_total{k="v"}`;
- a histogram's or a timer's Count and percentiles: `kafka_<d>_<t>_<n>_count` and
  `kafka_<d>_<t>_<n>{quantile="0.99"}` (Strimzi emulates a summary; Keel adds its `_sum`
  where it knows it).

Keel's own values, which Kafka has no MBean for, are named `keel_<area>_<what>`. Everything
here is built into `Exposition`, which hands prometheus_client its metric families.
"""

from __future__ import annotations

import collections
import dataclasses
import re
from collections.abc import Collection, Iterable, Iterator, Mapping

from prometheus_client.core import Metric

# Kafka's histogram percentiles, as Strimzi's rule renders `(\d+)thPercentile`: "0.$1".
QUANTILES: tuple[tuple[str, float], ...] = (
    ("0.50", 0.50),
    ("0.75", 0.75),
    ("0.95", 0.95),
    ("0.98", 0.98),
    ("0.99", 0.99),
    ("0.999", 0.999),
)

_PER_SEC = re.compile(r"PerSec\w*$")


@dataclasses.dataclass(frozen=True)
class MBean:
    """A Kafka MBean's domain, type and name, e.g. `kafka.controller`, `KafkaController`,
    `ActiveControllerCount`; its other keys (topic, request) are the labels of a sample."""

    domain: str
    type: str
    name: str

    def _prefix(self, name: str) -> str:
        # Kafka's LogCleaner names its gauges with hyphens (max-clean-time-secs), which
        # Prometheus's names may not hold: the JMX exporter makes them underscores.
        return f"{self.domain.replace('.', '_')}_{self.type}_{name}".lower().replace("-", "_")

    @property
    def gauge_name(self) -> str:
        return self._prefix(self.name)

    @property
    def meter_name(self) -> str:
        """Without Prometheus's `_total`, which the counter's sample adds."""
        if not _PER_SEC.search(self.name):
            raise ValueError(f"{self.name} is not a meter: a meter's name ends in PerSec")
        return self._prefix(_PER_SEC.sub("", self.name))

    @property
    def histogram_name(self) -> str:
        return self._prefix(self.name)


def kafka_camel_case(enum_name: str) -> str:
    """Kafka's name for one of Keel's upper-case enum names: an API's (ApiKeys' name, the
    `request` label of RequestMetrics) or a controller state's: LEADER_AND_ISR -> LeaderAndIsr."""
    return "".join(word.capitalize() for word in enum_name.split("_"))


def _labelled(labels: Mapping[str, str] | None) -> dict[str, str]:
    return dict(labels) if labels else {}


class Exposition:
    """One scrape's metric families, filled sample by sample; a family named twice (one
    sample per topic) is one family with several samples, as Prometheus requires."""

    def __init__(self) -> None:
        self._families: dict[str, Metric] = {}

    def _family(self, name: str, documentation: str, kind: str) -> Metric:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = Metric(name, documentation, kind)
        return family

    def gauge(self, bean: MBean, value: float, labels: Mapping[str, str] | None = None) -> None:
        name = bean.gauge_name
        self._family(name, f"{bean.domain}:type={bean.type},name={bean.name}", "gauge").add_sample(
            name, _labelled(labels), value
        )

    def meter(self, bean: MBean, count: float, labels: Mapping[str, str] | None = None) -> None:
        name = bean.meter_name
        self._family(name, f"{bean.domain}:type={bean.type},name={bean.name}", "counter").add_sample(
            f"{name}_total", _labelled(labels), count
        )

    def histogram(
        self,
        bean: MBean,
        count: int,
        recent: Collection[float],
        labels: Mapping[str, str] | None = None,
        total: float | None = None,
    ) -> None:
        """A Kafka histogram or timer (in ms): its Count and its percentiles over `recent`."""
        name = bean.histogram_name
        family = self._family(name, f"{bean.domain}:type={bean.type},name={bean.name}", "summary")
        base = _labelled(labels)
        for label, value in zip((label for label, _ in QUANTILES), quantiles(recent), strict=True):
            family.add_sample(name, {**base, "quantile": label}, value)
        family.add_sample(f"{name}_count", base, count)
        if total is not None:
            family.add_sample(f"{name}_sum", base, total)

    def keel_gauge(
        self, name: str, documentation: str, value: float, labels: Mapping[str, str] | None = None
    ) -> None:
        self._family(name, documentation, "gauge").add_sample(name, _labelled(labels), value)

    def keel_counter(
        self, name: str, documentation: str, count: float, labels: Mapping[str, str] | None = None
    ) -> None:
        self._family(name, documentation, "counter").add_sample(f"{name}_total", _labelled(labels), count)

    def families(self) -> Iterator[Metric]:
        return iter(self._families.values())


class RecentHistogram:
    """Count, sum and the recent values of something timed on a hot path (a request): an int
    add, a float add and a bounded deque's append; percentiles are left to the scrape."""

    __slots__ = ("count", "recent", "total")

    def __init__(self, keep: int = 1024) -> None:
        self.count = 0
        self.total = 0.0
        self.recent: collections.deque[float] = collections.deque(maxlen=keep)

    def record(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.recent.append(value)


def quantiles(recent: Collection[float]) -> list[float]:
    """Kafka's percentiles (QUANTILES) of the recent values, sorted once; 0 with none."""
    if not recent:
        return [0.0] * len(QUANTILES)
    ordered = sorted(recent)
    last = len(ordered) - 1
    return [ordered[min(last, int(q * len(ordered)))] for _, q in QUANTILES]


def topic_samples(counts: Mapping[str, int], retired: int = 0) -> Iterable[tuple[dict[str, str], int]]:
    """Kafka's BrokerTopicMetrics come per topic and for all topics (no topic key): both. The
    all-topics total also counts `retired`, what topics deleted since had counted."""
    total = retired
    for topic, count in counts.items():
        total += count
        yield {"topic": topic}, count
    yield {}, total
