"""What a chaos run reads from the logs its processes leave, for the checker: each broker's
elections (controller.log) and the state changes it made as controller (state-change.log),
each planner's plans and moves.

The patterns follow the lines as written: a broker's text format (node/broker/logs.py's
TextFormatter) around KafkaController's election line and actors/base/state_change_log.py's
`[Controller id=N epoch=E]` prefix; the planner's format (node/planner/main.py's LOG_FORMAT)
around PlanExecutor's lines. tests/unit/test_chaos_logs.py writes each line through those
loggers and formatters, so a change of wording fails there rather than leaving a run with
nothing to check. Times are seconds since the run started, from the lines' wall-clock times.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from node.broker.logs import CONTROLLER_LOG, STATE_CHANGE_LOG, log_files, read_log
from node.chaos.history import DONE, SUBMITTED, ControllerActions, ControllerSeen, History, PlanMove, PlanRun

# A line's head, as the broker's text format and the planner's both write it: its time
# (logging's asctime, local time), level, `[broker N]` or `[planner]`, and logger. Each pattern
# starts at the newline before it (`_text` puts one before the first line): a pattern that
# starts with a literal is searched for quickly, and a run's state-change logs are thousands of
# lines.
_HEAD = r"\n(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \[[^\]\n]*\] \S+: "
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S,%f"

ELECTED = re.compile(_HEAD + r"broker (\d+) is controller at epoch (\d+)")
CONTROLLER_ACTION = re.compile(_HEAD + r"\[Controller id=(\d+) epoch=(\d+)\] ")
PLAN_STARTED = re.compile(_HEAD + r"executing plan (\S+) \([^)\n]*\): (\d+) moves")
PLAN_RESUMED = re.compile(_HEAD + r"resuming plan (\S+): (\d+) of (\d+) moves done")
PLAN_ENDED = re.compile(_HEAD + r"plan (\S+) (\w+): (\d+) moves done, (\d+) failed, (\d+) cancelled")
# A running plan of which no copy could be read, reported stopped by the planner that became
# active (PlanExecutor._stop_unknown).
PLAN_STOPPED = re.compile(_HEAD + r"plan (\S+) stopped: (.*)")
MOVE_SUBMITTED = re.compile(
    _HEAD + r"plan (\S+): submitting the move of (\S+)-(\d+) to replicas \[([\d, ]*)\]"
)
MOVE_DONE = re.compile(_HEAD + r"plan (\S+): the move of (\S+)-(\d+) is done(?=\n|\Z)")


def _text(text: str) -> str:
    """A log's text as the patterns read it: its first line after a newline too."""
    return "\n" + text


def seconds(stamp: str, wall_started: float) -> float:
    """A line's time as seconds since the run started (`wall_started`, a Unix time)."""
    return round(datetime.strptime(stamp, _TIME_FORMAT).timestamp() - wall_started, 3)


def elections(directory: Path, source: str, wall_started: float) -> list[ControllerSeen]:
    """Every "broker N is controller at epoch E" in the controller.log (and its rotations)
    under `directory`."""
    return [
        ControllerSeen(seconds(stamp, wall_started), source, int(epoch), int(broker))
        for stamp, broker, epoch in ELECTED.findall(_text(read_log(directory, CONTROLLER_LOG)))
    ]


def controller_actions(directory: Path, source: str, wall_started: float) -> list[ControllerActions]:
    """The state changes made as controller, per (broker id, controller epoch), from the
    state-change.log under `directory` and its rotations, oldest first: one pass of one
    pattern over each file (a run's failovers write thousands of lines), and only the first
    and last time of each epoch turned into seconds."""
    # Keyed by the id and epoch as written: numbers are made once per epoch, not per line.
    first: dict[tuple[str, str], str] = {}
    last: dict[tuple[str, str], str] = {}
    count: Counter[tuple[str, str]] = Counter()
    for path in log_files(directory, STATE_CHANGE_LOG):
        for stamp, broker, epoch in CONTROLLER_ACTION.findall(_text(path.read_text(errors="replace"))):
            key = (broker, epoch)
            if key not in first:
                first[key] = stamp
            last[key] = stamp
            count[key] += 1
    return [
        ControllerActions(
            seconds(first[key], wall_started),
            seconds(last[key], wall_started),
            source,
            int(key[1]),
            int(key[0]),
            n,
        )
        for key, n in count.items()
    ]


def read_plans(history: History, planner_logs: Iterable[tuple[str, str]], wall_started: float) -> None:
    """Each plan's start, resumptions and end, and each move handed to the controller or found
    done, from every planner's log (`(planner, text)`), in time order across the planners: the
    last end logged is the plan's. Each is an event too, to show around a violation."""
    entries: list[tuple[float, str, int, re.Match[str]]] = []
    for planner, log in planner_logs:
        text = _text(log)
        for pattern in (PLAN_STARTED, PLAN_RESUMED, PLAN_ENDED, PLAN_STOPPED, MOVE_SUBMITTED, MOVE_DONE):
            entries.extend(
                (seconds(m[1], wall_started), planner, m.start(), m) for m in pattern.finditer(text)
            )
    entries.sort(key=lambda e: e[:3])
    for t, planner, position, m in entries:
        plan_id = m[2]
        if m.re is PLAN_STARTED:
            history.plans.setdefault(plan_id, PlanRun(plan_id, int(m[3])))
            history.event(t, "plan", f"{planner}: executing plan {plan_id} ({m[3]} moves)")
        elif m.re is PLAN_RESUMED:
            plan = history.plans.setdefault(plan_id, PlanRun(plan_id, int(m[4])))
            plan.resumed_with_done.append(int(m[3]))
            history.event(t, "plan", f"{planner}: resuming plan {plan_id}, {m[3]} of {m[4]} moves done")
        elif m.re is PLAN_ENDED:
            if plan_id in history.plans:
                plan = history.plans[plan_id]
                plan.state, plan.done, plan.failed, plan.cancelled = m[3], int(m[4]), int(m[5]), int(m[6])
            history.event(
                t, "plan", f"{planner}: plan {plan_id} {m[3]}: {m[4]} done, {m[5]} failed, {m[6]} cancelled"
            )
        elif m.re is PLAN_STOPPED:
            if plan_id in history.plans:
                history.plans[plan_id].state = "failed"
            history.event(t, "plan", f"{planner}: plan {plan_id} stopped: {m[3]}")
        elif m.re is MOVE_SUBMITTED:
            replicas = tuple(int(r) for r in m[5].split(",") if r.strip())
            history.plan_moves.append(
                PlanMove(t, planner, position, SUBMITTED, plan_id, m[3], int(m[4]), replicas)
            )
            history.event(
                t, "plan", f"{planner}: plan {plan_id} sends {m[3]}-{m[4]} to replicas {list(replicas)}"
            )
        else:
            history.plan_moves.append(PlanMove(t, planner, position, DONE, plan_id, m[3], int(m[4])))
            history.event(t, "plan", f"{planner}: plan {plan_id} found {m[3]}-{m[4]} done")
