"""Ports: the interfaces through which actors reach ZooKeeper and other brokers.

`ClusterStore` is the controller's view of ZooKeeper, phrased in Kafka's terms
(KafkaZkClient's operations) rather than in znodes, so the controller reads like
KafkaController. `node.zk.store.ZkClusterStore` implements it over aiozk; the unit tests'
in-memory fake implements it too, and both pass the contract suite in
`tests/contract/test_cluster_store.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol


class ControllerMovedError(Exception):
    """A write fenced by `/controller_epoch`'s version found it moved: another controller
    was elected since. The caller must resign (spec §2.4)."""


class BrokerIdTakenError(Exception):
    """`/brokers/ids/<id>` belongs to another live session."""


@dataclasses.dataclass(frozen=True)
class ControllerEpoch:
    """The controller epoch and the ZooKeeper data version of `/controller_epoch` that
    holds it; the version fences every later write of this controller."""

    epoch: int
    zk_version: int


@dataclasses.dataclass(frozen=True)
class EndPoint:
    listener: str
    security_protocol: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"


@dataclasses.dataclass(frozen=True)
class BrokerInfo:
    """A broker's registration: what `/brokers/ids/<id>` holds."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None


@dataclasses.dataclass(frozen=True)
class RegisteredBroker:
    info: BrokerInfo
    # The czxid of the broker's znode: it changes with every registration.
    broker_epoch: int


class ControllerWatcher(Protocol):
    """Told about `/controller` changes. Implementations only enqueue events."""

    def controller_changed(self) -> None: ...

    def controller_deleted(self) -> None: ...


class SessionWatcher(Protocol):
    """Told when the ZooKeeper session expired and a new one replaced it (spec §2.5)."""

    async def before_new_session(self) -> None:
        """Called first; returns once everything queued before it is drained."""

    def after_new_session(self) -> None: ...


@dataclasses.dataclass(frozen=True)
class ControllerView:
    controller_id: int | None
    epoch: ControllerEpoch | None


class ClusterStore(Protocol):
    async def controller_id(self) -> int | None:
        """The active controller's id, or None; re-arms the `/controller` watch."""
        ...

    async def controller_epoch(self) -> ControllerEpoch | None: ...

    async def read_controller(self) -> ControllerView:
        """Who holds `/controller` and the epoch, in one round trip, re-arming the watch.
        `/controller` is read before `/controller_epoch`, so the epoch is never older than
        the controller named; a newer one means a newer controller, which the watch reports."""
        ...

    async def register_controller_and_increment_epoch(
        self, broker_id: int, seen: ControllerEpoch | None = None
    ) -> ControllerEpoch:
        """Create ephemeral `/controller` and bump `/controller_epoch` in one multi-op
        (spec §2.2 step 2), conditional on the epoch's version: `seen` if the caller has just
        read it, else read now. Raises ControllerMovedError if another broker won."""
        ...

    async def delete_controller(self, epoch_zk_version: int) -> None:
        """Delete `/controller`, fenced by the epoch version; raises ControllerMovedError."""
        ...

    async def register_broker(self, info: BrokerInfo) -> int:
        """Checked ephemeral create of `/brokers/ids/<id>`; returns the broker epoch.
        Raises BrokerIdTakenError if another live session holds the id."""
        ...

    async def registered_brokers(self) -> list[RegisteredBroker]: ...

    def watch_controller(self, watcher: ControllerWatcher) -> None: ...

    def watch_session(self, watcher: SessionWatcher) -> None: ...
