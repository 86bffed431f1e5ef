"""TLS for the RPC wire from PEM files, as Kafka's `ssl.keystore.type=PEM`: the keystore is
one file holding the certificate chain and the private key (encrypted or not:
`ssl.key.password`), the truststore a file of CA certificates.

A listener's context asks for a client certificate as `ssl.client.auth` says (none,
requested, required); a client certificate that verifies makes the connection's principal
`User:<subject CN>` (Kafka's default principal builder maps the whole subject DN; the CN is
what its SSL principal mapping rules are mostly used to extract).
"""

from __future__ import annotations

import dataclasses
import ssl
import typing

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsConfigError(ValueError):
    """A keystore or truststore that cannot be used: `key` is the property, the message
    names the file and why."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key
        self.message = message


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """Kafka's ssl.* settings that Keel uses."""

    keystore_location: str | None = None
    key_password: str | None = dataclasses.field(default=None, repr=False)
    truststore_location: str | None = None
    client_auth: str = "none"
    # Kafka's ssl.endpoint.identification.algorithm: "https" checks the peer's name against
    # its certificate; "" does not.
    endpoint_identification: str = "https"


def server_context(files: TlsFiles) -> ssl.SSLContext:
    """A listener's context; needs a keystore."""
    if not files.keystore_location:
        raise TlsConfigError("ssl.keystore.location", "is required on a TLS listener")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(context, files)
    context.verify_mode = CLIENT_AUTH[files.client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        if not files.truststore_location:
            raise TlsConfigError(
                "ssl.truststore.location", f"ssl.client.auth={files.client_auth} needs it to verify clients"
            )
        _load_truststore(context, files.truststore_location)
    return context


def client_context(files: TlsFiles) -> ssl.SSLContext:
    """A client's context: the truststore (else the system's CAs), and the keystore when
    the server asks for a client certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = files.endpoint_identification.lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    if files.truststore_location:
        _load_truststore(context, files.truststore_location)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if files.keystore_location:
        _load_keystore(context, files)
    return context


def _load_keystore(context: ssl.SSLContext, files: TlsFiles) -> None:
    assert files.keystore_location is not None
    try:
        context.load_cert_chain(files.keystore_location, password=files.key_password)
    except FileNotFoundError:
        raise TlsConfigError("ssl.keystore.location", f"{files.keystore_location}: no such file") from None
    except (ssl.SSLError, OSError) as e:
        raise TlsConfigError(
            "ssl.keystore.location",
            f"{files.keystore_location}: not a PEM certificate chain and private key"
            f" (or a wrong ssl.key.password): {e}",
        ) from None


def _load_truststore(context: ssl.SSLContext, location: str) -> None:
    try:
        context.load_verify_locations(cafile=location)
    except FileNotFoundError:
        raise TlsConfigError("ssl.truststore.location", f"{location}: no such file") from None
    except (ssl.SSLError, OSError) as e:
        raise TlsConfigError(
            "ssl.truststore.location", f"{location}: no PEM certificates in it: {e}"
        ) from None


def certificate_principal(ssl_object: object) -> str | None:
    """`User:<CN>` of the peer's verified certificate, or None when it sent none (or the
    connection is not TLS: `ssl_object` is then None)."""
    if not isinstance(ssl_object, ssl.SSLObject | ssl.SSLSocket):
        return None
    certificate = ssl_object.getpeercert()
    if not certificate:
        return None
    subject = typing.cast(tuple[tuple[tuple[str, str], ...], ...], certificate.get("subject", ()))
    for rdn in subject:
        for name, value in rdn:
            if name == "commonName":
                return f"User:{value}"
    return None
