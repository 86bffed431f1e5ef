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
    ApiKey.SASL_HANDSHAKE: (1, 1),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 7),
    # v6 names topics by id as well; Keel's DeleteTopics names them.
    ApiKey.DELETE_TOPICS: (1, 5),
    ApiKey.DELETE_RECORDS: (0, 2),
    # Idempotent producers only: a transactional id is refused.
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    # librdkafka sends exactly v2.
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    # The older form: the named configs replace the resource's dynamic ones.
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    # The classic group protocol; aiokafka needs OffsetCommit 2 and 3, and a range that holds
    # one of its versions of each. FindCoordinator 4 and up batches keys: not served.
    ApiKey.FIND_COORDINATOR: (0, 3),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.OFFSET_FETCH: (1, 7),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    # Over the bindings `keel acl` writes; SECURITY_DISABLED without an authorizer. Not v3:
    # kafka-python would infer Kafka 3.3 from DescribeAcls 3, and then, held to a configured
    # 3.0, send Kafka 3.0's own versions (Metadata 11) instead of this table's.
    # (kio has no v0 of these: Kafka 3.x's own brokers serve them from v1.)
    ApiKey.DESCRIBE_ACLS: (1, 2),
    ApiKey.CREATE_ACLS: (1, 2),
    ApiKey.DELETE_ACLS: (1, 2),
}
# Advertised from 0, served from 3: the first version that carries record batches.
MIN_PRODUCE_SERVED: Final = 3
