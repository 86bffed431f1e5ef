"""The console's HTML, rendered on the server from a `ClusterView`: pure functions of what
they are given, so they are tested without a cluster.

A page is a layout around named fragments (`<section id="NAME">`); the event stream sends
the same fragments again, rendered from a newer view, and the page's script puts each into
its section (node/ui/static/console.js). Every value from the cluster is escaped.
"""

from __future__ import annotations

import datetime
import html
import string
import urllib.parse
from collections.abc import Callable, Mapping, Sequence

from node.cli.plan_status import duration
from node.cli.reassignment_plan import mib
from node.ui.timeline import Event
from node.ui.view import NO_LEADER, BrokerRow, ClusterView, PartitionRow, Reassignment

PAGES = (
    ("cluster", "/", "Cluster"),
    ("topics", "/topics", "Topics"),
    ("reassignments", "/reassignments", "Reassignments"),
    ("timeline", "/timeline", "Timeline"),
)

CURRENT = ' class="current"'
LAYOUT = string.Template(
    """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>$title · Keel</title>
<link rel="stylesheet" href="/static/console.css">
<script src="/static/console.js" defer></script>
</head>
<body data-page="$page" data-events="$events">
<header>
<strong class="brand">Keel</strong>
<nav>$nav</nav>
<span id="live" class="live" title="updates from the server">connecting…</span>
</header>
<section id="summary">$summary</section>
<main>
$body
</main>
</body>
</html>
"""
)


def e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def page(name: str, title: str, fragments: Mapping[str, str], events_query: str = "") -> str:
    """A whole page: `fragments` holds the summary and the page's own sections, in order."""
    nav = "".join(
        f'<a href="{href}"{CURRENT if key == name else ""}>{label}</a>' for key, href, label in PAGES
    )
    body = "\n".join(
        f'<section id="{key}">{value}</section>' for key, value in fragments.items() if key != "summary"
    )
    events = f"/events/{name}" + (f"?{events_query}" if events_query else "")
    return LAYOUT.substitute(
        title=e(title),
        page=e(name),
        events=e(events),
        nav=nav,
        summary=fragments.get("summary", ""),
        body=body,
    )


def message_page(title: str, text: str, *, ok: bool, back: str = "/") -> str:
    """The answer to an action: what was done, or why not, in words."""
    kind = "ok" if ok else "error"
    body = (
        f'<div class="message {kind}" role="status"><p>{e(text)}</p><p><a href="{e(back)}">Back</a></p></div>'
    )
    return page("message", title, {"summary": f"<h1>{e(title)}</h1>", "result": body})


# --- the summary bar, on every page ---


def summary(view: ClusterView | None, problem: str | None) -> str:
    if view is None:
        return f'<div class="banner error">{e(problem or "reading the cluster…")}</div>'
    controller = "none" if view.controller_id is None else f"broker {view.controller_id}"
    queue = "?" if view.event_queue_size is None else str(view.event_queue_size)
    alive = sum(1 for b in view.brokers if b.alive)
    parts = [
        f'<span>Controller <b id="controller-id">{e(controller)}</b></span>',
        f'<span>Controller epoch <b id="controller-epoch">{e(view.controller_epoch)}</b></span>',
        f'<span>Event queue <b id="event-queue-size">{e(queue)}</b></span>',
        f"<span>Brokers <b>{alive}/{len(view.brokers)}</b> alive</span>",
        f"<span>Partitions <b>{len(view.partitions)}</b></span>",
        _count("offline", view.offline_count, "offline"),
        _count("under-replicated", view.under_replicated_count, "under-replicated"),
    ]
    banner = f'<div class="banner error">{e(problem)}</div>' if problem else ""
    return banner + '<div class="bar">' + "".join(parts) + "</div>"


def _count(css: str, count: int, label: str) -> str:
    return f'<span class="{css if count else ""}"><b>{count}</b> {label}</span>'


# --- the cluster page ---


def brokers_table(view: ClusterView) -> str:
    rows = "".join(_broker_row(b, b.broker_id == view.controller_id) for b in view.brokers)
    return (
        '<h2>Brokers</h2><table class="grid" id="brokers-table"><thead><tr><th>Id</th><th>Rack</th>'
        "<th>Address</th><th>State</th><th>Broker epoch</th><th>Partitions</th><th>Leaders</th>"
        f"<th>Bytes</th><th>Controller</th></tr></thead><tbody>{rows}</tbody></table>"
    )


