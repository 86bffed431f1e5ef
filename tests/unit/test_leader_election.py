"""Preferred and unclean leader elections (spec §7.8): the pure choices, then KafkaControllers
on the in-memory ClusterStore: the ZooKeeper trigger, ElectLeaders' per-partition results,
the auto-rebalance task on a hand-driven clock, and pending elections at failover."""

from __future__ import annotations

import logging

import pytest

from actors.base.ports import (
    BrokerInfo,
    LeaderAndIsr,
    LeadershipInfo,
    RegisteredBroker,
    ReplicaAssignment,
    TopicPartition,
)
from actors.controller import KafkaController
from actors.controller.context import ControllerContext
from actors.controller.events import ControllerState
from actors.controller.leader_election import (
    FIRST_REBALANCE_DELAY_S,
    ElectionOutcome,
    election_response,
    plan_election,
    rebalance_candidates,
)
from node.broker.leader_election import elect_leaders as broker_elect_leaders
from tests.controllers import ControllerCluster as Cluster
from tests.controllers import settled
from tests.support import eventually
from wire.api import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
)
from wire.errors import ErrorCode, NotController

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)

# --- the choices, on a hand-built context ---


def context_with(
    partitions: dict[TopicPartition, tuple[tuple[int, ...], int, tuple[int, ...]]],
    live: set[int],
    *,
    adding: dict[TopicPartition, tuple[int, ...]] | None = None,
) -> ControllerContext:
    """partition -> (replicas, leader, isr)."""
    context = ControllerContext()
    info = BrokerInfo(0, ())
    context.live_brokers = {b: RegisteredBroker(info, b) for b in live}
    for tp, (replicas, leader, isr) in partitions.items():
        context.all_topics.add(tp.topic)
        context.set_assignment(tp, ReplicaAssignment(replicas, (adding or {}).get(tp, ())))
        context.leadership[tp] = LeadershipInfo(LeaderAndIsr(leader, 1, isr), 1)
    return context


def test_a_plan_sorts_unknown_deleting_already_led_and_electable_partitions() -> None:
    d0 = TopicPartition("d", 0)
    context = context_with(
        {T0: ((1, 2), 2, (1, 2)), T1: ((1, 2), 1, (1, 2)), d0: ((1, 2), 2, (1, 2))}, {1, 2}
    )
    context.topics_to_be_deleted.add("d")
    missing = TopicPartition("t", 9)
    plan = plan_election(context, [T0, T1, d0, missing], ElectionType.PREFERRED)
    assert (plan.electable, plan.not_needed, plan.deleting, plan.unknown) == ([T0], [T1], [d0], [missing])


def test_an_unclean_election_is_needed_only_without_a_live_leader() -> None:
    context = context_with({T0: ((1, 2), 1, (1,)), T1: ((1, 2), 2, (2,))}, {1})
    plan = plan_election(context, [T0, T1], ElectionType.UNCLEAN)
    assert (plan.electable, plan.not_needed) == ([T1], [T0])


def test_the_rebalance_threshold_is_strictly_greater_than_the_percentage() -> None:
    # Broker 1 prefers 10 partitions and leads 9 of them: exactly 10% imbalance.
    partitions = {TopicPartition("t", p): ((1, 2), 1, (1, 2)) for p in range(9)}
    partitions[TopicPartition("t", 9)] = ((1, 2), 2, (1, 2))
    context = context_with(partitions, {1, 2})
    assert rebalance_candidates(context, 10) == []
    assert rebalance_candidates(context, 9) == [TopicPartition("t", 9)]


def test_rebalance_candidates_need_their_preferred_replica_online_and_in_the_isr() -> None:
    u0, u1 = TopicPartition("u", 0), TopicPartition("u", 1)
    context = context_with(
        {T0: ((1, 2), 2, (1, 2)), T1: ((1, 2), 2, (2,)), u0: ((3, 2), 2, (3, 2)), u1: ((1, 2), 2, (1, 2))},
        {1, 2},
    )
    context.topics_to_be_deleted.add("u")
    # Broker 3 is offline; u1 is queued for deletion; t-1's preferred replica is out of the ISR.
    assert rebalance_candidates(context, 10) == [T0]


