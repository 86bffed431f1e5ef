"""`keel reassign status`: the progress of the plan the planner executes, and self-healing.

    keel reassign status [--wait] [--planner host:port] [--format json]

The planner is found through the brokers (`/keel/planner`) unless `--planner` names it.
The table format draws one progress line (moves done, bytes copied, rate, time left) under
the plan's id, origin and state; `--wait` redraws it until the plan ends and exits 0 only
if it completed. `--format json` prints the planner's status object as it is (with
`--wait`, the last one).

The bar is drawn with a few characters rather than a progress-bar library: the line is
the same one `keel reassign execute --wait` draws, and a library would add a dependency
for one line of output.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable

import orjson

from node.cli.reassignment_plan import mib
from node.clients.planner import PlannerClient, PlannerNotRunning, find_planner
from node.command.entry import CommandError, UsageError
from node.command.output import print_json
from wire.endpoint import parse_bootstrap

# Seconds between two looks of `--wait`, and between two lines when stderr is not a terminal.
POLL_INTERVAL_S = 1.0
LINE_INTERVAL_S = 5.0
BAR_WIDTH = 24


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--:--"
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def _int(status: dict[str, object], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) else 0


def progress_line(status: dict[str, object], *, width: int = BAR_WIDTH) -> str:
    """[bar] percent  moves done/total (in flight, failed)  bytes copied of total  rate  time left."""
    total, copied = _int(status, "bytes_total"), _int(status, "bytes_copied")
    moves, done = _int(status, "moves_total"), _int(status, "moves_done")
    # A plan without data to copy (leaders only) shows its moves instead.
    by_moves = 1.0 if moves == 0 else done / moves
    fraction = min(1.0, copied / total) if total > 0 else by_moves
    filled = round(fraction * width)
    rate = status.get("rate_bytes_per_s")
    speed = f"{mib(int(rate))}/s" if isinstance(rate, int | float) and rate > 0 else "-- MiB/s"
    left = status.get("seconds_left")
    eta = duration(left if isinstance(left, int | float) else None)
    extra = f"{_int(status, 'moves_in_flight')} in flight"
    if _int(status, "moves_failed"):
        extra += f", {_int(status, 'moves_failed')} failed"
    return (
        f"[{'#' * filled}{'-' * (width - filled)}] {fraction * 100:5.1f}%  "
        f"{done}/{moves} moves ({extra})  {mib(copied)} of {mib(total)}  {speed}  {eta} left"
    )


def describe(status: dict[str, object]) -> list[str]:
    """The lines of the table format."""
    if not status.get("plan_id"):
        lines = ["No plan has been executed by this planner."]
    else:
        origin = status.get("origin") or "request"
        lines = [f"Plan {status['plan_id']} ({origin}): {status.get('state')}"]
        if status.get("reason"):
            lines.append(f"  {status['reason']}")
        lines.append(progress_line(status))
        throttle = status.get("throttle_bytes_per_s")
        limit = status.get("max_moves_per_broker")
        lines.append(
            f"Throttle: {f'{mib(throttle)}/s' if isinstance(throttle, int) and throttle >= 0 else 'none'}; "
            f"at most {limit} moves in flight per broker."
        )
        for failure in _dicts(status.get("failures")):
            lines.append(
                f"Failed: {failure.get('topic')}-{failure.get('partition')}: {failure.get('reason')}"
            )
        if status.get("message"):
            lines.append(f"Note: {status['message']}")
    healing = status.get("self_healing")
    if isinstance(healing, dict):
        lines.extend(describe_healing(healing))
    return lines


def describe_healing(healing: dict[str, object]) -> list[str]:
    threshold = healing.get("threshold_ms")
    seconds = threshold / 1000 if isinstance(threshold, int) else 0
    state = "on" if healing.get("enabled") else "off"
    if healing.get("enabled") and not healing.get("active"):
        state += ", but this planner is not the active one"
    lines = [f"Self-healing: {state} (threshold {seconds:g} s)."]
    for gone in _dicts(healing.get("gone")):
        heal_in = gone.get("heal_in_s")
        when = "healed" if heal_in is None else f"heal in {duration(float(str(heal_in)))}"
        lines.append(
            f"  Broker {gone.get('broker')} gone for {duration(float(str(gone.get('gone_for_s'))))}; {when}."
        )
    if idle := healing.get("gone_without_replicas"):
        lines.append(f"  Broker(s) {idle} gone, holding no replicas: nothing to heal.")
    last = healing.get("last_heal")
    if isinstance(last, dict) and last:
        plan = last.get("plan_id") or "-"
        lines.append(f"  Last heal: brokers {last.get('brokers')}, plan {plan}, {last.get('state')}.")
    return lines


def _dicts(value: object) -> list[dict[str, object]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


async def fetch_status(client: PlannerClient) -> dict[str, object]:
    response = await client.status()
    status = orjson.loads(response.status_json or "{}")
    return status if isinstance(status, dict) else {}


async def follow(
    fetch: Callable[[], Awaitable[dict[str, object]]],
    *,
    interactive: bool,
    poll_interval_s: float = POLL_INTERVAL_S,
    quiet: bool = False,
) -> dict[str, object]:
    """Draw the progress until the plan is no longer running; returns the last status."""
    last_line = 0.0
    while True:
        status = await fetch()
        running = status.get("state") == "running"
        if not quiet:
            line = progress_line(status)
            now = time.monotonic()
            if interactive:
                print("\r" + line, end="" if running else "\n", file=sys.stderr, flush=True)
            elif now - last_line >= LINE_INTERVAL_S or not running:
                print(line, file=sys.stderr, flush=True)
                last_line = now
        if not running:
            return status
        await asyncio.sleep(poll_interval_s)


def check_planner_address(address: str | None) -> None:
    """`--planner`, checked before anything connects."""
    if address is None:
        return
    try:
        parse_bootstrap(address)
    except ValueError:
        raise UsageError(f"--planner {address} is not host:port") from None


async def status_command(args: argparse.Namespace, bootstrap: str) -> int:
    check_planner_address(args.planner)
    timeout = args.timeout
    try:
        if args.planner:
            client = PlannerClient.at(args.planner, timeout=timeout, security=args.security)
        else:
            endpoint = await find_planner(bootstrap, timeout=timeout, security=args.security)
            client = PlannerClient(endpoint, timeout=timeout, security=args.security)
        async with client:
            status = await fetch_status(client)
            if args.wait and status.get("state") == "running":
                status = await follow(
                    lambda: fetch_status(client), interactive=sys.stderr.isatty(), quiet=args.format == "json"
                )
    except PlannerNotRunning as e:
        raise CommandError(str(e)) from None
    if args.format == "json":
        print_json(status)
    else:
        print("\n".join(describe(status)))
    if args.wait:
        return 0 if status.get("state") in ("complete", None) else 1
    return 0


def add_arguments(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "status", parents=[common], help="the progress of the plan the planner executes, and self-healing"
    )
    parser.add_argument("--wait", action="store_true", help="follow the plan until it ends")
    parser.add_argument(
        "--planner", default=None, metavar="HOST:PORT", help="the planner (default: ask the brokers)"
    )
