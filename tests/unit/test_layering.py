"""The layering `bin → node → actors → wire`, checked on every import in the tree.

`wire/` imports nothing of ours, and its codec no asyncio; `actors/` imports only `wire`
of ours and never aiozk, sockets or files; `node/` may import `actors` and `wire`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {"wire", "actors", "node"}
ALLOWED = {"wire": set(), "actors": {"wire"}, "node": {"actors", "wire"}}
FORBIDDEN_IN_ACTORS = {
    "aiozk",
    "kazoo",
    "socket",
    "subprocess",
    "os",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "open",
}
# The sans-I/O codec: the asyncio server and client live beside it, not in it.
CODEC = {"__init__.py", "errors.py", "frames.py", "schema.py", "envelope.py"}


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(OURS))
def test_packages_import_only_the_layers_below(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted((imports(path) & OURS) - ALLOWED[package] - {package})
        for path in sources(package)
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_actors_touch_no_io() -> None:
    offenders = {}
    for path in sources("actors"):
        used = imports(path) & FORBIDDEN_IN_ACTORS
        calls_open = any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "open"
            for n in ast.walk(ast.parse(path.read_text()))
        )
        if used or calls_open:
            offenders[str(path.relative_to(ROOT))] = sorted(used | ({"open"} if calls_open else set()))
    assert offenders == {}


def test_wire_codec_has_no_asyncio() -> None:
    paths = [p for p in sources("wire") if p.name in CODEC or p.parent.name == "api"]
    assert len(paths) > 5
    assert {str(p.relative_to(ROOT)) for p in paths if "asyncio" in imports(p)} == set()


def test_the_check_sees_a_violation() -> None:
    # Guard against a check that cannot fail: the node package does import actors.
    assert "actors" in set().union(*(imports(p) for p in sources("node")))
