"""Who may read and write Keel's znodes: Kafka's ZooKeeper ACLs (ZkData.defaultAcls).

With `zookeeper.set.acl=true` every znode Keel creates gets CREATOR_ALL_ACL (everything, for
the identity that created it: Keel's own) and READ_ACL_UNSAFE (anyone may read), except under
the sensitive roots (SCRAM credentials in `/config/users`, broker configs that may hold
passwords in `/config/brokers`), which only Keel's identity may read. `/consumers` stays open,
as Kafka leaves it for old consumers. Without it, every znode is open (OPEN_ACL_UNSAFE).

Keel's identity in ZooKeeper is a `digest` one (`addauth digest user:password`, sent on every
connection), read from the `Client` section of a JAAS file as Kafka's is; ZooKeeper records
it in the ACLs as `digest:<user>:<hash>`. See docs/OPERATIONS.md, "Security".
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from aiozk import protocol
from aiozk.protocol.acl import ACL

from node.security.jaas import JaasConfigError, parse_jaas_file
from node.zk import paths

# ZooDefs.Ids: all permissions for the identities the creator authenticated with.
CREATOR_ALL_ACL = protocol.AUTHED_UNRESTRICTED
READ_ACL_UNSAFE = protocol.WORLD_READABLE
OPEN_ACL_UNSAFE = protocol.UNRESTRICTED_ACCESS

# ZkData.SensitiveRootPaths: only Keel may read what is under them.
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")

# ZkData.SecureRootPaths (with ZkAclStore's), and Keel's own `/keel`: what `keel zookeeper
# secure` walks. `/consumers` is left out on purpose, as Kafka leaves it.
SECURE_ROOT_PATHS = (
    "/admin",
    paths.BROKERS,
    "/cluster",
    "/config",
    paths.CONTROLLER,
    paths.CONTROLLER_EPOCH,
    "/isr_change_notification",
    "/latest_producer_id_block",
    paths.LOG_DIR_EVENT_NOTIFICATION,
    "/delegation_token",
    "/kafka-acl",
    "/kafka-acl-changes",
    "/kafka-acl-extended",
    "/kafka-acl-extended-changes",
    "/migration",
    "/feature",
    paths.KEEL,
)

CONSUMERS = "/consumers"

# The login module a JAAS `Client` section names for ZooKeeper's username/password identity.
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
DEFAULT_JAAS_SECTION = "Client"


class ZkSecurityError(ValueError):
    """ZooKeeper credentials that cannot be used; the message names the file and why."""


@dataclasses.dataclass(frozen=True)
class DigestCredentials:
    username: str
    password: str = dataclasses.field(repr=False)

    @property
    def auth(self) -> bytes:
        """What ZooKeeper's `digest` scheme takes: `user:password`."""
        return f"{self.username}:{self.password}".encode()


@dataclasses.dataclass(frozen=True)
class ZkSecurity:
    """How a client authenticates to ZooKeeper, and whether what it creates gets ACLs."""

    set_acl: bool = False
    credentials: DigestCredentials | None = None


def sensitive(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOT_PATHS)


def default_acls(path: str, secure: bool) -> list[ACL]:
    """The ACLs of a znode Keel creates at `path` (chroot-relative), as Kafka's defaultAcls."""
    if not secure or path == CONSUMERS:
        return [OPEN_ACL_UNSAFE]
    return [CREATOR_ALL_ACL] if sensitive(path) else [CREATOR_ALL_ACL, READ_ACL_UNSAFE]


def read_credentials(location: Path, section: str = DEFAULT_JAAS_SECTION) -> DigestCredentials:
    """The username and password of the JAAS file's `section` (DigestLoginModule)."""
    try:
        text = location.read_text(encoding="utf-8")
    except OSError as e:
        raise ZkSecurityError(f"cannot read {location}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ZkSecurityError(f"{location} is not UTF-8 text") from None
    try:
        sections = parse_jaas_file(text)
    except JaasConfigError as e:
        raise ZkSecurityError(f"{location}: {e}") from None
    modules = sections.get(section)
    if not modules:
        raise ZkSecurityError(f"{location} has no {section} section for ZooKeeper")
    module = modules[0]
    if module.login_module != DIGEST_LOGIN_MODULE:
        raise ZkSecurityError(
            f"{location}: section {section} uses {module.login_module}; Keel authenticates to ZooKeeper "
            f"only with {DIGEST_LOGIN_MODULE} (username and password)"
        )
    username, password = module.options.get("username"), module.options.get("password")
    if not username or password is None:
        raise ZkSecurityError(f"{location}: section {section} needs username and password")
    return DigestCredentials(username, password)
