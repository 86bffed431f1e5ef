"""Which broker pairs the bytes pass moves bytes between, and how many (pure)."""

from __future__ import annotations

from node.planner.bytes_balance import Flow, outside_band, plan_flows, shares


def test_brokers_within_their_band_need_no_flow() -> None:
    on = {1: 100.0, 2: 104.0, 3: 96.0}
    assert outside_band(on, shares(on, dict.fromkeys(on, 1.0))) == []
    assert plan_flows(on, shares(on, dict.fromkeys(on, 1.0))) == []


def test_a_heavy_broker_sheds_its_excess_to_the_most_room_first() -> None:
    on = {1: 160.0, 2: 70.0, 3: 90.0, 4: 80.0}  # share 100 each
    flows = plan_flows(on, shares(on, dict.fromkeys(on, 1.0)))
    assert flows == [Flow(1, 2, 30.0), Flow(1, 3, 10.0), Flow(1, 4, 20.0)]


def test_a_light_broker_draws_from_the_heaviest() -> None:
    on = {1: 104.0, 2: 103.0, 3: 101.0, 4: 92.0}  # share 100; only broker 4 is outside
    flows = plan_flows(on, shares(on, dict.fromkeys(on, 1.0)))
    assert sum(f.amount for f in flows) == 8.0
    assert {f.light for f in flows} == {4}
    assert flows[0] == Flow(1, 4, 4.0)


def test_shares_follow_capacity_weights() -> None:
    on = {1: 300.0, 2: 0.0}
    share = shares(on, {1: 1.0, 2: 2.0})
    assert share == {1: 100.0, 2: 200.0}
    assert plan_flows(on, share) == [Flow(1, 2, 200.0)]


def after(on: dict[int, float], flows: list[Flow]) -> dict[int, float]:
    moved = dict(on)
    for f in flows:
        moved[f.heavy] -= f.amount
        moved[f.light] += f.amount
    return moved


def test_a_stuck_pair_is_routed_around_through_brokers_inside_the_band() -> None:
    on = {1: 110.0, 2: 101.0, 3: 92.0, 4: 97.0}  # share 100: brokers 1 and 3 are outside
    share = shares(on, dict.fromkeys(on, 1.0))
    assert plan_flows(on, share)[0] == Flow(1, 3, 8.0)
    rerouted = plan_flows(on, share, stuck={(1, 3)})
    assert (1, 3) not in {(f.heavy, f.light) for f in rerouted}
    # Broker 4 takes its shortfall and half a band more; 2 gives down to half a band under.
    assert outside_band(after(on, rerouted), share) == []
    assert all(abs(v - 100.0) <= 2.5 + 1e-9 for b, v in after(on, rerouted).items() if b in (2, 4))
