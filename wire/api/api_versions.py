"""ApiVersions (18): which APIs and versions this broker answers.

Errors: none beyond the envelope's (UNSUPPORTED_VERSION for an unknown version).
"""

from __future__ import annotations

import dataclasses

from wire.api.base import Request, Response
from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApiVersionsRequest(Request):
    API_KEY = ApiKey.API_VERSIONS


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApiVersionRange(Struct):
    api_key: int
    min_version: int
    max_version: int


@dataclasses.dataclass(frozen=True, kw_only=True)
class ApiVersionsResponse(Response):
    api_keys: list[ApiVersionRange] = dataclasses.field(default_factory=list)
