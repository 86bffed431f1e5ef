"""The docs, the README and the code's docstrings and comments name only files and folders
that exist: a path such as `node/zk/client.py` or `tests/contract/` in the text is read as
the tree's own, so a file moved or removed must take its mentions with it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("node", "actors", "wire", "bench", "tests", "docs", "bin")
# A path of the tree: one of its top folders, then folders, ending in a file with a suffix
# or in a folder's slash; not inside another path (`.venv/bin/python`, `/usr/bin/env`).
NAMED = re.compile(
    rf"(?<![\w./-])((?:{'|'.join(TOPS)})/(?:[\w-]+/)*(?:[\w-]+\.(?:py|md|sh|json|js|css|txt)|))(?![\w/-])"
)


def named_paths(text: str) -> set[str]:
    return {m for m in NAMED.findall(text) if "/" in m}


def texts() -> list[Path]:
    code = [p for top in ("node", "actors", "wire", "bench", "tests") for p in (ROOT / top).rglob("*.py")]
    scripts = [p for p in (ROOT / "bin").iterdir() if p.is_file()]
    return [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", *sorted(code), *sorted(scripts)]


def test_every_named_file_exists() -> None:
    missing = {
        str(path.relative_to(ROOT)): sorted(
            p for p in named_paths(path.read_text()) if not (ROOT / p).exists()
        )
        for path in texts()
        if path.resolve() != Path(__file__).resolve()  # its own examples name nothing real
    }
    assert {k: v for k, v in missing.items() if v} == {}


def test_the_check_reads_paths_as_the_docs_write_them() -> None:
    text = (
        "see `node/zk/client.py`, (tests/contract/) and bench/failover.py; "
        "not .venv/bin/python, /usr/bin/env, node.zk.client or actors/topic_admin.assign_replicas"
    )
    assert named_paths(text) == {"node/zk/client.py", "tests/contract/", "bench/failover.py"}
    assert named_paths("node/nowhere.py") == {"node/nowhere.py"}
