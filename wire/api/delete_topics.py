"""DeleteTopics (20): mark topics for deletion and wait, up to `timeout_ms`, until the
receiving broker no longer serves them.

Per-topic errors: UNKNOWN_TOPIC_OR_PARTITION (3) when the topic does not exist,
TOPIC_DELETION_DISABLED (73) when `delete.topic.enable` is false, REQUEST_TIMED_OUT (7) when
the deletion was accepted but has not finished within the timeout (it goes on), INVALID_REQUEST
(42) when a name repeats in the request.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteTopicsRequest(Request):
    API_KEY = ApiKey.DELETE_TOPICS

    topic_names: list[str]
    # 0 or less: answer at once (REQUEST_TIMED_OUT for every accepted topic), as Kafka does.
    timeout_ms: int = 30000


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeletableTopicResult(Struct):
    name: str
    error_code: int
    error_message: str | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class DeleteTopicsResponse(Response):
    responses: list[DeletableTopicResult] = dataclasses.field(default_factory=list)
