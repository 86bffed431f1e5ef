"""Incremental fetch sessions (KIP-227): the leader's cache and the follower's client, and an
idle follower of many partitions on a real replica manager."""

from __future__ import annotations

from pathlib import Path

from actors.base.ports import TopicPartition
from actors.replica.fetch_session import (
    DIRTY_ANSWERED_PER_FETCH,
    PARTITIONS_ADDED_PER_FETCH,
    FetchSessionCache,
    FetchSessionClient,
)
from actors.replica.replica_manager import ReplicaManager
from actors.replica.replication import FetchPlan
from node.broker.log.config import LogConfig
from node.broker.log.manager import LogManager
from wire import records
from wire.api import (
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveLeader,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
)
from wire.errors import ErrorCode


def fetch(
    partitions: dict[int, int], *, session_id: int, epoch: int, forget: list[int] | None = None
) -> FetchRequest:
    return FetchRequest(
        replica_id=2,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            FetchTopic(
                topic="t",
                partitions=[FetchPartition(partition=p, fetch_offset=o) for p, o in partitions.items()],
            )
        ]
        if partitions
        else [],
        forgotten_topics_data=[ForgottenTopic(topic="t", partitions=forget)] if forget else [],
    )


def test_a_full_fetch_opens_a_session_and_later_ones_carry_only_changes() -> None:
    cache = FetchSessionCache()
    session, error, wanted = cache.open_or_update(fetch({0: 0, 1: 0, 2: 0}, session_id=0, epoch=0))
    assert session is not None and error == ErrorCode.NONE and len(wanted) == 3
    session, error, wanted = cache.open_or_update(fetch({1: 5}, session_id=session.session_id, epoch=1))
    assert session is not None and [tp.partition for tp, _ in wanted] == [1]
    assert session.partitions[TopicPartition("t", 1)].fetch_offset == 5
    cache.mark_dirty(TopicPartition("t", 2))
    _, _, wanted = cache.open_or_update(fetch({}, session_id=session.session_id, epoch=2))
    assert [(tp.partition, item.fetch_offset) for tp, item in wanted] == [(2, 0)], (
        "a changed partition is answered"
    )
    _, _, wanted = cache.open_or_update(fetch({}, session_id=session.session_id, epoch=3, forget=[0]))
    assert wanted == [] and TopicPartition("t", 0) not in session.partitions


def test_unknown_sessions_and_wrong_epochs_are_refused() -> None:
    cache = FetchSessionCache()
    session, _, _ = cache.open_or_update(fetch({0: 0}, session_id=0, epoch=0))
    assert session is not None
    assert cache.open_or_update(fetch({}, session_id=99, epoch=1))[1] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.open_or_update(fetch({}, session_id=session.session_id, epoch=5))[1] == (
        ErrorCode.INVALID_FETCH_SESSION_EPOCH
    )
    again, _, _ = cache.open_or_update(fetch({0: 0}, session_id=0, epoch=0))
    assert again is not None and len(cache) == 1, "a follower's new full fetch replaces its old session"


def test_the_client_sends_changes_and_starts_over_after_a_lost_answer() -> None:
    client = FetchSessionClient()
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    assert client.needs_full_fetch
    assert client.build_full({a: (0, 0), b: (0, 0)}) == (0, 0, [a, b])
    client.answered(ErrorCode.NONE, session_id=7)
    assert not client.needs_full_fetch
    assert client.build_incremental({a: (3, 0)}, set()) == (7, 1, [a], {})
    client.answered(ErrorCode.NONE, session_id=7)
    assert client.build_incremental({a: (3, 0)}, {b}) == (7, 2, [], {"t": [1]}), "unchanged: not resent"
    assert client.sent == {a: (3, 0)}
    # No answer to that one: the leader's view is unknown, so the next fetch is full.
    assert client.needs_full_fetch
    client.answered(ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0)
    assert client.needs_full_fetch and client.session_id == 0