def test_the_imbalance_count_leaves_out_deleting_topics_and_counts_adding_replicas_literally() -> None:
    u0 = TopicPartition("u", 0)
    context = context_with(
        {T0: ((1, 2), 2, (1, 2)), T1: ((3, 1), 1, (1, 3)), u0: ((1, 2), 2, (1, 2))},
        {1, 2, 3},
        adding={T1: (3,)},
    )
    # t-0 is led by 2, not 1; t-1's first replica 3 is being added and is in the ISR.
    assert context.preferred_replica_imbalance_count() == 3
    context.topics_to_be_deleted.add("u")
    assert context.preferred_replica_imbalance_count() == 2


def test_an_election_over_every_partition_leaves_out_those_that_needed_none() -> None:
    outcomes = {
        T0: ElectionOutcome(leader=1),
        T1: ElectionOutcome(error=ErrorCode.ELECTION_NOT_NEEDED),
    }
    assert results_of(election_response(outcomes, every_partition=True)) == {T0: ErrorCode.NONE}
    assert results_of(election_response(outcomes, every_partition=False)) == {
        T0: ErrorCode.NONE,
        T1: ErrorCode.ELECTION_NOT_NEEDED,
    }


async def elect(
    controller: KafkaController, election_type: ElectionType, partitions: frozenset[TopicPartition] | None
) -> ElectLeadersResponse:
    outcomes = await controller.elect_leaders(election_type, partitions)
    return election_response(outcomes, every_partition=partitions is None)


def results_of(response: ElectLeadersResponse) -> dict[TopicPartition, int]:
    return {
        TopicPartition(topic.topic, r.partition_id): r.error_code
        for topic in response.replica_election_results
        for r in topic.partition_result
    }


# --- controllers on the in-memory store ---


async def led_by_its_second_replica(cluster: Cluster, **config: object) -> None:
    """Brokers 1 and 3 up; t-0 = [2, 3] created while 2 is down, so 3 leads; then 2 starts
    and catches up: ISR [3, 2], leader 3, leader epoch 0."""
    await cluster.start(1, **config)
    await cluster.start(3, **config)
    await eventually(
        settled(cluster, lambda: cluster.controller.broker_id == 1), timeout=2, message="no controller"
    )
    await cluster.create_topic("t", {0: (2, 3)})
    await eventually(
        settled(cluster, lambda: T0 in cluster.zk.partition_states), timeout=2, message="not created"
    )
    assert cluster.state("t", 0).leader == 3
    await cluster.start(2, **config)
    await eventually(
        settled(cluster, lambda: 2 in cluster.controller.context.live_brokers),
        timeout=2,
        message="2 not seen",
    )
    await cluster.expand_isr(T0, (3, 2))
    assert cluster.controller.context.preferred_replica_imbalance_count() == 1


async def test_creating_the_election_node_elects_the_preferred_replica_and_deletes_the_node(
    cluster: Cluster,
) -> None:
    await led_by_its_second_replica(cluster)
    await cluster.stores[1].create_preferred_replica_election([T0, TopicPartition("missing", 0)])
    await eventually(
        settled(cluster, lambda: cluster.zk.preferred_replica_election is None),
        timeout=2,
        message="the election node was not processed",
    )
    state = cluster.state("t", 0)
    assert (state.leader, state.leader_epoch, state.isr) == (2, 1, (3, 2))
    assert cluster.controller.context.preferred_replica_imbalance_count() == 0
    # The watch is armed again: a second node is processed too.
    await cluster.stores[3].create_preferred_replica_election([T0])
    await eventually(
        settled(cluster, lambda: cluster.zk.preferred_replica_election is None),
        timeout=2,
        message="the second election node was not processed",
    )
    assert cluster.state("t", 0).leader_epoch == 1, "already led by its preferred replica: no election"


