"""Parsers for policy options (``--policy-opt NAME=VALUE``): each raises ValueError with a reason."""

from __future__ import annotations


def fraction(v) -> float:
    x = float(v)
    if not 0.0 <= x < 1.0:
        raise ValueError(f"must be in [0, 1), got {x:g}")
    return x


def positive(v) -> float:
    x = float(v)
    if not x > 0:
        raise ValueError(f"must be positive, got {x:g}")
    return x


def nonneg(v) -> float:
    x = float(v)
    if not x >= 0:
        raise ValueError(f"must be zero or positive, got {x:g}")
    return x


def positive_int(v) -> int:
    x = int(v)
    if x <= 0:
        raise ValueError(f"must be a positive whole number, got {x}")
    return x


def boolean(v) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {v!r}")


def ascending_list(v) -> tuple:
    """A list of positive numbers in ascending order, from a sequence or 'a;b;c' / 'a,b,c'."""
    if isinstance(v, str):
        parts = [p for p in v.replace(";", ",").split(",") if p.strip()]
    else:
        parts = list(v)
    xs = tuple(float(p) for p in parts)
    if any(not x > 0 for x in xs):
        raise ValueError(f"must be positive numbers, got {list(xs)}")
    if any(b <= a for a, b in zip(xs, xs[1:])):
        raise ValueError(f"must be in ascending order, got {list(xs)}")
    return xs


def backfill_option():
    """``backfill``: the option of the non-preemptive queue policies (``fifo``, ``sjf``) that turns
    backfilling off (head-of-line blocking, as Tiresias' ``fifo`` schedule and Slurm without its
    backfill plugin): the engine's ``C_HOL``."""
    from .. import parts

    return parts.Option("backfill", True, boolean,
                        "false: strict order, no job starts while one before it waits (head-of-line blocking)")

