"""`metrics.http.listener`'s value, checked with the rest of a process's configuration (kept
apart from the HTTP server so that reading a configuration loads no web framework)."""

from __future__ import annotations

LISTENER_KEY = "metrics.http.listener"


class MetricsListenerError(ValueError):
    pass


def parse_listener(raw: str) -> tuple[str, int]:
    """`host:port` (`[v6]:port`; an empty host: every interface; port 0: any free one)."""
    host, sep, port = raw.strip().rpartition(":")
    if not sep:
        raise MetricsListenerError(f"{raw!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        number = int(port)
    except ValueError:
        raise MetricsListenerError(f"{raw!r}: the port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise MetricsListenerError(f"{raw!r}: the port {number} is outside 0..65535")
    return host, number
