"""A SCRAM exchange by `scramp`'s client against a server that looks credentials up the way
Keel's SASL server does (`CredentialCache.credential`), and Kafka's stored user config built
the way `kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]'` builds it."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import scramp

from wire.credentials import ScramCredential

Lookup = Callable[[str, str], ScramCredential | None]


def kafka_user_config(mechanism: str, password: str, iterations: int = 4096) -> bytes:
    """`/config/users/<name>` as Kafka writes it, computed here without any of Keel's code."""
    salt, stored_key, server_key, count = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations
    )
    text = ScramCredential(salt, stored_key, server_key, count).to_kafka()
    return orjson.dumps({"version": 1, "config": {mechanism: text}})


def authenticates(lookup: Lookup, mechanism: str, user: str, password: str) -> bool:
    """True when the client's proof is accepted and the server's signature verifies."""

    def auth_info(username: str) -> tuple[bytes, bytes, bytes, int]:
        credential = lookup(username, mechanism)
        if credential is None:
            raise scramp.ScramException(f"unknown user {username}")
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    server = scramp.ScramMechanism(mechanism).make_server(auth_info)
    client = scramp.ScramClient([mechanism], user, password)
    try:
        server.set_client_first(client.get_client_first())
        client.set_server_first(server.get_server_first())
        server.set_client_final(client.get_client_final())
        client.set_server_final(server.get_server_final())
    except scramp.ScramException:
        return False
    return True
