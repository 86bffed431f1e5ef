"""The replicated log on the replica manager, on real log files: appends on the leader,
acks=all waiting for the high watermark, reads, epoch checks, truncation by leader epoch on a
follower, and ISR shrink and expansion proposals (spec §9.1, §9.5)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from actors.replica.partition import FollowerState, Partition, PendingIsr, Role, TopicPartition
from actors.replica.replica_manager import ReplicaManager
from node.broker.log.config import LogConfig
from node.broker.log.manager import LogManager
from tests.support import ManualClock
from wire import records
from wire.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    AlterPartitionResult,
    FetchableTopicResponse,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
    LiveBroker,
    LiveLeader,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
    OffsetsForLeaderEpochRequest,
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    UpdateMetadataRequest,
)
from wire.errors import ErrorCode

TP = TopicPartition("t", 0)


def order(leader: int, epoch: int, isr: list[int], *, partition_epoch: int = 0) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=9,
        controller_epoch=1,
        partition_states=[
            LeaderAndIsrPartitionState(
                topic="t",
                partition=0,
                controller_epoch=1,
                leader=leader,
                leader_epoch=epoch,
                isr=isr,
                partition_epoch=partition_epoch,
                replicas=[1, 2, 3],
            )
        ],
        live_leaders=[LiveLeader(broker_id=b, host="127.0.0.1", port=9000 + b) for b in (1, 2, 3)],
    )


def produce(values: list[bytes], *, acks: int = -1) -> ProduceRequest:
    batch = records.build_batch([(None, v) for v in values], timestamp=1_000)
    return ProduceRequest(
        acks=acks,
        topic_data=[
            ProduceTopicData(name="t", partition_data=[ProducePartitionData(index=0, records=batch)])
        ],
    )


def fetch(offset: int, *, replica: int = -1, epoch: int = -1, replica_epoch: int = -1) -> FetchRequest:
    return FetchRequest(
        replica_id=replica,
        replica_epoch=replica_epoch,
        max_wait_ms=0,
        topics=[
            FetchTopic(
                topic="t",
                partitions=[FetchPartition(partition=0, fetch_offset=offset, current_leader_epoch=epoch)],
            )
        ],
    )


# Each broker's epoch (its registration's), which its fetches carry (KIP-903).
EPOCHS = {1: 100, 2: 200, 3: 300}


def proposal(isr: tuple[int, ...], leader_epoch: int, partition_epoch: int) -> PendingIsr:
    """Broker 1's ISR change, each follower named with its broker epoch."""
    epochs = tuple(-1 if r == 1 else EPOCHS[r] for r in isr)
    return PendingIsr(isr, leader_epoch, partition_epoch, epochs)


class ProposalRecorder:
    """The replica manager's effects in a test: ISR changes are recorded, not sent; no fetchers
    (the test moves the data with Brokers.replicate)."""

    def __init__(self, broker_id: int, proposals: list[tuple[int, PendingIsr]]) -> None:
        self.broker_id = broker_id
        self.proposals = proposals

    def start_fetcher(self, source: int) -> None:
        pass

    def propose_isr(self, tp: TopicPartition, proposal: PendingIsr) -> None:
        self.proposals.append((self.broker_id, proposal))


