"""The wire format of a Kafka listener: Kafka's binary protocol in, Keel's requests out.

`KafkaWireFormat` is what `RpcServer` parses and encodes with on a listener of
`kafka.listeners`; everything else (framing, connection limits, TLS, idle timeouts, one
request at a time per connection, so that answers go out in request order as Kafka's clients
require) is the server's, as on Keel's own listeners. A request is read with kio
(`codec.read_request`), refused unless its API and version are advertised
(`versions.ADVERTISED`), and translated to Keel's (`translations`); the handler's answer is
translated back into the request's version.

As Kafka's broker: a request that cannot be read, or of an API or version not advertised,
closes its connection; ApiVersions of a version it does not advertise is answered at
version 0 with UNSUPPORTED_VERSION and the table, so that the client can pick again; a
Produce with `acks=0` gets no answer, and when a partition of it failed its connection is
closed instead (`FailedUnansweredProduce`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from wire.api import API_SPECS, ApiKey, ApiVersionsRequest, Response
from wire.context import RequestContext
from wire.envelope import ParsedRequest, RequestHeader
from wire.errors import ErrorCode, FrameError, InvalidRequest, UnsupportedVersion, WireError
from wire.kafka.codec import (
    KafkaHeader,
    build,
    peek_header,
    read_request,
    response_schema,
    write_response,
)
from wire.kafka.translations import TRANSLATIONS, api_versions_fields
from wire.kafka.versions import ADVERTISED, MIN_PRODUCE_SERVED


@dataclasses.dataclass(frozen=True)
class KafkaRequest(ParsedRequest):
    """A Kafka request as Keel's (`body`), with what answering it in Kafka's protocol needs:
    its Kafka header and kio body (None for an ApiVersions of a version not advertised)."""

    kafka_header: KafkaHeader | None = None
    kafka_body: Any = None


class FailedUnansweredProduce(FrameError):
    """Kafka's answer to a Produce with `acks=0` that failed on a partition: its connection
    closes, the one thing a producer that reads no answers notices, so that it refreshes its
    metadata (a moved leader) rather than go on sending where nothing is written. The server
    closes a connection on any FrameError, with one line in its log."""


class KafkaWireFormat:
    def parse(self, frame: bytes, context: RequestContext) -> ParsedRequest:
        prefix = peek_header(frame)
        if prefix is not None and prefix[0] == ApiKey.API_VERSIONS and not _advertised(*prefix[:2]):
            unknown = KafkaHeader(ApiKey.API_VERSIONS, 0, prefix[2], None)
            return _request(unknown, None, ApiVersionsRequest(), context)
        header, body = read_request(frame)
        if not _advertised(header.api_key, header.api_version):
            raise UnsupportedVersion(f"API {header.api_key} version {header.api_version} is not served here")
        if header.api_key == ApiKey.PRODUCE and header.api_version < MIN_PRODUCE_SERVED:
            raise UnsupportedVersion(
                f"Produce v{header.api_version} (magic 0 or 1 message sets) is not served"
            )
        keel = TRANSLATIONS[header.api_key].to_keel(body, header.api_version)
        return _request(header, body, keel, context)

    def encode(self, request: ParsedRequest, response: Response) -> bytes | None:
        assert isinstance(request, KafkaRequest) and request.kafka_header is not None
        header = request.kafka_header
        if request.kafka_body is None:  # ApiVersions of a version not advertised
            fields = api_versions_fields(ErrorCode.UNSUPPORTED_VERSION)
            return write_response(header, build(response_schema(ApiKey.API_VERSIONS, 0), fields))
        fields = TRANSLATIONS[header.api_key].to_kafka(request.kafka_body, response)
        if header.api_key == ApiKey.PRODUCE and request.kafka_body.acks == 0:
            failed = [
                f"{t['name']}-{p['index']} {ErrorCode(p['error_code']).name}"
                for t in cast("list[dict[str, Any]]", fields["responses"])
                for p in t["partition_responses"]
                if p["error_code"]
            ]
            if failed:
                raise FailedUnansweredProduce(
                    f"Produce with acks=0 failed on {len(failed)} partitions ({', '.join(failed[:3])})"
                )
            return None
        return write_response(header, build(response_schema(header.api_key, header.api_version), fields))

    def refuse(self, error: WireError) -> bytes:
        # parse() refuses only by closing the connection, as Kafka's broker does.
        raise InvalidRequest(f"no Kafka answer for {error.message}")


def _advertised(api_key: int, version: int) -> bool:
    low, high = ADVERTISED.get(api_key, (0, -1))
    return low <= version <= high


def _request(header: KafkaHeader, body: Any, keel: Any, context: RequestContext) -> KafkaRequest:
    spec = API_SPECS[header.api_key]
    keel_header = RequestHeader(header.api_key, spec.max_version, header.correlation_id, header.client_id)
    return KafkaRequest(keel_header, spec, keel, context, kafka_header=header, kafka_body=body)
