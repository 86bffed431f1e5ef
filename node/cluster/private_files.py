"""Files that hold secrets (passwords in properties, private keys), created readable by their
owner alone before anything is written to them: writing first and narrowing the mode after
leaves the secret readable by others for a moment, and the default umask leaves it so."""

from __future__ import annotations

import os
from pathlib import Path


def private(path: Path) -> Path:
    """`path` created empty (or emptied) with mode 0600, whatever the umask or its mode
    before; then write it as usual."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return path