async def test_an_election_node_naming_an_offline_preferred_replica_is_deleted_and_changes_nothing(
    cluster: Cluster,
) -> None:
    await led_by_its_second_replica(cluster)
    await cluster.kill(2)
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).isr == (3,)),
        timeout=2,
        message="2 not dropped from the ISR",
    )
    before = cluster.state("t", 0)
    await cluster.stores[1].create_preferred_replica_election([T0])
    await eventually(
        settled(cluster, lambda: cluster.zk.preferred_replica_election is None),
        timeout=2,
        message="the election node was not deleted",
    )
    assert cluster.state("t", 0) == before


async def test_elect_leaders_answers_per_partition(cluster: Cluster) -> None:
    await led_by_its_second_replica(cluster)
    await cluster.create_topic("u", {0: (1, 3)})
    await cluster.create_topic("d", {0: (3, 1)})
    await eventually(
        settled(cluster, lambda: len(cluster.zk.partition_states) == 3),
        timeout=2,
        message="topics not created",
    )
    cluster.controller.context.topics_to_be_deleted.add("d")
    u0, d0, missing = TopicPartition("u", 0), TopicPartition("d", 0), TopicPartition("t", 7)
    response = await elect(cluster.controller, ElectionType.PREFERRED, frozenset({T0, u0, d0, missing}))
    assert results_of(response) == {
        T0: ErrorCode.NONE,
        u0: ErrorCode.ELECTION_NOT_NEEDED,
        d0: ErrorCode.INVALID_TOPIC_EXCEPTION,
        missing: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert cluster.state("t", 0).leader == 2
    assert cluster.controller.metrics.timers[ControllerState.MANUAL_LEADER_BALANCE].count >= 1, (
        "ManualLeaderBalanceRateAndTimeMs"
    )
    assert cluster.controller.metrics.snapshot()["ManualLeaderBalanceRateAndTimeMs.count"] >= 1
    everything = await elect(cluster.controller, ElectionType.PREFERRED, None)
    assert results_of(everything) == {d0: ErrorCode.INVALID_TOPIC_EXCEPTION}


async def test_a_preferred_replica_out_of_the_isr_cannot_be_elected(cluster: Cluster) -> None:
    await cluster.start(1)
    await cluster.start(3)
    await eventually(
        settled(cluster, lambda: cluster.controller.broker_id == 1), timeout=2, message="no controller"
    )
    await cluster.create_topic("t", {0: (2, 3)})
    await cluster.start(2)
    await eventually(
        settled(
            cluster,
            lambda: 2 in cluster.controller.context.live_brokers and T0 in cluster.zk.partition_states,
        ),
        timeout=2,
        message="not settled",
    )
    response = await elect(cluster.controller, ElectionType.PREFERRED, frozenset({T0}))
    assert results_of(response) == {T0: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
    assert cluster.state("t", 0).leader == 3


async def test_an_unclean_election_picks_a_live_replica_out_of_the_isr(cluster: Cluster) -> None:
    await led_by_its_second_replica(cluster)
    await cluster.create_topic("u", {0: (1, 3)})
    await eventually(
        settled(cluster, lambda: len(cluster.zk.partition_states) == 2), timeout=2, message="no u"
    )
    # The ISR shrinks to [3] while 2 lags; then 3 dies: t-0 has no live ISR member.
    state = cluster.state("t", 0)
    cluster.zk.partition_states[T0] = (state._replace(isr=(3,)), 1, state.partition_epoch + 1)
    await cluster.kill(3)
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).leader == -1),
        timeout=2,
        message="t-0 still has a leader",
    )
    u0 = TopicPartition("u", 0)
    response = await elect(cluster.controller, ElectionType.UNCLEAN, frozenset({T0, u0}))
    assert results_of(response) == {T0: ErrorCode.NONE, u0: ErrorCode.ELECTION_NOT_NEEDED}
    assert (cluster.state("t", 0).leader, cluster.state("t", 0).isr) == (2, (2,))
    assert cluster.controller.metrics.unclean_leader_elections == 1


