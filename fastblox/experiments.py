"""Named experiments: each a documented sweep (run through :func:`fastblox.sweep.run_sweep`) that
writes its tables and figures into one folder.

``run_experiment(name, out_dir, quick=False)`` runs one and returns ``{label: path}`` of the files
it wrote; ``EXPERIMENTS`` maps each name to an :class:`Experiment` (its function and description).

Every experiment's folder is a sweep folder (``sweep.toml``, ``points/``, ``summary.parquet``,
``errors.json``, see ``docs/sweeps.md``) plus ``summary.csv`` and its figures (``*.png`` and
``*.pdf``); so rerunning resumes, and :func:`fastblox.report.write_report` turns it into HTML.

* ``blox-fig6`` — Blox (EuroSys 2024) Figure 6: FIFO, LAS, SRTF × loads 1..9 jobs/h on Blox's paper
  workload, 32x4 cluster, compat mode (Blox's simulator, round for round), jobs 3000..4000 tracked.
  Figures: avg JCT vs load, JCT CDF per policy at load 8, avg responsiveness vs load, and the
  cluster state / preemptions over time at load 8. ``quick``: loads 2, 5, 8.
* ``blox-admission`` — Blox Figures 12-13: LAS, SRTF, FIFO × accept-all and load-based admission
  (``load:1.0``, ``load:1.2``, ``load:1.4``, ``load:1.5``) at load 9, compat mode. Figures: avg JCT
  and avg responsiveness bars. ``quick``: accept-all and load:1.2.
* ``philly-arrivals`` — FIFO, LAS, SRTF on the bundled Philly sample (2,000 jobs, real arrival
  times) on 16x8 and 32x8 clusters, native events mode. Figures: avg JCT bars, JCT CDF per policy
  and cluster, cluster state / preemptions over time on 16x8. ``quick``: the first 500 jobs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import ConfigError

FIG6_LOADS = [1, 2, 3, 4, 5, 6, 7, 8, 9]
FIG6_QUICK_LOADS = [2, 5, 8]
POLICIES = ["fifo", "las", "srtf"]
ADMISSIONS = ["accept-all", "load:1.0", "load:1.2", "load:1.4", "load:1.5"]
ADMISSIONS_QUICK = ["accept-all", "load:1.2"]

BLOX_BASE = {"workload": "blox", "seed": 1, "cluster": "32x4", "blox_compat": True, "track": "3000:4000"}


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    func: Callable  # (out_dir: Path, quick: bool, **sweep_kw) -> dict


EXPERIMENTS: dict[str, Experiment] = {}


def experiment(name: str, description: str):
    def deco(f):
        EXPERIMENTS[name] = Experiment(name, description, f)
        return f
    return deco


def get_experiment(name: str) -> Experiment:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise ConfigError(f"unknown experiment {name!r}; choose one of: {', '.join(sorted(EXPERIMENTS))}") from None


def run_experiment(name: str, out_dir, quick: bool = False, executor: str = "threads", workers: int | None = None,
                   progress: bool = False) -> dict:
    """Run experiment ``name`` into ``out_dir``; returns ``{label: Path}`` of the files written."""
    exp = get_experiment(name)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return exp.func(out, quick, executor=executor, workers=workers, progress=progress)


# ----------------------------------------------------------------------------- helpers
def _sweep(config: dict, out: Path, **kw):
    from .sweep import run_sweep

    res = run_sweep(config, out, **kw)
    if res.errors:
        first = next(iter(res.errors.values()))
        raise ConfigError(f"experiment {config['name']}: {len(res.errors)} point(s) failed "
                          f"(see {out / 'errors.json'}); e.g. {first['error']}")
    return res


def _jobs(out: Path, point_id: str, tracked_only: bool = True):
    import polars as pl

    df = pl.read_parquet(out / "points" / f"{point_id}.parquet")
    return df.filter(pl.col("tracked")) if tracked_only else df


def _series(out: Path, point_id: str):
    import polars as pl

    p = out / "points" / f"{point_id}.series.parquet"
    return pl.read_parquet(p) if p.exists() else None


def _write_tables(summary, out: Path, files: dict) -> None:
    summary.write_csv(out / "summary.csv")
    files["summary"] = out / "summary.parquet"
    files["summary_csv"] = out / "summary.csv"
    files["sweep"] = out / "sweep.toml"


def _add(files: dict, key: str, paths: list) -> None:
    files[f"{key}_png"], files[f"{key}_pdf"] = paths


def _write_meta(out: Path, name: str, quick: bool, files: dict) -> None:
    meta = {"experiment": name, "quick": quick, "description": EXPERIMENTS[name].description,
            "files": {k: str(Path(v).relative_to(out)) for k, v in files.items()}}
    (out / "experiment.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    files["experiment"] = out / "experiment.json"


# ----------------------------------------------------------------------------- experiments
@experiment("blox-fig6", "Blox Figure 6: FIFO/LAS/SRTF avg JCT vs load (1..9 jobs/h), Blox paper workload, "
                         "32x4, compat mode, jobs 3000..4000 tracked")
def blox_fig6(out: Path, quick: bool, **kw) -> dict:
    import polars as pl

    from . import plots

    loads = FIG6_QUICK_LOADS if quick else FIG6_LOADS
    cfg = {"name": "blox-fig6" + ("-quick" if quick else ""), "base": {**BLOX_BASE, "record_series": True},
           "grid": {"policy": POLICIES, "load": loads}}
    res = _sweep(cfg, out, **kw)
    s = res.summary.sort(["scheduler", "load"])
    files: dict = {}
    _write_tables(s, out, files)
    _add(files, "avg_jct_vs_load", plots.avg_jct_vs_load(
        s, out / "avg_jct_vs_load", ylabel="average JCT (h)",
        title="Blox Fig. 6: average JCT of jobs 3000-4000 (32x4 GPUs, compat)"))
    _add(files, "avg_responsiveness_vs_load", plots.avg_jct_vs_load(
        s, out / "avg_responsiveness_vs_load", metric="avg_responsiveness_s", ylabel="average responsiveness (h)",
        title="average responsiveness (submit to first round scheduled)"))
    top = max(loads)
    at = s.filter(pl.col("load") == float(top)).sort("scheduler")
    jct = {r["scheduler"].upper(): _jobs(out, r["point_id"])["jct_s"] for r in at.iter_rows(named=True)}
    _add(files, f"jct_cdf_load{top}", plots.jct_cdf(jct, out / f"jct_cdf_load{top}",
                                                     title=f"JCT CDF of jobs 3000-4000 at load {top} jobs/h"))
    ser = {r["scheduler"].upper(): _series(out, r["point_id"]) for r in at.iter_rows(named=True)}
    ser = {k: v for k, v in ser.items() if v is not None}
    if ser:
        _add(files, f"timeseries_load{top}", plots.timeseries(ser, out / f"timeseries_load{top}",
                                                              title=f"cluster state at load {top} jobs/h (32x4 GPUs)"))
        _add(files, f"preemptions_load{top}", plots.preemptions(ser, out / f"preemptions_load{top}",
                                                                title=f"preemptions per 300 s round at load {top} jobs/h"))
    _write_meta(out, "blox-fig6", quick, files)
    return files


@experiment("blox-admission", "Blox Figures 12-13: LAS/SRTF/FIFO x accept-all vs load-based admission "
                              "(load:1.0..1.5) at load 9 jobs/h, 32x4, compat mode")
def blox_admission(out: Path, quick: bool, **kw) -> dict:
    from . import plots

    adm = ADMISSIONS_QUICK if quick else ADMISSIONS
    cfg = {"name": "blox-admission" + ("-quick" if quick else ""), "base": {**BLOX_BASE, "load": 9},
           "grid": {"policy": ["las", "srtf", "fifo"], "admission": adm}}
    res = _sweep(cfg, out, **kw)
    s = res.summary.sort(["scheduler", "admission"])
    files: dict = {}
    _write_tables(s, out, files)
    _add(files, "avg_jct_by_admission", plots.bar_chart(
        s, out / "avg_jct_by_admission", ylabel="average JCT (h)",
        title="Blox Figs. 12-13: average JCT at load 9 jobs/h by admission"))
    _add(files, "avg_responsiveness_by_admission", plots.bar_chart(
        s, out / "avg_responsiveness_by_admission", metric="avg_responsiveness_s", ylabel="average responsiveness (h)",
        title="average responsiveness at load 9 jobs/h by admission"))
    _write_meta(out, "blox-admission", quick, files)
    return files


@experiment("philly-arrivals", "FIFO/LAS/SRTF on the bundled Philly sample (real arrivals) on 16x8 and 32x8 "
                               "clusters, native events mode")
def philly_arrivals(out: Path, quick: bool, **kw) -> dict:
    import polars as pl

    from . import plots

    base = {"workload": "sample", "record_series": True}
    if quick:
        base["num_jobs"] = 500
    clusters = ["16x8", "32x8"]
    cfg = {"name": "philly-arrivals" + ("-quick" if quick else ""), "base": base,
           "grid": {"policy": POLICIES, "cluster": clusters}}
    res = _sweep(cfg, out, **kw)
    s = res.summary.sort(["cluster", "scheduler"])
    files: dict = {}
    _write_tables(s, out, files)
    _add(files, "avg_jct_by_cluster", plots.bar_chart(
        s, out / "avg_jct_by_cluster", group="scheduler", bars="cluster", ylabel="average JCT (h)",
        title="Philly sample: average JCT by policy and cluster"))
    _add(files, "avg_queue_by_cluster", plots.bar_chart(
        s, out / "avg_queue_by_cluster", group="scheduler", bars="cluster", metric="avg_queue_s",
        ylabel="average queueing delay (h)", title="Philly sample: average queueing delay"))
    jct = {f"{r['scheduler'].upper()} {r['cluster']}": _jobs(out, r["point_id"])["jct_s"]
           for r in s.iter_rows(named=True)}
    _add(files, "jct_cdf", plots.jct_cdf(jct, out / "jct_cdf", title="Philly sample: JCT CDF"))
    small = s.filter(pl.col("cluster") == clusters[0]).sort("scheduler")
    ser = {r["scheduler"].upper(): _series(out, r["point_id"]) for r in small.iter_rows(named=True)}
    ser = {k: v for k, v in ser.items() if v is not None}
    if ser:
        _add(files, "timeseries_16x8", plots.timeseries(ser, out / "timeseries_16x8",
                                                        title="Philly sample on 16x8 GPUs: cluster state"))
        _add(files, "preemptions_16x8", plots.preemptions(ser, out / "preemptions_16x8",
                                                          title="Philly sample on 16x8 GPUs: preemptions per step"))
    _write_meta(out, "philly-arrivals", quick, files)
    return files
