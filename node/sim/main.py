"""`keel-sim`: run the deterministic simulation of the control plane over a range of seeds.

    keel-sim --seeds 1-500 [--brokers 5] [--steps 60] [--faults crash,expire,...]

A progress line while it runs, then a summary: seeds, simulated events, events per second
(of wall time), faults by kind. On the first violation it stops and prints the invariant,
the last events before it, and the one command that replays that seed; the exit status is
then 1.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time

from node.cli.arguments import positive_int
from node.entry import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_STATUS_HELP,
    KeelArgumentParser,
    add_verbose_option,
    run_main,
    verbose_requested,
)
from node.sim.simulation import DEFAULT_FAULTS, FAULTS, RunConfig, RunResult, run_seed


def seed_range(text: str) -> range:
    """`N` or `FIRST-LAST` (inclusive)."""
    first, sep, last = text.partition("-")
    try:
        low = int(first)
        high = int(last) if sep else low
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a seed or a range FIRST-LAST") from None
    if low < 0 or high < low:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range of seeds from low to high")
    return range(low, high + 1)


def fault_kinds(text: str) -> frozenset[str]:
    kinds = frozenset(k.strip() for k in text.split(",") if k.strip())
    unknown = sorted(kinds - set(FAULTS))
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown fault kind {', '.join(unknown)}; known: {', '.join(FAULTS)}"
        )
    return kinds


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = KeelArgumentParser(
        prog="keel-sim",
        description="The deterministic simulation of the control plane, one run per seed.",
        epilog=EXIT_STATUS_HELP,
    )
    add_verbose_option(parser)
    parser.add_argument("--seeds", type=seed_range, default=range(1, 101), help="N or FIRST-LAST (1-100)")
    parser.add_argument("--brokers", type=positive_int, default=5, help="brokers per run (5)")
    parser.add_argument(
        "--steps", type=positive_int, default=60, help="steps of workload and faults per run (60)"
    )
    parser.add_argument(
        "--faults",
        type=fault_kinds,
        default=DEFAULT_FAULTS,
        help=f"comma-separated kinds among {','.join(FAULTS)} (all)",
    )
    return parser.parse_args(argv)


def replay_command(args: argparse.Namespace, seed: int) -> str:
    command = f"bin/keel-sim --seeds {seed} --brokers {args.brokers} --steps {args.steps}"
    if args.faults != DEFAULT_FAULTS:
        command += f" --faults {','.join(k for k in FAULTS if k in args.faults)}"
    return command


def _run(argv: list[str]) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    events = 0
    faults: collections.Counter[str] = collections.Counter()
    seeds = args.seeds
    for done, seed in enumerate(seeds, 1):
        result = run_seed(RunConfig(seed=seed, brokers=args.brokers, steps=args.steps, faults=args.faults))
        events += result.events
        faults.update(result.faults)
        if result.violation is not None:
            _print_violation(args, result)
            return EXIT_FAILED
        elapsed = time.monotonic() - started
        if sys.stderr.isatty() or done == len(seeds) or done % 50 == 0:
            end = "\n" if not sys.stderr.isatty() or done == len(seeds) else "\r"
            print(
                f"seed {seed}: {done}/{len(seeds)} runs, {events} events, {elapsed:.1f} s",
                end=end,
                file=sys.stderr,
                flush=True,
            )
    _print_summary(seeds, events, time.monotonic() - started, faults)
    return EXIT_OK


def _print_summary(seeds: range, events: int, elapsed_s: float, faults: collections.Counter[str]) -> None:
    rate = events / elapsed_s if elapsed_s > 0 else 0.0
    print(f"seeds {seeds.start}-{seeds.stop - 1}: {len(seeds)} runs, no violation")
    print(f"simulated events: {events} in {elapsed_s:.1f} s ({rate:,.0f} events/s)")
    kinds = ", ".join(f"{kind} {faults[kind]}" for kind in FAULTS if faults[kind] > 0)
    print(f"faults: {kinds or 'none'}")


def _print_violation(args: argparse.Namespace, result: RunResult) -> None:
    assert result.violation is not None
    print(f"seed {result.seed}: violated: {result.violation}")
    print("last events before it:")
    for line in result.last_events:
        print(f"  {line}")
    print(f"replay: {replay_command(args, result.seed)}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_main("keel-sim", lambda: _run(argv), verbose=verbose_requested(argv))


if __name__ == "__main__":
    sys.exit(main())
