"""Kafka's `state.change.logger`: every partition and replica state change, on the controller
that makes it and on each broker that applies it, in the words Kafka's StateChangeLogger uses
(`[Controller id=1 epoch=3] Changed partition t-0 from OfflinePartition to OnlinePartition
with state LeaderAndIsr(...)`, `[Broker id=2] Handling LeaderAndIsr request ...`).

Where its records go is the process's business (node/broker/logs.py routes them to
`state-change.log`); this module only names the logger and words the lines. A change of
100k partitions is 100k lines: formatting each as a record of its own costs about 20 µs, so a
batch of lines is one record, one line per change, which the broker's formatters write as so
many lines, each with its own time, level and logger.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from actors.base.loop_slices import turn_if_held
from actors.base.ports import LeaderAndIsr

STATE_CHANGE_LOGGER = "state.change.logger"

_logger = logging.getLogger(STATE_CHANGE_LOGGER)

# Lines per record: a failover's state change stays a few records, each of bounded size.
_LINES_PER_RECORD = 10_000
# Lines per record when logged in slices (`log_in_slices`): each record a few milliseconds
# to format and write, the loop turning between two.
_LINES_PER_SLICE = 1_000


def describe_leader_and_isr(state: LeaderAndIsr) -> str:
    """A partition's state as Kafka's LeaderAndIsr prints itself."""
    isr = ",".join(map(str, state.isr))
    return (
        f"LeaderAndIsr(leader={state.leader}, leaderEpoch={state.leader_epoch}, isr={isr}, "
        f"partitionEpoch={state.partition_epoch})"
    )


class StateChangeLogger:
    """One process's view of the state-change log: a prefix naming who changes the state
    (the controller and its epoch, or a broker), then one line per change."""

    def __init__(self, prefix: Callable[[], str]) -> None:
        self._prefix = prefix

    @classmethod
    def for_controller(cls, broker_id: int, epoch: Callable[[], int]) -> StateChangeLogger:
        """The controller's: the epoch is read at each use, as the controller's changes."""
        return cls(lambda: f"[Controller id={broker_id} epoch={epoch()}] ")

    @classmethod
    def for_broker(cls, broker_id: int) -> StateChangeLogger:
        prefix = f"[Broker id={broker_id}] "
        return cls(lambda: prefix)

    @staticmethod
    def enabled(level: int = logging.INFO) -> bool:
        return _logger.isEnabledFor(level)

    def log(self, level: int, lines: Iterable[str]) -> None:
        """Log each of `lines` (a generator is only run when the level is enabled)."""
        if not _logger.isEnabledFor(level):
            return
        prefix = self._prefix()
        batch = [prefix + line for line in lines]
        for start in range(0, len(batch), _LINES_PER_RECORD):
            _logger.log(level, "\n".join(batch[start : start + _LINES_PER_RECORD]))

    async def log_in_slices(self, level: int, lines: Iterable[str]) -> None:
        """`log`, in records of a thousand lines between which the loop turns if it has been
        held (actors/base/loop_slices.py): a controlled shutdown or a broker failure at 200k
        partitions logs 70k changes at once, half a second or more to format and write."""
        if not _logger.isEnabledFor(level):
            return
        prefix = self._prefix()
        batch: list[str] = []
        for line in lines:
            batch.append(prefix + line)
            if len(batch) == _LINES_PER_SLICE:
                _logger.log(level, "\n".join(batch))
                batch = []
                await turn_if_held()
        if batch:
            _logger.log(level, "\n".join(batch))

    def info(self, line: str) -> None:
        self.log(logging.INFO, (line,))

    def warning(self, line: str) -> None:
        self.log(logging.WARNING, (line,))
