"""Kafka's error codes and the exception tree that carries them.

Error codes travel as data (`error_code` in every response body); `WireError` and its
subclasses carry a code through Python code paths. `for_code` turns a code read off the
wire back into the matching exception, as aiokafka's `errors.for_code` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import ClassVar


class ErrorCode(IntEnum):
    """Kafka's numbers and names (clients/.../common/protocol/Errors.java)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    INVALID_PRODUCER_EPOCH = 47
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    SASL_AUTHENTICATION_FAILED = 58
    REASSIGNMENT_IN_PROGRESS = 60
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    INVALID_UPDATE_VERSION = 95
    BROKER_ID_NOT_REGISTERED = 102
    INELIGIBLE_REPLICA = 107


class WireError(Exception):
    """Root of every error that has a Kafka error code.

    `retriable` is Kafka's RetriableException: the same request may succeed if sent again
    after a metadata refresh or a pause (a moved leader, a lost connection, a busy ISR).
    Every client's retry loop asks the error, not a list of its own.
    """

    code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: ClassVar[bool] = False
    _by_code: ClassVar[dict[ErrorCode, type[WireError]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        WireError._by_code[cls.code] = cls

    def __init__(self, message: str = "", correlation_id: int | None = None) -> None:
        super().__init__(message or self.code.name)
        self.message = message or self.code.name
        # Set when the error was found after the correlation id could be read, so the
        # server can still answer instead of closing the connection.
        self.correlation_id = correlation_id

    @property
    def error_code(self) -> ErrorCode:
        return self.code


class UnknownServerError(WireError):
    code = ErrorCode.UNKNOWN_SERVER_ERROR


class CorruptMessage(WireError):
    code = ErrorCode.CORRUPT_MESSAGE
    retriable = True


class InvalidRecord(WireError):
    """A batch whose records do not match its header, or that a client may not write
    (Kafka's InvalidRecordException): nothing of it is appended, and sending it again fails
    the same way."""

    code = ErrorCode.INVALID_RECORD


class UnsupportedCompressionType(WireError):
    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


class OutOfOrderSequence(WireError):
    """An idempotent producer's batch whose sequence does not follow the last one this
    partition appended for it (Kafka's OutOfOrderSequenceException)."""

    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpoch(WireError):
    """A batch of a producer epoch older than one this partition has appended: a fenced
    producer (Kafka's InvalidProducerEpochException)."""

    code = ErrorCode.INVALID_PRODUCER_EPOCH


class InvalidRequest(WireError):
    code = ErrorCode.INVALID_REQUEST


class UnsupportedVersion(WireError):
    code = ErrorCode.UNSUPPORTED_VERSION


class PolicyViolation(WireError):
    """A request that would pass one of the broker's limits (max.partitions, ...)."""

    code = ErrorCode.POLICY_VIOLATION


class RequestTimedOut(WireError):
    code = ErrorCode.REQUEST_TIMED_OUT
    retriable = True


class NetworkException(WireError):
    code = ErrorCode.NETWORK_EXCEPTION
    retriable = True


class BrokerUnreachable(NetworkException):
    """No connection could be opened: nothing listens there, or it did not answer in time.
    A NetworkException like any other to a client that retries; a command tells the user the
    cluster may not be up."""


def all_failed(errors: Sequence[WireError], prefix: str = "") -> NetworkException:
    """The one error for a request that each broker asked in turn failed: BrokerUnreachable
    when not one of them could be reached."""
    message = prefix + "; ".join(e.message for e in errors)
    if errors and all(isinstance(e, BrokerUnreachable) for e in errors):
        return BrokerUnreachable(message)
    return NetworkException(message)


class NotController(WireError):
    code = ErrorCode.NOT_CONTROLLER
    retriable = True


class CoordinatorLoadInProgress(WireError):
    """The group's coordinator is still loading its partition of `__consumer_offsets`."""

    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    retriable = True


class CoordinatorNotAvailable(WireError):
    """No broker coordinates the group yet (`__consumer_offsets` made, or its leader moving)."""

    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True


class NotCoordinator(WireError):
    """The broker asked no longer coordinates the group: find the coordinator again."""

    code = ErrorCode.NOT_COORDINATOR
    retriable = True


class TopicAuthorizationFailed(WireError):
    """The authorizer refused an operation on a topic (per topic in a response)."""

    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED


class ClusterAuthorizationFailed(WireError):
    """The authorizer refused an operation on the cluster: the whole request is refused and
    nothing of it is applied."""

    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


class StaleControllerEpoch(WireError):
    code = ErrorCode.STALE_CONTROLLER_EPOCH


class StaleBrokerEpoch(WireError):
    code = ErrorCode.STALE_BROKER_EPOCH


class BrokerNotAvailable(WireError):
    code = ErrorCode.BROKER_NOT_AVAILABLE


class OffsetOutOfRange(WireError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE


class UnknownTopicOrPartition(WireError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    retriable = True


class NotLeaderOrFollower(WireError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    retriable = True


class MessageTooLarge(WireError):
    code = ErrorCode.MESSAGE_TOO_LARGE


class NotEnoughReplicas(WireError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS
    retriable = True


class NotEnoughReplicasAfterAppend(WireError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True


class FencedLeaderEpoch(WireError):
    code = ErrorCode.FENCED_LEADER_EPOCH
    retriable = True


class UnknownLeaderEpoch(WireError):
    code = ErrorCode.UNKNOWN_LEADER_EPOCH
    retriable = True


class KafkaStorageError(WireError):
    code = ErrorCode.KAFKA_STORAGE_ERROR
    retriable = True


class LeaderNotAvailable(WireError):
    code = ErrorCode.LEADER_NOT_AVAILABLE
    retriable = True


class ReplicaNotAvailable(WireError):
    code = ErrorCode.REPLICA_NOT_AVAILABLE
    retriable = True


class FetchSessionIdNotFound(WireError):
    code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    retriable = True


class InvalidFetchSessionEpoch(WireError):
    code = ErrorCode.INVALID_FETCH_SESSION_EPOCH
    retriable = True


class UnsupportedSaslMechanism(WireError):
    """The client asked for a SASL mechanism this listener does not enable."""

    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM


class IllegalSaslState(WireError):
    """A SASL request out of order: SaslAuthenticate before SaslHandshake, a second
    handshake in the middle of an exchange, or SASL on a listener without it."""

    code = ErrorCode.ILLEGAL_SASL_STATE


class SaslAuthenticationFailed(WireError):
    """Wrong credentials, an unknown user, or a malformed SASL message. Not retriable: the
    same credentials fail again (Kafka's SaslAuthenticationException)."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class FrameError(CorruptMessage):
    """The byte stream itself is broken (bad length): the connection cannot continue."""

    retriable = False


def for_code(code: int, message: str = "") -> WireError:
    """The exception for an error code read off the wire."""
    try:
        error_code = ErrorCode(code)
    except ValueError:
        return UnknownServerError(f"unknown error code {code}: {message}")
    cls = WireError._by_code.get(error_code)
    if cls is None:
        error = UnknownServerError(message or error_code.name)
        error.code = error_code  # type: ignore[misc]
        return error
    return cls(message)


def is_retriable(code: int) -> bool:
    """Whether an error code read off the wire names a retriable error."""
    try:
        cls = WireError._by_code.get(ErrorCode(code))
    except ValueError:
        return False
    return cls is not None and cls.retriable
