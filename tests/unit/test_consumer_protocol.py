"""The consumer protocol's bytes, read back as Kafka's clients write them: kafka-python's
encoders are the independent writer."""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from actors.group.coordinator import subscribed_topics
from wire.consumer_protocol import (
    ConsumerAssignment,
    ConsumerProtocolError,
    decode_assignment,
    subscription_topics,
)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_an_assignment_of_every_version_reads_back(version: int) -> None:
    data = ConsumerProtocolAssignment(version, [("orders", [0, 2]), ("audit", [1])], b"sticky").encode()
    assert decode_assignment(data) == ConsumerAssignment(
        version=version, partitions=(("orders", 0), ("orders", 2), ("audit", 1)), user_data=b"sticky"
    )


def test_an_empty_assignment() -> None:
    assert decode_assignment(b"").partitions == ()
    assert decode_assignment(ConsumerProtocolAssignment(0, [], b"").encode()).partitions == ()


def test_an_assignment_without_user_data_or_with_null_user_data() -> None:
    written = ConsumerProtocolAssignment(0, [("t", [5])], b"").encode()
    without = written[:-4]
    assert decode_assignment(without) == ConsumerAssignment(0, (("t", 5),), None)
    null = without + b"\xff\xff\xff\xff"
    assert decode_assignment(null) == ConsumerAssignment(0, (("t", 5),), None)


@pytest.mark.parametrize("cut", [1, 3, 7, 10, 14])
def test_a_truncated_assignment_is_an_error_naming_the_field(cut: int) -> None:
    data = ConsumerProtocolAssignment(0, [("topic", [0, 1])], b"").encode()
    with pytest.raises(ConsumerProtocolError, match=r"^(version|topic|partition).* only \d+ (bytes )?left$"):
        decode_assignment(data[:cut])


def test_a_count_larger_than_the_bytes_is_refused_before_reading() -> None:
    with pytest.raises(ConsumerProtocolError, match="topic count of 2147483647"):
        decode_assignment(b"\x00\x00\x7f\xff\xff\xff")


def test_a_topic_that_is_not_utf8() -> None:
    with pytest.raises(ConsumerProtocolError, match="UTF-8"):
        decode_assignment(b"\x00\x00\x00\x00\x00\x01\x00\x01\xff\x00\x00\x00\x00")


def test_subscription_topics_of_any_version() -> None:
    for version in (0, 1, 3):
        data = ConsumerProtocolSubscription(version, ["a", "b"], b"").encode()
        assert subscription_topics(data) == ["a", "b"]
        assert subscribed_topics(data) == {"a", "b"}
    assert subscribed_topics(b"\x00") == set(), "the coordinator reads a malformed one as none"
