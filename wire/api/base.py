"""What every API declaration is made of: a request body, a response body, a version range."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from wire.api.keys import ApiKey
from wire.schema import Struct


@dataclasses.dataclass(frozen=True, kw_only=True)
class Request(Struct):
    API_KEY: ClassVar[ApiKey]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Response(Struct):
    """Every response body carries `error_code` (0 = none) and, on error, `error_message`."""

    error_code: int = 0
    error_message: str | None = None


@dataclasses.dataclass(frozen=True)
class ApiSpec:
    key: ApiKey
    min_version: int
    max_version: int
    request: type[Request]
    response: type[Response]
