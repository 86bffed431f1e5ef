"""CredentialTable: SCRAM credentials held in memory, looked up by the SASL server.

It is the credential lookup a broker starts with: `lookup(username, mechanism)` is the
`wire.sasl.CredentialLookup` every SASL listener calls, and the table is filled from the
`user_<name>="<password>"` options of the broker's `sasl.jaas.config` (or by a test, or by
`keel-cluster`). A store that reads Kafka's `/config/users/<name>` from ZooKeeper replaces it
by passing its own lookup function of the same signature to `KeelBroker` (`credentials=`);
nothing else changes.
"""

from __future__ import annotations

from node.security.jaas import seeded_users
from wire.credentials import SCRAM_MECHANISMS, ScramCredential
from wire.sasl import make_scram_credential


class CredentialTable:
    def __init__(self) -> None:
        self._credentials: dict[tuple[str, str], ScramCredential] = {}

    @classmethod
    def from_jaas(cls, jaas_config: str | None) -> CredentialTable:
        """The users a process's own `sasl.jaas.config` declares (`user_<name>="<password>"`,
        as Kafka's PlainLoginModule takes them on the server side); none without one."""
        table = cls()
        for username, password in (seeded_users(jaas_config) if jaas_config else {}).items():
            table.add_user(username, password)
        return table

    def add_user(self, username: str, password: str) -> None:
        """A credential for each SCRAM mechanism, salted afresh (the password is not kept)."""
        for mechanism in SCRAM_MECHANISMS:
            self._credentials[username, mechanism] = make_scram_credential(mechanism, password)

    def set_credential(self, username: str, mechanism: str, credential: ScramCredential) -> None:
        self._credentials[username, mechanism] = credential

    def remove_user(self, username: str) -> None:
        for mechanism in SCRAM_MECHANISMS:
            self._credentials.pop((username, mechanism), None)

    def lookup(self, username: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get((username, mechanism))

    @property
    def users(self) -> list[str]:
        return sorted({name for name, _ in self._credentials})
