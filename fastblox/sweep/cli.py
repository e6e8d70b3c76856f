"""``fastblox sweep CONFIG.toml --out DIR``: the command-line face of :func:`run_sweep`.

Hook it into a parser with ``add_sweep_commands(subparsers)``; the command's ``func`` returns an
exit code (0: every point finished, 1: some points failed, see DIR/errors.json). Bad input, and a
folder another sweep is running into, raise :class:`fastblox.errors.FastbloxError` subclasses,
which ``fastblox.cli.main`` prints as one line (exit 2); Ctrl-C raises
:class:`~fastblox.sweep.run.SweepInterrupted`, printed as one line with exit 130.
"""

from __future__ import annotations

import sys

from .._argtypes import positive_float, positive_int
from ..errors import ConfigError


def add_sweep_commands(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a grid of configurations (a sweep config in TOML), resumably",
        description="Run every point of a sweep config (a [base] table of run options and a [grid] of lists; "
        "see docs/sweeps.md) and write one Parquet + JSON file per point, summary.parquet and errors.json "
        "into --out DIR. Points already in DIR are skipped, so an interrupted sweep resumes.",
    )
    p.add_argument("config", metavar="CONFIG.toml", help="the sweep config")
    add_executor_options(p, "record it in errors.json")
    p.set_defaults(func=cmd_sweep)


def add_executor_options(p, on_timeout: str) -> None:
    """--out and the executor's options, shared by ``sweep`` and ``search``; ``on_timeout`` says
    what becomes of a point stopped by --point-timeout."""
    p.add_argument("--out", metavar="DIR", required=True, help="output folder (created; reused to resume)")
    p.add_argument("--executor", choices=["local", "threads", "serial", "ray"], default="local",
                   help="local: a process pool (default); threads: a thread pool; serial: one by one; "
                        "ray: a Ray cluster (pip install 'fastblox[ray]')")
    p.add_argument("--workers", type=positive_int, default=None, help="processes or threads (default: CPU count)")
    p.add_argument("--ray-address", default=None, metavar="ADDR", help="address of a running Ray cluster (ray executor)")
    p.add_argument("--point-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="stop a point that runs longer than this (wall time; local and serial executors) and "
                        f"{on_timeout} (default: no limit)")
    p.add_argument("--quiet", action="store_true", help="no progress line even on a terminal")


def cmd_sweep(a) -> int:
    from .run import run_sweep

    if a.ray_address and a.executor != "ray":
        raise ConfigError("--ray-address needs --executor ray")
    res = run_sweep(a.config, a.out, executor=a.executor, workers=a.workers, progress=not a.quiet,
                    ray_address=a.ray_address, point_timeout=a.point_timeout, notice=_notice)
    damaged = f", {len(res.damaged)} damaged and run again" if res.damaged else ""
    print(f"fastblox sweep: {res.num_points} points: {len(res.ran)} run, {len(res.skipped)} already done, "
          f"{len(res.errors)} failed{damaged} in {res.wall_s:.2f} s -> {res.out_dir / 'summary.parquet'}")
    if res.errors:
        first = next(iter(res.errors.items()))
        print(f"  failed points are listed in {res.out_dir / 'errors.json'}; e.g. {first[0]}: {first[1]['error']}")
        return 1
    return 0


def _notice(line: str) -> None:
    print(f"fastblox sweep: {line}", file=sys.stderr, flush=True)
