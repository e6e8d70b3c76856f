"""``fastblox experiment NAME --out DIR [--quick]`` and ``fastblox report RESULTS_DIR``.

Hook them into a parser with ``add_experiment_commands(subparsers)``; each command's ``func``
returns an exit code. An unknown experiment name raises :class:`fastblox.errors.ConfigError`
listing the valid names.
"""

from __future__ import annotations


from ._argtypes import positive_int


def add_experiment_commands(sub) -> None:
    from .experiments import EXPERIMENTS

    names = "; ".join(f"{e.name}: {e.description}" for e in EXPERIMENTS.values())
    p = sub.add_parser(
        "experiment",
        help="run a named experiment (a sweep + its tables and figures)",
        description=f"Run a named experiment into --out DIR (resumable sweep folder + summary.csv + PNG/PDF "
        f"figures + report.html). Experiments: {names}.",
    )
    p.add_argument("name", metavar="NAME", help=f"one of: {', '.join(EXPERIMENTS)}")
    p.add_argument("--out", metavar="DIR", required=True, help="output folder (created; reused to resume)")
    p.add_argument("--quick", action="store_true", help="a smaller grid and 2 seeds instead of 3 (seconds to a minute)")
    p.add_argument("--executor", choices=["local", "threads", "serial", "ray"], default="threads",
                   help="how the sweep's points run (default: threads)")
    p.add_argument("--workers", type=positive_int, default=None, help="threads or processes (default: CPU count)")
    p.add_argument("--no-report", action="store_true", help="do not write DIR/report.html")
    p.set_defaults(func=cmd_experiment)

    r = sub.add_parser("report", help="write a self-contained HTML report of a results folder",
                       description="Write RESULTS_DIR/report.html: the summary table(s) (only the columns that "
                       "vary; constant ones listed once above) and every PNG figure with its caption, images "
                       "embedded, of a run, sweep or experiment folder. A run or sweep folder without figures gets "
                       "its standard figures drawn first (as `fastblox plot` does).")
    r.add_argument("results_dir", metavar="RESULTS_DIR")
    r.add_argument("--out", metavar="FILE", default=None, help="where to write (default: RESULTS_DIR/report.html)")
    r.set_defaults(func=cmd_report)


def cmd_experiment(a) -> int:
    import sys

    from .experiments import get_experiment, run_experiment
    from .report import write_report

    get_experiment(a.name)  # ConfigError listing the names, before anything is created
    files = run_experiment(a.name, a.out, quick=a.quick, executor=a.executor, workers=a.workers,
                           progress=sys.stderr.isatty())
    figs = sum(1 for k in files if k.endswith("_png"))
    msg = f"fastblox experiment {a.name}: {figs} figures (PNG + PDF) and summary tables in {a.out}"
    if not a.no_report:
        msg += f"; report: {write_report(a.out)}"
    print(msg)
    return 0


def cmd_report(a) -> int:
    from .report import write_report

    print(write_report(a.results_dir, out=a.out))
    return 0
