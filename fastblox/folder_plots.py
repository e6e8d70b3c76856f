"""The standard figures of any results folder, and a comparison of runs.

Two kinds of folder are understood (:func:`folder_kind`):

* a **run** folder, as ``fastblox run --out DIR`` writes it: ``jobs.parquet`` and
  ``summary.json`` (and ``series.parquet`` with ``--record-series``);
* a **sweep** folder, as ``fastblox sweep`` and ``fastblox experiment`` write it:
  ``summary.parquet`` and ``points/<id>.parquet`` (and ``points/<id>.series.parquet``).

:func:`plot_folders` draws, for runs: the JCT CDF of the tracked jobs (one curve per run) and,
when recorded, the cluster state and preemptions over time. For a sweep: the JCT CDF per point
(one figure per load when the load varies), the average and p99 JCT against the load when the
load varies (mean over the seeds, min-max error bars), bar charts when only categorical
parameters vary, and the cluster state over time at the highest load when series were recorded.
Curves are labelled by the parameters that vary (:func:`fastblox.plots.label_of`); every figure
carries a caption (PNG metadata) that ``fastblox report`` shows.

:func:`compare_runs` tabulates the main figures of several run folders relative to the first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError
from .sweep.config import PARAM_KEYS

RUN_FILES = ("jobs.parquet", "summary.json")
SWEEP_FILE = "summary.parquet"
#: what each kind of folder holds, for error messages
EXPECTED = (f"a run folder ({' and '.join(RUN_FILES)}, as `fastblox run --out DIR` writes) or a sweep folder "
            f"({SWEEP_FILE} and points/, as `fastblox sweep` and `fastblox experiment` write)")
#: parameters that only decide where a figure's points lie, never a line of their own
SPREAD_KEY = "seed"
#: the parameters that set a load, each with its axis label: a generator's arrival rate, or the
#: offered load a trace's arrivals were rescaled to (``target_load``); the first that varies is x
LOAD_KEYS = {"target_load": "offered load (GPU-seconds asked / GPU-seconds available)",
             "load": "load (jobs per hour)"}
HOUR = 3600.0


def folder_kind(path) -> str:
    """``"run"`` or ``"sweep"``; a :class:`ConfigError` naming the path otherwise."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: no such folder; expected {EXPECTED}")
    if not p.is_dir():
        raise ConfigError(f"{p} is a file, not a folder; expected {EXPECTED}")
    if all((p / f).is_file() for f in RUN_FILES):
        return "run"
    if (p / SWEEP_FILE).is_file():
        return "sweep"
    raise ConfigError(f"{p} is neither a run nor a sweep folder: expected {EXPECTED}")


# ----------------------------------------------------------------------------- runs
@dataclass
class Run:
    """One run folder: its summary figures and configuration (``summary.json``)."""

    path: Path
    summary: dict
    config: dict
    jobs_file: Path | None = None  # default: path / jobs.parquet (a sweep point: points/<id>.parquet)

    def jobs(self):
        return _read(self.jobs_file or self.path / "jobs.parquet")

    def tracked_jct(self):
        import polars as pl

        j = self.jobs()
        return j.filter(pl.col("tracked"))["jct_s"] if "tracked" in j.columns else j["jct_s"]

    def series(self):
        p = self.path / "series.parquet" if self.jobs_file is None else self.jobs_file.with_suffix(".series.parquet")
        return _read(p) if p.is_file() else None


def sweep_runs(root) -> list[Run]:
    """The finished points of a sweep folder, each as a :class:`Run` (its summary, its parameters
    as the configuration, its jobs), ordered by the parameters that vary (the policy first)."""
    root = Path(root)
    s = _read(root / SWEEP_FILE)
    params = point_params(root, s)
    cols = _policy_first(_varying(params, PARAM_KEYS))
    runs = []
    for pid, par in sorted(zip(s["point_id"].to_list(), params),
                           key=lambda t: [(t[1].get(c) is None, str(t[1].get(c)) if not isinstance(t[1].get(c), (int, float))
                                           else t[1].get(c)) for c in cols]):
        doc = json.loads((root / "points" / f"{pid}.json").read_text())
        runs.append(Run(root / "points" / pid, doc["summary"], par, root / "points" / f"{pid}.parquet"))
    return runs


def read_run(path) -> Run:
    p = Path(path)
    if folder_kind(p) != "run":
        raise ConfigError(f"{p} is a sweep folder, not a run folder ({' and '.join(RUN_FILES)}); "
                          f"`fastblox plot {p}` draws its figures")
    try:
        doc = json.loads((p / "summary.json").read_text())
        return Run(p, doc["summary"], doc.get("config", {}))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{p / 'summary.json'}: not a fastblox run summary ({type(e).__name__}: {e})") from None