class Brokers:
    def __init__(self, tmp_path: Path) -> None:
        self.clock = ManualClock()
        self.proposals: list[tuple[int, PendingIsr]] = []
        self.managers = {
            b: ReplicaManager(
                b,
                LogManager([tmp_path / str(b)], LogConfig(min_insync_replicas=2)),
                clock=self.clock,
                effects=ProposalRecorder(b, self.proposals),
            )
            for b in (1, 2, 3)
        }
        for manager in self.managers.values():
            manager.update_metadata(
                UpdateMetadataRequest(
                    controller_id=9,
                    controller_epoch=1,
                    live_brokers=[
                        LiveBroker(broker_id=b, endpoints=[], broker_epoch=EPOCHS[b]) for b in (1, 2, 3)
                    ],
                ),
                EPOCHS[manager.state.broker_id],
            )

    def __getitem__(self, broker_id: int) -> ReplicaManager:
        return self.managers[broker_id]

    def lead(self, leader: int, epoch: int, isr: list[int]) -> None:
        for broker_id, manager in self.managers.items():
            manager.become_leader_or_follower(order(leader, epoch, isr), EPOCHS[broker_id])

    def replicate(self, follower: int, leader: int) -> None:
        """One fetcher round: truncate first if needed, else fetch and append."""
        plan = self[follower].follower_path.plan_fetch(leader)
        assert plan is not None
        if plan.epoch_request is not None:
            self[follower].follower_path.truncate_to_epoch_ends(
                leader, plan, self[leader].leader_path.offsets_for_leader_epoch(plan.epoch_request)
            )
            return
        assert plan.fetch_request is not None
        self[follower].follower_path.process_fetched(
            leader, plan, self[leader].leader_path.read(plan.fetch_request, wait=False).response
        )


@pytest.fixture
def brokers(tmp_path: Path) -> Brokers:
    return Brokers(tmp_path)


def partition(manager: ReplicaManager) -> Partition:
    return manager.state.partitions[TP]


def values(manager: ReplicaManager, offset: int = 0) -> list[bytes | None]:
    log = partition(manager).log
    return [] if log is None else [r.value for r in records.records(log.read(offset, 1 << 20))]


async def test_acks_all_waits_until_every_isr_member_has_the_batch(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1, 2, 3])
    outcome = brokers[1].leader_path.append_records(produce([b"a", b"b"]))
    assert outcome.answers[TP].base_offset == 0
    waiter = outcome.waiting[TP]
    brokers.replicate(2, 1)
    brokers.replicate(2, 1)  # the second fetch reports the follower's new log end
    assert not waiter.done(), "one follower is not enough while the ISR has three"
    brokers.replicate(3, 1)
    brokers.replicate(3, 1)
    assert waiter.done() and waiter.result() == ErrorCode.NONE
    assert partition(brokers[1]).high_watermark == 2
    assert values(brokers[3]) == [b"a", b"b"] and partition(brokers[3]).high_watermark == 2


async def test_produce_refusals_append_nothing(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1])
    assert (
        brokers[1].leader_path.append_records(produce([b"x"])).answers[TP].error_code
        == ErrorCode.NOT_ENOUGH_REPLICAS
    )
    assert (
        brokers[2].leader_path.append_records(produce([b"x"])).answers[TP].error_code
        == ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    corrupt = bytearray(records.build_batch([(None, b"y")], timestamp=1))
    corrupt[-1] ^= 1
    bad = ProduceRequest(
        acks=1,
        topic_data=[
            ProduceTopicData(name="t", partition_data=[ProducePartitionData(index=0, records=bytes(corrupt))])
        ],
    )
    assert brokers[1].leader_path.append_records(bad).answers[TP].error_code == ErrorCode.CORRUPT_MESSAGE
    unknown = ProduceRequest(
        topic_data=[
            ProduceTopicData(name="nope", partition_data=[ProducePartitionData(index=0, records=b"")])
        ]
    )
    assert brokers[1].leader_path.append_records(unknown).answers[TopicPartition("nope", 0)].error_code == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert partition(brokers[1]).log_end_offset == 0


async def test_consumers_read_up_to_the_high_watermark_followers_to_the_log_end(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1, 2])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    consumer = brokers[1].leader_path.read(fetch(0), wait=False).response.responses[0].partitions[0]
    assert (consumer.records, consumer.high_watermark) == (b"", 0), "nothing is committed yet"
    follower = (
        brokers[1]
        .leader_path.read(fetch(0, replica=2, epoch=0), wait=False)
        .response.responses[0]
        .partitions[0]
    )
    assert [r.value for r in records.records(follower.records)] == [b"a"]


