"""The console's web server (aiohttp): the pages, their event streams, the actions.

    GET  /, /topics, /reassignments, /timeline   a page, rendered from the observer's view
    GET  /events/<page>                          server-sent events: the page's fragments as
                                                 JSON, each time what they show changes
    GET  /confirm?action=...                     the confirmation of an action (and the login
                                                 on a SASL cluster)
    POST /actions                                the action, answered as a readable message
    POST /plan                                   ask the planner for a plan (not executed)
    GET  /healthz                                the process is up

aiohttp, not a thread-per-request server: the console is an asyncio program, its observer
shares the loop with the open event streams, and aiohttp streams a response natively.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

from aiohttp import web

from node.clients.planner import PlannerNotRunning
from node.planner.request import GOALS
from node.ui import actions, render
from node.ui.observer import ConsoleObserver
from node.ui.view import ClusterView
from wire.errors import WireError

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
# Seconds between two comments on an idle event stream, so that proxies keep it open.
KEEPALIVE_S = 15.0
# The goals a plan can be asked for here; removing brokers needs a broker list the form lacks.
PREVIEW_GOALS = tuple(g for g in GOALS if g != "remove-brokers")
OBSERVER: web.AppKey[ConsoleObserver] = web.AppKey("observer", ConsoleObserver)
# The token given to a browser that had none, for the page that sets its cookie.
NEW_CSRF: web.RequestKey[str] = web.RequestKey("new_csrf", str)

Fragments = dict[str, str]


def _view(request: web.Request) -> tuple[ConsoleObserver, ClusterView | None]:
    observer = request.app[OBSERVER]
    return observer, observer.view


def _csrf(request: web.Request) -> str:
    return request.cookies.get(actions.CSRF_COOKIE) or request.get(NEW_CSRF) or ""


@web.middleware
async def csrf_cookie(request: web.Request, handler: Callable[[web.Request], object]) -> web.StreamResponse:
    """Give every browser its token (the cookie) on its first page."""
    token = request.cookies.get(actions.CSRF_COOKIE)
    if not token:
        request[NEW_CSRF] = actions.new_token()
    response = await handler(request)  # type: ignore[misc]
    assert isinstance(response, web.StreamResponse)
    if not token and not response.prepared:
        response.set_cookie(
            actions.CSRF_COOKIE, request[NEW_CSRF], httponly=True, samesite="Strict", path="/"
        )
    return response


# --- the pages: each is a function from the request to its fragments ---


# Every page has all its sections from the start, empty until the cluster has been read, so
# that the event stream has a place to put each fragment.
WAITING = '<p class="muted">Reading the cluster…</p>'


def cluster_fragments(request: web.Request) -> Fragments:
    observer, view = _view(request)
    return {
        "summary": render.summary(view, observer.problem),
        "brokers": WAITING if view is None else render.brokers_table(view),
        "metrics": "" if view is None else render.controller_metrics(view),
    }


def topics_fragments(request: web.Request) -> Fragments:
    observer, view = _view(request)
    keep = render.partition_filter(request.query.get("topic", ""), request.query.get("only", ""))
    return {
        "summary": render.summary(view, observer.problem),
        "partitions": WAITING if view is None else render.partitions_table(view, keep),
    }


def reassignments_fragments(request: web.Request) -> Fragments:
    observer, view = _view(request)
    return {
        "summary": render.summary(view, observer.problem),
        "reassignments": WAITING if view is None else render.reassignments(view),
        "planner": "" if view is None else render.planner_status(view),
        "plans": render.plans(observer.plans),
    }


def timeline_fragments(request: web.Request) -> Fragments:
    observer, view = _view(request)
    return {
        "summary": render.summary(view, observer.problem),
        "timeline": render.timeline(observer.timeline.newest_first()),
    }


PAGES: dict[str, tuple[str, Callable[[web.Request], Fragments]]] = {
    "cluster": ("Cluster", cluster_fragments),
    "topics": ("Topics", topics_fragments),
    "reassignments": ("Reassignments", reassignments_fragments),
    "timeline": ("Timeline", timeline_fragments),
}


def _page_handler(name: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    title, fragments_of = PAGES[name]

    async def handler(request: web.Request) -> web.Response:
        fragments = fragments_of(request)
        extra: Fragments = {}
        if name == "topics":
            extra["filter"] = render.filter_form(
                request.query.get("topic", ""), request.query.get("only", "")
            )
        if name == "reassignments":
            extra["plan-form"] = render.plan_form(_csrf(request), PREVIEW_GOALS)
        if name == "reassignments":
            # The form that asks for a plan goes just above the plans it adds to.
            plans = fragments.pop("plans")
            fragments |= {**extra, "plans": plans}
            extra = {}
        ordered = {"summary": fragments.pop("summary"), **extra, **fragments}
        return _html(render.page(name, title, ordered, request.query_string))

    return handler


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: the page's fragments now, then again each time the view changes
    (at most once per observer look). The script puts each into its section."""
    name = request.match_info["page"]
    if name not in PAGES:
        raise web.HTTPNotFound(text=f"no page {name!r}")
    _, fragments_of = PAGES[name]
    observer = request.app[OBSERVER]
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )
    await response.prepare(request)
    version = -1
    sent: Fragments = {}
    try:
        while True:
            newer = await observer.wait_newer(version, KEEPALIVE_S)
            if newer == version:
                await response.write(b": keep-alive\n\n")
                continue
            version = newer
            fragments = fragments_of(request)
            changed = {k: v for k, v in fragments.items() if sent.get(k) != v}
            sent = fragments
            if changed:
                payload = json.dumps({"version": version, "fragments": changed})
                await response.write(f"data: {payload}\n\n".encode())
    except (ConnectionResetError, asyncio.CancelledError):
        pass
    return response


