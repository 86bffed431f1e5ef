"""Kafka's znode paths (spec §1, ZkData.scala)."""

import urllib.parse

CONTROLLER = "/controller"
# Kafka's: the last block of producer ids a broker claimed (node/zk/producer_ids.py).
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
BROKER_SEQUENCE_ID = "/brokers/seqid"
CLUSTER_ID = "/cluster/id"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"


def broker_id(broker: int) -> str:
    return f"{BROKER_IDS}/{broker}"


# Created at broker start-up if missing, parents before children (spec §1).
PERSISTENT_PATHS: tuple[str, ...] = (
    "/keel",
    "/keel/controller_changes",
    "/keel/acknowledged_changes",
    "/consumers",
    BROKERS,
    BROKER_IDS,
    BROKER_TOPICS,
    "/config",
    "/config/changes",
    "/config/topics",
    "/config/clients",
    "/config/users",
    "/config/brokers",
    "/config/ips",
    "/admin",
    "/admin/delete_topics",
    BROKER_SEQUENCE_ID,
    "/isr_change_notification",
    "/latest_producer_id_block",
    "/log_dir_event_notification",  # LOG_DIR_EVENT_NOTIFICATION
    "/cluster",
)


def topic(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}"


def topic_partitions(name: str) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions"


def topic_partition(name: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{partition}"


def partition_state(name: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{name}/partitions/{partition}/state"


def topic_config(name: str) -> str:
    return f"/config/topics/{name}"


ADMIN_DELETE_TOPICS = "/admin/delete_topics"


def delete_topic_marker(name: str) -> str:
    return f"{ADMIN_DELETE_TOPICS}/{name}"


# The legacy admin tools' reassignment request (spec §1, §7.7).
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
# --- dynamic configs (spec §1): /config/<type>/<name> and change notifications ---

CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"


def entity_config(entity_type: str, name: str) -> str:
    return f"/config/{entity_type}/{name}"


def entity_configs(entity_type: str) -> str:
    return f"/config/{entity_type}"


def config_change(name: str) -> str:
    return f"{CONFIG_CHANGES}/{name}"


# Kafka's Sanitizer: an entity name in a path is URL-encoded (Java's URLEncoder, with `*` and a
# space as %2A and %20), so that `User:CN=a/b` is one znode, named as Kafka's tools name it.
def sanitize(name: str) -> str:
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return urllib.parse.unquote_plus(name)


# Keel's own: the active planner's registration (ephemeral; its endpoint as JSON).
KEEL = "/keel"
PLANNER = "/keel/planner"
# The controller's change records (docs/STANDBY.md): a persistent sequential change-<seq> per
# fenced multi-op that wrote partition states, when records are on.
CONTROLLER_CHANGES = "/keel/controller_changes"
CHANGE_PREFIX = "change-"
# The newest of them that every live broker has been told and answered (msgpack; empty: no
# mark), which the controller sets now and then.
ACKNOWLEDGED_CHANGES = "/keel/acknowledged_changes"


def change_sequence(name: str) -> int | None:
    """The sequence of a record's znode name; None for a name that is not a record's."""
    digits = name[len(CHANGE_PREFIX) :]
    return int(digits) if name.startswith(CHANGE_PREFIX) and digits.isdigit() else None


def partition_of_state(path: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition state's path; None for any other path."""
    parts = path.split("/")
    shape = len(parts) == 7 and parts[:3] == ["", "brokers", "topics"] and parts[4] == "partitions"
    if shape and parts[6] == "state" and parts[5].isdigit():
        return parts[3], int(parts[5])
    return None


# Log-dir failures (spec §7.11): a broker whose log directory failed creates a sequential
# `log_dir_event_<seq>` naming itself; the controller handles and deletes them.
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"


def log_dir_event(name: str) -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION}/{name}"


# --- ACLs (Kafka's ZkAclStore, ZkAclChangeStore) ---
# Literal patterns under /kafka-acl/<ResourceType>/<name>, prefixed ones under
# /kafka-acl-extended/prefixed/<ResourceType>/<name>; a change to either is announced by a
# sequential acl_changes_<seq> under its own change path.

KAFKA_ACL = "/kafka-acl"
KAFKA_ACL_EXTENDED = "/kafka-acl-extended"
KAFKA_ACL_CHANGES = "/kafka-acl-changes"
KAFKA_ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"


def acl_root(prefixed: bool) -> str:
    return f"{KAFKA_ACL_EXTENDED}/prefixed" if prefixed else KAFKA_ACL


def acl_changes(prefixed: bool) -> str:
    return KAFKA_ACL_EXTENDED_CHANGES if prefixed else KAFKA_ACL_CHANGES


def acl_resource_type(prefixed: bool, resource_type: str) -> str:
    """`resource_type` as Kafka names it: Topic, Group, Cluster, TransactionalId, ..."""
    return f"{acl_root(prefixed)}/{resource_type}"


def acl_resource(prefixed: bool, resource_type: str, name: str) -> str:
    return f"{acl_root(prefixed)}/{resource_type}/{name}"