async def test_fetch_epoch_checks_and_offsets_out_of_range(brokers: Brokers) -> None:
    brokers.lead(1, 3, [1, 2, 3])

    def code(request: FetchRequest) -> int:
        return brokers[1].leader_path.read(request, wait=False).response.responses[0].partitions[0].error_code

    assert code(fetch(0, replica=2, epoch=2)) == ErrorCode.FENCED_LEADER_EPOCH
    assert code(fetch(0, replica=2, epoch=4)) == ErrorCode.UNKNOWN_LEADER_EPOCH
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    assert code(fetch(5, replica=2, epoch=3)) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert code(fetch(0, epoch=3)) == ErrorCode.NONE


async def test_a_long_poll_wakes_when_data_arrives(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1, 2])
    request = FetchRequest(replica_id=2, max_wait_ms=500, topics=fetch(0, replica=2).topics)
    outcome = brokers[1].leader_path.read(request, wait=True)
    assert outcome.waiter is not None and not outcome.waiter.done()
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    await asyncio.wait_for(outcome.waiter, 1)


async def test_list_offsets_and_epoch_end_offsets(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1])
    brokers[1].leader_path.append_records(produce([b"a", b"b"], acks=1))
    brokers.lead(1, 2, [1])
    brokers[1].leader_path.append_records(produce([b"c"], acks=1))

    def offset(timestamp: int) -> int:
        request = ListOffsetsRequest(
            topics=[
                ListOffsetsTopic(
                    name="t", partitions=[ListOffsetsPartition(partition_index=0, timestamp=timestamp)]
                )
            ]
        )
        return brokers[1].leader_path.list_offsets(request).topics[0].partitions[0].offset

    assert (offset(EARLIEST_TIMESTAMP), offset(LATEST_TIMESTAMP), offset(1_000)) == (0, 3, 0)

    def epoch_end(epoch: int) -> tuple[int, int]:
        request = OffsetsForLeaderEpochRequest(
            topics=[
                OffsetForLeaderTopic(
                    topic="t", partitions=[OffsetForLeaderPartition(partition=0, leader_epoch=epoch)]
                )
            ]
        )
        answer = brokers[1].leader_path.offsets_for_leader_epoch(request).topics[0].partitions[0]
        return answer.leader_epoch, answer.end_offset

    assert epoch_end(0) == (0, 2)
    assert epoch_end(1) == (0, 2), "an epoch the leader never had ends where the next begins"
    assert epoch_end(2) == (2, 3)


async def test_a_follower_truncates_what_the_new_leader_never_had(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1, 2, 3])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    for follower in (2, 3):
        brokers.replicate(follower, 1)
    brokers[1].leader_path.append_records(produce([b"only-on-2"], acks=1))
    brokers.replicate(2, 1)  # 3 never gets the second batch
    brokers.lead(3, 1, [3, 2])  # 3 leads now; 2 holds a batch 3 never had
    brokers[3].leader_path.append_records(produce([b"new"], acks=1))
    brokers.replicate(2, 3)  # OffsetsForLeaderEpoch, then truncation
    assert values(brokers[2]) == [b"a"]
    brokers.replicate(2, 3)
    assert values(brokers[2]) == [b"a", b"new"] == values(brokers[3])


async def test_a_follower_with_a_later_epoch_than_the_unclean_leader_truncates_below_its_high_watermark(
    brokers: Brokers,
) -> None:
    """Simulation seed 90: a leader elected uncleanly at epoch 2 had written nothing yet at
    that epoch, so its epoch cache ended at epoch 0; a follower that had committed a batch at
    epoch 1 under another leader asked where epoch 1 ends, was told "unknown", truncated
    only to its high watermark, and then joined the ISR with a batch the leader never had."""
    brokers.lead(1, 0, [1, 2, 3])
    brokers[1].leader_path.append_records(produce([b"only-on-1"], acks=1))
    brokers.lead(3, 1, [3, 2])  # 1 is cut off; nothing of it reached 2 or 3
    brokers[3].leader_path.append_records(produce([b"only-on-3-and-2"], acks=1))
    for _ in range(3):  # fetch, report the log end, learn the high watermark
        brokers.replicate(2, 3)
    assert (values(brokers[2]), partition(brokers[2]).high_watermark) == ([b"only-on-3-and-2"], 1)
    brokers.lead(1, 2, [1, 2])  # an unclean election: 1 leads with what it has
    brokers.replicate(2, 1)  # OffsetsForLeaderEpoch for epoch 1: it ends where epoch 2 starts, 0
    assert values(brokers[2]) == []
    brokers.replicate(2, 1)
    assert values(brokers[2]) == [b"only-on-1"] == values(brokers[1])


