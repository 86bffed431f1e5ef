"""`async with` for the client libraries: entering gives the client, leaving closes it."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class AsyncClosing:
    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
