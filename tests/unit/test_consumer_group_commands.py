"""The pure parts of `keel consumer-groups`: the describe rows and their tables, the reset
plan, and the option combinations refused before anything is sent."""

from __future__ import annotations

import argparse
import datetime
import re

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from node.cli.group_commands import check_args
from node.cli.group_rows import (
    OFFSETS_HEADERS,
    assignment_text,
    member_rows,
    offset_rows,
    parse_states,
    state_row,
)
from node.cli.main import parse_args
from node.cli.offset_reset import (
    LogOffsets,
    ResetError,
    ResetSpec,
    ResetTo,
    parse_datetime,
    parse_topic_scope,
    plan_reset,
)
from node.command.entry import UsageError
from node.command.output import print_table
from wire.api import DescribedGroup, DescribedGroupMember


def _member(member_id: str, partitions: list[tuple[str, list[int]]]) -> DescribedGroupMember:
    return DescribedGroupMember(
        member_id=member_id,
        client_id=f"client-{member_id}",
        client_host=f"/10.0.0.{len(member_id)}",
        member_assignment=ConsumerProtocolAssignment(0, partitions, b"").encode() if partitions else b"",
    )


GROUP = DescribedGroup(
    group_id="billing",
    group_state="Stable",
    protocol_type="consumer",
    protocol_data="range",
    members=[
        _member("a", [("orders", [2])]),
        _member("bb", [("orders", [1, 0]), ("audit", [0])]),
        _member("ccc", []),
    ],
)


def test_offset_rows_list_the_busiest_member_first_then_committed_partitions_nobody_holds() -> None:
    committed = {("orders", 0): 5, ("orders", 2): 9, ("audit", 0): 1, ("old", 3): 7}
    log_end = {("orders", 0): 8, ("orders", 1): 4, ("orders", 2): 9, ("audit", 0): 1, ("old", 3): 10}
    rows = offset_rows(GROUP, committed, log_end)
    assert [
        (r.consumer_id, r.topic, r.partition, r.current_offset, r.log_end_offset, r.lag) for r in rows
    ] == [
        ("bb", "audit", 0, 1, 1, 0),
        ("bb", "orders", 0, 5, 8, 3),
        ("bb", "orders", 1, None, 4, None),
        ("a", "orders", 2, 9, 9, 0),
        (None, "old", 3, 7, 10, 3),
    ]
    assert rows[0].cells()[6:] == ["bb", "/10.0.0.2", "client-bb"]


def test_offset_rows_without_a_log_end_offset_have_no_lag() -> None:
    (row,) = offset_rows(DescribedGroup(group_id="g", group_state="Empty"), {("t", 0): 3}, {})
    assert (row.log_end_offset, row.lag) == (None, None)


def test_another_protocols_assignment_is_not_read_as_partitions() -> None:
    other = DescribedGroup(group_id="g", protocol_type="connect", members=GROUP.members)
    assert offset_rows(other, {}, {}) == []
    assert [row[4] for row in member_rows(other, with_assignment=False)] == [0, 0, 0]


def test_member_rows_with_kafkas_verbose_assignment() -> None:
    assert member_rows(GROUP, with_assignment=True) == [
        ["billing", "a", "/10.0.0.1", "client-a", 1, "orders(2)"],
        ["billing", "bb", "/10.0.0.2", "client-bb", 3, "audit(0), orders(0,1)"],
        ["billing", "ccc", "/10.0.0.3", "client-ccc", 0, "-"],
    ]
    assert assignment_text([]) == "-"


def test_state_row_prints_the_coordinator_as_kafka() -> None:
    assert state_row(GROUP, 2, "127.0.0.1", 9092) == ["billing", "127.0.0.1:9092  (2)", "range", "Stable", 3]


def test_the_offsets_table(capsys: pytest.CaptureFixture[str]) -> None:
    rows = offset_rows(GROUP, {("orders", 2): 9}, {("orders", 2): 12})
    print_table(OFFSETS_HEADERS, [r.cells() for r in rows if r.topic == "orders" and r.partition == 2])
    header, line = capsys.readouterr().out.splitlines()
    assert header.split() == list(OFFSETS_HEADERS)
    assert line.split() == ["billing", "orders", "2", "9", "12", "3", "a", "/10.0.0.1", "client-a"]


def test_states_are_kafkas_names_in_any_case() -> None:
    assert parse_states("stable, EMPTY") == ["Stable", "Empty"]
    with pytest.raises(ValueError, match=r"Invalid state list 'stable,asleep'\. Valid states are: "):
        parse_states("stable,asleep")


