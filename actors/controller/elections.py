"""Partition leader election: Kafka's four algorithms as pure functions (spec §6).

Each takes what the controller knows about one partition and returns an `ElectionResult` with
the leader, the ISR to write and the brokers to tell, or None when no leader can be chosen.
The controller applies results; it decides nothing here. Every successful election is
written with leader epoch + 1 by the caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence, Set


@dataclasses.dataclass(frozen=True)
class ElectionResult:
    leader: int
    isr: tuple[int, ...]
    recipients: tuple[int, ...]
    unclean: bool = False


def offline_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    online: Set[int],
    *,
    unclean_allowed: bool,
) -> ElectionResult | None:
    """New and Offline partitions: the first online replica in the ISR, in assignment order.

    Only the ISR may lead unless unclean election is on; an unclean leader gets ISR [leader]
    (data acknowledged to the old ISR may be lost, which is what `unclean` reports).
    """
    recipients = tuple(r for r in assignment if r in online)
    live_isr = [r for r in isr if r in online]
    clean = next((r for r in assignment if r in online and r in isr), None)
    if clean is not None:
        return ElectionResult(clean, tuple(live_isr), recipients)
    if not live_isr and unclean_allowed and recipients:
        return ElectionResult(recipients[0], (recipients[0],), recipients, unclean=True)
    return None


def reassignment_election(
    target: Sequence[int], isr: Sequence[int], online: Set[int]
) -> ElectionResult | None:
    """Reassignment: the first target replica that is online and in the ISR; ISR unchanged;
    every target replica is told, live or not."""
    leader = next((r for r in target if r in online and r in isr), None)
    if leader is None:
        return None
    return ElectionResult(leader, tuple(isr), tuple(target))


def preferred_election(
    assignment: Sequence[int], isr: Sequence[int], online: Set[int]
) -> ElectionResult | None:
    """Preferred replica: the first assigned replica, if online and in the ISR; ISR unchanged."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred not in online or preferred not in isr:
        return None
    return ElectionResult(preferred, tuple(isr), tuple(assignment))


def controlled_shutdown_election(
    assignment: Sequence[int],
    isr: Sequence[int],
    live_or_shutting_down: Set[int],
    shutting_down: Set[int],
) -> ElectionResult | None:
    """Controlled shutdown: the first live ISR member not shutting down; the ISR drops every
    shutting-down broker; the shutting-down broker is still told."""
    leader = next(
        (r for r in assignment if r in live_or_shutting_down and r in isr and r not in shutting_down),
        None,
    )
    if leader is None:
        return None
    new_isr = tuple(r for r in isr if r not in shutting_down)
    recipients = tuple(r for r in assignment if r in live_or_shutting_down)
    return ElectionResult(leader, new_isr, recipients)
