"""How many replicas of each topic each broker should hold: the (topic, broker) cell targets.

Pure Python over the aggregated cells (topics x brokers, never partitions). For a topic t with
n_t replicas over groups g of weight w_g, the share x_tg = n_t*w_g/W (water-filled under a cap
when racks limit a topic's share of a rack); each cell gets floor(x_tg) and r_t = n_t - sum  floors
cells get one more (a "ceil slot"). Which cells get the ceil slots is free: it costs no move,
so a cell that already holds more than its floor is preferred (keeping its replica saves a
move), and the slots are placed so every group's total lands on its own floor/ceil target.
Bulk swap passes fix the totals: a group over its target hands a ceil slot of some topic to a
group under it that has none of that topic, cheapest swaps first.

With racks (every target broker in one, two racks or more) this runs twice: racks first (a
topic's share of a rack capped at partitions x per-partition rack cap), then the brokers inside
each rack share their rack's cells.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

EPS = 1e-9

Cells = dict[str, dict[int, int]]


def water_fill(n: float, weights: Sequence[float], cap: float | None) -> list[float]:
    """Shares of n proportional to weights, none above cap (the rest spread over the others)."""
    shares = [0.0] * len(weights)
    free = list(range(len(weights)))
    left = float(n)
    while free and left > EPS:
        total = sum(weights[i] for i in free)
        capped = [i for i in free if cap is not None and left * weights[i] / total > cap - shares[i] + EPS]
        if not capped:
            for i in free:
                shares[i] += left * weights[i] / total
            break
        for i in capped:
            left -= cap - shares[i] if cap is not None else 0.0
            shares[i] = cap if cap is not None else shares[i]
        free = [i for i in free if i not in capped]
    return shares


def round_targets(ideal: Sequence[float], total: int, current: Sequence[int]) -> list[int]:
    """Integers within floor/ceil of ideal summing to total; the ceil goes to the largest
    fractions, then to the groups holding most now (so a balanced start stays as it is)."""
    floors = [math.floor(x + EPS) for x in ideal]
    extra = total - sum(floors)
    order = sorted(range(len(ideal)), key=lambda i: (-round(ideal[i] - floors[i], 6), -current[i], i))
    for i in order[: max(0, extra)]:
        floors[i] += 1
    return floors


@dataclasses.dataclass
class Allocation:
    targets: Cells  # topic -> group -> target
    group_targets: dict[int, int]
    floors: Cells  # topic -> group -> floor of the share (for the bound)
    remainders: dict[str, int]


def allocate(  # noqa: PLR0915, PLR0917
    totals: Mapping[str, int],
    groups: Sequence[int],
    weights: Mapping[int, float],
    current: Cells,
    caps: Mapping[str, int] | None,
    group_totals: Mapping[int, int] | None = None,
) -> Allocation:
    """Cell targets for topics over groups; see the module's description."""
    w = [weights[g] for g in groups]
    floors: Cells = {}
    remainders: dict[str, int] = {}
    candidates: dict[str, set[int]] = {}
    ideal_group = dict.fromkeys(groups, 0.0)
    for topic, n in totals.items():
        cap = None if caps is None else caps[topic]
        shares = water_fill(n, w, cap)
        row = {}
        for g, x in zip(groups, shares, strict=True):
            row[g] = math.floor(x + EPS)
            ideal_group[g] += x
        floors[topic] = row
        remainders[topic] = n - sum(row.values())
        candidates[topic] = {g for g in groups if cap is None or row[g] + 1 <= cap}
    held = {g: sum(current.get(t, {}).get(g, 0) for t in totals) for g in groups}
    total = sum(totals.values())
    if group_totals is None:
        rounded = round_targets([ideal_group[g] for g in groups], total, [held[g] for g in groups])
        group_totals = dict(zip(groups, rounded, strict=True))
    need = {g: group_totals[g] - sum(floors[t][g] for t in totals) for g in groups}

    # The ceil slots of each topic: cells holding more than their floor first, then the
    # groups that still need most.
    slots: dict[int, set[str]] = {g: set() for g in groups}
    left = dict(need)
    for topic in sorted(totals, key=lambda t: (-remainders[t], t)):
        r = remainders[topic]
        if r <= 0:
            continue
        have = current.get(topic, {})
        row = floors[topic]
        chosen = sorted(candidates[topic], key=lambda g: (have.get(g, 0) <= row[g], -left[g], g))[:r]
        for g in chosen:
            slots[g].add(topic)
            left[g] -= 1

    def preferred(topic: str, g: int) -> int:
        return 1 if current.get(topic, {}).get(g, 0) > floors[topic][g] else 0

    # Swap passes: over-target groups hand a ceil slot to under-target ones, cheapest first.
    stuck: set[tuple[int, int]] = set()
    while True:
        over = sorted((g for g in groups if len(slots[g]) > need[g]), key=lambda g: need[g] - len(slots[g]))
        under = sorted((g for g in groups if len(slots[g]) < need[g]), key=lambda g: len(slots[g]) - need[g])
        pair = next(((o, u) for o in over for u in under if (o, u) not in stuck), None)
        if pair is None:
            break
        o, u = pair
        movable = [t for t in slots[o] - slots[u] if u in candidates[t]]
        if not movable:
            stuck.add(pair)
            continue
        movable.sort(key=lambda t: (preferred(t, o) - preferred(t, u), t))
        count = min(len(slots[o]) - need[o], need[u] - len(slots[u]), len(movable))
        for topic in movable[:count]:
            slots[o].discard(topic)
            slots[u].add(topic)
        stuck = {p for p in stuck if o not in p and u not in p}

    targets: Cells = {t: dict(row) for t, row in floors.items()}
    for g, topics in slots.items():
        for topic in topics:
            targets[topic][g] += 1
    achieved = {g: sum(targets[t][g] for t in totals) for g in groups}
    return Allocation(targets, achieved, floors, remainders)


