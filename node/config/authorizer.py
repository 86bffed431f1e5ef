"""The authorizer's properties (Kafka's AclAuthorizer), the same for brokers and the planner."""

from __future__ import annotations

from actors.security.acl import AclError
from actors.security.authorizer import parse_super_users
from node.config.properties import ConfigError, Definition, boolean

# Kafka's names for its ACL authorizer; Keel's is the same authorizer under its own name.
AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "keel.security.AclAuthorizer",
)


def _authorizer_class(key: str, raw: str) -> str:
    name = raw.strip()
    if name not in AUTHORIZER_CLASS_NAMES:
        raise ConfigError(key, f"unknown authorizer {name!r} (Keel has {', '.join(AUTHORIZER_CLASS_NAMES)})")
    return name


def _super_users(key: str, raw: str) -> frozenset[str]:
    try:
        return parse_super_users(raw)
    except AclError as e:
        raise ConfigError(key, str(e)) from None


# The authorizer's properties (Kafka's AclAuthorizer), the same for brokers and the planner.
AUTHORIZER_DEFINITIONS: dict[str, Definition] = {
    "authorizer.class.name": Definition(_authorizer_class, ""),
    "super.users": Definition(_super_users, ""),
    "allow.everyone.if.no.acl.found": Definition(boolean, "false"),
}