# --- actions ---


async def confirm(request: web.Request) -> web.Response:
    observer = request.app[OBSERVER]
    try:
        action, fields = actions.parse_request(dict(request.query))
    except actions.ActionError as e:
        return _html(render.message_page("Action refused", str(e), ok=False), 400)
    question = action.question.format(**fields)
    form = render.confirm_form(
        action.name, question, fields, _csrf(request), ask_login=actions.needs_login(observer.security)
    )
    return _html(render.page("confirm", "Confirm", {"summary": "<h1>Confirm</h1>", "confirm": form}))


def _checked_form(request: web.Request, form: dict[str, str]) -> str | None:
    """Why a POST is refused as possibly cross-site, or None."""
    origin = request.headers.get("Origin")
    if origin and origin != "null" and origin.split("://", 1)[-1] != request.host:
        return f"the form came from {origin}, not from this console"
    if not actions.tokens_match(request.cookies.get(actions.CSRF_COOKIE), form.get("csrf")):
        return "the form's token does not match this browser's: open the page again and retry"
    return None


async def perform(request: web.Request) -> web.Response:
    observer = request.app[OBSERVER]
    form = {k: str(v) for k, v in (await request.post()).items()}
    if refused := _checked_form(request, form):
        log.warning("refused an action: %s", refused)
        return _html(render.message_page("Action refused", refused, ok=False), 403)
    back = "/topics"
    try:
        action, fields = actions.parse_request(form)
        back = "/reassignments" if action.name == "cancel-reassignment" else "/topics"
        security = actions.as_user(observer.security, form.get("username", ""), form.get("password", ""))
        view = observer.view
        bootstrap = ",".join(b.address for b in (view.brokers if view else ()) if b.alive and b.address)
        if not bootstrap:
            raise actions.ActionError("no broker is alive to send the action to")
        done = await actions.perform(action, fields, bootstrap, security)
    except actions.ActionError as e:
        log.warning("action refused: %s", e)
        return _html(render.message_page("Action failed", str(e), ok=False, back=back), 400)
    log.info("action %s %s done: %s", action.name, fields, done)
    return _html(render.message_page("Done", done, ok=True, back=back))


async def plan(request: web.Request) -> web.Response:
    observer = request.app[OBSERVER]
    form = {k: str(v) for k, v in (await request.post()).items()}
    if refused := _checked_form(request, form):
        return _html(render.message_page("Refused", refused, ok=False), 403)
    goal = form.get("goal", "")
    if goal not in PREVIEW_GOALS:
        return _html(
            render.message_page("Refused", f"unknown goal {goal!r}", ok=False, back="/reassignments"), 400
        )
    try:
        await observer.preview_plan([goal])
    except (PlannerNotRunning, WireError, OSError) as e:
        return _html(
            render.message_page("No plan", f"the planner gave no plan: {e}", ok=False, back="/reassignments"),
            400,
        )
    raise web.HTTPSeeOther("/reassignments")


async def healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok\n")


def served_host_names(listen_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The Host names the console answers: the address it listens on, the loopback names,
    and those it was told (`--allowed-host`, for a name it is reached by)."""
    names = {listen_host.strip("[]").lower(), "localhost", "127.0.0.1", "::1"}
    names.update(name.strip("[]").lower() for name in extra)
    return frozenset(names)


def host_check(allowed: frozenset[str]) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Refuse a request whose Host header names another host (DNS rebinding: a web page at
    evil.example whose name later points at the console's address is, to the browser, the
    same origin as the console, cookies and all)."""

    @web.middleware
    async def check(request: web.Request, handler: Callable[[web.Request], object]) -> web.StreamResponse:
        name = _host_name(request.host)
        if name not in allowed:
            log.warning("refused a request for host %r: the console serves %s", request.host, sorted(allowed))
            return _html(
                render.message_page(
                    "Refused", f"this console does not serve the host {request.host!r}", ok=False
                ),
                421,
            )
        response = await handler(request)  # type: ignore[misc]
        assert isinstance(response, web.StreamResponse)
        return response

    return check


def _host_name(host: str) -> str:
    """The name of a Host header, without its port: `[::1]:8080` is `::1`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def make_app(observer: ConsoleObserver, allowed_hosts: frozenset[str] | None = None) -> web.Application:
    """`allowed_hosts` None: any Host (the tests' apps)."""
    middlewares = [csrf_cookie] if allowed_hosts is None else [host_check(allowed_hosts), csrf_cookie]
    app = web.Application(middlewares=middlewares)
    app[OBSERVER] = observer
    app.router.add_get("/", _page_handler("cluster"))
    for name in ("topics", "reassignments", "timeline"):
        app.router.add_get(f"/{name}", _page_handler(name))
    app.router.add_get("/events/{page}", events)
    app.router.add_get("/confirm", confirm)
    app.router.add_post("/actions", perform)
    app.router.add_post("/plan", plan)
    app.router.add_get("/healthz", healthz)
    app.router.add_static("/static", STATIC)
    return app


async def serve(
    observer: ConsoleObserver, host: str, port: int, allowed_hosts: Iterable[str] = ()
) -> web.AppRunner:
    app = make_app(observer, served_host_names(host, allowed_hosts))
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


async def close(runner: web.AppRunner) -> None:
    with contextlib.suppress(Exception):
        await runner.cleanup()
