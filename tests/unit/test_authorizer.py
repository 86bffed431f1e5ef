"""Kafka's AclAuthorizer rules, one table row per rule (AclAuthorizerTest's cases)."""

from __future__ import annotations

import pytest

from actors.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclEntry,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    check_binding,
    parse_name,
)
from actors.security.authorizer import AclAuthorizer, AuthorizerConfig, parse_super_users
from wire.context import RequestContext

Op = AclOperation
T = ResourceType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED

ALICE = RequestContext(principal="User:alice", client_host="10.0.0.1")


def acl(
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    *,
    principal: str = "User:alice",
    host: str = "*",
    kind: ResourceType = T.TOPIC,
    pattern: PatternType = LITERAL,
) -> tuple[ResourcePattern, AclEntry]:
    return ResourcePattern(kind, name, pattern), AclEntry(principal, host, operation, permission)


def authorizer(*acls: tuple[ResourcePattern, AclEntry], **config: object) -> AclAuthorizer:
    result = AclAuthorizer(AuthorizerConfig(**config))  # type: ignore[arg-type]
    by_pattern: dict[ResourcePattern, list[AclEntry]] = {}
    for pattern, entry in acls:
        by_pattern.setdefault(pattern, []).append(entry)
    for pattern, entries in by_pattern.items():
        result.set_acls(pattern, entries)
    return result


