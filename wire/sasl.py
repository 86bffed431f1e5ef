"""SASL authentication of one connection, without I/O: the server's state machine (Kafka's
SaslServerAuthenticator) and the client's exchange (SaslClientAuthenticator), over the
SaslHandshake and SaslAuthenticate APIs (KIP-152).

The server side is fed each parsed request of a connection on a SASL listener and says what
to do with it: hand it to the handler (ApiVersions, or anything once authenticated), answer
it here (the SASL requests), or close the connection (anything else before authentication).
The RPC server in `wire/server.py` does the I/O and the delay after a failure.

Mechanisms: SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802/7677) through `scramp`, and PLAIN
(RFC 4616), which sends the password itself and so is offered only over TLS. As Kafka's: SCRAM
credentials come from a lookup `(username, mechanism) -> ScramCredential | None` (the brokers'
cache of `/config/users`), and PLAIN checks the password against the listener's own table of
PLAIN users (the `user_<name>` options of its PlainLoginModule entry), which knows nothing of
SCRAM users.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable, Collection, Mapping

import scramp

from wire.api import (
    ApiVersionsRequest,
    Request,
    Response,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from wire.credentials import SCRAM_MECHANISMS, ScramCredential
from wire.errors import (
    IllegalSaslState,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanism,
    WireError,
)

PLAIN = "PLAIN"
SASL_MECHANISMS = (*SCRAM_MECHANISMS, PLAIN)

# (username, mechanism) -> the user's credential for that SCRAM mechanism, or None.
CredentialLookup = Callable[[str, str], ScramCredential | None]

# What scramp raises on a malformed or wrong message; never let anything else escape.
_MESSAGE_ERRORS = (scramp.ScramException, UnicodeDecodeError, ValueError, TypeError, KeyError, IndexError)


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"  # waiting for SaslHandshake (ApiVersions allowed)
    AUTHENTICATE = "authenticate"  # a mechanism is chosen: SaslAuthenticate tokens
    COMPLETE = "complete"
    FAILED = "failed"


@dataclasses.dataclass(frozen=True)
class SaslStep:
    """What the server does with one request of the exchange: send `response` (None: send
    nothing), then close the connection if `close`. `failed_authentication`: wrong
    credentials, answered only after connection.failed.authentication.delay.ms. `reason` is
    the log line of a close."""

    response: Response | None
    close: bool = False
    failed_authentication: bool = False
    reason: str = ""


class SaslServer:
    """One connection's server side. `receive` returns None for a request the handler is to
    answer, else the step to take; `principal` is `User:<name>` once complete."""

    def __init__(
        self,
        mechanisms: Collection[str],
        credentials: CredentialLookup,
        *,
        tls: bool,
        plain_users: Mapping[str, str] | None = None,
    ) -> None:
        # PLAIN sends the password in clear: only where TLS hides it (Kafka's documented
        # advice, enforced here).
        self.mechanisms = [m for m in mechanisms if m != PLAIN or tls]
        self._credentials = credentials
        self._plain_users = plain_users or {}
        self.state = SaslState.HANDSHAKE
        self.principal: str | None = None
        self._exchange: _ScramExchange | _PlainExchange | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    def receive(self, request: Request) -> SaslStep | None:
        if isinstance(request, SaslHandshakeRequest):
            return self._handshake(request)
        if isinstance(request, SaslAuthenticateRequest):
            return self._authenticate(request)
        if self.state is SaslState.COMPLETE:
            return None
        if self.state is SaslState.HANDSHAKE and isinstance(request, ApiVersionsRequest):
            return None
        self.state = SaslState.FAILED
        name = request.API_KEY.name
        return SaslStep(None, close=True, reason=f"{name} before SASL authentication completed")

    def _handshake(self, request: SaslHandshakeRequest) -> SaslStep:
        if self.state is not SaslState.HANDSHAKE:
            return self._illegal("SaslHandshake", close=self.state is not SaslState.COMPLETE)
        if request.mechanism not in self.mechanisms:
            self.state = SaslState.FAILED
            message = (
                f"unsupported SASL mechanism {request.mechanism!r}; enabled: {', '.join(self.mechanisms)}"
            )
            return SaslStep(
                SaslHandshakeResponse(
                    error_code=UnsupportedSaslMechanism.code,
                    error_message=message,
                    mechanisms=list(self.mechanisms),
                ),
                close=True,
                reason=message,
            )
        if request.mechanism == PLAIN:
            self._exchange = _PlainExchange(self._plain_users)
        else:
            self._exchange = _ScramExchange(request.mechanism, self._credentials)
        self.state = SaslState.AUTHENTICATE
        return SaslStep(SaslHandshakeResponse(mechanisms=list(self.mechanisms)))

    def _authenticate(self, request: SaslAuthenticateRequest) -> SaslStep:
        if self.state is not SaslState.AUTHENTICATE or self._exchange is None:
            return self._illegal("SaslAuthenticate", close=self.state is not SaslState.COMPLETE)
        try:
            challenge = self._exchange.step(request.auth_bytes)
        except SaslAuthenticationFailed as e:
            self.state = SaslState.FAILED
            return SaslStep(
                SaslAuthenticateResponse(error_code=e.code, error_message=e.message),
                close=True,
                failed_authentication=True,
                reason=e.message,
            )
        if self._exchange.username is not None:
            self.state = SaslState.COMPLETE
            self.principal = f"User:{self._exchange.username}"
        return SaslStep(SaslAuthenticateResponse(auth_bytes=challenge))

    def _illegal(self, what: str, *, close: bool) -> SaslStep:
        """Out of order. After authentication completed Kafka's KafkaApis answers and keeps
        the connection; during the exchange the authenticator gives up on it."""
        message = f"{what} in SASL state {self.state.value}"
        if close:
            self.state = SaslState.FAILED
        response_type = SaslHandshakeResponse if what == "SaslHandshake" else SaslAuthenticateResponse
        response = response_type(error_code=IllegalSaslState.code, error_message=message)
        return SaslStep(response, close=close, reason=message)


def _failed(mechanism: str) -> SaslAuthenticationFailed:
    # Kafka's words; the same for an unknown user and a wrong password, so that a client
    # cannot tell which users exist.
    return SaslAuthenticationFailed(
        "Authentication failed during authentication due to invalid credentials"
        f" with SASL mechanism {mechanism}"
    )


# A process's own secret, for the made-up credentials of users that do not exist.
_MADE_UP_KEY = secrets.token_bytes(32)
# What `keel user add` gives a user unless told (node/zk/scram_users.py).
_MADE_UP_ITERATIONS = 4096


def _made_up_credential(username: str, mechanism: str) -> tuple[bytes, bytes, bytes, int]:
    """RFC 5802 §5.1: a server answers a user it does not know with a salt and an iteration
    count as for one it does (the same ones each time for that name), so that the exchange
    fails at the client's proof, as for a wrong password, not at its first message: which
    users exist is not told to whoever asks. No proof can match the made-up keys."""
    digest = hashlib.sha256 if mechanism == "SCRAM-SHA-256" else hashlib.sha512

    def derive(label: bytes) -> bytes:
        return hmac.new(_MADE_UP_KEY, label + username.encode("utf-8"), digest).digest()

    return derive(b"salt")[:16], derive(b"stored"), derive(b"server"), _MADE_UP_ITERATIONS


class _ScramExchange:
    """RFC 5802's two round trips, the server's side."""

    def __init__(self, mechanism: str, credentials: CredentialLookup) -> None:
        self.mechanism = mechanism
        self.username: str | None = None  # set once the client's proof checked out
        self._credentials = credentials
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)
        self._first = True
        self._claimed: str | None = None  # the name in client-first, not yet proven

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int] | None:
        self._claimed = username
        credential = self._credentials(username, self.mechanism)
        if credential is None:
            return _made_up_credential(username, self.mechanism)
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def step(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
            if self._first:
                self._first = False
                self._server.set_client_first(message)
                return str(self._server.get_server_first()).encode("utf-8")
            self._server.set_client_final(message)
            final = str(self._server.get_server_final())
        except _MESSAGE_ERRORS as e:
            raise _failed(self.mechanism) from e
        self.username = self._claimed
        return final.encode("utf-8")


class _PlainExchange:
    """RFC 4616: `[authzid] NUL authcid NUL passwd` in one message; the answer is empty."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self.username: str | None = None
        self._users = users

    def step(self, token: bytes) -> bytes:
        try:
            authzid, username, password = token.decode("utf-8").split("\0")
        except ValueError as e:
            raise SaslAuthenticationFailed("Authentication failed: invalid SASL/PLAIN request") from e
        if authzid and authzid != username:
            # Kafka's PlainSaslServer: no acting on behalf of another user.
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        expected = self._users.get(username)
        # Kafka's PlainServerCallbackHandler: the password must be the user's `user_<name>`.
        if not username or expected is None or not hmac.compare_digest(password.encode(), expected.encode()):
            raise _failed(PLAIN)
        self.username = username
        return b""


