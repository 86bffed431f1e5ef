"""The layering `bin → node → actors → wire`, checked on every import in the tree.

`wire/` imports nothing of ours, and only its asyncio shell (client, pool, server, connection
quotas) uses asyncio: the rest is the sans-I/O codec, which imports no part of the shell.
`actors/` imports only `wire` of ours, and never the shell, aiozk, sockets, TLS, files, threads
or processes; nor does it call asyncio's own I/O (streams, servers, subprocesses, executors).
`node/` may import `actors` and `wire`. Relative imports count as what they name.

Inside `node/`, its packages stand on three floors (node/__init__.py is the floor plan):
libraries every process uses, the processes, the tools. A package imports the floors below
its own; on its floor, a library or a tool imports only those named before it, and the two
processes import neither the other. Inside `actors/`, its packages are grouped by what they
hold: `base` (the runtime, the ports) under the rules (`admin`, then `security`), under the
actors (`replica`, `controller`), which import neither the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OURS = {"wire", "actors", "node"}
ALLOWED = {"wire": set(), "actors": {"wire"}, "node": {"actors", "wire"}}
# node/'s floors, from the bottom; on an ordered floor a package may import those before it.
Floors = tuple[tuple[str, bool, tuple[str, ...]], ...]
NODE_FLOORS: Floors = (
    ("libraries", True, ("command", "security", "metrics", "zk", "clients", "config")),
    ("processes", False, ("broker", "planner")),
    ("tools", True, ("sim", "cluster", "chaos", "cli", "ui")),
)
# actors/'s packages by what they hold: the runtime and ports under everything, the admin
# rules, then security, the replica manager, the controller and the group coordinator, none of
# which uses another.
ACTORS_FLOORS: Floors = (
    ("base", True, ("base",)),
    ("rules", True, ("admin", "security")),
    ("actors", False, ("replica", "controller", "group")),
)
# Modules whose import means files, sockets, TLS, processes, threads or a ZooKeeper client.
FORBIDDEN_IN_ACTORS = {
    "aiozk",
    "kazoo",
    "socket",
    "ssl",
    "select",
    "selectors",
    "mmap",
    "fcntl",
    "subprocess",
    "multiprocessing",
    "threading",
    "concurrent",
    "os",
    "io",
    "builtins",
    "pathlib",
    "shutil",
    "tempfile",
}
# asyncio's own I/O, as functions of `asyncio` or methods of an event loop: streams and
# servers, subprocesses, threads and executors, pipes, raw sockets, name lookups.
ASYNCIO_IO = {
    "open_connection",
    "open_unix_connection",
    "start_server",
    "start_unix_server",
    "create_subprocess_exec",
    "create_subprocess_shell",
    "subprocess",
    "to_thread",
    "run_in_executor",
    "set_default_executor",
    "create_connection",
    "create_unix_connection",
    "create_server",
    "create_unix_server",
    "create_datagram_endpoint",
    "connect_accepted_socket",
    "connect_read_pipe",
    "connect_write_pipe",
    "subprocess_exec",
    "subprocess_shell",
    "start_tls",
    "sendfile",
    "sock_accept",
    "sock_connect",
    "sock_recv",
    "sock_recv_into",
    "sock_recvfrom",
    "sock_recvfrom_into",
    "sock_sendall",
    "sock_sendto",
    "sock_sendfile",
    "add_reader",
    "add_writer",
    "getaddrinfo",
    "getnameinfo",
}
LOOP_GETTERS = {"get_running_loop", "get_event_loop", "new_event_loop"}
# The asyncio shell of wire/; every other module of it is sans-I/O.
WIRE_ASYNCIO = {"wire.client", "wire.connection_quotas", "wire.pool", "wire.request_memory", "wire.server"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path) -> str:
    """The package a module's relative imports start from: a package's own for its __init__."""
    return ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imported_names(tree: ast.Module, package: str) -> set[str]:
    """Every module imported, and every name imported from one, dotted in full, relative
    imports resolved against `package` (type-only imports included)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if node.level > len(parts):
                    raise ValueError(f"{package}: a relative import above the top package")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def top_level(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


def imports(path: Path) -> set[str]:
    return top_level(imported_names(parse(path), package_of(path)))


def within(names: set[str], modules: set[str]) -> set[str]:
    """The names that are one of `modules` or inside one."""
    return {n for n in names if any(n == m or n.startswith(m + ".") for m in modules)}


def _is_asyncio_or_loop(target: ast.expr, asyncio_names: set[str]) -> bool:
    if isinstance(target, ast.Name):
        return target.id in asyncio_names or target.id.lower().endswith("loop")
    if isinstance(target, ast.Attribute):
        return target.attr.lower().endswith("loop")
    if isinstance(target, ast.Call):  # asyncio.get_running_loop().create_connection(...)
        func = target.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in LOOP_GETTERS
    return False


def io_in_actors(tree: ast.Module, package: str) -> set[str]:
    """What a module of actors/ does that is I/O: the modules and asyncio functions it
    imports, and the calls it makes (`open`, asyncio's I/O on `asyncio` or a loop)."""
    names = imported_names(tree, package)
    found = top_level(names) & FORBIDDEN_IN_ACTORS
    found |= within(names, {f"asyncio.{name}" for name in ASYNCIO_IO}) | shell_imports(tree, package)
    asyncio_names = {"asyncio"} | {
        alias.asname
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "asyncio" and alias.asname
    }
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.add("open")
        elif (
            isinstance(func, ast.Attribute)
            and func.attr in ASYNCIO_IO
            and _is_asyncio_or_loop(func.value, asyncio_names)
        ):
            found.add(ast.unparse(func))
    return found


def shell_imports(tree: ast.Module, package: str) -> set[str]:
    """What a module imports of wire's asyncio shell (so, through it, of asyncio)."""
    return within(imported_names(tree, package), WIRE_ASYNCIO)


@pytest.mark.parametrize("package", sorted(OURS))
def test_packages_import_only_the_layers_below(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted((imports(path) & OURS) - ALLOWED[package] - {package})
        for path in sources(package)
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def package_in(top: str, module: str) -> str | None:
    """The package of `top` a module is in (`node.zk.client` -> `zk`); None outside one."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == top else None


def allowed_on(floors: Floors, package: str) -> set[str]:
    """The packages that `package` may import, by the floors."""
    allowed: set[str] = set()
    for _, ordered, packages in floors:
        if package in packages:
            return allowed | (set(packages[: packages.index(package)]) if ordered else set())
        allowed |= set(packages)
    raise AssertionError(f"{package} stands on no floor: put it on one")


def floor_offenders(modules: dict[str, set[str]], top: str, floors: Floors) -> dict[str, list[str]]:
    """For each module of `top` (by name, with the names it imports), the packages of `top`
    it imports that its floor does not allow."""
    offenders = {}
    for module, names in modules.items():
        package = package_in(top, module)
        if package is None:
            continue
        used = {package_in(top, n) for n in names} - {None, package}
        wrong = sorted(p for p in used if p is not None and p not in allowed_on(floors, package))
        if wrong:
            offenders[module] = wrong
    return offenders


def node_floor_offenders(modules: dict[str, set[str]]) -> dict[str, list[str]]:
    return floor_offenders(modules, "node", NODE_FLOORS)


@pytest.mark.parametrize(("top", "floors"), [("node", NODE_FLOORS), ("actors", ACTORS_FLOORS)])
def test_packages_stand_on_their_floors(top: str, floors: Floors) -> None:
    placed = {p for _, _, packages in floors for p in packages}
    present = {path.parent.name for path in (ROOT / top).glob("*/__init__.py")}
    assert present == placed, f"every package of {top}/ is on exactly one floor"
    loose = sorted(p.name for p in (ROOT / top).glob("*.py") if p.name != "__init__.py")
    assert loose == [], f"{top}/'s modules live in its packages"
    modules = {module_name(p): imported_names(parse(p), package_of(p)) for p in sources(top)}
    assert floor_offenders(modules, top, floors) == {}


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("actors.base.ports", "actors.admin.topic_admin"),  # the base imports a rule
        ("actors.admin.topic_admin", "actors.security.acl"),  # admin imports one named after it
        ("actors.admin.config_admin", "actors.replica.replication_quota"),  # a rule imports an actor
        ("actors.controller.context", "actors.replica.partition"),  # an actor imports the other
    ],
)
def test_the_actors_floor_check_sees_a_violation(module: str, imported: str) -> None:
    assert floor_offenders({module: {imported}}, "actors", ACTORS_FLOORS) != {}


@pytest.mark.parametrize(
    ("module", "imported"),
    [
        ("node.zk.client", "node.broker.config"),  # a library imports a process
        ("node.security.jaas", "node.zk.acls"),  # a library imports one named after it
        ("node.planner.config", "node.broker.config"),  # a process imports the other
        ("node.broker.logs", "node.cli.main"),  # a process imports a tool
        ("node.cluster.local", "node.chaos.run"),  # a tool imports one named after it
    ],
)
def test_the_floor_check_sees_a_violation(module: str, imported: str) -> None:
    assert node_floor_offenders({module: {imported}}) != {}


def test_the_floor_check_lets_a_package_use_what_is_below() -> None:
    assert (
        node_floor_offenders({"node.ui.main": {"node.cli.arguments", "node.planner.request", "node.zk"}})
        == {}
    )


def test_actors_touch_no_io() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(io_in_actors(parse(path), package_of(path)))
        for path in sources("actors")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_the_wire_shell_uses_asyncio() -> None:
    """The shell listed above is exactly the modules of wire/ that import asyncio: a new one
    is either codec, and must not, or shell, and is listed here."""
    users = {module_name(p) for p in sources("wire") if "asyncio" in imports(p)}
    assert users == WIRE_ASYNCIO
    codec = [p for p in sources("wire") if module_name(p) not in WIRE_ASYNCIO]
    assert len(codec) > 20


def test_the_wire_codec_does_not_import_the_shell() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(shell_imports(parse(path), package_of(path)))
        for path in sources("wire")
        if module_name(path) not in WIRE_ASYNCIO
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_check_sees_a_violation() -> None:
    # Guard against a check that cannot fail: the node package does import actors.
    assert "actors" in set().union(*(imports(p) for p in sources("node")))


def test_relative_imports_resolve_to_the_modules_they_name() -> None:
    tree = ast.parse("from . import events\nfrom ..replica.handle import BrokerHandle\n")
    assert imported_names(tree, "actors.controller") == {
        "actors.controller",
        "actors.controller.events",
        "actors.replica.handle",
        "actors.replica.handle.BrokerHandle",
    }
    with pytest.raises(ValueError, match="above the top package"):
        imported_names(ast.parse("from ... import x\n"), "wire.api")


@pytest.mark.parametrize(
    "source",
    [
        "import ssl\n",
        "import selectors\n",
        "from mmap import mmap\n",
        "from concurrent.futures import ThreadPoolExecutor\n",
        "from asyncio import open_connection\n",
        "import asyncio.subprocess\n",
        "from wire import server\n",
        "from wire.pool import ConnectionPool\n",
        "reader, writer = await asyncio.open_connection('h', 1)\n",
        "server = await asyncio.start_server(handle, 'h', 1)\n",
        "proc = await asyncio.create_subprocess_exec('ls')\n",
        "proc = await asyncio.create_subprocess_shell('ls')\n",
        "value = await asyncio.to_thread(work)\n",
        "import asyncio as aio\nvalue = await aio.to_thread(work)\n",
        "await loop.create_connection(factory, 'h', 1)\n",
        "await self._loop.run_in_executor(None, work)\n",
        "await asyncio.get_running_loop().create_server(factory, 'h', 1)\n",
        "await event_loop.getaddrinfo('h', 1)\n",
        "data = open('f').read()\n",
    ],
)
def test_the_io_check_sees_a_violation(source: str) -> None:
    assert io_in_actors(ast.parse(source), "actors.replica") != set()


@pytest.mark.parametrize(
    ("source", "package"),
    [
        ("from . import client\n", "wire"),
        ("from .pool import ConnectionPool\n", "wire"),
        ("from ..server import RpcServer\n", "wire.api"),
        ("import wire.connection_quotas\n", "wire"),
    ],
)
def test_the_shell_check_sees_a_violation(source: str, package: str) -> None:
    assert shell_imports(ast.parse(source), package) != set()


def test_the_io_check_lets_the_loop_schedule() -> None:
    source = (
        "import asyncio\n"
        "future = asyncio.get_running_loop().create_future()\n"
        "loop.call_later(1.0, wake)\n"
        "await asyncio.wait_for(future, 1.0)\n"
    )
    assert io_in_actors(ast.parse(source), "actors.replica") == set()


def import_cycles() -> list[list[str]]:
    """Cycles among our modules, type-only imports included: a cycle through
    `if TYPE_CHECKING:` still ties the two modules into one."""
    paths = {module_name(p): p for package in sorted(OURS) for p in sources(package)}
    known = set(paths)
    graph = {
        name: (imported_names(parse(path), package_of(path)) & known) - {name} for name, path in paths.items()
    }
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
