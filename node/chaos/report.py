"""The figures of a chaos run: a human-readable summary and the `--report` JSON."""

from __future__ import annotations

import dataclasses
from typing import Any

from node.chaos import checker
from node.chaos.checker import Violation
from node.chaos.history import DONE, SUBMITTED, FinalState, History
from node.chaos.schedule import Fault, counts


@dataclasses.dataclass
class Report:
    seed: int
    duration_s: float
    brokers: int
    zookeeper_servers: int
    plan: list[Fault]
    injected: dict[str, int]
    skipped: list[str]
    history: History
    final: FinalState
    controller_changes: int
    violations: list[Violation]
    # The command that runs the same schedule again.
    replay: str = ""

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_json(self) -> dict[str, Any]:
        history = self.history
        unavailable = checker.longest_unavailability(history)
        return {
            "seed": self.seed,
            "duration_s": self.duration_s,
            "brokers": self.brokers,
            "zookeeper_servers": self.zookeeper_servers,
            "faults": dict(sorted(self.injected.items())),
            "planned_faults": counts(self.plan),
            "schedule": [f.as_json() for f in self.plan],
            "skipped_faults": self.skipped,
            "sent": history.sent,
            "acknowledged": len(history.acks),
            "indeterminate": history.indeterminate,
            "send_failures": {f"{tp} {why}": n for (tp, why), n in sorted(history.send_failures.items())},
            "read": len({r.value for r in history.reads if not r.reader.startswith("replica-")}),
            "lost": checker.lost_count(history),
            "duplicates": checker.duplicates(history),
            "kafka_clients": kafka_clients(history),
            "controller_changes": self.controller_changes,
            "max_unavailable_s": max(unavailable.values(), default=0.0),
            "unavailable_s": unavailable,
            "without_leader_s": checker.longest_without_leader(history),
            "without_controller_s": checker.longest_without_controller(history),
            "healthy_after_s": self.final.healthy_after_s,
            "held_up_by": self.final.held_up_by,
            "plans": [dataclasses.asdict(p) for p in history.plans.values()],
            "observed": observed(history),
            "violations": [v.as_json() for v in self.violations],
            "ok": self.ok,
            "replay": self.replay,
        }

    def summary(self) -> str:
        value = self.as_json()
        faults = ", ".join(f"{k} {n}" for k, n in value["faults"].items()) or "none"
        healthy = value["healthy_after_s"]
        lines = [
            f"chaos run, seed {self.seed}: {self.duration_s:g} s, {self.brokers} brokers, "
            f"{self.zookeeper_servers} ZooKeeper server(s)",
            f"  faults injected: {faults} ({len(self.skipped)} skipped: nothing free to hit)",
            f"  records: {value['sent']} sent, {value['acknowledged']} acknowledged, "
            f"{value['indeterminate']} not acknowledged, {value['read']} read, {value['lost']} lost, "
            f"{value['duplicates']} duplicated",
            "  Kafka clients ({topics}): {acknowledged} acknowledged by the idempotent producer, "
            "{read} read, {duplicates} duplicated; {commits} group commits, {commits_failed} failed "
            "or not counted".format(**value["kafka_clients"]),
            f"  controller changes: {value['controller_changes']}",
            "  read from the logs: {elections_logged} elections, {controller_state_changes} state "
            "changes made as controller, {plan_moves_sent} plan moves sent and {plan_moves_done} "
            "found done".format(**value["observed"]),
            f"  planner plans: {len(self.history.plans)} ("
            + (
                ", ".join(f"{p.plan_id} {p.state or 'not ended'}" for p in self.history.plans.values())
                or "none"
            )
            + ")",
            f"  longest stretch without an acknowledged write: {value['max_unavailable_s']:.1f} s "
            + "("
            + ", ".join(f"{tp} {s:.1f}" for tp, s in value["unavailable_s"].items())
            + ")",
            "  longest stretch without a leader in ZooKeeper: "
            + ", ".join(f"{tp} {s:.1f}" for tp, s in value["without_leader_s"].items()),
            f"  longest stretch without /controller: {value['without_controller_s']:.1f} s",
            "  healthy "
            + (f"{healthy:.1f} s after the heal" if healthy is not None else "never after the heal"),
        ]
        if self.ok:
            lines.append("  every check passed")
        else:
            lines.append(f"  {len(self.violations)} violation(s):")
            for violation in self.violations:
                lines.append(f"  - {violation.kind} at t={violation.t:.1f}s: {violation.message}")
                lines.extend(f"      {e}" for e in violation.events)
            lines.append(f"  replay: {self.replay}")
        return "\n".join(lines)


def kafka_clients(history: History) -> dict[str, Any]:
    """The figures of Kafka's clients: the idempotent producer's topics, their acknowledged and
    read values, their duplicates (0 unless the idempotence failed), the group's commits."""
    topics = set(history.idempotent_topics)
    return {
        "topics": ", ".join(sorted(topics)) or "none",
        "acknowledged": sum(1 for a in history.acks if a.topic in topics),
        "read": len(
            {r.value for r in history.reads if r.topic in topics and not r.reader.startswith("replica-")}
        ),
        "duplicates": checker.idempotent_duplicates(history),
        "commits": len(history.commits),
        "commits_failed": history.commits_failed,
    }


def observed(history: History) -> dict[str, int]:
    """How much the checks of controllers and plans had to go on, from the logs and the
    watcher. A run elects a controller and creates its topics before its faults, so a zero
    among the controller figures (or no move found done in a run whose plans completed) says
    a log was not read, or is no longer read as it is written."""
    return {
        "elections_logged": sum(1 for c in history.controllers if c.source != "zookeeper"),
        "controllers_watched": sum(1 for c in history.controllers if c.source == "zookeeper"),
        "controller_state_changes": sum(a.lines for a in history.controller_actions),
        "plan_moves_sent": sum(1 for m in history.plan_moves if m.kind == SUBMITTED),
        "plan_moves_done": sum(1 for m in history.plan_moves if m.kind == DONE),
    }
