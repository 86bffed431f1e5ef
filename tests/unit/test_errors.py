from __future__ import annotations

from wire.errors import ErrorCode, NotController, StaleControllerEpoch, UnknownServerError, for_code


def test_kafka_numbers() -> None:
    assert ErrorCode.STALE_CONTROLLER_EPOCH == 11
    assert ErrorCode.NOT_CONTROLLER == 41
    assert ErrorCode.FENCED_LEADER_EPOCH == 74
    assert ErrorCode.STALE_BROKER_EPOCH == 77


def test_for_code_builds_the_matching_exception() -> None:
    error = for_code(41, "moved")
    assert isinstance(error, NotController)
    assert error.message == "moved"
    assert isinstance(for_code(11), StaleControllerEpoch)


def test_for_code_of_a_code_without_its_own_class_keeps_the_code() -> None:
    error = for_code(ErrorCode.TOPIC_ALREADY_EXISTS, "exists")
    assert error.code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_for_code_of_an_unknown_number() -> None:
    error = for_code(12345, "what")
    assert isinstance(error, UnknownServerError)
    assert "12345" in error.message
