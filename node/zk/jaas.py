"""JAAS login configuration, the format Kafka and ZooKeeper read their credentials from:

    Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        username="keel"
        password="keel-secret";
    };

A file holds named sections of login modules (`parse_jaas_file`); Kafka's `sasl.jaas.config`
property holds the modules of one section without its name (`parse_login_modules`). Each
module is its class name, a control flag and `key=value` options, ended by `;`. Comments are
`//` to the end of the line and `/* ... */`, as Java's ConfigFile reads them.
"""

from __future__ import annotations

import dataclasses
import re

FLAGS = ("required", "requisite", "sufficient", "optional")

_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/          # blanks and comments
    |(?P<quoted>"(?:[^"\\]|\\.)*")       # a quoted value
    |(?P<punct>[{};=])
    |(?P<word>[^\s{};="]+)""",
    re.VERBOSE | re.DOTALL,
)


class JaasError(ValueError):
    """The text is not a JAAS configuration; the message says where."""


@dataclasses.dataclass(frozen=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str]


def _tokens(text: str) -> list[str]:
    tokens = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise JaasError(f"unexpected {text[position : position + 20]!r}")
        position = match.end()
        if match.group("quoted") is not None:
            # Marked with a leading quote so that a quoted "=" or ";" stays a value.
            tokens.append('"' + re.sub(r"\\(.)", r"\1", match.group("quoted")[1:-1]))
        elif match.group("punct") or match.group("word"):
            tokens.append(match.group(0))
    return tokens


def _value(token: str) -> str:
    return token[1:] if token.startswith('"') else token


def _modules(tokens: list[str], start: int, end_at: str | None) -> tuple[list[LoginModule], int]:
    """Login modules from tokens[start] up to `end_at` (or the end); (modules, next index)."""
    modules = []
    i = start
    while i < len(tokens) and tokens[i] != end_at:
        if i + 1 >= len(tokens):
            raise JaasError(f"login module {tokens[i]} has no control flag")
        name, flag = tokens[i], tokens[i + 1].lower()
        if flag not in FLAGS:
            raise JaasError(f"login module {name}: {tokens[i + 1]!r} is not one of {', '.join(FLAGS)}")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ";":
            if i + 2 >= len(tokens) or tokens[i + 1] != "=":
                raise JaasError(f"login module {name}: expected key=value before {tokens[i]!r}")
            options[tokens[i]] = _value(tokens[i + 2])
            i += 3
        if i >= len(tokens):
            raise JaasError(f"login module {name} is not ended by ';'")
        modules.append(LoginModule(name, flag, options))
        i += 1
    return modules, i


def parse_login_modules(text: str) -> list[LoginModule]:
    """The modules of `sasl.jaas.config`: `Module flag key=value ...;` without a section."""
    modules, _ = _modules(_tokens(text), 0, None)
    if not modules:
        raise JaasError("no login module")
    return modules


def parse_jaas_file(text: str) -> dict[str, list[LoginModule]]:
    """Every section of a JAAS file by name."""
    tokens = _tokens(text)
    sections: dict[str, list[LoginModule]] = {}
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i + 1] != "{":
            raise JaasError(f"expected a section 'Name {{', not {tokens[i]!r}")
        name = tokens[i]
        modules, i = _modules(tokens, i + 2, "}")
        if i >= len(tokens):
            raise JaasError(f"section {name} is not closed by '}}'")
        i += 1
        if i < len(tokens) and tokens[i] == ";":
            i += 1
        sections[name] = modules
    return sections