def test_a_session_opens_with_a_bounded_number_of_partitions_and_grows_by_as_many() -> None:
    client = FetchSessionClient()
    wanted = [TopicPartition("t", p) for p in range(5)]
    now = client.split_additions(wanted, limit=2)
    assert (now, set(client.waiting)) == (wanted[:2], set(wanted[2:]))
    client.build_full({tp: (0, 0) for tp in now})
    client.answered(ErrorCode.NONE, session_id=7)
    # Partitions already in the session are always sent; at most `limit` new ones, those
    # waiting first in partition order.
    now = client.split_additions([wanted[0]], limit=2)
    assert (now, set(client.waiting)) == ([wanted[0], wanted[2], wanted[3]], {wanted[4]})
    client.build_incremental({tp: (0, 0) for tp in now}, set())
    client.answered(ErrorCode.NONE, session_id=7)
    assert client.split_additions([], limit=2) == [wanted[4]]
    assert not client.waiting


def test_a_leader_that_keeps_no_session_is_sent_every_partition_in_each_full_fetch() -> None:
    client = FetchSessionClient()
    wanted = [TopicPartition("t", p) for p in range(5)]
    client.build_full({tp: (0, 0) for tp in wanted[:2]})
    client.answered(ErrorCode.NONE, session_id=0)
    assert client.split_additions(wanted, limit=2) == wanted
    assert not client.waiting


def test_a_follower_of_many_partitions_adds_them_to_its_session_a_bounded_number_per_fetch(
    tmp_path: Path,
) -> None:
    count = 2 * PARTITIONS_ADDED_PER_FETCH + 500
    leader, follower = leading(tmp_path / "leader", count), following(tmp_path / "follower", count)
    named, waits = [], []
    while True:
        plan = follower.follower_path.plan_fetch(1)
        assert plan is not None and plan.fetch_request is not None
        request = plan.fetch_request
        named.append(sum(len(t.partitions) for t in request.topics))
        waits.append(request.max_wait_ms)
        follower.follower_path.process_fetched(1, plan, leader.leader_path.read(request, wait=False).response)
        if named[-1] == 0:
            break
    assert named == [PARTITIONS_ADDED_PER_FETCH, PARTITIONS_ADDED_PER_FETCH, 500, 0]
    assert waits[:2] == [0, 0], "while partitions wait to be added, the leader answers at once"
    assert waits[2] > 0, "once all are in, the fetch long-polls again"
    (session,) = leader.state.fetch_sessions._sessions.values()
    assert len(session.partitions) == count


def named(plan: FetchPlan | None) -> set[TopicPartition]:
    assert plan is not None and plan.fetch_request is not None
    return {TopicPartition(t.topic, p.partition) for t in plan.fetch_request.topics for p in t.partitions}


def test_a_follower_whose_leader_stops_answering_loses_no_partition_of_its_session(tmp_path: Path) -> None:
    """Unanswered fetches and a session the leader forgot each start a new session; what was
    in the old one joins it a slice at a time, and every partition followed is in it again."""
    count = 2 * PARTITIONS_ADDED_PER_FETCH + 500
    leader, follower = leading(tmp_path / "leader", count), following(tmp_path / "follower", count)
    path = follower.follower_path

    def grow_until_whole() -> None:
        while True:
            plan = path.plan_fetch(1)
            assert plan is not None and plan.fetch_request is not None
            path.process_fetched(1, plan, leader.leader_path.read(plan.fetch_request, wait=False).response)
            if not path.state.fetch_targets.get(1).session.waiting:
                return

    opening = named(path.plan_fetch(1))
    assert len(opening) == PARTITIONS_ADDED_PER_FETCH
    # Unanswered (the leader is down): each retry is the same full fetch, the rest waiting.
    for _ in range(3):
        assert named(path.plan_fetch(1)) == opening
    grow_until_whole()
    session = path.state.fetch_targets.get(1).session
    assert len(session.sent) == count
    # The leader forgot the session: a new one opens and grows back to every partition.
    plan = path.plan_fetch(1)
    path.process_fetched(1, plan, FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND))
    assert len(named(path.plan_fetch(1))) == PARTITIONS_ADDED_PER_FETCH
    grow_until_whole()
    assert len(session.sent) == count
    (on_leader,) = leader.state.fetch_sessions._sessions.values()
    assert len(on_leader.partitions) == count


