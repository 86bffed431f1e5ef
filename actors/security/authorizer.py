"""Kafka's AclAuthorizer without its ZooKeeper: the ACL cache and the decision.

`authorize(context, operation, resource_type, name)` follows AclAuthorizer.authorizeAction:

- a super user (`super.users`) may do anything;
- the ACLs that apply to a resource are those of its literal name, of the literal wildcard
  `*` of its type, and of every PREFIXED pattern its name starts with;
- none at all: `allow.everyone.if.no.acl.found` decides (false by default);
- a matching Deny wins over any Allow; an entry matches when its principal is the caller's
  or `User:*`, its host the caller's address or `*`, and its operation the one asked or All;
- otherwise a matching Allow is needed. Allowing Read, Write, Delete or Alter implies
  Describe, and AlterConfigs implies DescribeConfigs (AclOperation's documented inheritance);
  a Deny implies nothing.

The cache is replaced one resource pattern at a time, as the change notifications name
them; the node layer (node/zk/acl_authorizer.py) loads it and keeps it current.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable

from actors.admin.topic_admin import legal_topic_name
from actors.security.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    check_principal,
)
from wire.context import RequestContext

_O = AclOperation
# An Allow of any of these grants the key as well (AclAuthorizer.authorizeAction).
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    _O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
    _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
}


@dataclasses.dataclass(frozen=True)
class AuthorizerConfig:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def parse_super_users(value: str) -> frozenset[str]:
    """`super.users`: principals separated by `;` (`User:admin;User:broker`); AclError for
    one not in the form Type:name."""
    return frozenset(check_principal(p.strip()) for p in value.split(";") if p.strip())


class AclAuthorizer:
    def __init__(self, config: AuthorizerConfig) -> None:
        self.config = config
        self._acls: dict[ResourcePattern, frozenset[AclEntry]] = {}
        # The lengths of the PREFIXED patterns held, per resource type, each with how many
        # patterns have it: a name is looked up at those lengths only, so that a decision
        # costs the name's length times the lengths in use, not the square of the name's length
        # (a Metadata naming a 200,000-character topic held the loop for tens of seconds).
        self._prefix_lengths: dict[ResourceType, collections.Counter[int]] = {}

    # --- the cache ---

    def set_acls(self, pattern: ResourcePattern, entries: Iterable[AclEntry]) -> None:
        """Replace what the cache holds for one resource pattern (none: forget it)."""
        acls = frozenset(entries)
        held = pattern in self._acls
        if acls:
            self._acls[pattern] = acls
        else:
            self._acls.pop(pattern, None)
        if pattern.pattern_type is PatternType.PREFIXED and held != bool(acls):
            lengths = self._prefix_lengths.setdefault(pattern.resource_type, collections.Counter())
            lengths[len(pattern.name)] += 1 if acls else -1
            if not lengths[len(pattern.name)]:
                del lengths[len(pattern.name)]

    def clear(self) -> None:
        self._acls.clear()
        self._prefix_lengths.clear()

    def acls(self, pattern: ResourcePattern) -> frozenset[AclEntry]:
        return self._acls.get(pattern, frozenset())

    def bindings(self) -> list[AclBinding]:
        """Every cached ACL, by resource pattern then entry."""
        return [
            AclBinding(pattern, entry)
            for pattern in sorted(self._acls)
            for entry in sorted(self._acls[pattern], key=_entry_order)
        ]

    # --- the decision ---

    def authorize(
        self, context: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        principal, host = context.principal, context.client_host
        if principal in self.config.super_users:
            return True
        if resource_type is ResourceType.TOPIC and not legal_topic_name(name):
            # No topic can have it: refused before any ACL is looked at, so that a 200,000
            # character name costs no more than a legal one.
            return False
        acls = self._matching_acls(resource_type, name)
        if not acls:
            return self.config.allow_everyone_if_no_acl_found
        deny = AclPermissionType.DENY
        if any(_matches(e, principal, host, operation, deny) for e in acls):
            return False
        allow = AclPermissionType.ALLOW
        granting = IMPLIED_BY.get(operation, frozenset({operation}))
        return any(_matches(e, principal, host, op, allow) for e in acls for op in granting)

    def _matching_acls(self, resource_type: ResourceType, name: str) -> list[AclEntry]:
        found: list[AclEntry] = []
        lengths = self._prefix_lengths.get(resource_type, ())
        for pattern in (
            ResourcePattern(resource_type, name),
            ResourcePattern(resource_type, WILDCARD_RESOURCE),
            *(
                ResourcePattern(resource_type, name[:n], PatternType.PREFIXED)
                for n in sorted(lengths)
                if n <= len(name)
            ),
        ):
            found.extend(self._acls.get(pattern, ()))
        return found


def _matches(
    entry: AclEntry, principal: str, host: str, operation: AclOperation, permission: AclPermissionType
) -> bool:
    return (
        entry.permission is permission
        and entry.principal in (principal, WILDCARD_PRINCIPAL)
        and entry.operation in (operation, AclOperation.ALL)
        and entry.host in (host, WILDCARD_HOST)
    )


def _entry_order(entry: AclEntry) -> tuple[str, str, str, str]:
    return (entry.principal, entry.permission.name, entry.operation.name, entry.host)
