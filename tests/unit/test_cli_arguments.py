"""`keel`'s global options before or after the command, `--command-config`, and arguments
refused before anything connects."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.cli.arguments import CommandConfigError, apply_command_config
from node.cli.main import main, parse_args


@pytest.mark.parametrize(
    "argv",
    [
        ["--bootstrap-server", "h:1", "--format", "json", "topic", "list"],
        ["topic", "list", "--bootstrap-server", "h:1", "--format", "json"],
        ["--format", "json", "topic", "list", "--bootstrap-server", "h:1"],
    ],
)
def test_global_options_before_or_after_the_command(argv: list[str]) -> None:
    args = parse_args(argv)
    apply_command_config(args)
    assert (args.group, args.command) == ("topic", "list")
    assert (args.bootstrap_server, args.format, args.timeout) == ("h:1", "json", 30.0)


def test_defaults_when_no_global_option_is_given() -> None:
    args = parse_args(["cluster", "describe"])
    apply_command_config(args)
    assert (args.bootstrap_server, args.format, args.timeout) == (None, "table", 30.0)


def test_command_config_fills_what_the_command_line_left_unset(tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text("bootstrap.servers=a:1,b:2\nrequest.timeout.ms=5000\nsasl.mechanism=PLAIN\n")
    args = parse_args(["--command-config", str(config), "topic", "list"])
    apply_command_config(args)
    assert (args.bootstrap_server, args.timeout) == ("a:1,b:2", 5.0)
    args = parse_args(["topic", "list", "--command-config", str(config), "--bootstrap-server", "c:3"])
    apply_command_config(args)
    assert args.bootstrap_server == "c:3", "the command line wins"


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "No such file"), ("request.timeout.ms=soon\n", "positive integer"), (b"\xff\xfe", "decode")],
)
def test_a_bad_command_config_is_one_readable_error(
    tmp_path: Path, content: str | bytes | None, message: str
) -> None:
    config = tmp_path / "admin.properties"
    if isinstance(content, str):
        config.write_text(content)
    elif isinstance(content, bytes):
        config.write_bytes(content)
    args = parse_args(["--command-config", str(config), "topic", "list"])
    with pytest.raises(CommandConfigError, match=message):
        apply_command_config(args)


def test_bad_command_config_exits_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["topic", "list", "--command-config", str(tmp_path / "missing.properties")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keel: --command-config") and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["topic", "create", "--topic", "t", "--partitions", "-1"],
        ["topic", "create", "--topic", "t", "--partitions", "0"],
        ["topic", "create", "--topic", "t", "--replication-factor", "x"],
        ["--timeout", "0", "topic", "list"],
        ["produce", "--topic", "t", "--partition", "-1"],
        ["produce", "--topic", "t", "--max-request-size", "0"],
        ["consume", "--topic", "t", "--partition", "-2"],
        ["consume", "--topic", "t", "--max-messages", "-3"],
        ["consume", "--topic", "t", "--timeout-ms", "-1"],
    ],
)
def test_bad_numbers_are_refused_before_connecting(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # No broker listens at this address: a refusal that came from connecting would say so.
    with pytest.raises(SystemExit) as exited:
        main(["--bootstrap-server", "127.0.0.1:1", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    # One line naming the argument, not argparse's usage block.
    assert err.count("\n") == 1 and "usage:" not in err, err
    assert ": argument --" in err and "--help" in err and "cannot connect" not in err
