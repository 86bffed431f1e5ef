"""The APIs and versions a Kafka listener advertises in ApiVersions.

Every client Keel is tested with overlaps each range: aiokafka needs a range that holds one
of its own versions (Metadata 5, Produce 7, Fetch 11), librdkafka Produce from 0 (its
compressed produce fails otherwise, KAFKA-18659; v0-2, magic 0 and 1, are refused when they
come) and kafka-python infers Kafka 3.0 from ListOffsets 7, and so writes record batches
(magic 2). No inter-broker API is advertised: kafka-python would infer a broker version from
LeaderAndIsr, and the controller's requests go over Keel's own listener only.
"""

from __future__ import annotations

from typing import Final

from wire.api.keys import ApiKey

ADVERTISED: Final[dict[int, tuple[int, int]]] = {
    ApiKey.PRODUCE: (0, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (0, 9),
    ApiKey.API_VERSIONS: (0, 3),
}
# Advertised from 0, served from 3: the first version that carries record batches.
MIN_PRODUCE_SERVED: Final = 3
