"""ControllerContext: what the active controller holds in memory (spec §4.3).

It grows with each capability (brokers, topics, partition states); `reset` puts it back to
the state of a broker that is not the controller.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass
class ControllerContext:
    epoch: int = 0
    # The data version of /controller_epoch this controller wrote; fences all its writes.
    epoch_zk_version: int = 0
    live_broker_epochs: dict[int, int] = dataclasses.field(default_factory=dict)

    def reset(self) -> None:
        self.epoch = 0
        self.epoch_zk_version = 0
        self.live_broker_epochs.clear()
