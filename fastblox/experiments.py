"""Named experiments ("recipes"): each a documented sweep (run through
:func:`fastblox.sweep.run_sweep`) that writes its tables and figures into one folder.

``run_experiment(name, out_dir, quick=False)`` runs one and returns ``{label: path}`` of the files
it wrote. Every recipe is one :class:`Recipe` entry of the registry ``RECIPES`` (also exported as
``EXPERIMENTS``): a ``[base]`` and a ``[grid]`` of sweep keys, the keys its ``--quick`` variant
replaces, how to sort its summary, and a tuple of :class:`Figure` specs drawn by one shared
function per figure kind. Adding a setting is adding an entry (``register_recipe``), not code.

Every experiment's folder is a sweep folder (``sweep.toml``, ``points/``, ``summary.parquet``,
``errors.json``, see ``docs/sweeps.md``) plus ``summary.csv``, ``experiment.json`` and its figures
(``*.png`` and ``*.pdf``); so rerunning resumes, and :func:`fastblox.report.write_report` turns it
into HTML. The recipes, with their reasons, are listed in ``docs/sweeps.md`` ("Experiments").

Blox's paper workload has 1-GPU jobs of 16.97 GPU-hours on average, so on Blox's 32x4 cluster
(128 GPUs) ``load`` jobs/h offers ``load × 16.97 / 128`` of the GPUs: 0.80 at load 6, 1.06 at
8, 1.19 at 9. From load 8 on an endless stream has no steady state and the native engine's LAS
and SRTF (which, unlike Blox's, have no starvation guard) can leave a long tracked job waiting
forever; so the native-engine recipes replay a finite stream (4,000 jobs, jobs 1000-2999
tracked: the first thousand warm the cluster up, the last thousand keep it loaded while the
tracked jobs run) and the backlog drains after the last arrival.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from .errors import ConfigError
from .outputs import json_text, prepare_dir

FIG6_LOADS = [1, 2, 3, 4, 5, 6, 7, 8, 9]
#: every recipe of a generated workload runs these seeds (seed 1 is Blox's); ``--quick`` the first two
SEEDS = (1, 2, 3)
QUICK_SEEDS = SEEDS[:2]
GAVEL_SEEDS = (0, 1, 2)  # Gavel's generator: seed 0 by default
#: Blox's published Figure 6 values, where there are any (``datasets/README.md`` says what was found)
FIG6_PUBLISHED = "blox_fig6_published.csv"
FIG6_QUICK_LOADS = [2, 5, 8]
POLICIES = ["fifo", "las", "srtf"]
WITH_DYNAMIC = POLICIES + ["dynamic"]
ADMISSIONS = ["accept-all", "load:1.0", "load:1.2", "load:1.4", "load:1.5"]
ADMISSIONS_QUICK = ["accept-all", "load:1.2"]

#: Blox's simulator, as in the paper (compat engine, endless stream, jobs 3000-4000 tracked)
BLOX_BASE = {"workload": "blox", "seed": 1, "cluster": "32x4", "compat": "blox", "track": "3000:4000"}
#: Blox's workload on the native engine in 300 s rounds, a finite stream (see the module's docstring);
#: dynamic selection every hour with a one-hour look-ahead of the jobs known at the time
NATIVE_BLOX_BASE = {"workload": "blox", "seed": 1, "cluster": "32x4", "time_model": "rounds", "round_s": 300,
                    "num_jobs": 4000, "track": "1000:2999", "period_s": 3600, "horizon_s": 21600, "lookahead": "known"}
NATIVE_BLOX_QUICK = {"num_jobs": 600, "track": "100:499"}
#: Blox's workload saturates 32x4 near 7.5 jobs/h; below 6 no job waits and every policy is the same
SATURATION_LOADS = [6, 7, 7.5, 8, 8.5, 9]
LARGE_LOADS = SATURATION_LOADS
LARGE_SCALE = 4


@dataclass(frozen=True)
class Figure:
    """One figure of a recipe. ``kind`` picks the drawing function (``FIGURE_KINDS``); ``stem``
    and ``title`` may name selected values (``"jct_cdf_load{load}"``); ``at`` selects the summary
    rows drawn (``{column: value | "max" | "min"}``, applied in order); ``label`` the columns
    naming each line; ``opts`` goes to the plotting function."""

    kind: str
    stem: str
    title: str
    at: dict = field(default_factory=dict)
    label: tuple = ("policy",)
    opts: dict = field(default_factory=dict)
    caption: str = ""  # what the figure shows (may name selected values); the report's caption


@dataclass(frozen=True)
class Recipe:
    """A named experiment: the sweep ``{"base": base, "grid": grid}`` (``quick`` replaces keys of
    either table, ``{"base": {...}, "grid": {...}}``), the summary's sort order, its figures,
    ``derive(summary) -> summary`` adding columns the figures plot (optional), and the ``seeds``
    every grid point runs with (``quick_seeds`` with ``--quick``; empty: the base's one seed).
    Lines against the load show the mean over the seeds with min-max error bars."""

    name: str
    description: str
    base: dict
    grid: dict
    figures: tuple = ()
    quick: dict = field(default_factory=dict)
    sort: tuple = ("policy", "load")
    derive: Callable | None = None
    seeds: tuple = ()  # every grid point once per seed (empty: the base's one seed)
    quick_seeds: tuple = ()

    def config(self, quick: bool = False) -> dict:
        base, grid = dict(self.base), dict(self.grid)
        if quick:
            base.update(self.quick.get("base", {}))
            grid.update(self.quick.get("grid", {}))
        cfg = {"name": self.name + ("-quick" if quick else ""), "description": self.description,
               "base": base, "grid": grid}
        seeds = self.quick_seeds if quick else self.seeds
        if seeds:
            base.pop("seed", None)
            cfg["seeds"] = list(seeds)
        return cfg


def _data_path(name: str) -> Path:
    from .datasets import sample_path

    return sample_path(name)


RECIPES: dict[str, Recipe] = {}
EXPERIMENTS = RECIPES  # the name the CLI and older code use


def register_recipe(recipe: Recipe, replace: bool = False) -> Recipe:
    """Add a recipe to the registry (a duplicate name raises unless ``replace``). The hook for
    new settings, e.g. a heterogeneous cluster (``cluster = "v100:12x4,p100:12x4,k80:12x4"``)."""
    if recipe.name in RECIPES and not replace:
        raise ConfigError(f"an experiment named {recipe.name!r} is already registered")
    for f in recipe.figures:
        if f.kind not in FIGURE_KINDS:
            raise ConfigError(f"experiment {recipe.name!r}: unknown figure kind {f.kind!r}; "
                              f"choose one of: {', '.join(FIGURE_KINDS)}")
    RECIPES[recipe.name] = recipe
    return recipe


def get_experiment(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise ConfigError(f"unknown experiment {name!r}; choose one of: {', '.join(sorted(RECIPES))}") from None


def run_experiment(name: str, out_dir, quick: bool = False, executor: str = "threads", workers: int | None = None,
                   progress: bool = False) -> dict:
    """Run experiment ``name`` into ``out_dir``; returns ``{label: Path}`` of the files written."""
    from .sweep import run_sweep

    recipe = get_experiment(name)
    out = prepare_dir(out_dir)
    cfg = recipe.config(quick)
    res = run_sweep(cfg, out, executor=executor, workers=workers, progress=progress)
    if res.errors:
        first = next(iter(res.errors.values()))
        raise ConfigError(f"experiment {cfg['name']}: {len(res.errors)} point(s) failed "
                          f"(see {out / 'errors.json'}); e.g. {first['error']}")
    s = res.summary
    if recipe.derive is not None:
        s = recipe.derive(s)
    s = s.sort([c for c in [*recipe.sort, "seed"] if c in s.columns], nulls_last=True)
    files: dict = {}
    s.write_csv(out / "summary.csv")
    files.update(summary=out / "summary.parquet", summary_csv=out / "summary.csv", sweep=out / "sweep.toml")
    for fig in recipe.figures:
        rows = _select(s, fig.at)
        if rows.height == 0:
            continue
        names = {k: _fmt(rows[k][0]) for k in fig.at if k in rows.columns}
        stem, title = fig.stem.format(**names), fig.title.format(**names)
        fig = replace(fig, caption=fig.caption.format(**names))
        paths = FIGURE_KINDS[fig.kind](fig, rows, out, out / stem, title)
        if paths:
            files[f"{stem}_png"], files[f"{stem}_pdf"] = paths
    meta = {"experiment": name, "quick": quick, "description": recipe.description,
            "files": {k: str(Path(v).relative_to(out)) for k, v in files.items()}}
    (out / "experiment.json").write_text(json_text(meta, indent=1, sort_keys=True) + "\n")
    files["experiment"] = out / "experiment.json"
    return files


# ----------------------------------------------------------------------------- figure kinds
def _fmt(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _select(s, at: dict):
    import polars as pl

    for col, val in at.items():
        if val in ("max", "min"):
            val = s[col].max() if val == "max" else s[col].min()
        s = s.filter(pl.col(col) == val)
    return s


def _jobs(out: Path, point_id: str, tracked_only: bool = True):
    import polars as pl

    df = pl.read_parquet(out / "points" / f"{point_id}.parquet")
    return df.filter(pl.col("tracked")) if tracked_only else df


def _side_table(out: Path, point_id: str, name: str):
    import polars as pl

    p = out / "points" / f"{point_id}.{name}.parquet"
    return pl.read_parquet(p) if p.exists() else None


def _by_label(fig: Figure, rows) -> dict:
    """``{label: [row, ...]}``: the summary rows of each line, in seed order (several when the
    recipe runs several seeds)."""
    from .plots import label_of

    out: dict = {}
    for r in rows.sort("seed").iter_rows(named=True):
        out.setdefault(label_of(r, fig.label), []).append(r)
    return out


def _seeds_note(groups: dict, pooled: bool) -> str:
    n = max((len(v) for v in groups.values()), default=0)
    if n <= 1:
        return ""
    if pooled:
        return f" Each curve pools the tracked jobs of {n} seeds."
    return f" Shown: seed {next(iter(groups.values()))[0]['seed']} (one of {n} seeds)."


def _caption(fig: Figure, title: str, note: str = "") -> str:
    return (fig.caption or title.rstrip(".") + ".") + note


def _fig_vs_load(fig, rows, out, stem, title):
    from .plots import avg_jct_vs_load

    opts = dict(fig.opts)
    opts.setdefault("by", list(fig.label) if len(fig.label) > 1 else fig.label[0])
    if "reference" in opts:  # a bundled table of published points
        opts["reference"] = _reference(opts["reference"])
    return avg_jct_vs_load(rows, stem, title=title, caption=fig.caption or None, **opts)


def _reference(name: str):
    import polars as pl

    from .datasets import sample_path

    return pl.read_csv(sample_path(name), comment_prefix="#")


def _fig_bars(fig, rows, out, stem, title):
    from .plots import bar_chart

    return bar_chart(rows, stem, title=title, caption=fig.caption or None, **fig.opts)


def _fig_cdf(fig, rows, out, stem, title):
    import polars as pl

    from .plots import jct_cdf

    groups = _by_label(fig, rows)
    jct = {lab: pl.concat([_jobs(out, r["point_id"])["jct_s"] for r in rs]) for lab, rs in groups.items()}
    return jct_cdf(jct, stem, title=title, caption=_caption(fig, title, _seeds_note(groups, pooled=True)))


def _first_seed_tables(fig, rows, out, name: str):
    groups = _by_label(fig, rows)
    tabs = {lab: _side_table(out, rs[0]["point_id"], name) for lab, rs in groups.items()}
    return {k: v for k, v in tabs.items() if v is not None}, _seeds_note(groups, pooled=False)


def _fig_timeseries(fig, rows, out, stem, title):
    from .plots import timeseries

    ser, note = _first_seed_tables(fig, rows, out, "series")
    return timeseries(ser, stem, title=title, caption=_caption(fig, title, note)) if ser else None


def _fig_preemptions(fig, rows, out, stem, title):
    from .plots import preemptions

    ser, note = _first_seed_tables(fig, rows, out, "series")
    return preemptions(ser, stem, title=title, caption=_caption(fig, title, note)) if ser else None


def _fig_policy_timeline(fig, rows, out, stem, title):
    from .plots import policy_timeline

    per, note = _first_seed_tables(fig, rows, out, "periods")
    return policy_timeline(per, stem, title=title, caption=_caption(fig, title, note)) if per else None


def _fig_policy_shares(fig, rows, out, stem, title):
    from .plots import policy_shares

    cands = rows["candidates"][0].split(",")
    note = " Shares averaged over the seeds of each load." if rows["seed"].n_unique() > 1 else ""
    return policy_shares(rows, stem, cands, title=title, caption=_caption(fig, title, note), **fig.opts)


def _fig_jct_by_gpus(fig, rows, out, stem, title):
    """Mean JCT of the tracked jobs per gang size, one bar per line label (seeds pooled)."""
    import polars as pl

    from .plots import metric_by_group

    groups = _by_label(fig, rows)
    vals = {}
    for lab, rs in groups.items():
        j = pl.concat([_jobs(out, r["point_id"]) for r in rs]).group_by("num_gpus").agg(_mean_jct())
        vals[lab] = dict(zip(j["num_gpus"].to_list(), j["jct_s"].to_list()))
    return metric_by_group(vals, stem, xlabel="GPUs per job", ylabel="average JCT (h)", title=title,
                           caption=_caption(fig, title, _seeds_note(groups, pooled=True)))


def _mean_jct():
    import polars as pl

    return pl.col("jct_s").mean()


FIGURE_KINDS: dict[str, Callable] = {
    "vs_load": _fig_vs_load, "bars": _fig_bars, "cdf": _fig_cdf, "timeseries": _fig_timeseries,
    "preemptions": _fig_preemptions, "policy_timeline": _fig_policy_timeline, "policy_shares": _fig_policy_shares,
    "jct_by_gpus": _fig_jct_by_gpus,
}


def _cpus_per_gpu(summary):
    """CPUs per GPU of a ``--compat synergy`` point (its ``policy_opts`` text ``cpus=N``, servers of
    :data:`SYNERGY_GPUS_PER_SERVER` GPUs)."""
    import polars as pl

    cpus = pl.col("policy_opts").str.extract(r"cpus=(\d+)").cast(pl.Float64)
    return summary.with_columns((cpus / SYNERGY_GPUS_PER_SERVER).alias("cpus_per_gpu"))


def _per_128_gpus(summary):
    """The load a cluster of ``total_gpus`` sees, as jobs/h on 128 GPUs (Blox's 32x4)."""
    import polars as pl

    return summary.with_columns((pl.col("load") * 128.0 / pl.col("total_gpus")).alias("load_per_128_gpus"))


# ----------------------------------------------------------------------------- the recipes
_VS = "vs_load"
#: Synergy's CPU:GPU experiment (its ae-readme: configs cluster_4/5/6.ini with models-4/5/6): the
#: CPUs per GPU it ships profiles for; the servers of 8 GPUs (its configs')
SYNERGY_RATIOS = [3, 4, 5, 6]
SYNERGY_GPUS_PER_SERVER = 8
SYNERGY_POLICIES = ["srtf+fair", "srtf", "srtf+tune", "fifo+fair", "fifo+tune"]
HETERO_CLUSTER = "v100:9x4,p100:9x4,k80:9x4"
HETERO_POLICIES = ["fifo", "las-gpu", "tiresias", "themis", "gavel", "gavel-las-agnostic", "gavel-ftf", "optimus"]
for _r in (
    Recipe(
        "blox-fig6",
        "Blox Figure 6: FIFO/LAS/SRTF avg JCT vs load (1..9 jobs/h), Blox paper workload, 32x4, compat mode, "
        "jobs 3000..4000 tracked",
        base={**BLOX_BASE, "record_series": True}, grid={"policy": POLICIES, "load": FIG6_LOADS},
        quick={"grid": {"load": FIG6_QUICK_LOADS}}, seeds=SEEDS, quick_seeds=QUICK_SEEDS,
        figures=(
            Figure(_VS, "avg_jct_vs_load", "Blox Fig. 6: average JCT of jobs 3000-4000 (32x4 GPUs, compat)",
                   opts={"ylabel": "average JCT (h)", "reference": FIG6_PUBLISHED,
                         "reference_label": "Blox (published)"},
                   caption="Blox Fig. 6 replayed: average JCT of the tracked jobs 3000-4000 of Blox's paper "
                           "workload on 32x4 GPUs (compat mode) against the arrival rate, per policy."),
            Figure(_VS, "avg_responsiveness_vs_load", "average responsiveness (submit to first round scheduled)",
                   opts={"metric": "avg_responsiveness_s", "ylabel": "average responsiveness (h)"}),
            Figure("cdf", "jct_cdf_load{load}", "JCT CDF of jobs 3000-4000 at load {load} jobs/h", at={"load": "max"}),
            Figure("timeseries", "timeseries_load{load}", "cluster state at load {load} jobs/h (32x4 GPUs)",
                   at={"load": "max"}),
            Figure("preemptions", "preemptions_load{load}", "preemptions per 300 s round at load {load} jobs/h",
                   at={"load": "max"}),
        ),
    ),
    Recipe(
        "blox-admission",
        "Blox Figures 12-13: LAS/SRTF/FIFO x accept-all vs load-based admission (load:1.0..1.5) at load 9 jobs/h, "
        "32x4, compat mode",
        base={**BLOX_BASE, "load": 9}, grid={"policy": ["las", "srtf", "fifo"], "admission": ADMISSIONS},
        quick={"grid": {"admission": ADMISSIONS_QUICK}}, sort=("policy", "admission"), seeds=SEEDS,
        quick_seeds=QUICK_SEEDS,
        figures=(
            Figure("bars", "avg_jct_by_admission", "Blox Figs. 12-13: average JCT at load 9 jobs/h by admission",
                   opts={"ylabel": "average JCT (h)"}),
            Figure("bars", "avg_responsiveness_by_admission", "average responsiveness at load 9 jobs/h by admission",
                   opts={"metric": "avg_responsiveness_s", "ylabel": "average responsiveness (h)"}),
        ),
    ),
    Recipe(
        "philly-arrivals",
        "FIFO/LAS/SRTF on the bundled Philly sample (real arrivals) on 16x8 and 32x8 clusters, native events mode",
        base={"workload": "sample", "record_series": True}, grid={"policy": POLICIES, "cluster": ["16x8", "32x8"]},
        quick={"base": {"num_jobs": 500}}, sort=("cluster", "policy"),
        figures=(
            Figure("bars", "avg_jct_by_cluster", "Philly sample: average JCT by policy and cluster",
                   opts={"group": "policy", "bars": "cluster", "ylabel": "average JCT (h)"}),
            Figure("bars", "avg_queue_by_cluster", "Philly sample: average queueing delay",
                   opts={"group": "policy", "bars": "cluster", "metric": "avg_queue_s",
                         "ylabel": "average queueing delay (h)"}),
            Figure("cdf", "jct_cdf", "Philly sample: JCT CDF", label=("policy", "cluster")),
            Figure("timeseries", "timeseries_{cluster}", "Philly sample on {cluster} GPUs: cluster state",
                   at={"cluster": "16x8"}),
            Figure("preemptions", "preemptions_{cluster}", "Philly sample on {cluster} GPUs: preemptions per step",
                   at={"cluster": "16x8"}),
        ),
    ),
    Recipe(
        "blox-dynamic",
        "Blox Figures 14-15: dynamic policy selection (every hour, a 1 h or 6 h look-ahead of FIFO, LAS and SRTF "
        "from a copy of the run) vs each fixed policy, Blox workload (4,000 jobs, 1000..2999 tracked), 32x4, "
        "native engine, 300 s rounds, loads 6..9 jobs/h",
        base={k: v for k, v in NATIVE_BLOX_BASE.items() if k != "horizon_s"},
        grid={"policy": WITH_DYNAMIC, "load": SATURATION_LOADS, "horizon_s": [3600, 21600]},
        quick={"base": NATIVE_BLOX_QUICK, "grid": {"load": [6, 9]}},
        sort=("policy", "horizon_s", "load"), seeds=SEEDS, quick_seeds=QUICK_SEEDS,
        figures=(
            Figure(_VS, "avg_jct_vs_load", "average JCT: dynamic selection vs fixed policies (32x4)",
                   label=("policy", "horizon_s"), opts={"ylabel": "average JCT (h)"}),
            Figure("policy_timeline", "policy_over_time", "policy chosen each hour (6 h look-ahead), per load",
                   at={"policy": "dynamic", "horizon_s": 21600.0}, label=("load",)),
            Figure("policy_shares", "policy_shares", "share of the hours each policy ran (6 h look-ahead)",
                   at={"policy": "dynamic", "horizon_s": 21600.0}),
            Figure("cdf", "jct_cdf_load{load}", "JCT CDF of the tracked jobs at load {load} jobs/h", at={"load": "max"},
                   label=("policy", "horizon_s")),
        ),
    ),
    Recipe(
        "blox-high-load",
        "FIFO/LAS/SRTF (and dynamic selection) on Blox's workload beyond the paper's loads: 8..16 jobs/h "
        "(offered 1.06..2.1x the GPUs), 32x4, native engine, 300 s rounds, 4,000 jobs, 1000..2999 tracked",
        base=NATIVE_BLOX_BASE, grid={"policy": WITH_DYNAMIC, "load": [8, 10, 12, 14, 16]},
        quick={"base": NATIVE_BLOX_QUICK, "grid": {"load": [10, 14]}}, seeds=SEEDS, quick_seeds=QUICK_SEEDS,
        figures=(
            Figure(_VS, "avg_jct_vs_load", "average JCT beyond the paper's loads (32x4)",
                   opts={"ylabel": "average JCT (h)"}),
            Figure(_VS, "p99_jct_vs_load", "99th-percentile JCT beyond the paper's loads",
                   opts={"metric": "p99_jct_s", "ylabel": "p99 JCT (h)"}),
            Figure("cdf", "jct_cdf_load{load}", "JCT CDF of the tracked jobs at load {load} jobs/h", at={"load": "max"}),
        ),
    ),
    Recipe(
        "gavel-mix",
        "FIFO/LAS/SRTF (and dynamic selection) on Gavel's multi-GPU job mix (1/2/4/8 GPUs, 0.5..167 h; "
        "2,000 jobs, all tracked), 32x4, native engine, 300 s rounds, loads 2..5 jobs/h",
        base={"workload": "gavel", "seed": 0, "num_jobs": 2000, "cluster": "32x4", "time_model": "rounds",
              "round_s": 300, "period_s": 3600, "horizon_s": 21600, "lookahead": "known"},
        grid={"policy": WITH_DYNAMIC, "load": [2, 3, 3.5, 4, 4.5, 5]},
        quick={"base": {"num_jobs": 400}, "grid": {"load": [2, 5]}}, seeds=GAVEL_SEEDS,
        quick_seeds=GAVEL_SEEDS[:2],
        figures=(
            Figure(_VS, "avg_jct_vs_load", "Gavel's job mix: average JCT (32x4)",
                   opts={"ylabel": "average JCT (h)"}),
            Figure(_VS, "avg_queue_vs_load", "Gavel's job mix: average queueing delay",
                   opts={"metric": "avg_queue_s", "ylabel": "average queueing delay (h)"}),
            Figure("jct_by_gpus", "jct_by_gpus_load{load}", "Gavel's job mix at load {load} jobs/h: JCT by job size",
                   at={"load": "max"}),
            Figure("cdf", "jct_cdf_load{load}", "Gavel's job mix: JCT CDF at load {load} jobs/h", at={"load": "max"}),
        ),
    ),
    Recipe(
        "blox-large-cluster",
        f"FIFO/LAS/SRTF (and dynamic selection) on Blox's workload on 32x4 and on {LARGE_SCALE}x the GPUs (128x4) "
        f"with {LARGE_SCALE}x the load and jobs, native engine, 300 s rounds",
        base={k: v for k, v in NATIVE_BLOX_BASE.items() if k not in ("cluster", "num_jobs", "track")},
        grid={"policy": WITH_DYNAMIC, "cases": [
            case for load in LARGE_LOADS for case in (
                {"cluster": "32x4", "load": load, "num_jobs": 4000, "track": "1000:2999"},
                {"cluster": "128x4", "load": LARGE_SCALE * load, "num_jobs": LARGE_SCALE * 4000,
                 "track": f"{LARGE_SCALE * 1000}:{LARGE_SCALE * 3000 - 1}"})]},
        quick={"grid": {"cases": [
            {"cluster": "32x4", "load": 7, "num_jobs": 600, "track": "100:499"},
            {"cluster": "128x4", "load": LARGE_SCALE * 7, "num_jobs": LARGE_SCALE * 600,
             "track": f"{LARGE_SCALE * 100}:{LARGE_SCALE * 500 - 1}"}]}},
        sort=("cluster", "policy", "load"), derive=_per_128_gpus, seeds=SEEDS, quick_seeds=QUICK_SEEDS,
        figures=(
            Figure(_VS, "avg_jct_vs_load", "average JCT on 32x4 and 128x4 at the same load per GPU",
                   label=("policy", "cluster"),
                   opts={"x": "load_per_128_gpus", "xlabel": "load per 128 GPUs (jobs per hour)",
                         "ylabel": "average JCT (h)"}),
            Figure("cdf", "jct_cdf_load{load_per_128_gpus}", "JCT CDF at {load_per_128_gpus} jobs/h per 128 GPUs",
                   at={"load_per_128_gpus": "max"}, label=("policy", "cluster")),
        ),
    ),
    Recipe(
        "hetero-cluster",
        "The schedulers Blox promised, on Gavel's heterogeneous cluster (36 V100, 36 P100, 36 K80 in 4-GPU "
        "servers) with Gavel's job types and throughputs: FIFO, 2D-LAS, Tiresias, Themis, Gavel (aware and "
        "agnostic, max-min and finish-time fairness), Optimus; consolidated placement with measured "
        "multi-node slowdowns; 1,000 jobs, loads 1..4 jobs/h",
        base={"workload": "gavel", "seed": 0, "num_jobs": 1000, "cluster": HETERO_CLUSTER, "placement": "consolidated"},
        grid={"policy": HETERO_POLICIES, "load": [1, 2, 3, 4]},
        quick={"base": {"num_jobs": 120}, "grid": {"policy": ["fifo", "tiresias", "gavel", "gavel-las-agnostic"],
                                                   "load": [3]}},
        seeds=GAVEL_SEEDS, quick_seeds=GAVEL_SEEDS[:2],
        figures=(
            Figure(_VS, "avg_jct_vs_load", "average JCT on v100/p100/k80 (36 GPUs each)",
                   opts={"ylabel": "average JCT (h)"}),
            Figure(_VS, "rho_p95_vs_load", "finish-time fairness: 95th percentile of rho = JCT / time alone",
                   opts={"metric": "rho_p95", "unit_s": 1.0, "unit": "", "ylabel": "rho, 95th percentile"}),
            Figure("cdf", "jct_cdf_load{load}", "JCT CDF at load {load} jobs/h (heterogeneous cluster)",
                   at={"load": "max"}),
            Figure("jct_by_gpus", "jct_by_gpus_load{load}", "JCT by job size at load {load} jobs/h",
                   at={"load": "max"}),
        ),
    ),
    Recipe(
        "pollux-headline",
        "Pollux's headline comparison (OSDI '21): Pollux vs Optimus vs Tiresias on its workload-6 (160 elastic "
        "jobs, 16x4 GPUs, 60 s scheduling interval), replayed by --compat pollux",
        base={"compat": "pollux", "trace": str(_data_path("pollux-workload-6"))},
        grid={"policy": ["pollux", "optimus", "tiresias"]}, sort=("policy",),
        figures=(
            Figure("bars", "avg_jct_by_policy", "Pollux workload-6: average JCT by policy",
                   opts={"group": "policy", "bars": "compat", "ylabel": "average JCT (h)"},
                   caption="Average JCT of the 160 jobs of Pollux's workload-6 under each policy, as the Pollux "
                           "simulator runs them (--compat pollux; docs/fidelity.md compares them with the artifact)."),
            Figure("cdf", "jct_cdf", "Pollux workload-6: JCT CDF"),
        ),
    ),
    Recipe(
        "synergy-cpu",
        "Synergy (OSDI '22): JCT against the CPUs per GPU of the servers, GPU-proportional allocation (+fair) vs "
        "Synergy-Greedy (no suffix) and Synergy-Tune (+tune), SRTF and FIFO orderings, on a 200-job multi-GPU "
        "trace drawn with Synergy's workload helpers, 4 servers of 8 GPUs, 500 GB each, replayed by --compat synergy "
        "with the profiles it ships for 3, 4, 5 and 6 CPUs per GPU",
        base={"compat": "synergy", "trace": str(_data_path("synergy-200")), "cluster": f"4x{SYNERGY_GPUS_PER_SERVER}"},
        grid={"policy": SYNERGY_POLICIES,
              "cases": [{"policy_opts": {"cpus": r * SYNERGY_GPUS_PER_SERVER}} for r in SYNERGY_RATIOS]},
        quick={"grid": {"policy": ["srtf+fair", "srtf+tune"],
                        "cases": [{"policy_opts": {"cpus": r * SYNERGY_GPUS_PER_SERVER}} for r in (3, 6)]}},
        sort=("policy", "cpus_per_gpu"), derive=_cpus_per_gpu,
        figures=(
            Figure(_VS, "avg_jct_vs_cpus", "Synergy: average JCT against CPUs per GPU (4 x 8 GPUs, 200 jobs)",
                   opts={"x": "cpus_per_gpu", "xlabel": "CPUs per GPU on every server", "ylabel": "average JCT (h)"},
                   caption="Average JCT of the 200 jobs under each scheduler as the servers' CPUs per GPU grow; "
                           "+fair gives every job the GPU-proportional share of CPUs and memory, Greedy and Tune "
                           "give jobs the CPUs and memory their profile asks for (Synergy's simulator, "
                           "--compat synergy, docs/fidelity.md)."),
            Figure("cdf", "jct_cdf_cpus{cpus_per_gpu}", "Synergy: JCT CDF at {cpus_per_gpu} CPUs per GPU",
                   at={"cpus_per_gpu": "min"}),
        ),
    ),
):
    register_recipe(_r)
