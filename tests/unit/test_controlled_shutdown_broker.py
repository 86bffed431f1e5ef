"""The broker's controlled-shutdown attempts (node/broker/controlled_shutdown.py) against a
scripted controller: success, retries, the attempt limit and the deadline."""

from __future__ import annotations

import time

import pytest

from node.broker.config import load_config
from node.broker.controlled_shutdown import ControlledShutdownConfig, controlled_shutdown
from node.config.properties import ConfigError
from wire.api import ControlledShutdownRequest, ControlledShutdownResponse, RemainingPartition
from wire.errors import ErrorCode, NetworkException

DONE = ControlledShutdownResponse()
MOVED = ControlledShutdownResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
LEFT = ControlledShutdownResponse(
    remaining_partitions=[RemainingPartition(topic_name="t", partition_index=0)]
)


class Controller:
    def __init__(self, *answers: ControlledShutdownResponse | Exception) -> None:
        self._answers = list(answers)
        self.requests: list[tuple[ControlledShutdownRequest, float]] = []

    async def __call__(
        self, request: ControlledShutdownRequest, timeout: float
    ) -> ControlledShutdownResponse:
        self.requests.append((request, timeout))
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def config(**kwargs: object) -> ControlledShutdownConfig:
    return ControlledShutdownConfig(**{"retry_backoff_s": 0.001, **kwargs})  # type: ignore[arg-type]


async def test_done_at_the_first_answer_without_remaining_partitions() -> None:
    controller = Controller(DONE)
    assert await controlled_shutdown(3, lambda: 77, controller, config(), time.monotonic() + 10)
    ((request, _),) = controller.requests
    assert (request.broker_id, request.broker_epoch) == (3, 77)


async def test_a_moved_controller_a_lost_connection_and_partitions_left_are_retried() -> None:
    controller = Controller(MOVED, NetworkException("refused"), LEFT, DONE)
    assert await controlled_shutdown(3, lambda: 77, controller, config(max_retries=4), time.monotonic() + 10)
    assert len(controller.requests) == 4


async def test_each_attempt_carries_the_broker_epoch_of_that_moment() -> None:
    """After a session expiry the broker registers again with a new epoch."""
    epochs = iter([77, 90])
    controller = Controller(ControlledShutdownResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), DONE)
    assert await controlled_shutdown(3, lambda: next(epochs), controller, config(), time.monotonic() + 10)
    assert [request.broker_epoch for request, _ in controller.requests] == [77, 90]


async def test_it_gives_up_after_max_retries() -> None:
    controller = Controller(LEFT, LEFT, LEFT, DONE)
    assert not await controlled_shutdown(3, lambda: 77, controller, config(), time.monotonic() + 10)
    assert len(controller.requests) == 3


async def test_disabled_asks_nothing() -> None:
    controller = Controller()
    assert not await controlled_shutdown(
        3, lambda: 77, controller, config(enable=False), time.monotonic() + 10
    )
    assert controller.requests == []


async def test_the_deadline_bounds_each_request_and_ends_the_backoffs() -> None:
    controller = Controller(LEFT, DONE)
    deadline = time.monotonic() + 1.0
    assert not await controlled_shutdown(3, lambda: 77, controller, config(retry_backoff_s=5.0), deadline)
    ((_, timeout),) = controller.requests
    assert timeout <= 1.0, "the request may not outlive the deadline"
    assert time.monotonic() < deadline, "a backoff past the deadline is not slept"


def test_the_broker_configs_have_kafkas_names_and_defaults() -> None:
    defaults = ControlledShutdownConfig.from_broker_config(
        load_config({"broker.id": "1", "zookeeper.connect": "z"})
    )
    assert defaults == ControlledShutdownConfig(
        enable=True, max_retries=3, retry_backoff_s=5.0, request_timeout_s=30.0
    )
    custom = ControlledShutdownConfig.from_broker_config(
        load_config(
            {
                "broker.id": "1",
                "zookeeper.connect": "z",
                "controlled.shutdown.enable": "false",
                "controlled.shutdown.max.retries": "7",
                "controlled.shutdown.retry.backoff.ms": "250",
            }
        )
    )
    assert (custom.enable, custom.max_retries, custom.retry_backoff_s) == (False, 7, 0.25)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("controlled.shutdown.enable", "yes", "true or false"),
        ("controlled.shutdown.max.retries", "-1", "outside"),
        ("controlled.shutdown.retry.backoff.ms", "soon", "not an integer"),
    ],
)
def test_bad_values_name_their_key(key: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_config({"broker.id": "1", "zookeeper.connect": "z", key: value})
    assert caught.value.key == key
