"""The one error path of every command Keel installs: `keel`, `keel-node`, `keel-planner` and
`keel-cluster`.

An expected failure is one line on stderr, `<prog>: <what failed and what to do>`, and an exit
status that scripts can act on (docs/OPERATIONS.md, "Limits and errors"):

    0    done
    1    the action failed: the cluster refused it, a wait ran out, a topic does not exist
    2    usage or configuration: a bad argument, property or file; nothing was sent
    3    the action ran, but a later step failed; the line says what was done
    130  interrupted (Ctrl-C)

A traceback is printed only with `--verbose` (or `KEEL_VERBOSE=1`). Without it, library loggers
that print tracebacks while they retry (aiozk's reconnect loop) are kept off the terminal, so an
expected failure such as "nothing listens at zookeeper.connect" reads as one line.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable

from wire.errors import WireError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_INTERRUPTED = 130

# Loggers of libraries whose retries log full tracebacks for failures we report ourselves.
NOISY_LIBRARY_LOGGERS = ("aiozk", "py4j")


class CommandError(Exception):
    """An expected failure of an action: one line, exit 1."""

    status = EXIT_FAILED


class UsageError(CommandError):
    """A bad argument, property or file, found before anything was sent: exit 2."""

    status = EXIT_USAGE


class PartialError(CommandError):
    """The action ran and a later step failed; the message says what was done: exit 3."""

    status = EXIT_PARTIAL


def verbose_requested(argv: list[str]) -> bool:
    return "--verbose" in argv or os.environ.get("KEEL_VERBOSE", "") not in ("", "0")


def quiet_libraries(verbose: bool) -> None:
    """Keep library tracebacks off the terminal unless the user asked for them."""
    if verbose:
        return
    for name in NOISY_LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def run_main(prog: str, body: Callable[[], int], *, verbose: bool) -> int:
    """Run a command's body and turn what escapes it into one line and an exit status."""
    try:
        return body()
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except CommandError as e:
        _report(prog, str(e), verbose)
        return e.status
    except (WireError, OSError, TimeoutError) as e:
        _report(prog, str(e) or type(e).__name__, verbose)
        return EXIT_FAILED
    except Exception as e:
        _report(prog, f"unexpected {type(e).__name__}: {e} (--verbose shows the traceback)", verbose)
        return EXIT_FAILED


def _report(prog: str, message: str, verbose: bool) -> None:
    if verbose:
        traceback.print_exc()
    first, _, _ = message.partition("\n")
    print(f"{prog}: {first}", file=sys.stderr)
