"""``fastblox search CONFIG.toml --out DIR``: the command-line face of :func:`run_search`.

Hook it into a parser with ``add_search_commands(subparsers)``. Exit codes as ``fastblox sweep``'s:
0 every trial has an objective, 1 some trials failed (their runs are in DIR/errors.json, their
messages in search.parquet), 2 bad input (one line), 130 Ctrl-C (what finished is written).
"""

from __future__ import annotations

import sys

from .._argtypes import positive_int
from .cli import add_executor_options


def add_search_commands(sub) -> None:
    p = sub.add_parser(
        "search",
        help="find the best values of knobs for an objective (random search or TPE), resumably",
        description="Run the trials of a search config (a sweep's [base] with {name} placeholders and a [search] "
        "table: objective, sampler, trials, batch, seed, [search.space]; see docs/search.md) and write "
        "search.parquet (one row per trial), best.json, search.png and every run's files into --out DIR. "
        "Rerunning the same command resumes: finished trials are read back, not run again.",
    )
    p.add_argument("config", metavar="CONFIG.toml", help="the search config")
    add_executor_options(p, "fail its trial (the run is in errors.json)")
    p.add_argument("--trials", type=positive_int, default=None, metavar="N",
                   help="number of trials (default: the config's [search] trials); more than a finished search "
                        "had extends it")
    p.set_defaults(func=cmd_search)


def cmd_search(a) -> int:
    from .search import run_search

    res = run_search(a.config, a.out, executor=a.executor, workers=a.workers, trials=a.trials,
                     progress=not a.quiet, ray_address=a.ray_address, point_timeout=a.point_timeout, notice=_notice)
    statuses = res.trials["status"].value_counts(sort=True)
    counts = ", ".join(f"{n} {s}" for s, n in statuses.iter_rows())
    print(f"fastblox search: {res.num_done} trials ({counts}): {len(res.ran)} runs, {res.reused} reused, "
          f"in {res.wall_s:.2f} s -> {res.out_dir / 'search.parquet'}")
    if res.best is None:
        print(f"  no trial has a {res.objective}: see the error column of search.parquet")
        return 1
    b = res.best
    knobs = ", ".join(f"{k} = {v!r}" for k, v in b["params"].items())
    spread = f" ± {b['std']:,.6g} over seeds {b['seeds']}" if len(b["seeds"]) > 1 else ""
    ties = ""
    names = list(b["params"])
    tied = sorted({tuple(r[k] for k in names) for r in res.trials.filter(res.trials["trial"].is_in(b["ties"]))
                  .iter_rows(named=True)} - {tuple(b["params"].values())})
    if tied:
        vals = "; ".join(", ".join(f"{k} = {v!r}" for k, v in zip(names, t)) for t in tied)
        ties = f"\n  the same {res.objective} (exactly) at: {vals}"
    print(f"  best {res.objective} ({b['direction']}): {b['value']:,.6g}{spread} at {knobs} (trial {b['trial']}) "
          f"-> {res.out_dir / 'best.json'}, {res.out_dir / 'search.png'}{ties}")
    return 1 if (res.trials["status"] == "failed").any() else 0


def _notice(line: str) -> None:
    print(f"fastblox search: {line}", file=sys.stderr, flush=True)
