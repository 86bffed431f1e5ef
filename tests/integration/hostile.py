"""A hostile client in a process of its own, for `test_hostile_clients.py`: it opens many
connections to a broker and keeps them useless, so that the test's own event loop (which
measures a normal client's latency) does none of the attack's work.

- idle: connected, nothing sent;
- torn: 2 bytes of a frame's 4-byte length, then nothing; every other one then shuts its
  writing side (half-closed), which the broker must notice and close;
- slow: a frame that declares `--declared` bytes, then a trickle of 64 bytes per connection
  every second (slowloris), never completing it.

Prints `ready <open connections>` once all are open, then trickles until killed.

    python -m tests.integration.hostile PORT --idle 1000 --torn 500 --slow 500
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys

_BATCH = 100  # connections opened at once (the broker's listen backlog is larger)
_TRICKLE = b"\x00" * 64


async def open_connections(port: int, count: int) -> list[socket.socket]:
    loop = asyncio.get_running_loop()
    sockets: list[socket.socket] = []

    async def one() -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        await loop.sock_connect(sock, ("127.0.0.1", port))
        return sock

    for start in range(0, count, _BATCH):
        sockets += await asyncio.gather(*(one() for _ in range(min(_BATCH, count - start))))
    return sockets


async def attack(port: int, idle: int, torn: int, slow: int, declared: int) -> None:
    held = await open_connections(port, idle)
    for i, sock in enumerate(await open_connections(port, torn)):
        sock.send(declared.to_bytes(4, "big")[:2])
        if i % 2:
            sock.shutdown(socket.SHUT_WR)
        held.append(sock)
    trickling = await open_connections(port, slow)
    for sock in trickling:
        sock.send(declared.to_bytes(4, "big"))
    print(f"ready {len(held) + len(trickling)}", flush=True)
    # Each connection every second, spread over the second in tenths (as independent
    # clients would be, rather than one burst).
    tenth = max(1, len(trickling) // 10)
    while True:
        for start in range(0, len(trickling), tenth):
            for sock in trickling[start : start + tenth]:
                # Full or closed by the broker: the attack goes on with the others.
                with contextlib.suppress(OSError):
                    sock.send(_TRICKLE)
            await asyncio.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--torn", type=int, default=500)
    parser.add_argument("--slow", type=int, default=500)
    parser.add_argument("--declared", type=int, default=1_048_576)
    args = parser.parse_args()
    try:
        asyncio.run(attack(args.port, args.idle, args.torn, args.slow, args.declared))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
