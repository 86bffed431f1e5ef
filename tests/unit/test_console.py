"""The web console's pure parts: copy progress and its rate and time left, the timeline's
diffing of two looks, the rendering of a view, the actions' checks; and its server, on
views made by hand (no cluster): the CSRF refusal, the login on a SASL cluster, and the
event stream sending what changed."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from aiohttp.test_utils import TestClient, TestServer

from node.ui import actions, render
from node.ui.observer import ConsoleObserver
from node.ui.progress import ProgressTracker
from node.ui.server import OBSERVER, make_app
from node.ui.timeline import Timeline, changes
from node.ui.view import BrokerRow, ClusterView, PartitionRow
from wire.sasl import SaslCredentials
from wire.security import PLAINTEXT_CLIENT, ClientSecurity

# --- views made by hand ---


def broker(broker_id: int, *, alive: bool = True, leaders: int = 0) -> BrokerRow:
    return BrokerRow(
        broker_id, None, f"127.0.0.1:{9000 + broker_id}", alive, 100 + broker_id, leaders=leaders
    )


def partition(topic: str, p: int, leader: int, isr: tuple[int, ...], epoch: int = 0) -> PartitionRow:
    return PartitionRow(topic, p, (1, 2, 3), leader, epoch, isr, offline=leader == -1 or leader not in isr)


def view(
    *partitions: PartitionRow, controller: int = 1, epoch: int = 5, down: tuple[int, ...] = ()
) -> ClusterView:
    return ClusterView(
        taken_ms=1_700_000_000_000,
        controller_id=controller,
        controller_epoch=epoch,
        brokers=tuple(broker(i, alive=i not in down) for i in (1, 2, 3)),
        partitions=partitions,
        controller_metrics={"EventQueueSize": 4.0},
    )


# --- progress ---


def test_progress_counts_what_was_copied_since_the_largest_figure_and_times_the_rest() -> None:
    tracker = ProgressTracker(window_s=10.0)
    first = tracker.observe({("t", 0): 1000}, now=0.0)[("t", 0)]
    assert (first.copied, first.total, first.rate, first.seconds_left) == (0, 1000, None, None)
    later = tracker.observe({("t", 0): 600}, now=2.0)[("t", 0)]
    assert (later.copied, later.total) == (400, 1000)
    assert later.rate == pytest.approx(200.0)
    assert later.seconds_left == pytest.approx(3.0)
    assert later.fraction == pytest.approx(0.4)


def test_a_partition_no_longer_reassigning_is_forgotten_and_starts_again_from_its_new_total() -> None:
    tracker = ProgressTracker()
    tracker.observe({("t", 0): 1000}, now=0.0)
    tracker.observe({}, now=1.0)
    again = tracker.observe({("t", 0): 300}, now=2.0)[("t", 0)]
    assert (again.copied, again.total) == (0, 300)


def test_nothing_to_copy_is_complete() -> None:
    done = ProgressTracker().observe({("t", 0): 0}, now=0.0)[("t", 0)]
    assert (done.fraction, done.seconds_left) == (1.0, 0.0)


# --- timeline ---


def test_the_first_look_names_the_controller_only() -> None:
    events = changes(None, view(partition("t", 0, 1, (1, 2, 3))))
    assert [e.text for e in events] == ["controller is broker 1, epoch 5"]


def test_a_new_controller_a_broker_gone_and_a_moved_leader_are_events() -> None:
    before = view(partition("t", 0, 2, (1, 2, 3), epoch=3), partition("t", 1, 1, (1, 2, 3)))
    after = view(
        partition("t", 0, 3, (1, 3), epoch=4), partition("t", 1, 1, (1, 3)), controller=3, epoch=6, down=(2,)
    )
    texts = [e.text for e in changes(before, after)]
    assert texts == [
        "controller is broker 3, epoch 6 (was 1)",
        "broker 2 went down",
        "t-0: leader broker 3 at leader epoch 4 (was broker 2 at 3)",
    ]


def test_elections_the_controller_counted_between_two_looks_are_events_from_its_metrics() -> None:
    p = partition("t", 0, 1, (1, 2, 3))
    before = dataclasses.replace(
        view(p), controller_metrics={"LeaderElectionRateAndTimeMs.count": 2.0, "UncleanLeaderElections": 0.0}
    )
    after = dataclasses.replace(
        view(p), controller_metrics={"LeaderElectionRateAndTimeMs.count": 5.0, "UncleanLeaderElections": 1.0}
    )
    assert [(e.kind, e.text) for e in changes(before, after)] == [
        ("election", "controller 1 ran 3 leader election round(s) (LeaderElectionRateAndTimeMs)"),
        ("election", "controller 1 ran 1 unclean leader election(s) (UncleanLeaderElections)"),
    ]
    # A new controller counts from zero: its counts are not compared with the old one's.
    moved = dataclasses.replace(
        view(p, controller=2, epoch=6), controller_metrics={"UncleanLeaderElections": 0.0}
    )
    assert [e.kind for e in changes(after, moved)] == ["controller"]


def test_nothing_changed_is_no_event_and_the_timeline_lists_newest_first() -> None:
    timeline = Timeline()
    first = view(partition("t", 0, 1, (1, 2, 3)))
    timeline.observe(first)
    assert timeline.observe(dataclasses.replace(first, taken_ms=first.taken_ms + 500)) == []
    timeline.observe(view(partition("t", 0, 2, (1, 2, 3), epoch=1)))
    assert [e.kind for e in timeline.newest_first()] == ["leader", "controller"]


# --- rendering ---


def test_offline_and_under_replicated_partitions_are_highlighted_and_dead_replicas_struck() -> None:
    page = render.partitions_table(
        view(
            partition("t", 0, -1, ()),
            partition("t", 1, 1, (1, 3)),
            partition("t", 2, 1, (1, 2, 3)),
            down=(2,),
        ),
        render.partition_filter("", ""),
    )
    assert 'id="partition-t-0" class="offline" data-leader="-1"' in page
    assert 'id="partition-t-1" class="under-replicated"' in page
    assert 'id="partition-t-2" class=""' in page
    assert '<s class="down" title="down">2</s>' in page


def test_the_filter_keeps_what_it_asks_for() -> None:
    v = view(partition("orders", 0, 1, (1,)), partition("payments", 0, 1, (1, 2, 3)))
    only_orders = render.partitions_table(v, render.partition_filter("ord", ""))
    assert "partition-orders-0" in only_orders and "partition-payments-0" not in only_orders
    under = render.partitions_table(v, render.partition_filter("", "under-replicated"))
    assert "partition-orders-0" in under and "partition-payments-0" not in under


def test_names_from_the_cluster_are_escaped() -> None:
    page = render.partitions_table(view(partition("<script>x</script>", 0, 1, (1, 2, 3))), lambda _: True)
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_the_cluster_page_marks_a_dead_broker_and_the_controller() -> None:
    page = render.brokers_table(view(controller=3, down=(2,)))
    assert 'id="broker-2" data-alive="false" class="down"' in page
    assert re.search(r'id="broker-3".*<b class="controller">controller</b>', page)
    summary = render.summary(view(controller=3, down=(2,)), None)
    assert "broker 3" in summary and 'id="event-queue-size">4<' in summary and "<b>2/3</b> alive" in summary


def test_a_plan_is_drawn_as_before_and_after_bars_per_broker() -> None:
    chart = render.before_after_chart(
        [
            {"broker": 1, "replicas_before": 10, "replicas_after": 5},
            {"broker": 2, "replicas_before": 0, "replicas_after": 5},
        ],
        "replicas",
    )
    assert chart.count('class="bar-before" style="width:100.0%"') == 1
    assert chart.count('class="bar-after" style="width:50.0%"') == 2


def test_the_executing_plan_is_drawn_with_its_report_from_the_planners_status() -> None:
    status = {
        "plan_id": "p1",
        "origin": "self-healing",
        "state": "running",
        "moves_total": 4,
        "moves_done": 1,
        "bytes_total": 100,
        "bytes_copied": 25,
        "report": {
            "brokers": [
                {"broker": 1, "replicas_before": 4, "replicas_after": 0},
                {"broker": 2, "replicas_before": 0, "replicas_after": 4},
            ]
        },
    }
    page = render.planner_status(
        dataclasses.replace(view(), planner_status=status, planner_address="127.0.0.1:9999")
    )
    assert "self-healing" in page and 'aria-valuenow="25.0"' in page
    replicas = page.split('data-key="replicas"')[1].split('data-key="leaders"')[0]
    assert replicas.count('class="chart-row"') == 2 and 'title="after: 4"' in replicas
    # Without a report (a plan taken over from another planner), the progress alone.
    del status["report"]
    bare = render.planner_status(
        dataclasses.replace(view(), planner_status=status, planner_address="127.0.0.1:9999")
    )
    assert 'class="chart"' not in bare and "progressbar" in bare


def test_the_progress_label_says_copied_rate_and_time_left() -> None:
    assert render.copy_label(1 << 20, 4 << 20, float(1 << 20), 3.0) == (
        "1.0 MiB of 4.0 MiB, 1.0 MiB/s, 0:00:03 left"
    )
    assert render.copy_label(0, 4 << 20, None, None) == "0.0 MiB of 4.0 MiB, -- MiB/s, --:--:-- left"


# --- actions ---


def test_an_action_is_checked_before_anything_is_sent() -> None:
    action, fields = actions.parse_request({"action": "preferred-election", "topic": "t", "partition": "3"})
    assert (action.name, fields) == ("preferred-election", {"topic": "t", "partition": "3"})
    for form, why in (
        ({"action": "reboot"}, "unknown action"),
        ({"action": "delete-topic"}, "needs a topic"),
        ({"action": "unclean-election", "topic": "t", "partition": "x"}, "whole number"),
    ):
        with pytest.raises(actions.ActionError, match=why):
            actions.parse_request(form)


SASL = ClientSecurity("SASL_PLAINTEXT", sasl=SaslCredentials("SCRAM-SHA-256", "console", "secret"))


def test_on_sasl_an_action_goes_as_the_user_who_confirms_it() -> None:
    mine = actions.as_user(SASL, "alice", "pw")
    assert mine.sasl == SaslCredentials("SCRAM-SHA-256", "alice", "pw")
    assert mine.security_protocol == "SASL_PLAINTEXT"
    with pytest.raises(actions.ActionError, match="username and password"):
        actions.as_user(SASL, "alice", "")
    assert actions.as_user(PLAINTEXT_CLIENT, "", "") is PLAINTEXT_CLIENT


def test_tokens_must_both_be_there_and_match() -> None:
    assert actions.tokens_match("abc", "abc")
    assert not actions.tokens_match("abc", "abd")
    assert not actions.tokens_match(None, None)
    assert not actions.tokens_match("", "")


# --- the server, on views made by hand ---


async def console(security: ClientSecurity = PLAINTEXT_CLIENT, v: ClusterView | None = None) -> TestClient:
    observer = ConsoleObserver(None, security)  # type: ignore[arg-type]  # never reads: no start()
    observer.view = v
    client = TestClient(TestServer(make_app(observer)))
    await client.start_server()
    return client


def _token(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, page
    return found.group(1)


async def test_a_post_without_this_browsers_token_is_refused() -> None:
    client = await console(v=view(down=(1, 2, 3)))
    try:
        page = await (await client.get("/confirm", params={"action": "delete-topic", "topic": "t"})).text()
        token = _token(page)
        assert "Delete the topic t" in page and 'type="password"' not in page
        form = {"action": "delete-topic", "topic": "t", "csrf": "forged"}
        refused = await client.post("/actions", data=form)
        assert refused.status == 403 and "token does not match" in await refused.text()
        cross = await client.post(
            "/actions", data={**form, "csrf": token}, headers={"Origin": "http://evil.example"}
        )
        assert cross.status == 403 and "not from this console" in await cross.text()
        # The token matches: the action is checked, and refused in words (no broker is alive).
        answer = await client.post("/actions", data={**form, "csrf": token})
        assert answer.status == 400 and "no broker is alive" in await answer.text()
    finally:
        await client.close()


async def test_on_a_sasl_cluster_the_confirmation_asks_for_the_users_credentials() -> None:
    client = await console(SASL, view())
    try:
        page = await (await client.get("/confirm", params={"action": "delete-topic", "topic": "t"})).text()
        assert 'name="username"' in page and 'type="password"' in page
        answer = await client.post(
            "/actions", data={"action": "delete-topic", "topic": "t", "csrf": _token(page)}
        )
        assert answer.status == 400 and "give your username and password" in await answer.text()
    finally:
        await client.close()


async def test_the_event_stream_sends_the_fragments_then_only_what_changed() -> None:
    client = await console(v=view(partition("t", 0, 1, (1, 2, 3))))
    try:
        response = await client.get("/events/cluster")
        first = json.loads((await response.content.readline()).decode().removeprefix("data: "))
        await response.content.readline()
        assert set(first["fragments"]) == {"summary", "brokers", "metrics"}
        app_observer = client.server.app[OBSERVER]
        app_observer.view = view(partition("t", 0, 1, (1, 2, 3)), down=(2,))
        await app_observer._bump()
        second = json.loads((await response.content.readline()).decode().removeprefix("data: "))
        assert set(second["fragments"]) == {"summary", "brokers"}
        assert 'id="broker-2" data-alive="false"' in second["fragments"]["brokers"]
        assert second["version"] > first["version"]
    finally:
        await client.close()
