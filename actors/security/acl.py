"""ACLs as Kafka models them: a binding of a resource pattern (type, name, LITERAL or
PREFIXED) to an entry (principal, host, operation, Allow or Deny).

Names travel as Kafka writes them in ZooKeeper and prints them in `kafka-acls`: resource
types, operations and permissions in Pascal case (`Topic`, `ClusterAction`, `Allow`),
principals as `Type:name` (`User:alice`, `User:*` for everyone), hosts as addresses or `*`.
Parsing accepts Kafka's other spellings too (`CLUSTER_ACTION`, `CLUSTERACTION`), as its
SecurityUtils and the enums' `fromString` do between them.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import TypeVar

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
# The one cluster resource's name (Kafka's Resource.CLUSTER_NAME).
CLUSTER_NAME = "kafka-cluster"


class AclError(ValueError):
    """An ACL that Kafka would refuse: an unknown name, an operation the resource type does
    not have, a resource name with a `/`, a principal without its type."""


class _KafkaEnum(enum.Enum):
    @property
    def kafka_name(self) -> str:
        """The name Kafka writes: `CLUSTER_ACTION` → `ClusterAction`."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    def __str__(self) -> str:
        return self.kafka_name


class ResourceType(_KafkaEnum):
    """Kafka's numbers (ResourceType.java)."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    DENY = 2
    ALLOW = 3


E = TypeVar("E", bound=_KafkaEnum)


def parse_name(kind: type[E], text: str) -> E:
    """A member by any of Kafka's spellings, case and `_`/`-` aside."""
    wanted = text.replace("_", "").replace("-", "").upper()
    for member in kind:
        if member.name.replace("_", "") == wanted:
            return member
    choices = ", ".join(m.kafka_name for m in kind)
    raise AclError(f"unknown {_kind_name(kind)} {text!r} (one of {choices})")


def _kind_name(kind: type[_KafkaEnum]) -> str:
    return {
        ResourceType: "resource type",
        PatternType: "pattern type",
        AclOperation: "operation",
        AclPermissionType: "permission type",
    }.get(kind, kind.__name__)


_O = AclOperation
# What each resource type can be granted (Kafka's AclEntry.supportedOperations); ALL always.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            _O.READ,
            _O.WRITE,
            _O.CREATE,
            _O.DESCRIBE,
            _O.DELETE,
            _O.ALTER,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset(
        {
            _O.CREATE,
            _O.CLUSTER_ACTION,
            _O.DESCRIBE_CONFIGS,
            _O.ALTER_CONFIGS,
            _O.IDEMPOTENT_WRITE,
            _O.ALTER,
            _O.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}


def check_principal(principal: str) -> str:
    """`Type:name` (Kafka's SecurityUtils.parseKafkaPrincipal), both parts non-empty."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise AclError(f"principal {principal!r} is not in the form Type:name (e.g. User:alice)")
    return principal


@dataclasses.dataclass(frozen=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __lt__(self, other: ResourcePattern) -> bool:
        """By type, then pattern type, then name."""
        mine = (self.resource_type.value, self.pattern_type.value, self.name)
        return mine < (other.resource_type.value, other.pattern_type.value, other.name)

    def __str__(self) -> str:
        return f"{self.resource_type}:{self.pattern_type.name}:{self.name}"


@dataclasses.dataclass(frozen=True)
class AclEntry:
    """Kafka's AccessControlEntry: who, from where, may or may not do what."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return (
            f"{self.principal} has {self.permission.name.capitalize()} permission for operations: "
            f"{self.operation} from hosts: {self.host}"
        )


@dataclasses.dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AclEntry


def check_binding(binding: AclBinding) -> AclBinding:
    """Kafka's checks before an ACL is stored (AclAuthorizer.validateAclBinding, kafka-acls)."""
    pattern, entry = binding.pattern, binding.entry
    if not pattern.name:
        raise AclError("the resource name must not be empty")
    if "/" in pattern.name:
        raise AclError(f"resource name {pattern.name!r} contains '/'")
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise AclError(f"the cluster resource is named {CLUSTER_NAME!r}, not {pattern.name!r}")
    check_principal(entry.principal)
    if not entry.host:
        raise AclError("the host must be an address or '*'")
    supported = SUPPORTED_OPERATIONS[pattern.resource_type]
    if entry.operation is not AclOperation.ALL and entry.operation not in supported:
        names = ", ".join(sorted(o.kafka_name for o in supported | {AclOperation.ALL}))
        raise AclError(
            f"ResourceType {pattern.resource_type} only supports operations {names}, not {entry.operation}"
        )
    return binding
