"""JAAS login configuration, as Kafka and ZooKeeper read it; the one parser of it in Keel.

Kafka's `sasl.jaas.config` holds login module entries without a section:

    org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="s3cret";

and a JAAS file (`java.security.auth.login.config`, where the ZooKeeper client's digest
credentials live) holds named sections of them:

    Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required username="keel" password="x";
    };

An entry is a login module class, a control flag (required, requisite, sufficient, optional),
options `key=value` whose value is a word or a double-quoted string (with backslash escapes),
and a closing semicolon. `/* */` and `//` comments are skipped, as Java's StreamTokenizer does.
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
    | (?P<punct>[=;{}])
    """,
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class JaasConfigError(ValueError):
    """The text is not JAAS configuration; the message says where it went wrong."""


@dataclasses.dataclass(frozen=True)
class JaasEntry:
    login_module: str
    control_flag: str
    options: dict[str, str] = dataclasses.field(repr=False)


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items = _tokenize(text)
        self.position = 0

    def more(self, end: str | None = None) -> bool:
        return self.position < len(self.items) and self.items[self.position] != ("punct", end)

    def take(self, kind: str, what: str) -> str:
        if self.position >= len(self.items):
            raise JaasConfigError(f"expected {what} at the end of the text")
        token_kind, value = self.items[self.position]
        if token_kind != kind and not (kind == "value" and token_kind in ("word", "quoted")):
            raise JaasConfigError(f"expected {what}, found {value!r}")
        self.position += 1
        return value

    def entries(self, end: str | None) -> list[JaasEntry]:
        """Login module entries up to the punctuation `end` (or the end of the text)."""
        entries = []
        while self.more(end):
            module = self.take("word", "a login module class")
            flag = self.take("word", "a control flag").lower()
            if flag not in CONTROL_FLAGS:
                raise JaasConfigError(f"{flag!r} is not a control flag ({', '.join(CONTROL_FLAGS)})")
            options: dict[str, str] = {}
            while self.more(";"):
                key = self.take("word", "an option name or ';'")
                if self.take("punct", f"'=' after {key}") != "=":
                    raise JaasConfigError(f"expected '=' after {key}")
                options[key] = self.take("value", f"a value for {key}")
            self.take("punct", "';' at the end of the login module entry")
            entries.append(JaasEntry(module, flag, options))
        return entries


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """Every entry of a `sasl.jaas.config` value; raises JaasConfigError."""
    entries = _Tokens(text).entries(None)
    if not entries:
        raise JaasConfigError("no login module entry")
    return entries


def parse_jaas_file(text: str) -> dict[str, list[JaasEntry]]:
    """Every section of a JAAS file by name (`Name { entries };`); raises JaasConfigError."""
    tokens = _Tokens(text)
    sections: dict[str, list[JaasEntry]] = {}
    while tokens.more():
        name = tokens.take("word", "a section name")
        if tokens.take("punct", f"'{{' after section {name}") != "{":
            raise JaasConfigError(f"expected '{{' after section {name}")
        sections[name] = tokens.entries("}")
        tokens.take("punct", f"'}}' closing section {name}")
        if tokens.more() and tokens.items[tokens.position] == ("punct", ";"):
            tokens.position += 1
    return sections


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


def plain_users(jaas_config: str) -> dict[str, str]:
    """The passwords a PLAIN listener checks, as Kafka's PlainServerCallbackHandler finds
    them: the `user_<name>="<password>"` options of the PlainLoginModule entries (another
    module's options are not PLAIN users)."""
    return {
        key.removeprefix("user_"): value
        for entry in parse_jaas_config(jaas_config)
        if entry.login_module == PLAIN_LOGIN_MODULE
        for key, value in entry.options.items()
        if key.startswith("user_") and len(key) > len("user_")
    }