@pytest.mark.parametrize("wrote_in_its_own_epoch", [True, False])
async def test_a_follower_that_never_had_the_leaders_epoch_truncates_to_where_an_epoch_both_had_ends(
    brokers: Brokers, wrote_in_its_own_epoch: bool
) -> None:
    """Simulation seed 37862: the leader answered where its epoch 1 ends, an epoch the
    follower never had; the follower truncated to that offset only, kept a batch of epoch 0
    that the leader did not have below it, and fetched on top of it: the replicas differed
    below the high watermark. As Kafka's getOffsetTruncationState (KIP-279), it must cut back
    to where its own epoch before that one ends and ask again."""
    brokers.lead(1, 0, [1, 2, 3])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    for follower in (2, 3):
        brokers.replicate(follower, 1)
    brokers[1].leader_path.append_records(produce([b"only-on-1"], acks=1))  # 1 is cut off now
    brokers.lead(2, 1, [2, 3])
    brokers[2].leader_path.append_records(produce([b"on-2-and-3"], acks=1))
    brokers.replicate(3, 2)  # OffsetsForLeaderEpoch for epoch 0: nothing to truncate
    brokers.replicate(3, 2)
    brokers.lead(1, 2, [1, 3])  # 1 is in the ISR again, with its batch of epoch 0 at offset 1
    if wrote_in_its_own_epoch:
        brokers[1].leader_path.append_records(produce([b"only-on-1-at-2"], acks=1))
    brokers.lead(3, 3, [3, 1])
    brokers[3].leader_path.append_records(produce([b"new"], acks=1))
    brokers.replicate(1, 3)  # epoch 2 is unknown to 3: its epoch 1 ends at 2
    assert values(brokers[1]) == [b"a", b"only-on-1"]
    brokers.replicate(1, 3)  # asked again for epoch 0, which ends at 1 on the leader
    assert values(brokers[1]) == [b"a"]
    brokers.replicate(1, 3)
    assert values(brokers[1]) == [b"a", b"on-2-and-3", b"new"] == values(brokers[3])


async def test_a_follower_that_stops_catching_up_is_proposed_out_of_the_isr(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1, 2, 3])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    brokers.replicate(2, 1)
    brokers.replicate(2, 1)  # reports its log end: level with the leader's
    brokers.clock.advance(31)
    brokers[1].leader_path.maybe_shrink_isr()
    assert brokers.proposals == [(1, proposal((1, 2), 0, 0))], "3 never caught up; 2 is at the log end"
    brokers[1].leader_path.maybe_shrink_isr()
    assert len(brokers.proposals) == 1, "one change in flight at a time"
    result = AlterPartitionResult(
        partition_index=0, leader_id=1, leader_epoch=0, isr=[1, 2], partition_epoch=1
    )
    brokers[1].leader_path.isr_change_answered(TP, proposal((1, 2), 0, 0), result)
    assert (partition(brokers[1]).isr, partition(brokers[1]).partition_epoch) == ((1, 2), 1)


async def test_a_follower_whose_broker_is_gone_is_left_for_the_controller_to_remove(brokers: Brokers) -> None:
    """The controller's broker change takes every replica of a broker gone out of the ISRs;
    the leader proposes only the live laggards."""
    brokers.lead(1, 0, [1, 2, 3])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    _live(brokers[1], 1, 2)  # 3's registration is gone
    brokers.clock.advance(31)
    brokers[1].leader_path.maybe_shrink_isr()
    assert [(leader, p.new_isr) for leader, p in brokers.proposals] == [(1, (1, 3))], (
        "2 lags and is live; 3 is the controller's"
    )


