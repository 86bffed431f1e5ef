"""Argument types for argparse that refuse a bad value with one line before anything starts:
whole numbers and numbers held to a bound."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

N = TypeVar("N", int, float)


def _bounded(parse: Callable[[str], N], low: N, *, inclusive: bool, what: str) -> Callable[[str], N]:
    """An argparse type: `parse` the text, then hold it to `low` (argparse prints the message)."""

    def check(text: str) -> N:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value < low or (value == low and not inclusive):
            bound = f"at least {low}" if inclusive else f"more than {low}"
            raise argparse.ArgumentTypeError(f"must be {bound}, not {text}")
        return value

    return check


def at_least(low: int, what: str) -> Callable[[str], int]:
    """An argparse type for a whole number of at least `low`."""
    return _bounded(int, low, inclusive=True, what=what)


positive_int = _bounded(int, 1, inclusive=True, what="a whole number")
non_negative_int = _bounded(int, 0, inclusive=True, what="a whole number")
positive_float = _bounded(float, 0.0, inclusive=False, what="a number")
