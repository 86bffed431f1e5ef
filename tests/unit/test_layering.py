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


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path, known: set[str]) -> set[str]:
    """Our modules that `path` imports, type-only imports included: a cycle through
    `if TYPE_CHECKING:` still ties the two modules into one."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found.update(name for name in names if name in known)
    return found


def import_cycles() -> list[list[str]]:
    paths = {module_name(p): p for package in sorted(OURS) for p in sources(package)}
    known = set(paths)
    graph = {name: module_imports(path, known) - {name} for name, path in paths.items()}
    # Importing a package runs its __init__, which may import its own modules: not a cycle.
    for name, targets in graph.items():
        graph[name] = {m for m in targets if not name.startswith(m + ".")}
    cycles, state = [], dict.fromkeys(graph, 0)

    def visit(name: str, stack: list[str]) -> None:
        state[name] = 1
        stack.append(name)
        for target in sorted(graph[name]):
            if state[target] == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif state[target] == 0:
                visit(target, stack)
        stack.pop()
        state[name] = 2

    for name in sorted(graph):
        if state[name] == 0:
            visit(name, [])
    return cycles


def test_no_import_cycles() -> None:
    assert import_cycles() == []