# (description, ACLs, operation on topic "orders" by alice from 10.0.0.1, expected)
CASES = [
    ("no ACL at all: denied by default", [], Op.READ, False),
    ("a literal allow", [acl("orders", Op.READ)], Op.READ, True),
    ("an allow of another operation", [acl("orders", Op.WRITE)], Op.READ, False),
    ("an allow of All", [acl("orders", Op.ALL)], Op.CREATE, True),
    ("an allow for another topic only", [acl("payments", Op.READ)], Op.READ, False),
    ("an allow for another principal", [acl("orders", Op.READ, principal="User:bob")], Op.READ, False),
    ("an allow for everyone (User:*)", [acl("orders", Op.READ, principal="User:*")], Op.READ, True),
    ("an allow from this host", [acl("orders", Op.READ, host="10.0.0.1")], Op.READ, True),
    ("an allow from another host", [acl("orders", Op.READ, host="10.0.0.2")], Op.READ, False),
    ("a wildcard resource", [acl("*", Op.READ)], Op.READ, True),
    ("a prefix of the name", [acl("ord", Op.READ, pattern=PREFIXED)], Op.READ, True),
    ("the whole name as a prefix", [acl("orders", Op.READ, pattern=PREFIXED)], Op.READ, True),
    ("a prefix that does not match", [acl("pay", Op.READ, pattern=PREFIXED)], Op.READ, False),
    ("a prefix longer than the name", [acl("orders-eu", Op.READ, pattern=PREFIXED)], Op.READ, False),
    ("a literal that is only a prefix", [acl("ord", Op.READ)], Op.READ, False),
    ("another resource type", [acl("orders", Op.READ, kind=T.GROUP)], Op.READ, False),
    ("deny wins over allow", [acl("orders", Op.READ), acl("orders", Op.READ, DENY)], Op.READ, False),
    ("a deny of All wins", [acl("orders", Op.READ), acl("orders", Op.ALL, DENY)], Op.READ, False),
    (
        "a prefixed deny wins over a literal allow",
        [acl("orders", Op.READ), acl("o", Op.READ, DENY, pattern=PREFIXED)],
        Op.READ,
        False,
    ),
    ("a wildcard deny wins", [acl("orders", Op.READ), acl("*", Op.READ, DENY)], Op.READ, False),
    (
        "a deny for everyone wins",
        [acl("orders", Op.READ), acl("orders", Op.READ, DENY, principal="User:*")],
        Op.READ,
        False,
    ),
    (
        "a deny from another host does not apply",
        [acl("orders", Op.READ), acl("orders", Op.READ, DENY, host="10.0.0.9")],
        Op.READ,
        True,
    ),
    (
        "a deny of another operation does not apply",
        [acl("orders", Op.READ), acl("orders", Op.WRITE, DENY)],
        Op.READ,
        True,
    ),
    (
        "a deny of Read does not deny Describe",
        [acl("orders", Op.DESCRIBE), acl("orders", Op.READ, DENY)],
        Op.DESCRIBE,
        True,
    ),
    ("only a deny: denied", [acl("orders", Op.WRITE, DENY)], Op.READ, False),
    ("Read implies Describe", [acl("orders", Op.READ)], Op.DESCRIBE, True),
    ("Write implies Describe", [acl("orders", Op.WRITE)], Op.DESCRIBE, True),
    ("Delete implies Describe", [acl("orders", Op.DELETE)], Op.DESCRIBE, True),
    ("Alter implies Describe", [acl("orders", Op.ALTER)], Op.DESCRIBE, True),
    ("Create does not imply Describe", [acl("orders", Op.CREATE)], Op.DESCRIBE, False),
    ("AlterConfigs implies DescribeConfigs", [acl("orders", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, True),
    ("Describe does not imply Read", [acl("orders", Op.DESCRIBE)], Op.READ, False),
    (
        "DescribeConfigs does not imply AlterConfigs",
        [acl("orders", Op.DESCRIBE_CONFIGS)],
        Op.ALTER_CONFIGS,
        False,
    ),
    (
        "a denied Write does not stop an implied Describe",
        [acl("orders", Op.READ), acl("orders", Op.WRITE, DENY)],
        Op.DESCRIBE,
        True,
    ),
]


@pytest.mark.parametrize(("acls", "operation", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_topic_rules(
    acls: list[tuple[ResourcePattern, AclEntry]], operation: AclOperation, expected: bool
) -> None:
    assert authorizer(*acls).authorize(ALICE, operation, T.TOPIC, "orders") is expected


def test_super_users_may_do_anything_even_when_denied() -> None:
    auth = authorizer(
        acl("orders", Op.ALL, DENY, principal="User:*"),
        super_users=parse_super_users("User:admin; User:broker"),
    )
    broker = RequestContext(principal="User:broker", client_host="10.0.0.3")
    assert auth.authorize(broker, Op.WRITE, T.TOPIC, "orders")
    assert auth.authorize(broker, Op.CLUSTER_ACTION, T.CLUSTER, CLUSTER_NAME)
    assert not auth.authorize(ALICE, Op.WRITE, T.TOPIC, "orders")


@pytest.mark.parametrize(
    ("acls", "expected"),
    [
        ([], True),
        ([acl("payments", Op.READ)], True),  # ACLs on other resources do not count
        ([acl("orders", Op.WRITE, principal="User:bob")], False),  # any ACL on it does
        ([acl("o", Op.WRITE, principal="User:bob", pattern=PREFIXED)], False),
    ],
)
def test_allow_everyone_if_no_acl_found(acls: list[tuple[ResourcePattern, AclEntry]], expected: bool) -> None:
    auth = authorizer(*acls, allow_everyone_if_no_acl_found=True)
    assert auth.authorize(ALICE, Op.READ, T.TOPIC, "orders") is expected


def test_cluster_action_for_anonymous_from_one_host_only() -> None:
    auth = authorizer(
        acl(CLUSTER_NAME, Op.CLUSTER_ACTION, principal="User:ANONYMOUS", host="127.0.0.1", kind=T.CLUSTER)
    )
    local = RequestContext(client_host="127.0.0.1")
    other = RequestContext(client_host="127.0.0.2")
    assert auth.authorize(local, Op.CLUSTER_ACTION, T.CLUSTER, CLUSTER_NAME)
    assert not auth.authorize(other, Op.CLUSTER_ACTION, T.CLUSTER, CLUSTER_NAME)
    assert not auth.authorize(local, Op.ALTER, T.CLUSTER, CLUSTER_NAME)


def test_the_cache_is_replaced_per_pattern() -> None:
    pattern, entry = acl("orders", Op.READ)
    group, prefixed = acl("g", Op.READ, kind=T.GROUP), acl("o", Op.READ, pattern=PREFIXED)
    auth = authorizer((pattern, entry), group, prefixed)
    assert auth.bindings() == [AclBinding(pattern, entry), AclBinding(*prefixed), AclBinding(*group)]
    auth.set_acls(group[0], [])
    auth.set_acls(prefixed[0], [])
    auth.set_acls(pattern, [])
    assert auth.bindings() == []
    assert not auth.authorize(ALICE, Op.READ, T.TOPIC, "orders")


@pytest.mark.parametrize(
    ("text", "member"),
    [
        ("ClusterAction", Op.CLUSTER_ACTION),
        ("CLUSTER_ACTION", Op.CLUSTER_ACTION),
        ("clusteraction", Op.CLUSTER_ACTION),
        ("describe-configs", Op.DESCRIBE_CONFIGS),
        ("All", Op.ALL),
    ],
)
def test_operation_names_in_any_of_kafkas_spellings(text: str, member: AclOperation) -> None:
    assert parse_name(AclOperation, text) is member
    assert Op.CLUSTER_ACTION.kafka_name == "ClusterAction"
    assert T.TRANSACTIONAL_ID.kafka_name == "TransactionalId"


def test_unknown_names_are_refused_with_the_choices() -> None:
    with pytest.raises(AclError, match=r"unknown operation 'Fly'.*ClusterAction"):
        parse_name(AclOperation, "Fly")


@pytest.mark.parametrize(
    ("pattern", "entry", "message"),
    [
        (ResourcePattern(T.TOPIC, "a/b"), AclEntry("User:a", "*", Op.READ, ALLOW), "contains '/'"),
        (ResourcePattern(T.TOPIC, ""), AclEntry("User:a", "*", Op.READ, ALLOW), "must not be empty"),
        (ResourcePattern(T.TOPIC, "t"), AclEntry("alice", "*", Op.READ, ALLOW), "Type:name"),
        (ResourcePattern(T.TOPIC, "t"), AclEntry("User:a", "*", Op.CLUSTER_ACTION, ALLOW), "only supports"),
        (ResourcePattern(T.CLUSTER, "c"), AclEntry("User:a", "*", Op.ALTER, ALLOW), "kafka-cluster"),
        (ResourcePattern(T.GROUP, "g"), AclEntry("User:a", "", Op.READ, ALLOW), "host"),
    ],
)
def test_bindings_kafka_would_refuse(pattern: ResourcePattern, entry: AclEntry, message: str) -> None:
    with pytest.raises(AclError, match=message):
        check_binding(AclBinding(pattern, entry))


def test_super_users_must_name_their_type() -> None:
    assert parse_super_users("") == frozenset()
    with pytest.raises(AclError, match="Type:name"):
        parse_super_users("User:a;bob")


class _CountingAcls(dict[ResourcePattern, frozenset[AclEntry]]):
    """The authorizer's cache, counting the patterns a decision looks up."""

    lookups = 0

    def get(self, key, default=None):  # type: ignore[no-untyped-def, override]
        self.lookups += 1
        return super().get(key, default)


def test_a_decision_looks_up_a_long_name_at_the_prefix_lengths_in_use_only() -> None:
    """Every prefix of a 200,000-character name was looked up (each built and hashed: the
    square of the length); now only the lengths of the PREFIXED patterns held."""
    checked = authorizer(
        acl("ord", Op.READ, pattern=PREFIXED),
        acl("pay", Op.WRITE, pattern=PREFIXED),
        acl("orders-", Op.READ, DENY, pattern=PREFIXED),
    )
    counting = _CountingAcls(checked._acls)
    checked._acls = counting
    longest = "orders-" + "x" * 242  # 249 characters, the longest a topic may have
    assert not checked.authorize(ALICE, Op.READ, T.TOPIC, longest), "the longer prefix's Deny"
    assert counting.lookups == 2 + 2  # literal, wildcard, and the lengths 3 and 7
    assert checked.authorize(ALICE, Op.READ, T.TOPIC, "ordinary")
    counting.lookups = 0
    for illegal in ("orders-" + "x" * 200_000, "orders/../x", ""):
        assert not checked.authorize(ALICE, Op.READ, T.TOPIC, illegal), "no topic can have the name"
    assert counting.lookups == 0, "refused before any ACL is looked at"


def test_a_prefix_length_is_forgotten_with_its_last_pattern() -> None:
    checked = authorizer(acl("ord", Op.READ, pattern=PREFIXED), acl("pay", Op.READ, pattern=PREFIXED))
    checked.set_acls(ResourcePattern(T.TOPIC, "ord", PREFIXED), [])
    assert checked.authorize(ALICE, Op.READ, T.TOPIC, "payments")
    assert not checked.authorize(ALICE, Op.READ, T.TOPIC, "orders")
    checked.set_acls(ResourcePattern(T.TOPIC, "pay", PREFIXED), [])
    assert not checked.authorize(ALICE, Op.READ, T.TOPIC, "payments")
    assert checked._prefix_lengths[T.TOPIC] == {}
