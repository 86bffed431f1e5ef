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
expected failure such as "nothing listens at zookeeper.connect" reads as one line. A bad
argument is one line too (`KeelArgumentParser`), with exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import NoReturn

from wire.errors import WireError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3
EXIT_INTERRUPTED = 130

# The epilog of every entry point's --help.
EXIT_STATUS_HELP = (
    "exit status: 0 done, 1 the action failed, 2 a bad argument, property or file (nothing done), "
    "3 the action ran and a later step failed (the error says what was done), 130 interrupted; "
    "an error is one line, --verbose adds its traceback"
)

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


class KeelArgumentParser(argparse.ArgumentParser):
    """argparse, with a bad argument reported on one line and exit status 2:

        keel topic create: argument --partitions: must be at least 1, not 0 (see keel topic create --help)

    rather than the usage block and the error under it. Subparsers are of this class too:
    `add_subparsers` gives them their parent's class."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def add_verbose_option(parser: argparse.ArgumentParser) -> None:
    """`--verbose`. Read from the raw arguments (`verbose_requested`), since it must be known
    before they are parsed; a parser takes it only so that it is not refused. Its default is
    SUPPRESS so that a subcommand's copy never overwrites the top-level one."""
    parser.add_argument(
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the traceback behind an error, and library logs (also KEEL_VERBOSE=1)",
    )


def verbose_requested(argv: list[str]) -> bool:
    return "--verbose" in argv or os.environ.get("KEEL_VERBOSE", "") not in ("", "0")


def quiet_libraries(verbose: bool) -> None:
    """Keep library tracebacks off the terminal unless the user asked for them."""
    if verbose:
        return
    for name in NOISY_LIBRARY_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)


@contextlib.contextmanager
def libraries_quiet(verbose: bool) -> Iterator[None]:
    """Library loggers quiet for a while, then back at their levels: a server's start-up, whose
    failures it reports itself in one line, while the server once up keeps their warnings."""
    levels = {name: logging.getLogger(name).level for name in NOISY_LIBRARY_LOGGERS}
    quiet_libraries(verbose)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


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
