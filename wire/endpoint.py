"""The one endpoint type: where a broker listens, as registered in ZooKeeper
(`PLAINTEXT://host:port`), carried in UpdateMetadata and DescribeCluster, followed by
replica fetchers, and dialled by every client. A bootstrap address given as `host:port`
is an endpoint of the client's security protocol (PLAINTEXT unless it says otherwise).
"""

from __future__ import annotations

import dataclasses
import re

from wire.schema import Struct

_LISTENER = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


@dataclasses.dataclass(frozen=True)
class Endpoint(Struct):
    listener: str
    security_protocol: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.listener}://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def plaintext(cls, host: str, port: int) -> Endpoint:
        return cls("PLAINTEXT", "PLAINTEXT", host, port)

    @classmethod
    def parse_listener(cls, text: str, protocols: dict[str, str]) -> Endpoint:
        """`NAME://host:port` (host may be empty: every interface); the protocol comes from
        `listener.security.protocol.map`, else the listener's own name. Raises ValueError."""
        match = _LISTENER.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not NAME://host:port")
        port = int(match["port"])
        if port > 65535:
            raise ValueError(f"port {port} is outside 0..65535")
        name = match["name"].upper()
        return cls(name, protocols.get(name, name), match["host"].strip("[]"), port)


def parse_bootstrap(bootstrap: str, security_protocol: str = "PLAINTEXT") -> list[Endpoint]:
    """`host:port[,host:port...]`, as Kafka's `bootstrap.servers`, each an endpoint of the
    client's `security.protocol`. Raises ValueError."""
    servers = []
    for item in filter(None, (part.strip() for part in bootstrap.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        host = host.strip("[]") or "127.0.0.1"
        servers.append(Endpoint(security_protocol, security_protocol, host, int(port)))
    if not servers:
        raise ValueError("no bootstrap server given")
    return servers
