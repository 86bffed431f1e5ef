"""Kafka's `sasl.jaas.config`: one JAAS login module entry, as Kafka's JaasConfig reads it,

    org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="s3cret";

a login module class, a control flag (required, requisite, sufficient, optional), options
`key=value` whose value is a word or a double-quoted string (with backslash escapes), and a
closing semicolon. `/* */` and `//` comments are skipped, as Java's StreamTokenizer does.
"""

from __future__ import annotations

import dataclasses
import re

from wire.credentials import SCRAM_MECHANISMS
from wire.sasl import PLAIN, SASL_MECHANISMS, SaslCredentials

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(
    r"""
      (?P<space>\s+|//[^\n]*|/\*.*?\*/)
    | (?P<quoted>"(?:[^"\\]|\\.)*")
    | (?P<word>[A-Za-z0-9_.$\-]+)
    | (?P<punct>[=;])
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class JaasConfigError(ValueError):
    """The text is not a JAAS entry; the message says where it went wrong."""


@dataclasses.dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = dataclasses.field(repr=False)


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """Every entry of a JAAS configuration; raises JaasConfigError."""
    tokens = _tokenize(text)
    entries = []
    position = 0

    def take(kind: str, what: str) -> str:
        nonlocal position
        if position >= len(tokens):
            raise JaasConfigError(f"expected {what} at the end of the text")
        token_kind, value = tokens[position]
        if token_kind != kind and not (kind == "value" and token_kind in ("word", "quoted")):
            raise JaasConfigError(f"expected {what}, found {value!r}")
        position += 1
        return value

    while position < len(tokens):
        module = take("word", "a login module class")
        flag = take("word", "a control flag").lower()
        if flag not in CONTROL_FLAGS:
            raise JaasConfigError(f"{flag!r} is not a control flag ({', '.join(CONTROL_FLAGS)})")
        options: dict[str, str] = {}
        while position < len(tokens) and tokens[position] != ("punct", ";"):
            key = take("word", "an option name or ';'")
            if take("punct", f"'=' after {key}") != "=":
                raise JaasConfigError(f"expected '=' after {key}")
            options[key] = take("value", f"a value for {key}")
        take("punct", "';' at the end of the login module entry")
        entries.append(JaasEntry(module, flag, options))
    if not entries:
        raise JaasConfigError("no login module entry")
    return entries


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise JaasConfigError(f"unexpected {text[position]!r} at character {position + 1}")
        position = match.end()
        kind = match.lastgroup
        assert kind is not None
        if kind == "quoted":
            tokens.append((kind, _unquote(match.group()[1:-1])))
        elif kind != "space":
            tokens.append((kind, match.group()))
    return tokens


def _unquote(body: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body, flags=re.DOTALL)


def sasl_credentials(mechanism: str, jaas_config: str, *, key: str = "sasl.jaas.config") -> SaslCredentials:
    """A client's SASL identity from `sasl.mechanism` and `sasl.jaas.config`: exactly one
    entry, of the login module that goes with the mechanism, with `username` and `password`.
    Raises JaasConfigError naming `key`."""
    try:
        entries = parse_jaas_config(jaas_config)
    except JaasConfigError as e:
        raise JaasConfigError(f"{key}: {e}") from None
    if len(entries) != 1:
        raise JaasConfigError(f"{key}: has {len(entries)} login modules, should be 1")
    entry = entries[0]
    if mechanism not in (*SCRAM_MECHANISMS, PLAIN):
        raise JaasConfigError(f"SASL mechanism {mechanism!r} is not supported ({', '.join(SASL_MECHANISMS)})")
    expected = SCRAM_LOGIN_MODULE if mechanism in SCRAM_MECHANISMS else PLAIN_LOGIN_MODULE
    if entry.login_module != expected:
        raise JaasConfigError(f"{key}: {mechanism} needs {expected}, not {entry.login_module}")
    missing = [option for option in ("username", "password") if not entry.options.get(option)]
    if missing:
        raise JaasConfigError(f"{key}: {entry.login_module} needs {' and '.join(missing)}")
    return SaslCredentials(mechanism, entry.options["username"], entry.options["password"])


def seeded_users(jaas_config: str) -> dict[str, str]:
    """The `user_<name>="<password>"` options of every entry: the users a broker's own JAAS
    entry declares, as Kafka's PlainLoginModule takes them on the server side."""
    return {
        key.removeprefix("user_"): value
        for entry in parse_jaas_config(jaas_config)
        for key, value in entry.options.items()
        if key.startswith("user_") and len(key) > len("user_")
    }
