"""`keel leader-election --path-to-json-file`: the same strict reading as keel reassign's
file, and the same exit 2 before anything connects."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.cli.main import main
from node.cli.partition_file import PartitionFileError, parse_partition_list


def test_a_good_file_lists_its_partitions_in_order() -> None:
    text = '{"partitions":[{"topic":"b","partition":1},{"topic":"a","partition":0}]}'
    assert parse_partition_list(text) == [("b", 1), ("a", 0)]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"partitions":[{"topic":null,"partition":0}]}', '"topic" is missing'),
        ('{"partitions":[{"topic":"t","partition":1.9}]}', "non-negative integer"),
        ('{"partitions":[{"topic":"t","partition":"1"}]}', "non-negative integer"),
        ('{"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":0}]}', "t-0 is listed twice"),
        ('{"partitions":[]}', "is empty"),
    ],
)
def test_bad_election_files_are_refused(text: str, reason: str) -> None:
    with pytest.raises(PartitionFileError) as e:
        parse_partition_list(text)
    assert reason in str(e.value)


def test_the_election_command_exits_2_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "elect.json"
    path.write_text('{"partitions":[{"topic":"t","partition":1.9}]}')
    argv = ["leader-election", "--election-type", "preferred", "--path-to-json-file", str(path)]
    assert main([*argv, "--bootstrap-server", "127.0.0.1:1"]) == 2
    assert "non-negative integer" in capsys.readouterr().err
