"""The planner's metrics, Keel's own names (Kafka has no planner): whether this planner is the
active one, the last snapshot's age, plans and their stages, the executing plan's moves, bytes
and throttle, and self-healing. Read from the planner's parts when Prometheus scrapes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from node.metrics.names import Exposition
from node.planner.stats import PlannerStats

_MOVE_STATES = ("pending", "in_flight", "done", "failed", "cancelled")


class PlannerMetrics(Collector):
    """`executor` and `healer` follow PlanExecutor's and SelfHealer's `status()`; None when
    this build has none."""

    def __init__(
        self, is_active: Callable[[], bool], stats: PlannerStats, executor: Any | None, healer: Any | None
    ) -> None:
        self._is_active = is_active
        self._stats = stats
        self._executor = executor
        self._healer = healer

    def collect(self) -> Iterator[Metric]:
        out = Exposition()
        stats = self._stats
        out.keel_gauge(
            "keel_planner_active", "1 while this planner holds /keel/planner", int(self._is_active())
        )
        out.keel_counter("keel_planner_snapshots", "Live snapshots taken", stats.snapshots)
        if stats.last_snapshot_at is not None:
            out.keel_gauge(
                "keel_planner_snapshot_age_seconds",
                "Seconds since the last live snapshot",
                max(0.0, time.time() - stats.last_snapshot_at),
            )
        for origin in ("request", "self-healing"):
            out.keel_counter(
                "keel_planner_plans", "Plans computed, by origin", stats.plans[origin], {"origin": origin}
            )
        out.keel_counter("keel_planner_plan_seconds", "Seconds spent computing plans", stats.plan_seconds)
        for stage, seconds in stats.last_plan_stages.items():
            out.keel_gauge(
                "keel_planner_plan_stage_seconds",
                "The last plan's seconds per stage",
                seconds,
                {"stage": stage},
            )
        self._export_execution(out)
        self._export_healing(out)
        return out.families()

    def _export_execution(self, out: Exposition) -> None:
        status: dict[str, Any] = {} if self._executor is None else self._executor.status()
        out.keel_gauge(
            "keel_planner_moves_planned",
            "Moves of the executing (or last) plan",
            status.get("moves_total", 0),
        )
        for state in _MOVE_STATES:
            out.keel_gauge(
                "keel_planner_moves",
                "The executing (or last) plan's moves by state",
                status.get(f"moves_{state}", 0),
                {"state": state},
            )
        out.keel_gauge(
            "keel_planner_bytes_to_move",
            "Bytes the executing (or last) plan moves",
            status.get("bytes_total", 0),
        )
        out.keel_gauge("keel_planner_bytes_moved", "Bytes of it copied so far", status.get("bytes_copied", 0))
        throttle = status.get("throttle_bytes_per_s")
        out.keel_gauge(
            "keel_planner_throttle_bytes_per_second",
            "The replication throttle the plan is executed with (-1: none)",
            -1 if throttle is None else throttle,
        )
        out.keel_gauge(
            "keel_planner_executing",
            "1 while a plan is being executed",
            int(status.get("state") == "running"),
        )

    def _export_healing(self, out: Exposition) -> None:
        if self._healer is None:
            return
        status: dict[str, Any] = self._healer.status()
        out.keel_gauge(
            "keel_planner_self_healing_enabled",
            "planner.self.healing.enable",
            int(bool(status.get("enabled"))),
        )
        out.keel_gauge(
            "keel_planner_self_healing_brokers_gone",
            "Brokers gone that hold replicas, waiting out the threshold or healed",
            len(status.get("gone", ())),
        )
        out.keel_counter(
            "keel_planner_self_healing_actions",
            "Heal plans begun for brokers gone past the threshold",
            self._stats.heal_plans,
        )
