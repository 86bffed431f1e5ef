"""Kafka's znode contents, encoded and decoded exactly as Kafka writes them (spec §1)."""

from __future__ import annotations

import base64
import uuid

import orjson

from actors.ports import BrokerInfo, EndPoint


class ZNodeDataError(ValueError):
    """A znode holds something Kafka would not have written there."""


def _json(data: bytes | None, what: str) -> dict[str, object]:
    try:
        value = orjson.loads(data or b"")
    except orjson.JSONDecodeError as e:
        raise ZNodeDataError(f"{what}: not JSON: {e}") from e
    if not isinstance(value, dict):
        raise ZNodeDataError(f"{what}: not a JSON object")
    return value


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    # timestamp is a string of epoch ms, as Kafka writes it.
    return orjson.dumps(
        {"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms), "kraftControllerEpoch": -1}
    )


def decode_controller(data: bytes | None) -> int:
    broker_id = _json(data, "/controller").get("brokerid")
    if type(broker_id) is not int:
        raise ZNodeDataError("/controller: brokerid is not an int")
    return broker_id


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise ZNodeDataError(f"/controller_epoch: not an int: {data!r}") from e


def encode_broker(info: BrokerInfo, timestamp_ms: int) -> bytes:
    """Registration JSON version 5 (IBP >= 2.7-IV0)."""
    plaintext = next((e for e in info.endpoints if e.security_protocol == "PLAINTEXT"), None)
    value: dict[str, object] = {
        "version": 5,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "jmx_port": -1,
        "timestamp": str(timestamp_ms),
        "endpoints": [str(e) for e in info.endpoints],
        "listener_security_protocol_map": {e.listener: e.security_protocol for e in info.endpoints},
        "features": {},
    }
    if info.rack is not None:
        value["rack"] = info.rack
    return orjson.dumps(value)


def decode_broker(broker_id: int, data: bytes | None) -> BrokerInfo:
    value = _json(data, f"/brokers/ids/{broker_id}")
    protocols = value.get("listener_security_protocol_map") or {}
    endpoints = []
    raw_endpoints = value.get("endpoints")
    if not isinstance(raw_endpoints, list) or not isinstance(protocols, dict):
        raise ZNodeDataError(f"/brokers/ids/{broker_id}: bad endpoints")
    for raw in raw_endpoints:
        name, sep, address = str(raw).partition("://")
        host, _, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise ZNodeDataError(f"/brokers/ids/{broker_id}: bad endpoint {raw!r}")
        endpoints.append(EndPoint(name, str(protocols.get(name, name)), host.strip("[]"), int(port)))
    rack = value.get("rack")
    return BrokerInfo(broker_id, tuple(endpoints), rack if isinstance(rack, str) else None)


def new_cluster_id() -> str:
    """A random 22-character URL-safe base64 UUID, like Kafka's Uuid.randomUuid()."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def encode_cluster_id(cluster_id: str) -> bytes:
    # "version" is a string here, unlike every other Kafka znode.
    return orjson.dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    cluster_id = _json(data, "/cluster/id").get("id")
    if not isinstance(cluster_id, str):
        raise ZNodeDataError("/cluster/id: id is not a string")
    return cluster_id