async def test_an_unclean_election_with_no_live_replica_fails(cluster: Cluster) -> None:
    await cluster.start(1)
    await eventually(
        settled(cluster, lambda: cluster.controller.is_active), timeout=2, message="no controller"
    )
    await cluster.start(2)
    await cluster.create_topic("t", {0: (2,)})
    await eventually(settled(cluster, lambda: T0 in cluster.zk.partition_states), timeout=2, message="no t")
    await cluster.kill(2)
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).leader == -1), timeout=2, message="t-0 led"
    )
    response = await elect(cluster.controller, ElectionType.UNCLEAN, frozenset({T0}))
    assert results_of(response) == {T0: ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE}


async def test_a_broker_that_is_not_the_controller_answers_not_controller_per_partition(
    cluster: Cluster,
) -> None:
    await led_by_its_second_replica(cluster)
    follower = cluster.controllers[3]
    response = await elect(follower, ElectionType.PREFERRED, frozenset({T0, T1}))
    assert results_of(response) == {T0: ErrorCode.NOT_CONTROLLER, T1: ErrorCode.NOT_CONTROLLER}
    with pytest.raises(NotController):
        await elect(follower, ElectionType.PREFERRED, None)
    # Pre-empted (here: the queue is closed) gives the same answer.
    controller = cluster.controller
    await controller.event_manager.close()
    response = await elect(controller, ElectionType.PREFERRED, frozenset({T0}))
    assert results_of(response) == {T0: ErrorCode.NOT_CONTROLLER}


async def test_auto_rebalance_runs_5_s_after_failover_then_every_interval(cluster: Cluster) -> None:
    await led_by_its_second_replica(cluster, leader_imbalance_check_interval_s=1.0)
    controller, clock = cluster.controller, cluster.clocks[1]
    assert clock.pending() == [FIRST_REBALANCE_DELAY_S]
    clock.advance(FIRST_REBALANCE_DELAY_S)
    await eventually(
        settled(cluster, lambda: cluster.state("t", 0).leader == 2), timeout=2, message="not rebalanced"
    )
    assert cluster.state("t", 0).leader_epoch == 1
    assert clock.pending() == [1.0], "rescheduled after each run"
    assert controller.metrics.snapshot()["AutoLeaderBalanceRateAndTimeMs.count"] == 1
    clock.advance(1.0)
    await eventually(
        settled(cluster, lambda: controller.metrics.timers[ControllerState.AUTO_LEADER_BALANCE].count == 2),
        timeout=2,
        message="no second run",
    )
    assert cluster.state("t", 0).leader_epoch == 1, "balanced already: nothing elected"
    await controller.shutdown()
    assert clock.pending() == [], "resigning cancels the task"


async def test_a_failover_without_an_election_node_neither_deletes_it_nor_rearms_it(cluster: Cluster) -> None:
    await led_by_its_second_replica(cluster)
    elections = cluster.controller.metrics.timers[ControllerState.MANUAL_LEADER_BALANCE]
    assert (elections.count, cluster.stores[1].preferred_election_watch_armed) == (0, True)
    await cluster.stores[1].create_preferred_replica_election([T0])
    await eventually(
        settled(cluster, lambda: cluster.zk.preferred_replica_election is None),
        timeout=2,
        message="the election node was not processed",
    )


async def test_auto_rebalance_can_be_disabled(cluster: Cluster) -> None:
    await led_by_its_second_replica(cluster, auto_leader_rebalance_enable=False)
    assert cluster.clocks[1].pending() == []


async def test_an_election_node_the_controller_missed_is_processed_by_the_next_at_failover(
    cluster: Cluster,
) -> None:
    await led_by_its_second_replica(cluster)
    # Written behind the controller's back (its watch does not fire), then the controller dies.
    cluster.zk.preferred_replica_election = [T0]
    await cluster.kill(1)
    await eventually(
        settled(
            cluster,
            lambda: (
                any(c.is_active for c in cluster.controllers.values())
                and cluster.zk.preferred_replica_election is None
            ),
        ),
        timeout=2,
        message="the pending election was not processed at failover",
    )
    assert cluster.state("t", 0).leader == 2


