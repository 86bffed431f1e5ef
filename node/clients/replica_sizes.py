"""Replica sizes on disk, asked of each broker with DescribeLogDirs (35): how `keel reassign`
and the planner's executor tell how many bytes a reassignment still has to copy.
"""

from __future__ import annotations

from collections.abc import Mapping

from node.clients.admin import KeelAdminClient
from wire.api import DescribableLogDirTopic, MetadataResponse
from wire.errors import WireError
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

Partition = tuple[str, int]


class ReplicaSizeReader:
    """Replica sizes by DescribeLogDirs, one connection per broker, kept between looks."""

    def __init__(
        self, metadata: MetadataResponse, timeout: float, *, security: ClientSecurity = PLAINTEXT_CLIENT
    ) -> None:
        self._addresses = {b.broker_id: f"{b.host}:{b.port}" for b in metadata.brokers}
        self._timeout = timeout
        self._security = security
        self._clients: dict[int, KeelAdminClient] = {}
        self._stale: list[KeelAdminClient] = []

    @classmethod
    def at(
        cls, addresses: Mapping[int, str], timeout: float, *, security: ClientSecurity = PLAINTEXT_CLIENT
    ) -> ReplicaSizeReader:
        """A reader of brokers known by their addresses (from their registrations in ZooKeeper,
        as the web console knows them) rather than from a broker's metadata."""
        reader = cls(MetadataResponse(), timeout, security=security)
        reader._addresses = dict(addresses)
        return reader

    def update(self, metadata: MetadataResponse) -> None:
        """Brokers from newer metadata; a broker whose address changed gets a new connection."""
        for b in metadata.brokers:
            address = f"{b.host}:{b.port}"
            if self._addresses.get(b.broker_id) != address:
                self._addresses[b.broker_id] = address
                stale = self._clients.pop(b.broker_id, None)
                if stale is not None:
                    self._stale.append(stale)

    async def sizes(self, broker: int, partitions: list[Partition]) -> dict[Partition, int]:
        """Each partition's replica size on `broker`."""
        return {tp: size for tp, (size, _) in (await self.progress(broker, partitions)).items()}

    async def progress(self, broker: int, partitions: list[Partition]) -> dict[Partition, tuple[int, int]]:
        """Per partition on `broker`: (replica size, the bytes its adding replicas still lack
        as the leader counts them, or -1 where it leads no reassignment)."""
        address = self._addresses.get(broker)
        if address is None or not partitions:
            return {}
        client = self._clients.get(broker)
        if client is None:
            client = self._clients[broker] = KeelAdminClient(
                address, timeout=self._timeout, security=self._security
            )
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        try:
            response = await client.describe_log_dirs(
                [DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]
            )
        except WireError:  # a broker that does not answer counts as having nothing yet
            return {}
        return {
            (t.name, p.partition_index): (p.partition_size, p.reassignment_bytes_to_copy)
            for r in response.results
            for t in r.topics
            for p in t.partitions
        }

    async def close(self) -> None:
        for client in [*self._clients.values(), *self._stale]:
            await client.close()
        self._clients.clear()
        self._stale.clear()


async def bytes_to_copy(
    reader: ReplicaSizeReader, adding: Mapping[Partition, list[int]], leaders: Mapping[Partition, int]
) -> dict[Partition, int]:
    """Per partition in progress: the leader's figure (the bytes from each adding replica's
    fetch offset to its log end); while the leader has none yet, the leader's replica size
    minus each adding replica's."""
    wanted: dict[int, set[Partition]] = {}
    for tp, brokers in adding.items():
        for broker in [leaders.get(tp, -1), *brokers]:
            if broker >= 0:
                wanted.setdefault(broker, set()).add(tp)
    seen = {b: await reader.progress(b, sorted(tps)) for b, tps in wanted.items()}
    remaining = {}
    for tp, brokers in adding.items():
        leader_size, figure = seen.get(leaders.get(tp, -1), {}).get(tp, (0, -1))
        if figure >= 0:
            remaining[tp] = figure
        else:
            remaining[tp] = sum(max(0, leader_size - seen.get(b, {}).get(tp, (0, -1))[0]) for b in brokers)
    return remaining