LOGS = LogOffsets(
    earliest={("t", 0): 10, ("t", 1): 0},
    latest={("t", 0): 50, ("t", 1): 20},
    at_time={("t", 0): 30, ("t", 1): -1},
)
PARTITIONS = [("t", 1), ("t", 0)]


@pytest.mark.parametrize(
    ("spec", "committed", "plan"),
    [
        (ResetSpec(ResetTo.EARLIEST), {}, {("t", 0): 10, ("t", 1): 0}),
        (ResetSpec(ResetTo.LATEST), {}, {("t", 0): 50, ("t", 1): 20}),
        (ResetSpec(ResetTo.OFFSET, 15), {}, {("t", 0): 15, ("t", 1): 15}),
        (ResetSpec(ResetTo.OFFSET, 5), {}, {("t", 0): 10, ("t", 1): 5}),
        (ResetSpec(ResetTo.OFFSET, 99), {}, {("t", 0): 50, ("t", 1): 20}),
        (ResetSpec(ResetTo.SHIFT, -15), {("t", 0): 40, ("t", 1): 10}, {("t", 0): 25, ("t", 1): 0}),
        (ResetSpec(ResetTo.SHIFT, 15), {("t", 0): 40, ("t", 1): 10}, {("t", 0): 50, ("t", 1): 20}),
        # No record that recent in t-1: its log-end offset, as Kafka falls back to the latest.
        (ResetSpec(ResetTo.DATETIME, 1), {}, {("t", 0): 30, ("t", 1): 20}),
    ],
)
def test_reset_plans(
    spec: ResetSpec, committed: dict[tuple[str, int], int], plan: dict[tuple[str, int], int]
) -> None:
    assert plan_reset(spec, PARTITIONS, committed, LOGS) == plan
    assert list(plan_reset(spec, PARTITIONS, committed, LOGS)) == [("t", 0), ("t", 1)]


def test_shifting_a_partition_without_a_committed_offset() -> None:
    with pytest.raises(ResetError, match="Cannot shift offset for partition t-1 since there is no current"):
        plan_reset(ResetSpec(ResetTo.SHIFT, 1), PARTITIONS, {("t", 0): 40}, LOGS)


def test_datetimes_with_and_without_a_zone() -> None:
    assert parse_datetime("2024-05-01T12:00:00.000Z") == 1714564800000
    assert parse_datetime("2024-05-01T14:00:00+02:00") == 1714564800000
    local = datetime.datetime(2024, 5, 1, 12, 0).astimezone()
    assert parse_datetime("2024-05-01T12:00:00") == int(local.timestamp() * 1000)
    with pytest.raises(ResetError, match="is not like"):
        parse_datetime("yesterday")


def test_topic_scopes() -> None:
    assert parse_topic_scope("orders") == ("orders", None)
    assert parse_topic_scope("orders:0,2") == ("orders", [0, 2])
    for bad in ("orders:", ":1", "orders:a", "orders:-1"):
        with pytest.raises(ResetError):
            parse_topic_scope(bad)


def _args(*argv: str) -> argparse.Namespace:
    return parse_args(["consumer-groups", *argv])


@pytest.mark.parametrize(
    ("argv", "refusal"),
    [
        (["--describe"], "--describe takes --group G or --all-groups"),
        (["--describe", "--group", "g", "--all-groups"], "do not go together"),
        (["--describe", "--group", "g", "--state", "stable"], "--describe takes --state without a value"),
        (["--list", "--group", "g"], "--list takes no --group"),
        (["--delete-offsets", "--group", "g"], "--delete-offsets takes one --group and at least one --topic"),
        (
            ["--reset-offsets", "--group", "g", "--to-earliest"],
            "takes --topic T (repeatable) or --all-topics",
        ),
        (["--reset-offsets", "--group", "g", "--all-topics"], "takes one of --to-earliest"),
        (["--describe", "--group", "g", "--to-earliest"], "go with --reset-offsets"),
        (["--list", "--members"], "--members and --offsets go with --describe"),
    ],
)
def test_option_combinations_refused_as_kafka_refuses_them(argv: list[str], refusal: str) -> None:
    with pytest.raises(UsageError, match=re.escape(refusal)):
        check_args(_args(*argv))


def test_option_combinations_taken() -> None:
    for argv in (
        ["--list"],
        ["--list", "--state"],
        ["--list", "--state", "stable"],
        ["--describe", "--all-groups", "--state"],
        ["--describe", "--group", "a", "--group", "b", "--members"],
        ["--reset-offsets", "--group", "g", "--topic", "t:0", "--to-offset", "0", "--execute"],
        ["--delete", "--group", "g"],
        ["--delete-offsets", "--group", "g", "--topic", "t"],
    ):
        check_args(_args(*argv))
    assert _args("--describe", "--group", "a", "--group", "b").group_ids == ["a", "b"]
