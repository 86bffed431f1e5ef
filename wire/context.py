"""Who sent a request, and over what (Kafka's RequestContext and Session): the principal the
connection authenticated as, the client's address, and the listener it came in on.

The server builds one per connection and hands it to the handler with each request; the
authorizer reads it. A connection that has not authenticated (PLAINTEXT, or TLS without a
client certificate) is `User:ANONYMOUS`, as in Kafka.
"""

from __future__ import annotations

import dataclasses

ANONYMOUS = "User:ANONYMOUS"


@dataclasses.dataclass(frozen=True)
class RequestContext:
    principal: str = ANONYMOUS
    client_host: str = ""
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    # Unique per connection of a server (0: none, in process): what a follower's fetch
    # session is bound to, with the principal.
    connection_id: int = 0


ANONYMOUS_CONTEXT = RequestContext()
