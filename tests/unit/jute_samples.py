"""What the codec tests lay out with aiozk's own parts: rendered bytes and sample Stats."""

from __future__ import annotations

import struct
from typing import Any

from aiozk.protocol.stat import Stat


def rendered(*parts: Any) -> bytes:
    """aiozk's own rendering of `parts`, back to back."""
    formats, data = [], []
    for part in parts:
        fmt, values = part.render()
        formats.append(fmt)
        data += values
    return struct.pack("!" + "".join(formats), *data)


def sample_stat(version: int, *, num_children: int = 0) -> Stat:
    return Stat(
        created_zxid=0x100000001 + version,
        last_modified_zxid=0x100000002,
        created=1_700_000_000_000,
        modified=1_700_000_000_001,
        version=version,
        child_version=0,
        acl_version=0,
        ephemeral_owner=0x1234 if version % 2 else 0,
        data_length=12,
        num_children=num_children,
        last_modified_children=0x100000003,
    )


def stat_fields(stat: Stat) -> dict[str, int]:
    return {name: getattr(stat, name) for name, _ in Stat.parts}