async def test_a_follower_that_reaches_the_high_watermark_is_proposed_back_in(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1, 2])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    brokers.replicate(2, 1)
    brokers.replicate(2, 1)
    assert partition(brokers[1]).high_watermark == 1
    brokers.replicate(3, 1)
    assert not brokers.proposals, "3 fetched from offset 0: behind the high watermark"
    brokers.replicate(3, 1)
    assert brokers.proposals == [(1, proposal((1, 2, 3), 0, 0))]
    refused = AlterPartitionResult(partition_index=0, error_code=ErrorCode.INELIGIBLE_REPLICA)
    brokers[1].leader_path.isr_change_answered(TP, brokers.proposals[0][1], refused)
    assert partition(brokers[1]).pending_isr is None and partition(brokers[1]).isr == (1, 2)


async def test_a_follower_that_caught_up_while_an_isr_change_was_pending_joins_after_it(
    brokers: Brokers,
) -> None:
    """Two replicas added at once: the second one's fetches at the log end come while the
    first one's expansion is pending; it is proposed once that answer arrives, without
    waiting for a fetch that would never come (it has nothing left to fetch)."""
    brokers.lead(1, 0, [1])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    brokers.replicate(2, 1)
    brokers.replicate(2, 1)
    brokers.replicate(3, 1)
    brokers.replicate(3, 1)
    assert brokers.proposals == [(1, proposal((1, 2), 0, 0))], "one change in flight at a time"
    result = AlterPartitionResult(
        partition_index=0, leader_id=1, leader_epoch=0, isr=[1, 2], partition_epoch=1
    )
    brokers[1].leader_path.isr_change_answered(TP, proposal((1, 2), 0, 0), result)
    assert brokers.proposals[1:] == [(1, proposal((1, 2, 3), 0, 1))]


async def test_a_follower_at_the_log_end_is_proposed_again_after_a_refused_isr_change(
    brokers: Brokers,
) -> None:
    """Found by the simulation (seed 62500): an expansion refused with INELIGIBLE_REPLICA (its
    replica was shutting down) left the other caught-up follower of an empty partition out
    of the ISR for ever: its incremental fetches no longer named the partition, so no fetch
    proposed it. Its next fetch must read the partition again, as Kafka's does."""
    brokers.lead(1, 0, [1])
    for follower in (2, 3, 2, 3):
        brokers.replicate(follower, 1)
    assert brokers.proposals == [(1, proposal((1, 2), 0, 0))], "one change in flight at a time"
    refused = AlterPartitionResult(partition_index=0, error_code=ErrorCode.INELIGIBLE_REPLICA)
    brokers[1].leader_path.isr_change_answered(TP, brokers.proposals[0][1], refused)
    brokers.replicate(3, 1)
    assert brokers.proposals[1:] == [(1, proposal((1, 3), 0, 0))], "3's next fetch proposes it"


def test_caught_up_time_follows_kafkas_rule() -> None:
    state = Partition(TP, Role.LEADER, 1, 0, (1, 2), 0, (1, 2))
    follower = FollowerState(
        log_end_offset=5, last_caught_up_ms=0, last_fetch_leader_log_end_offset=10, last_fetch_ms=100
    )
    state.followers = {2: follower}
    # No log yet: the leader's log end is 0, so any fetch from 0 is caught up now.
    state.update_follower_fetch(2, 0, now_ms=200)
    assert follower.last_caught_up_ms == 200


async def test_a_fetch_answered_with_errors_creates_no_log(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1, 2, 3])
    plan = brokers[2].follower_path.plan_fetch(1)
    assert plan is not None
    refused = FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic="t",
                partitions=[
                    FetchPartitionData(partition_index=0, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
                ],
            )
        ]
    )
    assert brokers[2].follower_path.process_fetched(1, plan, refused), (
        "nothing succeeded: the fetcher backs off"
    )
    assert partition(brokers[2]).log is None, "an error is no reason to create a log on disk"


