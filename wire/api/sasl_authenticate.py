"""SaslAuthenticate (36): one token of the SASL exchange each way (KIP-152), after a
SaslHandshake chose the mechanism. SCRAM takes two round trips (client-first/server-first,
client-final/server-final), PLAIN one.

Errors: SASL_AUTHENTICATION_FAILED (wrong credentials, an unknown user, a malformed token:
answered after connection.failed.authentication.delay.ms, then the connection is closed),
ILLEGAL_SASL_STATE (no handshake first, or after authentication completed).
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey


@dataclasses.dataclass(frozen=True, kw_only=True)
class SaslAuthenticateRequest(Request):
    API_KEY = ApiKey.SASL_AUTHENTICATE
    auth_bytes: bytes


@dataclasses.dataclass(frozen=True, kw_only=True)
class SaslAuthenticateResponse(Response):
    auth_bytes: bytes = b""
    # 0: the session does not expire (Kafka's connections.max.reauth.ms unset).
    session_lifetime_ms: int = 0
