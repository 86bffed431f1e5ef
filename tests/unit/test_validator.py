"""The leader's checks of a client's batches (node/broker/log/validator.py): a batch whose
records are not what its header says, or that a client may not write, is refused whole and
nothing of it is appended; whatever is accepted reads back as its header says."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.base.ports import TopicPartition
from actors.replica import leader_path
from node.broker.log.config import LogConfig
from node.broker.log.log import Log
from node.broker.log.validator import validate_as_leader
from node.metrics.names import topic_samples
from tests.unit.test_storage_faults import manager_with_log
from wire import records
from wire.api import (
    ProducePartitionData,
    ProduceRequest,
    ProduceTopicData,
    StopReplicaPartition,
    StopReplicaRequest,
)
from wire.errors import CorruptMessage, ErrorCode, InvalidRecord, UnsupportedCompressionType, WireError
from wire.refusals import RefusalLog

MAX = 1 << 20
# Offsets in the header: attributes at 21, last offset delta 23, max timestamp 35, count 57.
_ATTRIBUTES, _LAST_DELTA, _MAX_TIMESTAMP, _COUNT = 21, 23, 35, 57


def forge(batch: bytes, **fields: int) -> bytes:
    """`batch` with header fields rewritten and its CRC made right again, as a hostile
    client would send it."""
    out = bytearray(batch)
    layout = {
        "attributes": (_ATTRIBUTES, ">h"),
        "last_offset_delta": (_LAST_DELTA, ">i"),
        "max_timestamp": (_MAX_TIMESTAMP, ">q"),
        "records_count": (_COUNT, ">i"),
    }
    for name, value in fields.items():
        at, fmt = layout[name]
        struct.pack_into(fmt, out, at, value)
    return recrc(out)


def recrc(batch: bytes | bytearray) -> bytes:
    out = bytearray(batch)
    struct.pack_into(">I", out, 17, records.checksum(out[21:]))
    return bytes(out)


def with_body(batch: bytes, body: bytes) -> bytes:
    """`batch`'s header over another records section (lengths and CRC made right)."""
    out = bytearray(batch[: records.HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - records.LOG_OVERHEAD)
    return recrc(out)


GOOD = records.build_batch([(b"k", b"v1"), (None, b"v2"), (b"", None)], timestamp=1_700)


def test_a_well_formed_batch_passes() -> None:
    ((_, header),) = validate_as_leader(GOOD, MAX)
    assert header.records_count == 3


def test_a_header_claiming_more_records_than_the_batch_holds_is_refused() -> None:
    # What pushed a partition's offsets past 32 bits: 2^31 - 1 records claimed in 4 KB.
    forged = forge(GOOD, records_count=2**31 - 1, last_offset_delta=2**31 - 2)
    with pytest.raises(InvalidRecord, match="holds 3 records, its header says 2147483647"):
        validate_as_leader(forged, MAX)


def test_one_claimed_record_over_a_garbage_body_is_refused() -> None:
    forged = forge(with_body(GOOD, b"\xff" * 40), records_count=1, last_offset_delta=0)
    with pytest.raises(InvalidRecord):
        validate_as_leader(forged, MAX)


def test_records_out_of_offset_order_are_refused() -> None:
    single = records.build_batch([(None, b"a")], timestamp=5)
    body = bytearray(single[records.HEADER_SIZE :])
    body[3] = 2 * 7  # the offset delta varint (zigzag): 7 where 0 belongs
    with pytest.raises(InvalidRecord, match="offset delta 7"):
        validate_as_leader(with_body(single, bytes(body)), MAX)


def test_a_max_timestamp_other_than_the_records_largest_is_refused() -> None:
    with pytest.raises(InvalidRecord, match="max timestamp 0"):
        validate_as_leader(forge(GOOD, max_timestamp=0), MAX)


@pytest.mark.parametrize(
    ("attributes", "error"),
    [(1, CorruptMessage), (5, UnsupportedCompressionType), (0x20, InvalidRecord), (0x10, InvalidRecord)],
    ids=["gzip-claimed-not-gzip", "codec-5", "control", "transactional"],
)
def test_what_a_client_may_not_write_is_refused(attributes: int, error: type[WireError]) -> None:
    with pytest.raises(error):
        validate_as_leader(forge(GOOD, attributes=attributes), MAX)


def test_a_record_with_headers_passes() -> None:
    # One record with a header ("h" = b"x"), built by hand: Kafka's varint framing.
    record = bytes([0, 0, 0, 1 << 1, ord("k"), 1 << 1, ord("v"), 1 << 1, 1 << 1, ord("h"), 1 << 1, ord("x")])
    body = bytes([len(record) << 1]) + record
    batch = with_body(records.build_batch([(b"k", b"v")], timestamp=3), body)
    ((_, header),) = validate_as_leader(batch, MAX)
    assert [r.headers for r in records.records(batch)] == [(("h", b"x"),)]
    assert header.records_count == 1


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.binary(max_size=20) | st.none(), st.binary(max_size=40) | st.none()),
        min_size=1,
        max_size=5,
    ),
    st.data(),
)
def test_no_mutation_makes_the_validator_accept_what_does_not_read_back(
    pairs: list[tuple[bytes | None, bytes | None]], data: st.DataObject
) -> None:
    """Bytes of a good batch flipped, cut or added (the CRC then made right, so that the
    records are what is checked): refused with a Kafka error, or read back as the header says."""
    batch = bytearray(records.build_batch(pairs, timestamp=10))
    if data.draw(st.booleans()):  # a header that lies consistently, as the attack's did
        count = data.draw(st.integers(1, 2**31 - 1) | st.integers(1, 8))
        batch = bytearray(forge(bytes(batch), records_count=count, last_offset_delta=count - 1))
    if data.draw(st.booleans()):
        batch = bytearray(forge(bytes(batch), max_timestamp=data.draw(st.integers(-1, 20))))
    for _ in range(data.draw(st.integers(0, 4))):
        at = data.draw(st.integers(records.LOG_OVERHEAD, len(batch) - 1))
        match data.draw(st.sampled_from(["flip", "cut", "insert"])):
            case "flip":
                batch[at] = data.draw(st.integers(0, 255))
            case "cut":
                del batch[at]
            case "insert":
                batch.insert(at, data.draw(st.integers(0, 255)))
    if len(batch) >= records.HEADER_SIZE:
        struct.pack_into(">i", batch, 8, len(batch) - records.LOG_OVERHEAD)
        batch = bytearray(recrc(batch))
    try:
        headers = validate_as_leader(bytes(batch), MAX)
    except (CorruptMessage, InvalidRecord, UnsupportedCompressionType, WireError):
        return
    ((_, header),) = headers
    read = list(records.records(bytes(batch)))
    assert len(read) == header.records_count
    assert [r.offset for r in read] == list(range(header.base_offset, header.last_offset + 1))
    assert max(r.timestamp for r in read) == header.max_timestamp


