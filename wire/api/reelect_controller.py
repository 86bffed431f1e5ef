"""ReelectController (1000, Keel's own): delete `/controller` so the brokers elect anew.

This is what `zookeeper-shell delete /controller` does, offered over the wire so that
operators and scripts need no ZooKeeper client. The answering broker performs the delete
and reports who was controller before it (-1 if nobody was).
Errors: UNKNOWN_SERVER_ERROR if ZooKeeper cannot be reached.
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReelectControllerRequest(Request):
    API_KEY = ApiKey.REELECT_CONTROLLER


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReelectControllerResponse(Response):
    previous_controller_id: int = -1
