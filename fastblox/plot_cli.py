"""``fastblox plot PATH... [--out DIR]`` and ``fastblox compare RUN_DIR RUN_DIR... [--out DIR]``.

Hook them into a parser with ``add_plot_commands(subparsers)``; the work is in
:mod:`fastblox.folder_plots`.
"""

from __future__ import annotations


def add_plot_commands(sub) -> None:
    p = sub.add_parser(
        "plot", help="draw the standard figures of run or sweep folders",
        description="Draw the standard figures (PNG + PDF) of run folders (`fastblox run --out DIR`: JCT CDF of "
        "the tracked jobs, cluster state over time when recorded; several runs are overlaid) or sweep/experiment "
        "folders (JCT CDF per point, average and p99 JCT vs load with the spread over seeds when the load "
        "varies, bar charts when only categorical parameters vary, cluster state over time when recorded). "
        "Lines are labelled by the parameters that vary. Prints the files written.")
    p.add_argument("paths", metavar="PATH", nargs="+", help="run folders, or sweep/experiment folders")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where to write (default: the folder itself; an experiment's folder: its plots/)")
    p.set_defaults(func=cmd_plot)

    c = sub.add_parser(
        "compare", help="compare run folders: a table relative to the first run and overlaid JCT CDFs",
        description="Print avg/p50/p99 JCT, makespan, utilisation and preemptions of each run folder "
        "(`fastblox run --out DIR`), relative to the first, and draw their JCT CDFs overlaid "
        "(compare_jct_cdf.png/.pdf).")
    c.add_argument("runs", metavar="RUN_DIR", nargs="+", help="two or more run folders; the first is the baseline")
    c.add_argument("--out", metavar="DIR", default=None, help="where to write the figure (default: the first RUN_DIR)")
    c.set_defaults(func=cmd_compare)


def cmd_plot(a) -> int:
    from .folder_plots import plot_folders

    for p in plot_folders(a.paths, out=a.out):
        print(p)
    return 0


def cmd_compare(a) -> int:
    from .folder_plots import compare_runs

    table, figs = compare_runs(a.runs, out=a.out)
    print(table)
    for p in figs:
        print(p)
    return 0
