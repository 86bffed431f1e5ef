"""The one error path of the entry points: exit statuses, one line per error, argparse errors on
one line for every entry point and subcommand, library loggers quiet while a server starts,
and `log.dirs` checked before a broker starts."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from node.broker.config import load_config, prepare_log_dirs
from node.command.entry import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PARTIAL,
    EXIT_USAGE,
    CommandError,
    KeelArgumentParser,
    PartialError,
    UsageError,
    libraries_quiet,
    run_main,
)
from node.config.properties import ConfigError
from wire.errors import NetworkException


def raising(error: BaseException) -> Callable[[], int]:
    def body() -> int:
        raise error

    return body


@pytest.mark.parametrize(
    ("error", "status", "line"),
    [
        (CommandError("topic t does not exist"), EXIT_FAILED, "keel: topic t does not exist"),
        (UsageError("--topic is required"), EXIT_USAGE, "keel: --topic is required"),
        (PartialError("plan 7 executed; writing plan.json failed"), EXIT_PARTIAL, "keel: plan 7 executed"),
        (NetworkException("cannot connect to h:1"), EXIT_FAILED, "keel: cannot connect to h:1"),
        (OSError("disk full\nsecond line"), EXIT_FAILED, "keel: disk full"),
        (RuntimeError("boom"), EXIT_FAILED, "keel: unexpected RuntimeError: boom"),
    ],
)
def test_an_error_is_one_line_and_its_status(
    error: Exception, status: int, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main("keel", raising(error), verbose=False) == status
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1, err


def test_verbose_adds_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main("keel", raising(CommandError("refused")), verbose=True) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.endswith("keel: refused\n")


def test_an_interrupt_is_130_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main("keel", raising(KeyboardInterrupt()), verbose=False) == EXIT_INTERRUPTED
    assert "Traceback" not in capsys.readouterr().err


def test_argparse_errors_are_one_line_with_status_2_in_subcommands_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = KeelArgumentParser(prog="keel")
    create = parser.add_subparsers(dest="group").add_parser("topic").add_subparsers().add_parser("create")
    assert isinstance(create, KeelArgumentParser)
    create.add_argument("--partitions", type=int)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["topic", "create", "--partitions", "x"])
    assert exited.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        "keel topic create: argument --partitions: invalid int value: 'x' (see keel topic create --help)\n"
    )


ENTRY_POINTS = [
    ("node.cli.main", ["topic", "create", "--topic", "t", "--partitions", "0"], "keel topic create: "),
    ("node.broker.main", ["server.properties", "--bogus"], "keel-node: "),
    ("node.planner.main", [], "keel-planner: "),
    ("node.cli.keel_cluster", ["up", "--brokers", "0"], "keel-cluster up: "),
]


@pytest.mark.parametrize(("module", "argv", "prefix"), ENTRY_POINTS, ids=[m for m, _, _ in ENTRY_POINTS])
def test_every_entry_point_refuses_bad_arguments_in_one_line(
    module: str, argv: list[str], prefix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    main = __import__(module, fromlist=["main"]).main
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--verbose"])
    assert exited.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(prefix) and err.count("\n") == 1 and "usage:" not in err, err


def test_library_loggers_are_quiet_while_a_server_starts_then_back() -> None:
    aiozk = logging.getLogger("aiozk")
    aiozk.setLevel(logging.WARNING)
    with libraries_quiet(False):
        assert not aiozk.isEnabledFor(logging.ERROR)
    assert aiozk.level == logging.WARNING
    with libraries_quiet(True):
        assert aiozk.isEnabledFor(logging.WARNING)


def test_log_dirs_are_created_before_the_broker_starts(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "logs", tmp_path / "b"
    config = load_config({"broker.id": "1", "zookeeper.connect": "h:1", "log.dirs": f"{first},{second}"})
    prepare_log_dirs(config)
    assert first.is_dir() and second.is_dir()


@pytest.mark.parametrize(
    ("path", "phrase"),
    [("file", "is a file, not a directory"), ("file/logs", "cannot create"), ("/proc/keel", "cannot create")],
)
def test_log_dirs_that_cannot_be_used_name_the_key_and_path(tmp_path: Path, path: str, phrase: str) -> None:
    (tmp_path / "file").write_text("not a directory\n")
    where = tmp_path / path
    config = load_config({"broker.id": "1", "zookeeper.connect": "h:1", "log.dirs": str(where)})
    with pytest.raises(ConfigError) as refused:
        prepare_log_dirs(config)
    assert str(refused.value).startswith("log.dirs: ") and phrase in str(refused.value)
    assert str(where) in str(refused.value)


def test_a_chaos_run_with_too_few_brokers_is_a_bad_argument(capsys: pytest.CaptureFixture[str]) -> None:
    from node.cli.keel_cluster import main

    assert main(["chaos", "--brokers", "2"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == (
        "keel-cluster: a chaos run needs at least 3 brokers (its topics have replication factor 3)\n"
    ), err