async def test_a_fetch_answer_is_held_to_fetch_max_bytes_whatever_the_request_asks(brokers: Brokers) -> None:
    brokers.lead(1, 0, [1, 2])
    for value in (b"a", b"b", b"c"):
        brokers[1].leader_path.append_records(produce([value * 1000], acks=1))
    greedy = FetchRequest(
        replica_id=2,
        max_wait_ms=0,
        max_bytes=2**62,
        topics=[
            FetchTopic(
                topic="t", partitions=[FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=2**62)]
            )
        ],
    )

    def answered() -> list[bytes | None]:
        data = brokers[1].leader_path.read(greedy, wait=False).response.responses[0].partitions[0].records
        return [r.value for r in records.records(data)]

    assert answered() == [b"a" * 1000, b"b" * 1000, b"c" * 1000]
    brokers[1].state.config = dataclasses.replace(brokers[1].state.config, answer_max_bytes=2500)
    assert answered() == [b"a" * 1000, b"b" * 1000]


def _live(manager: ReplicaManager, *broker_ids: int, epochs: dict[int, int] | None = None) -> None:
    epochs = {**EPOCHS, **(epochs or {})}
    manager.update_metadata(
        UpdateMetadataRequest(
            controller_id=9,
            controller_epoch=1,
            live_brokers=[LiveBroker(broker_id=b, endpoints=[], broker_epoch=epochs[b]) for b in broker_ids],
        ),
        EPOCHS[manager.state.broker_id],
    )


async def test_a_follower_caught_up_before_its_broker_was_known_live_rejoins_the_isr(
    brokers: Brokers,
) -> None:
    """Found by the simulation (seed 7): a restarted broker caught up before the leader's
    metadata listed it live, so no expansion was proposed, and its later fetches no longer
    named the partition. The UpdateMetadata that brings it live must propose it."""
    _live(brokers[1], 1, 2)
    brokers.lead(1, 0, [1, 2])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    brokers.replicate(2, 1)
    brokers.replicate(2, 1)
    brokers.replicate(3, 1)
    brokers.replicate(3, 1)
    assert brokers.proposals == [], "3 is not live yet for the leader"
    _live(brokers[1], 1, 2, 3)
    assert brokers.proposals == [(1, proposal((1, 2, 3), 0, 0))]


async def test_a_partition_whose_epoch_end_offsets_keep_failing_does_not_starve_the_others(
    brokers: Brokers,
) -> None:
    """Found by the simulation (seed 7): a follower left with a stale leader for one partition
    (its StopReplica lost to a partition) asked that leader for the partition's epoch end
    offsets for ever, and never fetched its other partitions from the same leader."""
    other = TopicPartition("u", 0)
    brokers.lead(1, 0, [1, 2, 3])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    brokers.replicate(2, 1)
    # Broker 2 wrongly believes it follows 1 for `u-0` at an epoch 1 no longer leads.
    stale = dataclasses.replace(
        order(1, 5, [1, 2, 3]),
        partition_states=[
            dataclasses.replace(order(1, 5, [1, 2, 3]).partition_states[0], topic="u", partition=0)
        ],
    )
    # It wrote at epoch 4 once, so it must truncate by epoch before fetching `u-0`.
    brokers[2].state.logs.get_or_create(other, {}).append_as_leader(
        records.build_batch([(None, b"x")], timestamp=1), 4
    )
    brokers[2].become_leader_or_follower(stale, -1)
    brokers[1].leader_path.append_records(produce([b"b"], acks=1))
    brokers.replicate(2, 1)  # epoch end offsets: u-0 is answered with an error
    plan = brokers[2].follower_path.plan_fetch(1)
    assert plan is not None and plan.fetch_request is not None, "the others are fetched next"
    brokers.replicate(2, 1)
    brokers.replicate(2, 1)
    assert values(brokers[2]) == [b"a", b"b"]