CONTROLLER = '<b class="controller">controller</b>'


def _broker_row(b: BrokerRow, controller: bool) -> str:
    state = '<span class="up">alive</span>' if b.alive else '<span class="down">down</span>'
    return (
        f'<tr id="broker-{b.broker_id}" data-alive="{str(b.alive).lower()}" '
        f'class="{"" if b.alive else "down"}">'
        f"<td>{b.broker_id}</td><td>{e(b.rack or '')}</td><td>{e(b.address or '?')}</td>"
        f'<td class="state">{state}</td><td>{e(b.broker_epoch if b.broker_epoch is not None else "")}</td>'
        f'<td>{b.partitions}</td><td class="leaders">{b.leaders}</td><td>{mib(b.bytes)}</td>'
        f"<td>{CONTROLLER if controller else ''}</td></tr>"
    )


def controller_metrics(view: ClusterView) -> str:
    if not view.controller_metrics:
        return '<h2>Controller metrics</h2><p class="muted">The controller did not answer yet.</p>'
    rows = "".join(
        f"<tr><td>{e(name)}</td><td>{_number(value)}</td></tr>"
        for name, value in view.controller_metrics.items()
    )
    return f'<h2>Controller metrics</h2><table class="grid compact">{rows}</table>'


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


# --- the topics page ---


def partition_filter(topic: str, only: str) -> Callable[[PartitionRow], bool]:
    """The filter of the topics page: a topic name fragment, and `offline`,
    `under-replicated` or `reassigning` partitions only."""
    topic = topic.strip()

    def keep(p: PartitionRow) -> bool:
        if topic and topic not in p.topic:
            return False
        if only == "offline":
            return p.offline
        if only == "under-replicated":
            return p.under_replicated
        if only == "reassigning":
            return p.reassigning
        return True

    return keep


def filter_form(topic: str, only: str) -> str:
    options = "".join(
        f'<option value="{value}"{" selected" if value == only else ""}>{label}</option>'
        for value, label in (
            ("", "all partitions"),
            ("offline", "offline"),
            ("under-replicated", "under-replicated"),
            ("reassigning", "reassigning"),
        )
    )
    return (
        '<form class="filter" method="get" action="/topics">'
        f'<label>Topic <input name="topic" value="{e(topic)}" placeholder="name contains"></label> '
        f'<label>Show <select name="only">{options}</select></label> <button>Filter</button></form>'
    )


