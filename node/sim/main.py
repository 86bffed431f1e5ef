"""`keel-sim`: run the deterministic simulation of the control plane over a range of seeds.

    keel-sim --seeds 1-500 [--brokers 5] [--steps 60] [--faults crash,expire,...] [--jobs 2]
             [--keep-going]

A progress line while it runs, then a summary: seeds, simulated events, events per second
(of wall time), faults by kind. On the first violation it stops and prints the invariant,
the last events before it, and the one command that replays that seed; the exit status is
then 1. With `--keep-going` it prints each violation as it comes and runs every seed, so
that a long run covers its whole range on one version of the code; the summary then names
the seeds that violated, and the exit status is 1 if any did.

With `--jobs N` the seeds are shared among N worker processes, forked from this one: they
start with everything imported and with this process's hash secret, so each seed takes the
course it takes here. Results are taken in seed order whatever the order they finish in, so
the progress lines, the totals and the first violation reported (the lowest seed that has
one) are the same for any N; on a violation the other workers are terminated.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import multiprocessing.pool
import sys
import time
from collections.abc import Iterator

from node.command.entry import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_STATUS_HELP,
    KeelArgumentParser,
    add_verbose_option,
    run_main,
    verbose_requested,
)
from node.command.options import at_least, positive_int
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
    # Three at least: the run's topics have replication factor 3.
    parser.add_argument(
        "--brokers", type=at_least(3, "a whole number"), default=5, help="brokers per run, at least 3 (5)"
    )
    parser.add_argument(
        "--steps", type=positive_int, default=60, help="steps of workload and faults per run (60)"
    )
    parser.add_argument(
        "--faults",
        type=fault_kinds,
        default=DEFAULT_FAULTS,
        help=f"comma-separated kinds among {','.join(FAULTS)} (all)",
    )
    parser.add_argument(
        "--jobs", type=positive_int, default=1, help="worker processes the seeds are shared among (1)"
    )
    parser.add_argument(
        "--standby",
        action="store_true",
        help="run the brokers with controller.standby.enable (docs/STANDBY.md)",
    )
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="report each violation and run the remaining seeds, rather than stop at the first",
    )
    return parser.parse_args(argv)


def replay_command(args: argparse.Namespace, seed: int) -> str:
    command = f"bin/keel-sim --seeds {seed} --brokers {args.brokers} --steps {args.steps}"
    if args.faults != DEFAULT_FAULTS:
        command += f" --faults {','.join(k for k in FAULTS if k in args.faults)}"
    if args.standby:
        command += " --standby"
    return command


def _run(argv: list[str]) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    events = 0
    faults: collections.Counter[str] = collections.Counter()
    seeds = args.seeds
    violated: list[int] = []
    with _SeedResults(args) as results:
        for done, result in enumerate(results, 1):
            events += result.events
            faults.update(result.faults)
            if result.violation is not None:
                _print_violation(args, result)
                violated.append(result.seed)
                if not args.keep_going:
                    return EXIT_FAILED
            _print_progress(result.seed, done, len(seeds), events, time.monotonic() - started)
    _print_summary(seeds, events, time.monotonic() - started, faults, violated)
    return EXIT_FAILED if violated else EXIT_OK


class _SeedResults:
    """Every seed's result, in seed order: run here, or by `--jobs` forked workers. Leaving
    the block early (a violation) terminates the workers still running."""

    def __init__(self, args: argparse.Namespace) -> None:
        self._config = _ConfigOf(args)
        self._seeds: range = args.seeds
        self._jobs: int = min(args.jobs, len(args.seeds))
        self._pool: multiprocessing.pool.Pool | None = None

    def __enter__(self) -> Iterator[RunResult]:
        if self._jobs <= 1:
            return map(self._config, self._seeds)
        # Fork, not spawn: a worker starts at once with every module loaded, and with this
        # process's hash secret, so that sets iterate as they would here.
        # A worker is replaced after a bounded number of seeds: whatever a run leaves behind
        # (docs/RELIABILITY.md, "A worker's memory across seeds") cannot end a long run.
        self._pool = multiprocessing.get_context("fork").Pool(self._jobs, maxtasksperchild=_CHUNKS_PER_WORKER)
        # A few seeds per dispatch: little traffic between processes, and the workers stay
        # evenly loaded (a seed takes a fraction of a second).
        return self._pool.imap(self._config, self._seeds, chunksize=_CHUNK_SEEDS)

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()


# Seeds handed to a worker at once, and the dispatches a worker takes before a fresh one
# (forked from this process, as the first was) replaces it: 1,000 seeds.
_CHUNK_SEEDS = 4
_CHUNKS_PER_WORKER = 250


class _ConfigOf:
    """Runs one seed with the command's settings (a plain object, so that it pickles)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.brokers: int = args.brokers
        self.steps: int = args.steps
        self.faults: frozenset[str] = args.faults
        self.standby: bool = args.standby

    def __call__(self, seed: int) -> RunResult:
        config = RunConfig(
            seed=seed, brokers=self.brokers, steps=self.steps, faults=self.faults, standby=self.standby
        )
        return run_seed(config)


def _print_progress(seed: int, done: int, total: int, events: int, elapsed_s: float) -> None:
    if sys.stderr.isatty() or done == total or done % 50 == 0:
        end = "\n" if not sys.stderr.isatty() or done == total else "\r"
        print(
            f"seed {seed}: {done}/{total} runs, {events} events, {elapsed_s:.1f} s",
            end=end,
            file=sys.stderr,
            flush=True,
        )


def _print_summary(
    seeds: range, events: int, elapsed_s: float, faults: collections.Counter[str], violated: list[int]
) -> None:
    rate = events / elapsed_s if elapsed_s > 0 else 0.0
    if violated:
        named = ", ".join(map(str, violated[:20])) + (", ..." if len(violated) > 20 else "")
        outcome = f"{len(violated)} violated (seeds {named})"
    else:
        outcome = "no violation"
    print(f"seeds {seeds.start}-{seeds.stop - 1}: {len(seeds)} runs, {outcome}")
    print(f"simulated events: {events} in {elapsed_s:.1f} s ({rate:,.0f} events/s)")
    kinds = ", ".join(f"{kind} {faults[kind]}" for kind in FAULTS if faults[kind] > 0)
    print(f"faults: {kinds or 'none'}")


def _print_violation(args: argparse.Namespace, result: RunResult) -> None:
    assert result.violation is not None
    print(f"seed {result.seed}: violated: {result.violation}")
    print("last events before it:")
    for line in result.last_events:
        print(f"  {line}")
    print(f"replay: {replay_command(args, result.seed)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_main("keel-sim", lambda: _run(argv), verbose=verbose_requested(argv))


if __name__ == "__main__":
    sys.exit(main())
