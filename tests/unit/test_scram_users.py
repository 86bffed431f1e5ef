"""SCRAM credentials as Kafka stores them, the broker's cache of them, and the spellings of
`keel user`: no ZooKeeper here (tests/integration/test_zookeeper_security.py has it)."""

from __future__ import annotations

import pytest

from actors.security.credential_cache import CredentialCache, scram_credentials
from node.cli.user_commands import parse_add_config
from node.zk import data
from node.zk.paths import desanitize, sanitize
from node.zk.scram_users import ScramUserError, new_credential
from tests.scram import authenticates, kafka_user_config

SHA256, SHA512 = "SCRAM-SHA-256", "SCRAM-SHA-512"


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_a_credential_in_kafkas_format_verifies_a_scram_exchange(mechanism: str) -> None:
    config = data.decode_entity_config("/config/users/alice", kafka_user_config(mechanism, "alice-secret"))
    credentials, problems = scram_credentials(config)
    assert problems == {}
    cache = CredentialCache()
    cache.update_user("alice", credentials)
    assert authenticates(cache.credential, mechanism, "alice", "alice-secret")
    assert not authenticates(cache.credential, mechanism, "alice", "wrong")
    assert not authenticates(cache.credential, mechanism, "bob", "alice-secret")
    other = SHA512 if mechanism == SHA256 else SHA256
    assert cache.credential("alice", other) is None


def test_keel_computes_what_a_scram_client_accepts() -> None:
    cache = CredentialCache()
    cache.update_user("alice", {SHA512: new_credential(SHA512, "pw", 8192)})
    credential = cache.credential("alice", SHA512)
    assert credential is not None and credential.iterations == 8192
    assert authenticates(cache.credential, SHA512, "alice", "pw")


def test_an_update_replaces_what_was_known_of_the_user() -> None:
    cache = CredentialCache()
    cache.update_user("alice", {SHA256: new_credential(SHA256, "a"), SHA512: new_credential(SHA512, "a")})
    cache.update_user("alice", {SHA512: new_credential(SHA512, "b")})
    assert cache.mechanisms("alice") == [SHA512]
    assert authenticates(cache.credential, SHA512, "alice", "b")
    cache.remove_user("alice")
    assert cache.users() == set()


def test_an_unreadable_credential_is_reported_and_the_others_kept() -> None:
    good = new_credential(SHA256, "pw").to_kafka()
    credentials, problems = scram_credentials(
        {
            SHA256: good,
            SHA512: "salt=!!,stored_key=a,server_key=b,iterations=4096",
            "producer_byte_rate": "10",
        }
    )
    assert list(credentials) == [SHA256]
    assert "salt is not base64" in problems[SHA512]


def test_too_few_iterations_or_an_unknown_mechanism_are_refused() -> None:
    with pytest.raises(ScramUserError, match="less than the minimum 4096"):
        new_credential(SHA256, "pw", 4095)
    with pytest.raises(ScramUserError, match="unknown SCRAM mechanism"):
        new_credential("SCRAM-SHA-1", "pw")


def test_kafka_configs_add_config_spelling() -> None:
    parsed = parse_add_config(
        "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=p]"
    )
    assert parsed == {SHA256: ("alice-secret", 8192), SHA512: ("p", 4096)}
    for bad in ("SCRAM-SHA-256=password", "SCRAM-SHA-256=[iterations=8192]", "SCRAM-SHA-256=[pass=x]", ""):
        with pytest.raises(ScramUserError):
            parse_add_config(bad)


@pytest.mark.parametrize("name", ["alice", "User:CN=a/b, O=x", "a*b~c d+e", "é"])
def test_user_names_are_sanitized_as_kafkas_sanitizer_does(name: str) -> None:
    assert "/" not in sanitize(name)
    assert desanitize(sanitize(name)) == name
    assert sanitize("CN=a b*") == "CN%3Da%20b%2A"  # Java's URLEncoder, then %20 and %2A
