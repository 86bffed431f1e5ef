"""InitProducerId (22): an idempotent producer's id and epoch (KIP-98).

Without a transactional id the broker hands out a new producer id at epoch 0, from a block of
ids this broker claimed in ZooKeeper (`/latest_producer_id_block`, as Kafka's brokers claim
them). Transactions are not served: a transactional id is answered INVALID_REQUEST.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey


@dataclasses.dataclass(frozen=True, kw_only=True)
class InitProducerIdRequest(Request):
    API_KEY = ApiKey.INIT_PRODUCER_ID

    transactional_id: str | None = None
    transaction_timeout_ms: int = 60000
    producer_id: int = -1
    producer_epoch: int = -1


@dataclasses.dataclass(frozen=True, kw_only=True)
class InitProducerIdResponse(Response):
    producer_id: int = -1
    producer_epoch: int = -1
