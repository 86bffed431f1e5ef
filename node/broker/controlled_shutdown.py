"""The broker's side of controlled shutdown (spec §7.3, Kafka's KafkaServer.controlledShutdown).

On SIGTERM, before anything stops, the broker asks the active controller to move its leaders
away: up to `controlled.shutdown.max.retries` attempts, each to the controller this broker
knows at that moment (it watches `/controller`), `controlled.shutdown.retry.backoff.ms`
apart. An attempt succeeds when the answer is NONE and lists no partition still led here.
After the last failure the broker stops anyway, and says so.

Every attempt and every backoff fits in a deadline that the caller derives from
`shutdown.timeout.ms`, so that the whole stop stays bounded: an attempt that would outlive
the deadline is cut short, and a backoff that would pass it ends the attempts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable

from actors.base.clock import Clock, SystemClock
from actors.base.retry import Retry
from node.broker.config import BrokerConfig
from wire.api import ControlledShutdownRequest, ControlledShutdownResponse
from wire.errors import ErrorCode, WireError
from wire.retry import Backoff

log = logging.getLogger(__name__)

# Sends the request to the active controller within the timeout (seconds); raises WireError
# when there is none or it cannot be reached.
SendToController = Callable[[ControlledShutdownRequest, float], Awaitable[ControlledShutdownResponse]]


@dataclasses.dataclass(frozen=True)
class ControlledShutdownConfig:
    enable: bool = True
    max_retries: int = 3
    retry_backoff_s: float = 5.0
    request_timeout_s: float = 30.0

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> ControlledShutdownConfig:
        return cls(
            enable=config.get_bool("controlled.shutdown.enable"),
            max_retries=config.get_int("controlled.shutdown.max.retries"),
            retry_backoff_s=config.get_int("controlled.shutdown.retry.backoff.ms") / 1000,
            request_timeout_s=config.get_int("request.timeout.ms") / 1000,
        )


async def controlled_shutdown(
    broker_id: int,
    broker_epoch: Callable[[], int],
    send: SendToController,
    config: ControlledShutdownConfig,
    deadline: float,
    *,
    clock: Clock | None = None,
) -> bool:
    """Ask until the controller has moved every leader away; True on success. `deadline`
    is on `clock` (the system's monotonic clock by default). The request is built per
    attempt with the broker epoch read then, as Kafka's does: a session expiry between
    attempts re-registers the broker with a new epoch, and the old one would be refused as
    stale."""
    if not config.enable:
        return False
    clock = clock or SystemClock()
    started = clock.monotonic()
    # One fixed pause between attempts (controlled.shutdown.retry.backoff.ms), none past the deadline.
    pause = Backoff(config.retry_backoff_s, config.retry_backoff_s, multiplier=1, jitter=0)
    retry = Retry(clock, pause, timeout_s=deadline - started)
    for attempt in range(1, config.max_retries + 1):
        left = retry.remaining_s()
        if not left:
            break
        request = ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch())
        try:
            timeout = min(config.request_timeout_s, left)
            answer = await asyncio.wait_for(send(request, timeout), timeout)
        except TimeoutError:
            log.warning("controlled shutdown attempt %d: no answer within %.1f s", attempt, timeout)
        except (WireError, OSError) as e:
            log.warning("controlled shutdown attempt %d failed: %s", attempt, e)
        else:
            if answer.error_code == ErrorCode.NONE and not answer.remaining_partitions:
                log.info(
                    "controlled shutdown of broker %d done in %.0f ms (attempt %d)",
                    broker_id,
                    (clock.monotonic() - started) * 1000,
                    attempt,
                )
                return True
            if answer.error_code != ErrorCode.NONE:
                log.warning(
                    "controlled shutdown attempt %d refused with error %d: %s",
                    attempt,
                    answer.error_code,
                    answer.error_message,
                )
            else:
                first = answer.remaining_partitions[0]
                log.warning(
                    "controlled shutdown attempt %d: %d partitions still led here, e.g. %s-%d",
                    attempt,
                    len(answer.remaining_partitions),
                    first.topic_name,
                    first.partition_index,
                )
        if attempt == config.max_retries or not await retry.pause():
            break
    log.warning("controlled shutdown of broker %d failed; proceeding to an unclean shutdown", broker_id)
    return False