def test_a_refused_append_writes_nothing(tmp_path: Path) -> None:
    log = Log(tmp_path / "t-0", TopicPartition("t", 0), LogConfig())
    log.append_as_leader(GOOD, leader_epoch=0)
    size = log.size
    with pytest.raises(InvalidRecord):
        log.append_as_leader(GOOD + forge(GOOD, max_timestamp=0), leader_epoch=0)
    assert (log.log_end_offset, log.size) == (3, size), "not even the good batch before it"


def test_a_produce_answers_per_partition_and_a_refused_one_fails_no_other(tmp_path: Path) -> None:
    manager, _, logs = manager_with_log(tmp_path, leader=1, partitions=2)
    request = ProduceRequest(
        acks=1,
        timeout_ms=100,
        topic_data=[
            ProduceTopicData(
                name="t",
                partition_data=[
                    ProducePartitionData(index=0, records=GOOD),
                    ProducePartitionData(
                        index=1, records=forge(GOOD, records_count=2**31 - 1, last_offset_delta=2**31 - 2)
                    ),
                ],
            )
        ],
    )
    answers = manager.leader_path.append_records(request).answers
    assert answers[TopicPartition("t", 0)].error_code == ErrorCode.NONE
    assert answers[TopicPartition("t", 1)].error_code == ErrorCode.INVALID_RECORD
    assert [logs.get(TopicPartition("t", p)).log_end_offset for p in (0, 1)] == [6, 3]  # type: ignore[union-attr]


