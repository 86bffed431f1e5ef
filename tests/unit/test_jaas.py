"""Kafka's sasl.jaas.config syntax, and the client identity read from it."""

from __future__ import annotations

import pytest

from node.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfigError,
    parse_jaas_config,
    parse_jaas_file,
    plain_users,
    sasl_credentials,
)
from wire.sasl import SaslCredentials


def test_a_scram_login_module_entry() -> None:
    text = f'{SCRAM_LOGIN_MODULE} required username="admin" password="admin-secret";'
    (entry,) = parse_jaas_config(text)
    assert (entry.login_module, entry.control_flag) == (SCRAM_LOGIN_MODULE, "required")
    assert entry.options == {"username": "admin", "password": "admin-secret"}
    assert sasl_credentials("SCRAM-SHA-256", text) == SaslCredentials(
        "SCRAM-SHA-256", "admin", "admin-secret"
    )


def test_quoted_values_keep_semicolons_spaces_and_escapes() -> None:
    text = (
        f"{SCRAM_LOGIN_MODULE}  REQUIRED\n  /* a comment */ username=admin\n"
        f'  password="a;b \\"c\\" d\\\\e"; // trailing comment'
    )
    (entry,) = parse_jaas_config(text)
    assert entry.control_flag == "required"
    assert entry.options == {"username": "admin", "password": 'a;b "c" d\\e'}


def test_plain_users_are_the_plain_login_modules_user_options() -> None:
    """As Kafka's PlainServerCallbackHandler: another module's `user_` options are not PLAIN users."""
    text = (
        f'{SCRAM_LOGIN_MODULE} required username="admin" password="x" user_admin="x";'
        f' {PLAIN_LOGIN_MODULE} optional username=a password=b user_bob="b=b" user_carol=c;'
    )
    assert len(parse_jaas_config(text)) == 2
    assert plain_users(text) == {"bob": "b=b", "carol": "c"}


def test_a_jaas_file_section_cannot_hold_stray_text() -> None:
    with pytest.raises(JaasConfigError, match="'\\{' after section"):
        parse_jaas_file("KafkaServer ScramLoginModule required;")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no login module entry"),
        (f"{SCRAM_LOGIN_MODULE} required username=a", "';' at the end"),
        (f"{SCRAM_LOGIN_MODULE} mandatory;", "not a control flag"),
        (f"{SCRAM_LOGIN_MODULE} required username=;", "a value for username"),
        (f"{SCRAM_LOGIN_MODULE} required username a;", "'=' after username"),
        (f'{SCRAM_LOGIN_MODULE} required password="open;', "unexpected"),
    ],
)
def test_malformed_entries_say_where(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message):
        parse_jaas_config(text)


@pytest.mark.parametrize(
    ("mechanism", "text", "message"),
    [
        (
            "SCRAM-SHA-512",
            f'{PLAIN_LOGIN_MODULE} required username="a" password="b";',
            "needs .*ScramLoginModule",
        ),
        ("PLAIN", f'{SCRAM_LOGIN_MODULE} required username="a" password="b";', "needs .*PlainLoginModule"),
        ("SCRAM-SHA-256", f'{SCRAM_LOGIN_MODULE} required username="a";', "needs password"),
        ("GSSAPI", f'{SCRAM_LOGIN_MODULE} required username="a" password="b";', "not supported"),
        ("SCRAM-SHA-256", f"{SCRAM_LOGIN_MODULE} required; {SCRAM_LOGIN_MODULE} required;", "should be 1"),
    ],
)
def test_client_identity_errors(mechanism: str, text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message):
        sasl_credentials(mechanism, text)
