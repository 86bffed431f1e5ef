"""The SCRAM credentials a broker authenticates clients against (Kafka's CredentialCache, as
its CredentialProvider fills it from `/config/users/<name>`).

A user's config maps each mechanism to a credential in Kafka's stored format
(`{"SCRAM-SHA-256": "salt=...,stored_key=...,server_key=...,iterations=4096"}`); other keys
of the same config (client quotas) are not credentials and are ignored. `update_user`
replaces everything known of a user, so a mechanism removed from the config, or a user whose
config is gone, leaves the cache at once. The SASL server asks `credential(user, mechanism)`.
"""

from __future__ import annotations

from collections.abc import Mapping

from wire.credentials import SCRAM_MECHANISMS, CredentialFormatError, ScramCredential


def scram_credentials(config: Mapping[str, str]) -> tuple[dict[str, ScramCredential], dict[str, str]]:
    """(credential per mechanism, problem per mechanism that cannot be read) of a user's config."""
    credentials: dict[str, ScramCredential] = {}
    problems: dict[str, str] = {}
    for mechanism in SCRAM_MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            credentials[mechanism] = ScramCredential.from_kafka(text)
        except CredentialFormatError as e:
            problems[mechanism] = str(e)
    return credentials, problems


class CredentialCache:
    def __init__(self) -> None:
        self._by_mechanism: dict[str, dict[str, ScramCredential]] = {m: {} for m in SCRAM_MECHANISMS}

    def credential(self, username: str, mechanism: str) -> ScramCredential | None:
        """The user's credential for a SCRAM mechanism; None for an unknown user or mechanism."""
        users = self._by_mechanism.get(mechanism)
        return None if users is None else users.get(username)

    def update_user(self, username: str, credentials: Mapping[str, ScramCredential]) -> None:
        for mechanism, users in self._by_mechanism.items():
            credential = credentials.get(mechanism)
            if credential is None:
                users.pop(username, None)
            else:
                users[username] = credential

    def remove_user(self, username: str) -> None:
        self.update_user(username, {})

    def mechanisms(self, username: str) -> list[str]:
        return [m for m, users in self._by_mechanism.items() if username in users]

    def users(self) -> set[str]:
        return {user for users in self._by_mechanism.values() for user in users}