@dataclasses.dataclass
class CellPlan:
    targets: Cells  # topic -> broker -> target, for target brokers
    broker_targets: dict[int, int]
    lower_bound: dict[str, int]


def rack_cap(replication: int, racks: int) -> int:
    """At most this many replicas of one partition in one rack (1 when the racks allow it)."""
    return 1 if replication <= racks else math.ceil(replication / racks)


def cell_targets(  # noqa: PLR0917
    current: Cells,
    partitions: Mapping[str, int],
    replication: Mapping[str, int],
    brokers: Sequence[int],
    weights: Mapping[int, float],
    racks: Mapping[int, str] | None,
) -> CellPlan:
    """Targets for full balance over `brokers` (current may name other brokers: target 0)."""
    totals = {t: sum(row.values()) for t, row in current.items()}
    if racks:
        names = sorted(set(racks[b] for b in brokers))
        index = {name: i for i, name in enumerate(names)}
        members = {i: [b for b in brokers if index[racks[b]] == i] for i in range(len(names))}
        rack_current: Cells = {
            t: {i: sum(row.get(b, 0) for b in members[i]) for i in members} for t, row in current.items()
        }
        caps = {t: partitions[t] * rack_cap(replication[t], len(names)) for t in totals}
        level = allocate(
            totals,
            list(members),
            {i: sum(weights[b] for b in members[i]) for i in members},
            rack_current,
            caps,
        )
        targets: Cells = {t: {} for t in totals}
        nested_floors: Cells = {t: {} for t in totals}
        broker_targets: dict[int, int] = {}
        for i, inside in members.items():
            shares = {t: level.targets[t][i] for t in totals}
            local = allocate(
                shares,
                inside,
                weights,
                current,
                {t: partitions[t] for t in totals},
                None
                if len(members) == 1
                else _rack_broker_totals(level.group_targets[i], inside, weights, current),
            )
            for t in totals:
                targets[t].update(local.targets[t])
                nested_floors[t].update(local.floors[t])
            broker_targets.update(local.group_targets)
        # Racks of unequal weight cap what a broker can hold below the flat share: the bound
        # is then taken against the rack shares the plan uses.
        rack_weights = {round(sum(weights[b] for b in inside), 6) for inside in members.values()}
        rack_bound = len(rack_weights) > 1
    else:
        flat = allocate(totals, brokers, weights, current, {t: partitions[t] for t in totals})
        targets, broker_targets = flat.targets, flat.group_targets
        rack_bound = False
    if rack_bound:
        bound = bounds_against(current, totals, nested_floors, {b: (t, t) for b, t in broker_targets.items()})
    else:
        bound = lower_bounds(current, totals, brokers, weights, partitions)
    bound["rack_shares"] = int(rack_bound)
    return CellPlan(targets, broker_targets, bound)


