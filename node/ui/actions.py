"""The console's actions that change the cluster: cancel a partition's reassignment, elect
its preferred (or, uncleanly, any live) replica, delete a topic. Each goes through
KeelAdminClient, as `keel reassign cancel`, `keel leader-election` and `keel topic delete`
send it.

On a cluster whose listeners use SASL, an action is sent as the user who confirms it: the
username and password typed into the confirmation form make that one request's SASL client
(with the mechanism of the console's own `--command-config`), so the brokers' authorizer
decides with the user's own ACLs. They are kept nowhere: not on disk, not in memory past the
request. Without SASL, actions go as the console's own identity.

Forms are protected against cross-site requests by a token, sent both as a cookie
(SameSite=Strict) and in the form, that must match (`tokens_match`).
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
from collections.abc import Mapping

from node.clients.admin import KeelAdminClient
from wire.api import ElectionType
from wire.errors import ErrorCode, WireError
from wire.sasl import SaslCredentials
from wire.security import ClientSecurity, uses_sasl

CSRF_COOKIE = "keel_ui_csrf"
ACTION_TIMEOUT_S = 30.0
DEFAULT_MECHANISM = "SCRAM-SHA-512"


class ActionError(Exception):
    """A refused or failed action, as one readable sentence."""


@dataclasses.dataclass(frozen=True)
class Action:
    name: str
    fields: tuple[str, ...]
    # What the confirmation asks, with the fields filled in.
    question: str


ACTIONS = {
    a.name: a
    for a in (
        Action(
            "cancel-reassignment",
            ("topic", "partition"),
            "Cancel the reassignment of {topic}-{partition}? Its replicas go back to the ones it had before.",
        ),
        Action(
            "preferred-election",
            ("topic", "partition"),
            "Elect the preferred replica of {topic}-{partition} as its leader?",
        ),
        Action(
            "unclean-election",
            ("topic", "partition"),
            "Elect any live replica of {topic}-{partition} as its leader, even one out of sync? "
            "Records only the old leader had are lost.",
        ),
        Action("delete-topic", ("topic",), "Delete the topic {topic} and all its records?"),
    )
}


def new_token() -> str:
    return secrets.token_urlsafe(24)


def tokens_match(cookie: str | None, form: str | None) -> bool:
    return bool(cookie) and bool(form) and hmac.compare_digest(str(cookie), str(form))


def parse_request(form: Mapping[str, str]) -> tuple[Action, dict[str, str]]:
    """The action a form asks for and its fields, checked; raises ActionError."""
    action = ACTIONS.get(form.get("action", ""))
    if action is None:
        raise ActionError(f"unknown action {form.get('action', '')!r} (one of {', '.join(ACTIONS)})")
    fields = {}
    for name in action.fields:
        value = form.get(name, "").strip()
        if not value:
            raise ActionError(f"{action.name} needs a {name}")
        if name == "partition" and not value.isdigit():
            raise ActionError(f"partition must be a whole number, not {value!r}")
        fields[name] = value
    return action, fields


def needs_login(security: ClientSecurity) -> bool:
    return uses_sasl(security.security_protocol)


def as_user(security: ClientSecurity, username: str, password: str) -> ClientSecurity:
    """The console's security with the user's own SASL identity; raises ActionError."""
    if not needs_login(security):
        return security
    if not username or not password:
        raise ActionError("this cluster uses SASL: give your username and password to confirm")
    mechanism = security.sasl.mechanism if security.sasl is not None else DEFAULT_MECHANISM
    return dataclasses.replace(security, sasl=SaslCredentials(mechanism, username, password))


async def perform(action: Action, fields: Mapping[str, str], bootstrap: str, security: ClientSecurity) -> str:
    """Send the action; the sentence saying what was done, or ActionError saying why not."""
    try:
        async with KeelAdminClient(bootstrap, timeout=ACTION_TIMEOUT_S, security=security) as admin:
            return await _send(admin, action, fields)
    except WireError as e:
        raise ActionError(f"{action.name} failed: {e.code.name}: {e}") from None
    except OSError as e:
        raise ActionError(f"{action.name} failed: {e}") from None


async def _send(admin: KeelAdminClient, action: Action, fields: Mapping[str, str]) -> str:
    topic = fields["topic"]
    if action.name == "delete-topic":
        response = await admin.delete_topics([topic], timeout_ms=int(ACTION_TIMEOUT_S * 1000))
        for result in response.responses:
            _check(result.error_code, result.error_message, f"deleting {topic}")
        return f"Topic {topic} is marked for deletion."
    tp = (topic, int(fields["partition"]))
    name = f"{topic}-{tp[1]}"
    if action.name == "cancel-reassignment":
        answer = await admin.alter_partition_reassignments({tp: None})
        _check(answer.error_code, answer.error_message, f"cancelling the reassignment of {name}")
        for t in answer.responses:
            for p in t.partitions:
                _check(p.error_code, p.error_message, f"cancelling the reassignment of {name}")
        return f"The reassignment of {name} is cancelled."
    kind = ElectionType.PREFERRED if action.name == "preferred-election" else ElectionType.UNCLEAN
    election = await admin.elect_leaders(kind, [tp], timeout_ms=int(ACTION_TIMEOUT_S * 1000))
    for topic_result in election.replica_election_results:
        for r in topic_result.partition_result:
            if r.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                return f"{name} needed no election: its leader is already a valid choice."
            _check(r.error_code, r.error_message, f"the {kind.name.lower()} election of {name}")
    return f"{name} has a new leader ({kind.name.lower()} election)."


def _check(code: int, message: str | None, what: str) -> None:
    if code == ErrorCode.NONE:
        return
    try:
        name = ErrorCode(code).name
    except ValueError:
        name = f"error {code}"
    raise ActionError(f"{what} was refused: {name}" + (f": {message}" if message else ""))