def partitions_table(view: ClusterView, keep: Callable[[PartitionRow], bool]) -> str:
    shown = [p for p in view.partitions if keep(p)]
    alive = {b.broker_id for b in view.brokers if b.alive}
    rows = []
    topic = None
    for p in shown:
        if p.topic != topic:
            topic = p.topic
            deleting = " (being deleted)" if topic in view.topics_being_deleted else ""
            action = _action_link("delete-topic", "delete", topic=topic)
            rows.append(f'<tr class="topic"><th colspan="9">{e(topic)}{deleting} {action}</th></tr>')
        rows.append(_partition_row(p, alive))
    if not rows:
        rows.append('<tr><td colspan="9" class="muted">No partition matches.</td></tr>')
    return (
        f"<h2>Partitions <small>{len(shown)} of {len(view.partitions)}</small></h2>"
        '<table class="grid" id="partitions-table"><thead><tr><th>Partition</th><th>Leader</th>'
        '<th>Leader epoch</th><th>Replicas</th><th>ISR</th><th>Size</th><th>State</th><th colspan="2">'
        f"Elect</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _ids(ids: Sequence[int], alive: set[int] | None = None) -> str:
    if alive is None:
        return ",".join(str(i) for i in ids)
    return ",".join(str(i) if i in alive else f'<s class="down" title="down">{i}</s>' for i in ids)


def _partition_row(p: PartitionRow, alive: set[int]) -> str:
    if p.offline:
        css, state = "offline", "offline"
    elif p.under_replicated:
        css, state = "under-replicated", "under-replicated"
    else:
        css, state = "", "in sync"
    if p.reassigning:
        state += f", reassigning (+{_ids(p.adding)} -{_ids(p.removing)})"
    leader = "none" if p.leader == NO_LEADER else str(p.leader)
    where = {"topic": p.topic, "partition": str(p.partition)}
    return (
        f'<tr id="partition-{e(p.name)}" class="{css}" data-leader="{p.leader}">'
        f'<td>{p.partition}</td><td class="leader">{leader}</td><td>{p.leader_epoch}</td>'
        f"<td>{_ids(p.replicas, alive)}</td><td>{_ids(p.isr, alive)}</td><td>{mib(p.size)}</td>"
        f"<td>{e(state)}</td><td>{_action_link('preferred-election', 'preferred', **where)}</td>"
        f"<td>{_action_link('unclean-election', 'unclean', **where)}</td></tr>"
    )


def _action_link(action: str, label: str, **where: str) -> str:
    query = urllib.parse.urlencode({"action": action, **where})
    return f'<a class="action" href="/confirm?{e(query)}">{e(label)}</a>'


# --- the reassignments page ---


def reassignments(view: ClusterView) -> str:
    if not view.reassignments:
        return '<h2>Reassignments in progress</h2><p class="muted">None.</p>'
    rows = "".join(_reassignment_row(r) for r in view.reassignments)
    return (
        f"<h2>Reassignments in progress <small>{len(view.reassignments)}</small></h2>"
        '<table class="grid" id="reassignments-table"><thead><tr><th>Partition</th><th>Replicas</th>'
        "<th>Adding</th><th>Removing</th><th>Progress</th><th></th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def progress_bar(fraction: float, label: str) -> str:
    percent = round(fraction * 100, 1)
    return (
        f'<div class="progress" role="progressbar" aria-valuenow="{percent}" aria-valuemin="0" '
        f'aria-valuemax="100"><div style="width:{percent}%"></div><span>{e(label)}</span></div>'
    )


def copy_label(copied: int, total: int, rate: float | None, seconds_left: float | None) -> str:
    """`12.0 MiB of 40.0 MiB, 2.0 MiB/s, 0:00:14 left`."""
    speed = f"{mib(int(rate))}/s" if rate else "-- MiB/s"
    return f"{mib(copied)} of {mib(total)}, {speed}, {duration(seconds_left)} left"


def _reassignment_row(r: Reassignment) -> str:
    c = r.progress
    where = {"topic": r.topic, "partition": str(r.partition)}
    return (
        f'<tr id="reassignment-{e(r.topic)}-{r.partition}"><td>{e(r.topic)}-{r.partition}</td>'
        f"<td>{_ids(r.replicas)}</td><td>{_ids(r.adding)}</td><td>{_ids(r.removing)}</td>"
        f"<td>{progress_bar(c.fraction, copy_label(c.copied, c.total, c.rate, c.seconds_left))}</td>"
        f"<td>{_action_link('cancel-reassignment', 'cancel', **where)}</td></tr>"
    )


def planner_status(view: ClusterView) -> str:
    status = view.planner_status
    if view.planner_address is None:
        return '<h2>Planner</h2><p class="muted">No planner is running (bin/keel-planner).</p>'
    if status is None:
        return f"<h2>Planner</h2><p>The planner at {e(view.planner_address)} does not answer.</p>"
    head = f"<h2>Planner <small>{e(view.planner_address)}</small></h2>"
    if not status.get("plan_id"):
        return head + '<p class="muted">No plan has been executed by this planner.</p>'
    total, copied = _int(status, "bytes_total"), _int(status, "bytes_copied")
    moves, done = _int(status, "moves_total"), _int(status, "moves_done")
    fraction = min(1.0, copied / total) if total > 0 else (1.0 if moves == 0 else done / moves)
    rate = status.get("rate_bytes_per_s")
    left = status.get("seconds_left")
    label = f"{done}/{moves} moves, " + copy_label(
        copied,
        total,
        rate if isinstance(rate, int | float) else None,
        left if isinstance(left, int | float) else None,
    )
    report = status.get("report")
    charts = ""
    if isinstance(report, dict):
        brokers = [b for b in report.get("brokers", []) if isinstance(b, dict)]
        charts = "".join(before_after_chart(brokers, key) for key in ("replicas", "leaders", "bytes"))
    return (
        head + f"<p>Plan <b>{e(status.get('plan_id'))}</b> ({e(status.get('origin') or 'request')}): "
        f"<b>{e(status.get('state'))}</b></p>" + progress_bar(fraction, label) + charts
    )


def _int(status: Mapping[str, object], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) else 0


def plan_form(csrf: str, goals: Sequence[str]) -> str:
    options = "".join(f'<option value="{e(g)}">{e(g)}</option>' for g in goals)
    return (
        '<form method="post" action="/plan" class="filter"><input type="hidden" name="csrf" '
        f'value="{e(csrf)}"><label>Goal <select name="goal">{options}</select></label> '
        "<button>Ask the planner for a plan</button> "
        '<small class="muted">computed, not executed</small></form>'
    )


def plans(previews: Sequence[object]) -> str:
    """The plans asked for here, each with its per-broker before/after bars."""
    if not previews:
        return '<h2>Plans</h2><p class="muted">No plan asked for yet.</p>'
    parts = ["<h2>Plans</h2>"]
    for preview in previews:
        report = getattr(preview, "report", {})
        brokers = [b for b in report.get("brokers", []) if isinstance(b, dict)]
        at = datetime.datetime.fromtimestamp(getattr(preview, "at_ms", 0) / 1000, datetime.UTC)
        parts.append(
            f'<div class="plan"><h3>Plan {e(getattr(preview, "plan_id", ""))} '
            f"<small>{e(','.join(getattr(preview, 'goals', ())))} at {at:%H:%M:%S} UTC: "
            f"{e(report.get('moves', 0))} moves, {mib(int(report.get('bytes', 0) or 0))} to copy, "
            f"{e(getattr(preview, 'partitions', 0))} partitions change</small></h3>"
            + "".join(before_after_chart(brokers, key) for key in ("replicas", "leaders", "bytes"))
            + "</div>"
        )
    return "".join(parts)


def before_after_chart(brokers: Sequence[Mapping[str, object]], key: str) -> str:
    """Per broker, two bars: `<key>_before` and `<key>_after` of the plan's report."""

    def value(b: Mapping[str, object], side: str) -> int:
        v = b.get(f"{key}_{side}")
        return v if isinstance(v, int) else 0

    top = max([value(b, s) for b in brokers for s in ("before", "after")] + [1])
    show = mib if key == "bytes" else str
    rows = []
    for b in brokers:
        bars = "".join(
            f'<div class="bar-{side}" style="width:{100 * value(b, side) / top:.1f}%" '
            f'title="{side}: {e(show(value(b, side)))}"><span>{e(show(value(b, side)))}</span></div>'
            for side in ("before", "after")
        )
        rows.append(
            f'<div class="chart-row"><span class="chart-label">broker {e(b.get("broker"))}</span>'
            f'<div class="chart-bars">{bars}</div></div>'
        )
    title = f"<h4>{key} <small>before / after</small></h4>"
    return f'<div class="chart" data-key="{key}">{title}{"".join(rows)}</div>'


# --- the timeline page ---


def timeline(events: Sequence[Event]) -> str:
    if not events:
        return '<h2>Timeline</h2><p class="muted">Nothing has changed since the console started.</p>'
    rows = "".join(
        f'<li class="{e(ev.kind)}"><time>{_clock(ev.at_ms)}</time> {e(ev.text)}</li>' for ev in events
    )
    return (
        "<h2>Timeline <small>as this console saw it, newest first</small></h2>"
        f'<ol class="timeline" id="timeline-list">{rows}</ol>'
    )


def _clock(at_ms: int) -> str:
    at = datetime.datetime.fromtimestamp(at_ms / 1000, datetime.UTC)
    return f"{at:%Y-%m-%d %H:%M:%S}.{at.microsecond // 1000:03d}"


# --- the confirmation of an action ---


def confirm_form(action: str, what: str, fields: Mapping[str, str], csrf: str, *, ask_login: bool) -> str:
    hidden = "".join(
        f'<input type="hidden" name="{e(k)}" value="{e(v)}">'
        for k, v in {**fields, "action": action, "csrf": csrf}.items()
    )
    login = ""
    if ask_login:
        login = (
            "<fieldset><legend>Your credentials on this cluster (used for this action only, never stored)"
            '</legend><label>User <input name="username" autocomplete="username" required></label> '
            '<label>Password <input name="password" type="password" autocomplete="current-password" '
            "required></label></fieldset>"
        )
    return (
        f'<form method="post" action="/actions" class="confirm"><p>{e(what)}</p>{hidden}{login}'
        '<button type="submit" id="confirm">Confirm</button> '
        '<a href="javascript:history.back()">Cancel</a></form>'
    )