def _rack_broker_totals(
    rack_total: int, inside: Sequence[int], weights: Mapping[int, float], current: Cells
) -> dict[int, int]:
    w = sum(weights[b] for b in inside)
    held = [sum(row.get(b, 0) for row in current.values()) for b in inside]
    rounded = round_targets([rack_total * weights[b] / w for b in inside], rack_total, held)
    return dict(zip(inside, rounded, strict=True))


def lower_bounds(
    current: Cells,
    totals: Mapping[str, int],
    brokers: Sequence[int],
    weights: Mapping[int, float],
    partitions: Mapping[str, int],
) -> dict[str, int]:
    """LB_count (cluster-wide floor/ceil per broker) and sum _t LB_topic (each topic's cells within
    floor/ceil of its share), both against full balance over `brokers`; see docs/PLANNER.md."""
    floors: Cells = {}
    for t in current:
        shares = water_fill(totals[t], [weights[b] for b in brokers], partitions[t])
        floors[t] = {b: math.floor(x + EPS) for b, x in zip(brokers, shares, strict=True)}
    wsum = sum(weights[b] for b in brokers)
    total = sum(totals.values())
    ideal = {b: total * weights[b] / wsum for b in brokers}
    band = {b: (math.floor(x + EPS), math.ceil(x - EPS)) for b, x in ideal.items()}
    return bounds_against(current, totals, floors, band)


def bounds_against(
    current: Cells, totals: Mapping[str, int], floors: Cells, band: Mapping[int, tuple[int, int]]
) -> dict[str, int]:
    """The two bounds for given per-topic cell floors and per-broker (low, high) totals."""
    held = dict.fromkeys(band, 0)
    outside = 0
    topic_bound = 0
    for t, row in current.items():
        floor_row = floors[t]
        r = totals[t] - sum(floor_row.values())
        excess = 0
        over = 0
        for b, c in row.items():
            if b in band:
                held[b] += c
                if c > floor_row[b]:
                    excess += c - floor_row[b]
                    over += 1
            else:
                outside += c
                excess += c
        topic_bound += excess - min(r, over)
    shed = outside + sum(max(0, held[b] - hi) for b, (_, hi) in band.items())
    fill = sum(max(0, lo - held[b]) for b, (lo, _) in band.items())
    return {"count": max(shed, fill), "topic": topic_bound}


def heal_targets(current: Cells, brokers: Sequence[int], weights: Mapping[int, float]) -> CellPlan:
    """Targets that keep every replica on a target broker and place the others (on dead or
    removed brokers) where their topic and the broker totals are lowest."""
    target = set(brokers)
    load = dict.fromkeys(brokers, 0)
    for row in current.values():
        for b, c in row.items():
            if b in target:
                load[b] += c
    targets: Cells = {}
    moving = 0
    for t in sorted(current):
        row = current[t]
        cells = {b: row.get(b, 0) for b in brokers}
        homeless = sum(c for b, c in row.items() if b not in target)
        moving += homeless
        for _ in range(homeless):
            b = min(brokers, key=lambda b: (cells[b] / weights[b], load[b] / weights[b], b))
            cells[b] += 1
            load[b] += 1
        targets[t] = cells
    return CellPlan(targets, load, {"count": moving, "topic": moving, "rack_shares": 0})
