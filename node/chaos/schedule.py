"""The nemesis plan: which fault starts when, for how long, drawn from a seed up front.

The same seed, duration, fault kinds and session timeout give the same plan, whatever
happens while it runs. A fault names a role (a random broker, the controller, a partition's
leader) and carries a `pick`, a number drawn with the plan that chooses among the brokers that
hold the role when the fault starts: which broker that is depends on the run, how the choice
is made does not.
"""

from __future__ import annotations

import dataclasses
import random

# Each fault kind and its variants (what it targets, or how it cuts the network).
VARIANTS: dict[str, tuple[str, ...]] = {
    # SIGKILL, then a restart after the fault's duration.
    "kill": ("random", "controller", "leader"),
    # SIGTERM (controlled shutdown), then a restart.
    "term": ("random", "controller", "leader"),
    # SIGSTOP past the ZooKeeper session timeout, then SIGCONT: a zombie.
    "pause": ("controller", "leader"),
    # The broker's ZooKeeper session expires while the process runs on.
    "expire": ("random", "controller", "leader"),
    # Network faults through the proxies (node/chaos/proxy.py): a broker's link to ZooKeeper or
    # its listener's link, or the links between it and some other brokers only.
    "partition": (
        "from-zookeeper",
        "isolated",
        "leader-with-isr",
        "asymmetric",
        "flapping",
        "from-controller",
        "from-followers",
        "from-one-peer",
    ),
    # kill -9 of one ZooKeeper server, or of a majority, then a restart.
    "zk": ("member", "majority"),
    # Leader bounces chasing one partition (KIP-101/KIP-279).
    "bounce-leader": ("leader",),
    # An operator's forced re-election (`rmr /controller`, `keel controller reelect`): /controller
    # deleted, then deleted again as soon as the next controller holds it, as many times as the
    # variant says (node/chaos/faults.py Nemesis._delete_controller).
    "delete-controller": ("once", "twice", "3-times", "4-times", "5-times", "6-times", "7-times", "8-times"),
    # The planner killed while its executor runs a plan.
    "planner": ("active",),
}
FAULT_KINDS = tuple(VARIANTS)
# The partitions that cut a broker from other brokers only (node/chaos/proxy.py PeerLinks).
PEER_PARTITIONS = frozenset({"from-controller", "from-followers", "from-one-peer"})
# `planner` starts a Spark driver beside the brokers: asked for by name only.
DEFAULT_FAULTS = tuple(k for k in FAULT_KINDS if k != "planner")
# What targets a broker (so that a second fault does not pick one already under a fault).
# `delete-controller` is not among them: it takes /controller from whichever broker holds it,
# and the broker runs on untouched.
BROKER_FAULTS = frozenset({"kill", "term", "pause", "expire", "partition", "bounce-leader"})
# How many deletions in a row each variant of `delete-controller` makes.
CONTROLLER_DELETIONS = {variant: n for n, variant in enumerate(VARIANTS["delete-controller"], start=1)}
# How long after /controller is gone a live cluster must have a controller again, beyond the
# session timeout: the checker's `controller-absent` bound, and how long a deletion burst waits
# for the next controller before it gives up.
CONTROLLER_GRACE_S = 1.0

WARM_UP_S = 4.0
# No fault starts in the last seconds: the run ends with the workload on a healed cluster.
QUIET_TAIL_S = 3.0


@dataclasses.dataclass(frozen=True)
class Fault:
    at_s: float
    kind: str
    variant: str
    duration_s: float
    pick: int

    @property
    def ends_s(self) -> float:
        return self.at_s + self.duration_s

    def describe(self) -> str:
        return f"t={self.at_s:6.1f}s {self.kind}/{self.variant} for {self.duration_s:.1f}s (pick {self.pick})"

    def as_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def parse_faults(text: str) -> tuple[str, ...]:
    """`kill,term,...` → the kinds; ValueError naming an unknown one."""
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in VARIANTS]
    if unknown or not kinds:
        raise ValueError(
            f"unknown fault kind(s) {', '.join(unknown) or '(none)'}; known: {', '.join(FAULT_KINDS)}"
        )
    return kinds


def _duration(rng: random.Random, kind: str, variant: str, session_timeout_s: float) -> float:
    if kind == "pause":
        # Past the session timeout, so that the broker's session expires while it sleeps.
        return session_timeout_s * 1.5 + rng.uniform(0.0, 2.0)
    if kind == "expire":
        # A bound: the fault ends as soon as the session has expired.
        return session_timeout_s * 2 + 2.0
    if kind == "zk":
        return rng.uniform(2.0, 5.0) if variant == "majority" else rng.uniform(2.0, 8.0)
    if kind == "partition":
        return rng.uniform(3.0, 10.0)
    if kind == "bounce-leader":
        return rng.uniform(4.0, 8.0)
    if kind == "delete-controller":
        # A bound, as for `expire`: each deletion waits at most this long for the next
        # controller, and the burst ends with the last one's.
        return CONTROLLER_DELETIONS[variant] * (session_timeout_s + CONTROLLER_GRACE_S)
    return rng.uniform(1.0, 6.0)


def plan(seed: int, duration_s: float, kinds: tuple[str, ...], *, session_timeout_s: float) -> list[Fault]:
    """Faults start every 2 to 6 s after a warm-up; most last longer than that, so they overlap."""
    rng = random.Random(seed)
    faults = []
    at = WARM_UP_S + rng.uniform(0.0, 2.0)
    while at < duration_s - QUIET_TAIL_S:
        kind = rng.choice(kinds)
        variant = rng.choice(VARIANTS[kind])
        length = min(_duration(rng, kind, variant, session_timeout_s), duration_s - at)
        faults.append(Fault(round(at, 2), kind, variant, round(length, 2), rng.randrange(1 << 30)))
        at += rng.uniform(2.0, 6.0)
    return faults


def counts(faults: list[Fault]) -> dict[str, int]:
    out: dict[str, int] = {}
    for fault in faults:
        out[fault.kind] = out.get(fault.kind, 0) + 1
    return out
