"""What the planner counts of its own work for its metrics (node/planner/metrics.py): the
snapshots and plans it made, how long each stage of the last plan took, the heals it began."""

from __future__ import annotations

import collections
import dataclasses


@dataclasses.dataclass
class PlannerStats:
    snapshots: int = 0
    # time.time() of the last snapshot; None before the first.
    last_snapshot_at: float | None = None
    plans: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    plan_seconds: float = 0.0
    # The last plan's seconds per stage: the live snapshot, then the plan jobs' stages.
    last_plan_stages: dict[str, float] = dataclasses.field(default_factory=dict)
    heal_plans: int = 0

    def snapshot_taken(self, at: float) -> None:
        self.snapshots += 1
        self.last_snapshot_at = at

    def plan_made(self, origin: str, seconds: float, report: dict[str, object]) -> None:
        self.plans[origin] += 1
        self.plan_seconds += seconds
        snapshot = report.get("snapshot_seconds")
        stages = report.get("stage_seconds")
        self.last_plan_stages = {
            "snapshot": float(snapshot) if isinstance(snapshot, int | float) else 0.0,
            **({str(k): float(v) for k, v in stages.items()} if isinstance(stages, dict) else {}),
        }