@dataclasses.dataclass(frozen=True)
class SaslCredentials:
    """A client's identity: Kafka's `sasl.mechanism` and the username and password of its
    `sasl.jaas.config`."""

    mechanism: str
    username: str
    password: str = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        if self.mechanism not in SASL_MECHANISMS:
            supported = ", ".join(SASL_MECHANISMS)
            raise ValueError(f"SASL mechanism {self.mechanism!r} is not supported (supported: {supported})")


class SaslClient:
    """One connection's client side: the handshake request, then `respond` to each server
    token until `complete`. Raises SaslAuthenticationFailed when the server's final message
    does not prove it knows the credential (a server impersonated) or is malformed."""

    def __init__(self, credentials: SaslCredentials) -> None:
        self.credentials = credentials
        self.complete = False
        self._scram: scramp.ScramClient | None = None
        self._round = 0

    def handshake(self) -> SaslHandshakeRequest:
        return SaslHandshakeRequest(mechanism=self.credentials.mechanism)

    def first_token(self) -> bytes:
        c = self.credentials
        if c.mechanism == PLAIN:
            return f"\0{c.username}\0{c.password}".encode()
        self._scram = scramp.ScramClient([c.mechanism], c.username, c.password)
        return str(self._scram.get_client_first()).encode("utf-8")

    def respond(self, token: bytes) -> bytes | None:
        """The next token to send, or None when the exchange is complete."""
        self._round += 1
        if self._scram is None:  # PLAIN: one round trip
            self.complete = True
            return None
        try:
            if self._round == 1:
                self._scram.set_server_first(token.decode("utf-8"))
                return str(self._scram.get_client_final()).encode("utf-8")
            self._scram.set_server_final(token.decode("utf-8"))
        except _MESSAGE_ERRORS as e:
            raise SaslAuthenticationFailed(f"the server's SCRAM message did not check out: {e}") from e
        self.complete = True
        return None


def handshake_error(response: SaslHandshakeResponse) -> WireError | None:
    """The error a client raises for a refused handshake, naming what the server offers."""
    if not response.error_code:
        return None
    if response.error_code == UnsupportedSaslMechanism.code:
        return UnsupportedSaslMechanism(
            f"{response.error_message or 'unsupported mechanism'} (the server enables "
            f"{', '.join(response.mechanisms) or 'none'})"
        )
    return IllegalSaslState(response.error_message or "")