async def test_a_restarted_follower_joins_the_isr_only_on_its_own_fetches(brokers: Brokers) -> None:
    """KIP-903: broker 3 caught up, then restarted (broker epoch 300 -> 301) having lost the
    unflushed tail of its log. What its previous incarnation fetched does not let it in; its
    new incarnation's fetches do, once they reach the high watermark; and a fetch still
    coming from the previous incarnation is refused without changing anything."""
    _live(brokers[1], 1, 2)
    brokers.lead(1, 0, [1, 2])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    for follower in (2, 2, 3, 3):
        brokers.replicate(follower, 1)
    assert partition(brokers[1]).followers[3].log_end_offset == 1
    assert brokers.proposals == [], "3 is not live yet for the leader"
    _live(brokers[1], 1, 2, 3, epochs={3: 301})
    assert brokers.proposals == [], "proposed on its previous incarnation's fetches"
    read = brokers[1].leader_path.read
    assert read(fetch(0, replica=3, replica_epoch=301), wait=False).response.error_code == ErrorCode.NONE
    assert partition(brokers[1]).followers[3].log_end_offset == 0
    assert brokers.proposals == [], "behind the high watermark"
    stale = read(fetch(1, replica=3, replica_epoch=300), wait=False).response
    assert stale.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partition(brokers[1]).followers[3].log_end_offset == 0
    assert brokers.proposals == []
    read(fetch(1, replica=3, replica_epoch=301), wait=False)
    assert brokers.proposals == [(1, PendingIsr((1, 2, 3), 0, 0, (-1, 200, 301)))]


async def test_a_follower_shrunk_out_for_not_fetching_is_not_proposed_straight_back(brokers: Brokers) -> None:
    """Found by the simulation's power-loss fault: broker 3 stopped fetching (it died; its
    ZooKeeper session had not yet expired), holding the high watermark at its log end. Once
    shrunk out, the leader proposed it straight back, on the ground that it reached the
    high watermark it had itself held back, and did so again at every shrink until its
    session expired. A follower comes back on a fetch, or at the leader's log end."""
    read = brokers[1].leader_path.read
    brokers.lead(1, 0, [1, 3])
    brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    read(fetch(0, replica=3, replica_epoch=300), wait=False)
    read(fetch(1, replica=3, replica_epoch=300), wait=False)  # 3's last fetch: the log end then
    brokers.clock.advance(20)
    read(fetch(0, replica=2, replica_epoch=200), wait=False)
    brokers[1].leader_path.append_records(produce([b"b"], acks=1))
    read(fetch(1, replica=2, replica_epoch=200), wait=False)  # caught up with the end it saw last
    assert brokers.proposals == [(1, proposal((1, 3, 2), 0, 0))]
    joined = AlterPartitionResult(
        partition_index=0, leader_id=1, leader_epoch=0, isr=[1, 3, 2], partition_epoch=1
    )
    brokers[1].leader_path.isr_change_answered(TP, brokers.proposals[0][1], joined)
    brokers.clock.advance(11)
    brokers[1].leader_path.maybe_shrink_isr()
    assert brokers.proposals[1:] == [(1, proposal((1, 2), 0, 1))], "3 has not fetched for 31 s"
    shrunk = AlterPartitionResult(
        partition_index=0, leader_id=1, leader_epoch=0, isr=[1, 2], partition_epoch=2
    )
    brokers[1].leader_path.isr_change_answered(TP, brokers.proposals[1][1], shrunk)
    assert partition(brokers[1]).high_watermark == 1, "2 is at offset 1 too"
    assert brokers.proposals[2:] == [], "3 proposed back without fetching"


async def test_a_produce_that_sets_off_a_flush_waits_for_it(brokers: Brokers) -> None:
    brokers[1].state.topic_configs["t"] = {"flush.messages": "1"}
    brokers.lead(1, 0, [1])
    outcome = brokers[1].leader_path.append_records(produce([b"a"], acks=1))
    flushed = outcome.flushing[TP]
    assert not flushed.done(), "the fsync runs on the flusher's thread, after the append"
    logs = brokers[1].state.logs
    assert isinstance(logs, LogManager)
    await logs.flushed()
    assert flushed.result() == ErrorCode.NONE
