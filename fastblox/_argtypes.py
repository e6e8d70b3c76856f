"""argparse value types shared by every fastblox command: they reject bad numbers with a message
argparse prints as one line (exit code 2)."""

from __future__ import annotations

import argparse


def _number(s: str, kind, what: str):
    try:
        return kind(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}") from None


def positive_int(s: str) -> int:
    v = _number(s, int, "a positive integer")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {s!r}")
    return v


def positive_float(s: str) -> float:
    v = _number(s, float, "a number")
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {s!r}")
    return v


def nonneg_float(s: str) -> float:
    v = _number(s, float, "a number")
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"expected zero or a positive number, got {s!r}")
    return v
