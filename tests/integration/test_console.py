"""The web console in a real browser: headless Chromium (Debian's, through Selenium) on
keel-ui, in front of real brokers on a real ZooKeeper. It opens the cluster page and the
topics page, kills a broker that leads partitions, and sees both pages mark it down and its
leaderships move elsewhere without a reload. Screenshots go to test-artifacts/console/."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from node.cluster.local import ConsoleProcess
from tests import browser as chromium
from tests import security_pass
from tests.integration.conftest import Brokers
from tests.integration.test_partition_leadership import create_topic
from tests.support import eventually_sync

SHOTS = chromium.ARTIFACTS / "console"
# A page must follow a change within 2 s; the broker's session must expire first (2 s in
# these tests), then the controller elects, so the whole wait is longer.
FOLLOW_S = 30.0


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Any]:
    found = chromium.chromium_paths()
    if isinstance(found, str):
        pytest.skip(found)
    browser, driver_path = found
    web = chromium.headless_chromium(browser, driver_path, tmp_path / "chromium-profile")
    try:
        yield web
    finally:
        web.quit()  # type: ignore[attr-defined]


@pytest.fixture
def console(brokers: Brokers, zk_connect: str, tmp_path: Path) -> Iterator[ConsoleProcess]:
    secured = security_pass.active()
    process = ConsoleProcess(
        home=tmp_path / "console",
        zk_connect=zk_connect,
        command_config=None if secured is None else secured.client_config,
    ).start()
    try:
        process.wait_ready(30)
        yield process
    finally:
        process.stop(10)


def _rows(web: Any, selector: str, attribute: str) -> dict[str, str]:
    """Each matching row's id and attribute, read in one script: the page patches itself
    between two WebDriver calls, which would leave an element found by one stale in the next."""
    rows = web.execute_script(
        "var attribute = arguments[1];"
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(function (row) { return [row.id, row.getAttribute(attribute)]; });",
        selector,
        attribute,
    )
    return {row_id: value for row_id, value in rows}


def _mark(web: Any) -> None:
    """A value that a reload would clear: its presence later proves the page was patched."""
    web.execute_script("window.keelTestMark = 'not reloaded';")


def _not_reloaded(web: Any) -> bool:
    return bool(web.execute_script("return window.keelTestMark === 'not reloaded';"))


async def test_the_pages_mark_a_killed_broker_down_and_show_its_leaders_move_without_a_reload(
    brokers: Brokers, console: ConsoleProcess, driver: Any
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    brokers.start(1, 2, 3)
    controller, _ = await brokers.wait_for_controller()
    await create_topic(brokers.by_id(1), "orders", partitions=6, rf=3)
    web = driver

    web.get(console.url)
    # Brokers register before they run the election, so a look may list all three before the
    # controller: wait for both.
    eventually_sync(
        lambda: (
            _rows(web, "#brokers-table tbody tr", "data-alive")
            == {"broker-1": "true", "broker-2": "true", "broker-3": "true"}
            and web.find_element("id", "controller-id").text == f"broker {controller}"
        ),
        timeout=FOLLOW_S,
        message=f"the cluster page shows three live brokers and broker {controller} as controller",
    )
    _mark(web)
    web.save_screenshot(str(SHOTS / "1-cluster.png"))
    cluster_tab = web.current_window_handle

    web.switch_to.new_window("tab")
    web.get(console.url + "topics")
    leaders = eventually_sync(
        lambda: (
            (found := _rows(web, "#partitions-table tbody tr[data-leader]", "data-leader"))
            and len(found) == 6
            and "-1" not in found.values()
            and found
        ),
        timeout=FOLLOW_S,
        message="the topics page shows six partitions with leaders",
    )
    _mark(web)
    web.save_screenshot(str(SHOTS / "2-topics.png"))
    # A broker that leads partitions, and not the controller: its leaderships must move.
    led = {int(leader) for leader in leaders.values()}
    victim = min(led - {controller}, default=min(led))

    brokers.by_id(victim).kill()

    moved = eventually_sync(
        lambda: (
            (now := _rows(web, "#partitions-table tbody tr[data-leader]", "data-leader"))
            and len(now) == 6
            and all(leader not in (str(victim), "-1") for leader in now.values())
            and now
        ),
        timeout=FOLLOW_S,
        message=f"the topics page shows broker {victim}'s partitions led elsewhere",
    )
    assert _not_reloaded(web), "the topics page was reloaded instead of patched"
    assert {p for p, leader in leaders.items() if leader == str(victim)} <= set(moved)
    # Three replicas, one on a dead broker: every partition is shown under-replicated. The
    # controller shrinks the ISRs of the partitions the victim only followed in writes of their
    # own, which may reach the page after the leaders moved.
    eventually_sync(
        lambda: (
            set(_rows(web, "#partitions-table tbody tr[data-leader]", "class").values())
            == {"under-replicated"}
        ),
        timeout=FOLLOW_S,
        message="the topics page shows every partition under-replicated",
    )
    assert _not_reloaded(web), "the topics page was reloaded instead of patched"
    web.save_screenshot(str(SHOTS / "3-topics-after-kill.png"))

    web.switch_to.window(cluster_tab)
    eventually_sync(
        lambda: _rows(web, "#brokers-table tbody tr", "data-alive").get(f"broker-{victim}") == "false",
        timeout=FOLLOW_S,
        message=f"the cluster page marks broker {victim} down",
    )
    assert _not_reloaded(web), "the cluster page was reloaded instead of patched"
    assert web.find_element("css selector", f"#broker-{victim} .state").text == "down"
    web.save_screenshot(str(SHOTS / "4-cluster-after-kill.png"))

    web.get(console.url + "timeline")
    text = web.find_element("id", "timeline").text
    assert f"broker {victim} went down" in text
    web.save_screenshot(str(SHOTS / "5-timeline.png"))


async def test_the_console_refuses_a_host_it_was_not_started_for(console: ConsoleProcess) -> None:
    """DNS rebinding: a page at evil.example, its name later pointed at 127.0.0.1, reaches the
    console as the same origin, cookies and all; only the Host header tells it apart."""
    async with aiohttp.ClientSession() as session:
        for host, status in (
            (f"127.0.0.1:{console.port}", 200),
            (f"localhost:{console.port}", 200),
            (f"evil.example:{console.port}", 421),
            ("evil.example", 421),
        ):
            async with session.get(console.url, headers={"Host": host}) as response:
                assert response.status == status, host
        form = {"action": "delete-topic", "topic": "orders", "csrf": "x"}
        async with session.post(
            f"{console.url}actions", data=form, headers={"Host": f"evil.example:{console.port}"}
        ) as response:
            assert response.status == 421
    assert "refused a request for host 'evil.example" in console.log()