def _read(path: Path):
    import polars as pl

    try:
        return pl.read_parquet(path)
    except Exception as e:  # noqa: BLE001 - polars/pyarrow/OS errors alike: one line naming the file
        raise ConfigError(f"cannot read {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


def _varying(rows: list[dict], keys) -> list[str]:
    """The keys (in ``keys`` order) whose values differ between ``rows``."""
    out = []
    for k in keys:
        vals = {json.dumps(r.get(k), sort_keys=True, default=str) for r in rows}
        if len(vals) > 1:
            out.append(k)
    return out


def run_labels(runs: list[Run]) -> list[str]:
    """A label per run from the run options that differ between them (``LAS``, ``LAS 16x8``...);
    the folder's name when none differ or two labels would be the same."""
    from .plots import label_of

    configs = [r.config for r in runs]
    cols = _independent(configs, _policy_first(_varying(configs, PARAM_KEYS)))
    labels = [label_of({c: _hashable(r.config.get(c)) for c in cols}, cols) if cols else "" for r in runs]
    if not all(labels) or len(set(labels)) < len(labels):
        names = [r.path.name or str(r.path) for r in runs]
        labels = [f"{lab} ({n})" if lab else n for lab, n in zip(labels, names)]
    return labels


def _hashable(v):
    return json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v


def plot_runs(runs: list[Run], out: Path) -> list[Path]:
    """JCT CDF of the runs' tracked jobs and, where recorded, their state and preemptions over time."""
    from .plots import jct_cdf, preemptions, timeseries

    labels = run_labels(runs)
    what = "the run" if len(runs) == 1 else f"{len(runs)} runs"
    paths = jct_cdf({lab: r.tracked_jct() for lab, r in zip(labels, runs)}, out / "jct_cdf",
                    title="JCT CDF of the tracked jobs",
                    caption=f"Cumulative distribution of the job completion times (finish - submit) of the tracked "
                            f"jobs of {what}, log scale.")
    series = {lab: s for lab, r in zip(labels, runs) if (s := r.series()) is not None}
    if series:
        paths += timeseries(series, out / "timeseries", title="cluster state over time",
                            caption=f"Free GPUs, queued jobs and GPU demand over simulated time ({what} with "
                                    "a recorded series).")
        paths += preemptions(series, out / "preemptions", title="preemptions per scheduling step",
                             caption="Preemptions in each scheduling step (top) and their running total (bottom).")
    return paths


# ----------------------------------------------------------------------------- sweeps
def _point_jobs(root: Path, pid: str):
    import polars as pl

    p = root / "points" / f"{pid}.parquet"
    if not p.is_file():
        raise ConfigError(f"{root}: summary.parquet lists point {pid} but {p} is missing")
    j = _read(p)
    return j.filter(pl.col("tracked")) if "tracked" in j.columns else j


def point_params(root: Path, summary) -> list[dict]:
    """Each summary row's parameters as the sweep set them (``points/<id>.json``). Not the
    summary's columns: a summary figure of the same name (``num_jobs``: the jobs an endless
    stream generated) replaces its parameter there."""
    out = []
    for pid in summary["point_id"].to_list():
        p = root / "points" / f"{pid}.json"
        try:
            out.append(json.loads(p.read_text())["params"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{root}: cannot read the parameters of point {pid} from {p} "
                              f"({type(e).__name__})") from None
    return out


def sweep_axes(params: list[dict]) -> tuple[list[str], str | None, bool]:
    """``(lines, load_key, seeds_vary)``: the varying parameters that name a line (all but the
    load and the seed), the load parameter that varies (:data:`LOAD_KEYS`; None if none does)
    and whether the seed varies."""
    varying = _varying(params, PARAM_KEYS)
    x = next((k for k in LOAD_KEYS if k in varying), None)
    lines = _independent(params, _policy_first([c for c in varying if c not in (x, SPREAD_KEY)]))
    return lines, x, SPREAD_KEY in varying


def _policy_first(cols: list[str]) -> list[str]:
    """Labels read ``LAS 16x8``: the policy first, the rest in declaration order."""
    return sorted(cols, key=lambda c: c != "policy")


def _independent(rows: list[dict], cols: list[str]) -> list[str]:
    """``cols`` without those fixed by the ones before them (``preempt`` follows from the policy,
    ``num_jobs`` from the cluster in a ``cases`` axis): they would only lengthen the labels."""
    keep: list[str] = []
    for c in cols:
        seen: dict = {}
        for r in rows:
            k = json.dumps([r.get(x) for x in keep], default=str)
            seen.setdefault(k, set()).add(json.dumps(r.get(c), sort_keys=True, default=str))
        if not keep or any(len(v) > 1 for v in seen.values()):
            keep.append(c)
    return keep


def _fmt(v) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _groups(rows, cols) -> dict:
    """``{label: [row, ...]}`` of ``rows`` by the values of ``cols`` (seeds together, in seed order)."""
    from .plots import label_of

    out: dict = {}
    order = [c for c in (SPREAD_KEY,) if c in rows.columns]
    for r in (rows.sort(order) if order else rows).iter_rows(named=True):
        out.setdefault(label_of(r, cols) if cols else str(r.get("policy", "")).upper() or "all", []).append(r)
    return out


def plot_sweep(root: Path, out: Path) -> list[Path]:
    """The standard figures of a sweep folder (see the module's docstring)."""
    import polars as pl

    from .plots import avg_jct_vs_load, bar_chart, jct_cdf

    s = _read(root / SWEEP_FILE)
    if s.height == 0:
        raise ConfigError(f"{root / SWEEP_FILE} has no rows: no point of the sweep has finished")
    lines, x, seeds_vary = sweep_axes(point_params(root, s))
    name = root.resolve().name
    paths: list[Path] = []
    by = lines or ["policy"]
    nseeds = s[SPREAD_KEY].n_unique() if SPREAD_KEY in s.columns else 1
    pooled = f" Each curve pools the tracked jobs of {nseeds} seeds." if seeds_vary else ""
    if x is not None:
        for metric, what in (("avg_jct_s", "average JCT"), ("p99_jct_s", "p99 JCT")):
            stem = f"{metric.removesuffix('_s')}_vs_load"
            paths += avg_jct_vs_load(s, out / stem, metric=metric, by=by, x=x, xlabel=LOAD_KEYS[x],
                                     title=f"{name}: {what} vs load",
                                     ylabel=f"{what} (h)",
                                     caption=f"{what} of the tracked jobs against the load, one line per "
                                             f"{' / '.join(by)}.")
    elif lines:
        group, rest = lines[0], lines[1:]
        t = s
        bars = None
        if rest:
            bars = " / ".join(rest)
            from .plots import label_of

            t = s.with_columns(pl.Series(bars, [label_of(r, rest) for r in s.iter_rows(named=True)]))
        for metric, what in (("avg_jct_s", "average JCT"), ("p99_jct_s", "p99 JCT")):
            stem = f"{metric.removesuffix('_s')}_by_{group}"
            paths += bar_chart(t, out / stem, group=group, bars=bars, metric=metric, ylabel=f"{what} (h)",
                               title=f"{name}: {what} by {' and '.join(lines)}",
                               caption=f"{what} of the tracked jobs by {' and '.join(lines)}.")
    loads = sorted(s[x].unique().to_list(), key=lambda v: (v is None, v or 0)) if x is not None else [None]
    for load in loads:
        rows = s if load is None else s.filter(pl.col(x) == load)
        groups = _groups(rows, lines)
        jct = {lab: pl.concat([_point_jobs(root, r["point_id"])["jct_s"] for r in rs]) for lab, rs in groups.items()}
        at = "" if load is None else f" at load {_fmt(load)}"
        stem = "jct_cdf" if load is None else f"jct_cdf_load{_fmt(load)}"
        paths += jct_cdf(jct, out / stem, title=f"{name}: JCT CDF of the tracked jobs{at}",
                         caption=f"Cumulative distribution of the tracked jobs' completion times{at}, one curve "
                                 f"per {' / '.join(lines) or 'point'}, log scale.{pooled}")
    paths += _sweep_series(root, s, lines, x, loads[-1], name, out)
    return paths


def _sweep_series(root: Path, s, lines, x, load, name: str, out: Path) -> list[Path]:
    """Cluster state over time at ``load`` (the highest; None: every point), first seed of each line."""
    import polars as pl

    from .plots import timeseries

    rows = s if load is None else s.filter(pl.col(x) == load)
    series = {}
    seed = None
    for lab, rs in _groups(rows, lines).items():
        p = root / "points" / f"{rs[0]['point_id']}.series.parquet"
        if p.is_file():
            series[lab] = _read(p)
            seed = rs[0].get(SPREAD_KEY)
    if not series:
        return []
    at = "" if load is None else f" at load {_fmt(load)}"
    stem = "timeseries" if load is None else f"timeseries_load{_fmt(load)}"
    return timeseries(series, out / stem, title=f"{name}: cluster state over time{at}",
                      caption=f"Free GPUs, queued jobs and GPU demand over simulated time{at}, one line per "
                              f"{' / '.join(lines) or 'point'} (seed {seed}).")


# ----------------------------------------------------------------------------- entry points
def default_out(path: Path) -> Path:
    """Where ``fastblox plot`` writes a folder's figures: the folder itself; an experiment's
    folder (``experiment.json``) gets them in ``plots/``, beside the recipe's own figures."""
    return path / "plots" if (path / "experiment.json").is_file() else path


def plot_folders(paths, out=None) -> list[Path]:
    """Draw the standard figures of run folders (together, overlaid) or sweep folders (each on
    its own; with several, ``out/<folder name>``); returns the files written (PNG and PDF)."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise ConfigError("plot: give at least one run or sweep folder")
    kinds = [folder_kind(p) for p in paths]
    if "run" in kinds and "sweep" in kinds:
        runs = [str(p) for p, k in zip(paths, kinds) if k == "run"]
        sweeps = [str(p) for p, k in zip(paths, kinds) if k == "sweep"]
        raise ConfigError(f"plot: give run folders or sweep folders, not both (runs: {', '.join(runs)}; "
                          f"sweeps: {', '.join(sweeps)})")
    if kinds[0] == "run":
        dest = Path(out) if out is not None else default_out(paths[0])
        return plot_runs([read_run(p) for p in paths], dest)
    written = []
    for p in paths:
        if out is None:
            dest = default_out(p)
        else:
            dest = Path(out) / p.resolve().name if len(paths) > 1 else Path(out)
        written += plot_sweep(p, dest)
    return written


#: the columns of ``fastblox compare``: (summary key, heading, unit divisor, relative to the first run)
COMPARE_COLUMNS = (
    ("avg_jct_s", "avg JCT (h)", HOUR, True),
    ("p50_jct_s", "p50 JCT (h)", HOUR, True),
    ("p99_jct_s", "p99 JCT (h)", HOUR, True),
    ("makespan_s", "makespan (h)", HOUR, True),
    ("utilisation", "util (%)", 0.01, False),
    ("num_preemptions", "preemptions", 1.0, True),
)


def _cell(v, div: float, base) -> str:
    if v is None or v != v:
        return "n/a"
    text = f"{v / div:,.2f}" if div != 1.0 else f"{v:,.0f}"
    if base is not None:
        text += (f" (x{v / base:,.2f})" if v / base < 100 else f" (x{v / base:,.0f})") if base and base == base else " (x-)"
    return text


def compare_table(runs: list[Run], labels: list[str]) -> str:
    """Avg/p50/p99 JCT, makespan, utilisation and preemptions of each run, with each figure
    relative to the first run's (``x0.85``: 15 % lower)."""
    head = ["run"] + [h for _, h, _, _ in COMPARE_COLUMNS]
    rows = []
    first = runs[0].summary
    for r, lab in zip(runs, labels):
        cells = [lab]
        for key, _, div, rel in COMPARE_COLUMNS:
            base = first.get(key) if rel else None
            cells.append(_cell(r.summary.get(key), div, base))
        rows.append(cells)
    widths = [max(len(x[c]) for x in [head] + rows) for c in range(len(head))]
    fmt = lambda cells: "  ".join(c.ljust(w) if j == 0 else c.rjust(w)  # noqa: E731
                                  for j, (c, w) in enumerate(zip(cells, widths)))
    lines = [fmt(head), "  ".join("-" * w for w in widths)] + [fmt(x) for x in rows]
    lines.append("JCT statistics over each run's tracked jobs that finished; (xR): R times the first run's value.")
    return "\n".join(lines)


def compare_runs(paths, out=None) -> tuple[str, list[Path]]:
    """The comparison table of run folders and their overlaid JCT CDF (``compare_jct_cdf``,
    written into ``out``, default the first run's folder)."""
    from .plots import jct_cdf

    paths = [Path(p) for p in paths]
    runs = [r for p in paths for r in ([read_run(p)] if folder_kind(p) == "run" else sweep_runs(p))]
    if len(runs) < 2:
        raise ConfigError("compare: give at least two runs (run folders, or a sweep folder of several points)")
    labels = run_labels(runs)
    dest = Path(out) if out is not None else paths[0]
    figs = jct_cdf({lab: r.tracked_jct() for lab, r in zip(labels, runs)}, dest / "compare_jct_cdf",
                   title="JCT CDF of the tracked jobs",
                   caption=f"Job completion times of the tracked jobs of {len(runs)} runs overlaid "
                           f"({', '.join(labels)}), log scale.")
    return compare_table(runs, labels), figs