async def test_a_leader_answers_a_bounded_number_of_changed_partitions_per_fetch(tmp_path: Path) -> None:
    count = 2 * DIRTY_ANSWERED_PER_FETCH + 500
    leader = leading(tmp_path, count)
    opened = leader.leader_path.read(fetch({p: 0 for p in range(count)}, session_id=0, epoch=0), wait=False)
    session_id = opened.response.session_id
    batch = records.build_batch([(None, b"x")], timestamp=1)
    leader.leader_path.append_records(  # a record on every partition: each session partition dirty
        ProduceRequest(
            acks=1,
            topic_data=[
                ProduceTopicData(
                    name="t",
                    partition_data=[ProducePartitionData(index=p, records=batch) for p in range(count)],
                )
            ],
        )
    )
    answered = []
    for epoch in range(1, 5):
        response = leader.leader_path.read(fetch({}, session_id=session_id, epoch=epoch), wait=False).response
        answered.append(sum(len(t.partitions) for t in response.responses))
    assert answered == [DIRTY_ANSWERED_PER_FETCH, DIRTY_ANSWERED_PER_FETCH, 500, 0]


def replica(broker_id: int, path: Path, partitions: int) -> ReplicaManager:
    """Broker `broker_id` (1 or 2) with partitions 0..n-1 of "t", led by broker 1 and followed
    by broker 2."""
    manager = ReplicaManager(broker_id, LogManager([path], LogConfig()))
    states = [
        LeaderAndIsrPartitionState(
            topic="t",
            partition=p,
            controller_epoch=1,
            leader=1,
            leader_epoch=0,
            isr=[1, 2],
            partition_epoch=0,
            replicas=[1, 2],
        )
        for p in range(partitions)
    ]
    manager.become_leader_or_follower(
        LeaderAndIsrRequest(
            controller_id=9,
            controller_epoch=1,
            partition_states=states,
            live_leaders=[LiveLeader(broker_id=1, host="127.0.0.1", port=9001)],
        ),
        -1,
    )
    return manager


def leading(path: Path, partitions: int) -> ReplicaManager:
    return replica(1, path, partitions)


def following(path: Path, partitions: int) -> ReplicaManager:
    return replica(2, path, partitions)


async def test_an_idle_session_answers_nothing_and_a_produce_wakes_it(tmp_path: Path) -> None:
    leader = leading(tmp_path, 1000)
    full = leader.leader_path.read(fetch({p: 0 for p in range(1000)}, session_id=0, epoch=0), wait=True)
    assert len(full.response.responses[0].partitions) == 1000 and full.waiter is None
    session_id = full.response.session_id
    idle = leader.leader_path.read(fetch({}, session_id=session_id, epoch=1), wait=True)
    assert idle.response.responses == [] and idle.waiter is not None, "nothing changed: nothing to say"
    batch = records.build_batch([(None, b"x")], timestamp=1)
    leader.leader_path.append_records(
        ProduceRequest(
            acks=1,
            topic_data=[
                ProduceTopicData(name="t", partition_data=[ProducePartitionData(index=7, records=batch)])
            ],
        )
    )
    assert idle.waiter.done(), "an append wakes the session's long poll"
    woken = leader.leader_path.read(fetch({}, session_id=session_id, epoch=1), wait=False, reread=session_id)
    (answer,) = woken.response.responses[0].partitions
    assert answer.partition_index == 7
    assert [r.value for r in records.records(answer.records)] == [b"x"]


async def test_newly_followed_empty_partitions_are_not_answered(tmp_path: Path) -> None:
    leader = leading(tmp_path, 3)
    opened = leader.leader_path.read(fetch({0: 0}, session_id=0, epoch=0), wait=False).response
    added = leader.leader_path.read(
        fetch({1: 0, 2: 0}, session_id=opened.session_id, epoch=1), wait=False
    ).response
    assert added.responses == [], "two more empty partitions: nothing to tell"