def test_acks_other_than_minus_one_zero_or_one_append_nothing(tmp_path: Path) -> None:
    manager, _, logs = manager_with_log(tmp_path, leader=1, partitions=1)
    request = ProduceRequest(
        acks=2,
        topic_data=[ProduceTopicData(name="t", partition_data=[ProducePartitionData(index=0, records=GOOD)])],
    )
    answers = manager.leader_path.append_records(request).answers
    assert answers[TopicPartition("t", 0)].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert logs.get(TopicPartition("t", 0)).log_end_offset == 3  # type: ignore[union-attr]


def test_refused_produces_are_a_few_lines_not_one_per_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(leader_path, "_refusals", RefusalLog(leader_path.log))  # a fresh window
    manager, _, _ = manager_with_log(tmp_path, leader=1, partitions=1)
    bad = ProduceRequest(
        acks=1,
        topic_data=[
            ProduceTopicData(
                name="t", partition_data=[ProducePartitionData(index=0, records=forge(GOOD, max_timestamp=0))]
            )
        ],
    )
    with caplog.at_level(logging.WARNING, logger="actors.replica.leader_path"):
        for _ in range(50):
            manager.leader_path.append_records(bad)
    assert sum("refused a produce" in r.getMessage() for r in caplog.records) == 5


def test_per_topic_request_counts_are_kept_for_topics_hosted_here_only(tmp_path: Path) -> None:
    """A client naming made-up topics does not grow the per-topic metrics without end."""
    manager, _, _ = manager_with_log(tmp_path, leader=1, partitions=1)
    names = [f"made-up-{i}" for i in range(100)] + ["t"]
    request = ProduceRequest(
        acks=1,
        topic_data=[
            ProduceTopicData(name=name, partition_data=[ProducePartitionData(index=0, records=GOOD)])
            for name in names
        ],
    )
    answers = manager.leader_path.append_records(request).answers
    assert answers[TopicPartition("made-up-0", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    stats = manager.state.stats
    assert set(stats.produce_requests) == {"t"} and not stats.failed_produce_requests


def test_a_deleted_topics_series_go_and_the_all_topics_totals_keep_its_counts(tmp_path: Path) -> None:
    """Kafka's removeMetrics: once a topic's partitions are all deleted here, its per-topic
    series are gone (a broker that saw thousands of short-lived topics does not export them
    all for ever); the all-topics total, a counter, does not go down."""
    manager, _, _ = manager_with_log(tmp_path, leader=1, partitions=1)
    produce = ProduceRequest(
        acks=1,
        topic_data=[ProduceTopicData(name="t", partition_data=[ProducePartitionData(index=0, records=GOOD)])],
    )
    manager.leader_path.append_records(produce)
    stats = manager.state.stats
    assert stats.produce_requests["t"] == 1
    manager.stop_replicas(
        StopReplicaRequest(
            controller_id=1,
            controller_epoch=1,
            partitions=[StopReplicaPartition(topic="t", partition=0, leader_epoch=-2, delete_partition=True)],
        ),
        -1,
    )
    assert "t" not in stats.produce_requests and "t" not in stats.bytes_in
    samples = list(topic_samples(stats.produce_requests, stats.retired["produce_requests"]))
    assert samples == [({}, 1)], "no per-topic series; the all-topics total still 1"
