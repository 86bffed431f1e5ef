"""The produce benchmark's baseline: the least a replicated append can cost on this machine.

A minimal asyncio program in three processes, like three brokers. The "leader" takes
length-prefixed frames from a client, writes each to its file, forwards it to two
"followers" that write it to theirs and answer one byte, and answers the client once both
have. Frames are pipelined end to end; nothing is parsed, checked or indexed.

    python -m bench.baseline_pipe follower PORT FILE
    python -m bench.baseline_pipe leader PORT FILE FOLLOWER_PORT FOLLOWER_PORT
"""

from __future__ import annotations

import asyncio
import collections
import struct
import sys
from typing import BinaryIO

import uvloop

_LENGTH = struct.Struct(">I")


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        (length,) = _LENGTH.unpack(await reader.readexactly(4))
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        return None


async def follower(port: int, out: BinaryIO) -> None:

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (frame := await read_frame(reader)) is not None:
            out.write(frame)
            writer.write(b"\x01")
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    await server.serve_forever()


async def leader(port: int, out: BinaryIO, follower_ports: list[int]) -> None:

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        links = [await asyncio.open_connection("127.0.0.1", p) for p in follower_ports]
        pending: collections.deque[None] = collections.deque()

        async def acks() -> None:
            # Followers answer in order: one byte from each completes the oldest frame.
            while True:
                try:
                    await asyncio.gather(*(r.readexactly(1) for r, _ in links))
                except asyncio.IncompleteReadError:
                    return
                pending.popleft()
                writer.write(b"\x01")

        collector = asyncio.create_task(acks())
        while (frame := await read_frame(reader)) is not None:
            out.write(frame)
            header = _LENGTH.pack(len(frame))
            for _, link in links:
                link.write(header)
                link.write(frame)
            pending.append(None)
            await asyncio.gather(*(link.drain() for _, link in links))
        collector.cancel()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", port)
    await server.serve_forever()


def main() -> None:
    role, port, path, *rest = sys.argv[1:]
    with open(path, "ab", buffering=0) as out:
        if role == "follower":
            uvloop.run(follower(int(port), out))
        else:
            uvloop.run(leader(int(port), out, [int(p) for p in rest]))


if __name__ == "__main__":
    main()
