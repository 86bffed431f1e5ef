"""A SCRAM credential as Kafka stores it (`/config/users/<name>`, one entry per mechanism):
`salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>` (RFC 5802's
StoredKey and ServerKey; the password itself is never kept). A credential written by
Kafka's `kafka-configs --alter --add-config 'SCRAM-SHA-256=[...]'` reads back unchanged.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's ScramMechanism minimum; a lower count is refused when a credential is written.
MIN_SCRAM_ITERATIONS = 4096
_FIELDS = ("salt", "stored_key", "server_key", "iterations")


class CredentialFormatError(ValueError):
    """The text is not a SCRAM credential in Kafka's format; the message says which part."""


@dataclasses.dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka(self) -> str:
        return ",".join(
            (
                f"salt={_b64(self.salt)}",
                f"stored_key={_b64(self.stored_key)}",
                f"server_key={_b64(self.server_key)}",
                f"iterations={self.iterations}",
            )
        )

    @classmethod
    def from_kafka(cls, text: str) -> ScramCredential:
        fields: dict[str, str] = {}
        for part in text.split(","):
            name, sep, value = part.partition("=")
            if not sep or name not in _FIELDS:
                raise CredentialFormatError(f"unexpected {part!r} (expected {', '.join(_FIELDS)})")
            fields[name] = value
        missing = [name for name in _FIELDS if name not in fields]
        if missing:
            raise CredentialFormatError(f"missing {', '.join(missing)}")
        try:
            iterations = int(fields["iterations"])
        except ValueError:
            raise CredentialFormatError(f"iterations {fields['iterations']!r} is not a number") from None
        return cls(
            salt=_unb64("salt", fields["salt"]),
            stored_key=_unb64("stored_key", fields["stored_key"]),
            server_key=_unb64("server_key", fields["server_key"]),
            iterations=iterations,
        )


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _unb64(name: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise CredentialFormatError(f"{name} is not base64") from None