async def test_a_deposed_controller_cannot_elect_and_resigns(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="actors")
    await led_by_its_second_replica(cluster)
    old = cluster.controller
    # The old controller misses its deposition (spec §12.1 ControllerMoveOn...): it does not
    # hear of /controller changing, and the others elect a new controller at epoch 2.
    cluster.stores[1].controller_watch_armed = False
    await cluster.stores[3].force_delete_controller()
    await eventually(
        settled(cluster, lambda: cluster.controllers[3].is_active or cluster.controllers[2].is_active),
        timeout=2,
        message="no new controller",
    )
    assert old.is_active, "the old controller still believes it leads"
    await cluster.stores[2].create_preferred_replica_election([T0])
    await eventually(
        settled(cluster, lambda: not old.is_active and cluster.zk.preferred_replica_election is None),
        timeout=2,
        message="the old controller did not resign, or the new one did not elect",
    )
    state, controller_epoch, _ = cluster.zk.partition_states[T0]
    assert (state.leader, state.leader_epoch, controller_epoch) == (2, 1, 2), "elected once, by the new one"
    assert "controller moved to another broker while processing ReplicaLeaderElection" in caplog.text


async def test_every_partition_asked_of_a_broker_that_is_not_the_controller_answers_not_controller(
    cluster: Cluster,
) -> None:
    """A top-level NOT_CONTROLLER, which clients retry, rather than an empty success."""
    await led_by_its_second_replica(cluster)
    follower = cluster.controllers[3]
    request = ElectLeadersRequest(election_type=int(ElectionType.PREFERRED), topic_partitions=None)
    response = await broker_elect_leaders(follower, None, request)  # type: ignore[arg-type]
    assert (response.error_code, response.replica_election_results) == (ErrorCode.NOT_CONTROLLER, [])


async def test_a_controller_fenced_out_mid_election_answers_not_controller_and_resigns(
    cluster: Cluster,
) -> None:
    await led_by_its_second_replica(cluster)
    controller = cluster.controller
    # Another controller is elected behind this one's back (spec §12.1 ControllerMove...).
    assert cluster.zk.controller is not None and cluster.zk.epoch is not None
    cluster.zk.controller.value = 3
    cluster.zk.epoch = (cluster.zk.epoch[0] + 1, cluster.zk.epoch[1] + 1)
    response = await elect(controller, ElectionType.PREFERRED, frozenset({T0}))
    assert results_of(response) == {T0: ErrorCode.NOT_CONTROLLER}
    with pytest.raises(NotController):
        await elect(controller, ElectionType.PREFERRED, None)
    await eventually(settled(cluster, lambda: not controller.is_active), timeout=2, message="did not resign")
    assert cluster.state("t", 0).leader == 3, "the fenced write changed nothing"


async def test_an_admin_election_that_raises_answers_unknown_server_error(cluster: Cluster) -> None:
    await led_by_its_second_replica(cluster)
    controller = cluster.controller

    async def broken(*_: object) -> object:
        raise RuntimeError("boom")

    controller.leader_elections.on_admin = broken  # type: ignore[method-assign]
    response = await elect(controller, ElectionType.PREFERRED, frozenset({T0}))
    assert results_of(response) == {T0: ErrorCode.UNKNOWN_SERVER_ERROR}


async def test_an_admin_election_not_answered_in_time_times_out(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    await led_by_its_second_replica(cluster)
    controller = cluster.controller
    with monkeypatch.context() as patch:
        patch.setattr(controller.event_manager, "put", lambda event: None)  # lost: never answered
        outcomes = await controller.elect_leaders(ElectionType.PREFERRED, frozenset({T0}), timeout_s=0.01)
    assert outcomes[T0].error == ErrorCode.REQUEST_TIMED_OUT
