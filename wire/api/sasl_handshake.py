"""SaslHandshake (17): the mechanism a client wants, the first request on a SASL listener
(after an optional ApiVersions). Kafka's version 1 semantics (KIP-152): every token of the
exchange then travels in SaslAuthenticate requests, never as raw bytes on the socket.

Errors: UNSUPPORTED_SASL_MECHANISM (the answer lists the enabled ones; the connection is then
closed), ILLEGAL_SASL_STATE (a handshake in the middle of an exchange, after one has
completed, or on a listener without SASL).
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey


@dataclasses.dataclass(frozen=True, kw_only=True)
class SaslHandshakeRequest(Request):
    API_KEY = ApiKey.SASL_HANDSHAKE
    mechanism: str


@dataclasses.dataclass(frozen=True, kw_only=True)
class SaslHandshakeResponse(Response):
    # The mechanisms this listener enables, whatever the outcome.
    mechanisms: list[str] = dataclasses.field(default_factory=list)
