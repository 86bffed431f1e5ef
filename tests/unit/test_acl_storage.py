"""ACLs as Kafka stores them in ZooKeeper (node/zk/data.py), and who may ask the planner
to execute a plan (node/planner/service.py)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from actors.security.acl import (
    AclEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from actors.security.authorizer import AclAuthorizer, AuthorizerConfig
from node.cluster.state import ClusterState
from node.cluster.zookeeper import EmbeddedZooKeeper
from node.planner.service import PlannerService
from node.zk import data
from node.zk.acl_store import resource_path
from wire.api import API_SPECS, ApiKey
from wire.api.planner import CancelPlanRequest, PlannerStatusRequest, PlanReassignmentRequest
from wire.context import RequestContext
from wire.envelope import ParsedRequest, RequestHeader
from wire.errors import ClusterAuthorizationFailed

READ = AclEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
DENY = AclEntry("User:bob", "10.0.0.9", AclOperation.CLUSTER_ACTION, AclPermissionType.DENY)


def test_acl_json_is_kafkas() -> None:
    encoded = data.encode_acls({READ, DENY})
    assert orjson.loads(encoded) == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
            {
                "principal": "User:bob",
                "permissionType": "Deny",
                "operation": "ClusterAction",
                "host": "10.0.0.9",
            },
        ],
    }
    assert data.decode_acls("/kafka-acl/Topic/t", encoded) == {READ, DENY}
    # As Kafka's own tools write it: spaces, key order, and an empty znode.
    kafkas = (
        b'{"version": 1, "acls": [ { "host":"*", "permissionType": "Allow",'
        b'"operation": "Read","principal": "User:alice"}]}'
    )
    assert data.decode_acls("/kafka-acl/Topic/t", kafkas) == {READ}
    assert data.decode_acls("/kafka-acl/Topic/t", b"") == frozenset()


@pytest.mark.parametrize(
    "bad",
    [
        b'{"version": 2, "acls": []}',
        b'{"version": 1, "acls": [{"principal": "alice", "permissionType": "Allow", "operation": "Read",'
        b' "host": "*"}]}',
        b'{"version": 1, "acls": [{"principal": "User:a", "permissionType": "Maybe", "operation": "Read",'
        b' "host": "*"}]}',
        b'{"version": 1, "acls": [{"principal": "User:a"}]}',
        b"[1]",
    ],
)
def test_unreadable_acl_znodes_are_refused(bad: bytes) -> None:
    with pytest.raises(data.ZNodeDataError, match="/kafka-acl/Topic/t"):
        data.decode_acls("/kafka-acl/Topic/t", bad)


def test_paths_and_change_notifications_are_kafkas() -> None:
    literal = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx")
    prefixed = ResourcePattern(ResourceType.TOPIC, "pay", PatternType.PREFIXED)
    assert resource_path(literal) == "/kafka-acl/TransactionalId/tx"
    assert resource_path(prefixed) == "/kafka-acl-extended/prefixed/Topic/pay"
    assert data.encode_acl_change(literal) == b"TRANSACTIONAL_ID:tx"
    assert orjson.loads(data.encode_acl_change(prefixed)) == {
        "version": 1,
        "resourceType": "TOPIC",
        "name": "pay",
        "patternType": "PREFIXED",
    }
    for pattern in (literal, prefixed):
        is_prefixed = pattern.pattern_type is PatternType.PREFIXED
        assert data.decode_acl_change(data.encode_acl_change(pattern), prefixed=is_prefixed) == pattern
    # Older Kafka wrote the type as it names it in paths; a name may hold ':'.
    assert data.decode_acl_change(b"Topic:a:b", prefixed=False) == ResourcePattern(ResourceType.TOPIC, "a:b")
    with pytest.raises(data.ZNodeDataError):
        data.decode_acl_change(b"Nothing:x", prefixed=False)


def planner(authorizer: AclAuthorizer | None) -> PlannerService:
    return PlannerService(
        spark=None,  # type: ignore[arg-type]
        store=None,  # type: ignore[arg-type]
        snapshot_dir=Path("/nonexistent"),
        request_timeout_s=1,
        is_active=lambda: True,
        authorizer=authorizer,
    )


def parsed(body: object, host: str) -> ParsedRequest:
    key = body.API_KEY  # type: ignore[attr-defined]
    return ParsedRequest(
        RequestHeader(int(key), 0, 1, "test"),
        API_SPECS[key],
        body,
        RequestContext(client_host=host),  # type: ignore[arg-type]
    )


def test_the_planner_needs_cluster_alter_to_execute_and_describe_to_show() -> None:
    authorizer = AclAuthorizer(AuthorizerConfig())
    cluster = ResourcePattern(ResourceType.CLUSTER, "kafka-cluster")
    authorizer.set_acls(
        cluster,
        [
            AclEntry("User:ANONYMOUS", "10.0.0.1", AclOperation.DESCRIBE, AclPermissionType.ALLOW),
            AclEntry("User:ANONYMOUS", "10.0.0.2", AclOperation.ALTER, AclPermissionType.ALLOW),
        ],
    )
    service = planner(authorizer)
    execute, show = (
        PlanReassignmentRequest(goals=["rebalance"], execute=True),
        PlanReassignmentRequest(goals=["rebalance"]),
    )
    for body, allowed_from in (
        (execute, {"10.0.0.2"}),
        (CancelPlanRequest(), {"10.0.0.2"}),
        (show, {"10.0.0.1", "10.0.0.2"}),  # Alter implies Describe
        (PlannerStatusRequest(), {"10.0.0.1", "10.0.0.2"}),
    ):
        for host in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
            request = parsed(body, host)
            if host in allowed_from:
                service._authorize(request)
            else:
                with pytest.raises(ClusterAuthorizationFailed):
                    service._authorize(request)
    planner(None)._authorize(parsed(execute, "10.0.0.3"))  # no authorizer: everything passes
    assert ApiKey.PLAN_REASSIGNMENT in API_SPECS


def test_keel_cluster_binds_only_the_loopback_address(tmp_path: Path) -> None:
    """Without an authorizer the control APIs are open to whoever reaches the ports: the
    local cluster's brokers, planner and ZooKeeper listen on 127.0.0.1 only."""
    state = ClusterState(tmp_path, 1, [2181, 2888, 3888], [], {}, None)
    broker = state.cluster().new(1, port=9092)
    assert broker.settings["listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert state.cluster().new_planner().settings["listeners"].startswith("PLAINTEXT://127.0.0.1:")
    zookeeper = EmbeddedZooKeeper(tmp_path / "zk", ports=[2181, 2888, 3888])
    assert "clientPortAddress=127.0.0.1" in zookeeper._write_config(zookeeper.servers[0]).read_text()
