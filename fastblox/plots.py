"""Figures of runs and sweeps (matplotlib, Agg backend). Every function saves ``<stem>.png`` and
``<stem>.pdf`` and returns the two paths.

* :func:`jct_cdf` — CDF of job completion times per label (log-scale x axis, hours);
* :func:`avg_jct_vs_load` — a summary metric against the load, one line per group (policy);
* :func:`bar_chart` — a summary metric as grouped bars (e.g. policy × admission);
* :func:`timeseries` — free GPUs, queued jobs and GPU demand over time from ``Result.series``;
* :func:`preemptions` — preemptions per scheduling step (round) from ``Result.series``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HOUR = 3600.0
# distinct line styles and markers, so that curves lying on top of each other stay visible
_STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v"), ((0, (1, 2)), "x")]


def _style(i: int) -> dict:
    ls, mk = _STYLES[i % len(_STYLES)]
    return {"linestyle": ls, "marker": mk}


def _save(fig, stem) -> list[Path]:
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".pdf")]
    fig.tight_layout()
    fig.savefig(paths[0], dpi=120)
    fig.savefig(paths[1])
    plt.close(fig)
    return paths


def _as_array(x) -> np.ndarray:
    if hasattr(x, "to_numpy"):
        x = x.to_numpy()
    a = np.asarray(x, dtype=np.float64)
    return a[np.isfinite(a)]


def jct_cdf(jct_by_label: dict, stem, title: str = "JCT CDF", unit_s: float = HOUR, unit: str = "h") -> list[Path]:
    """CDF of the JCTs (seconds; any array-like or polars Series, NaN ignored) of each label."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (label, jct) in enumerate(jct_by_label.items()):
        a = np.sort(_as_array(jct)) / unit_s
        a = a[a > 0]
        if not len(a):
            continue
        y = np.arange(1, len(a) + 1) / len(a)
        st = _style(i)
        ax.step(a, y, where="post", linestyle=st["linestyle"], linewidth=1.6, label=f"{label} (n={len(a)})")
    ax.set_xscale("log")
    ax.set_xlabel(f"job completion time ({unit}, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize="small", framealpha=0.9)
    ax.set_title(title)
    return _save(fig, stem)


def avg_jct_vs_load(summary, stem, metric: str = "avg_jct_s", by: str = "scheduler", x: str = "load",
                    ylabel: str | None = None, xlabel: str = "load (jobs per hour)", title: str | None = None,
                    unit_s: float = HOUR, unit: str = "h", logy: bool = False) -> list[Path]:
    """``metric`` (seconds) of a summary table (polars DataFrame) against ``x``, one line per ``by``."""
    import polars as pl

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    df = summary.sort(x)
    for i, key in enumerate(sorted(df[by].unique().to_list())):
        d = df.filter(pl.col(by) == key)
        ax.plot(d[x].to_numpy(), d[metric].to_numpy() / unit_s, label=str(key).upper(), markersize=7 - i,
                linewidth=1.6, **_style(i))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel or f"{metric.removesuffix('_s').replace('_', ' ')} ({unit})")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(title=by)
    ax.set_title(title or f"{metric.removesuffix('_s').replace('_', ' ')} vs {x}")
    return _save(fig, stem)


def bar_chart(summary, stem, group: str = "scheduler", bars: str = "admission", metric: str = "avg_jct_s",
              ylabel: str | None = None, title: str | None = None, unit_s: float = HOUR, unit: str = "h") -> list[Path]:
    """Grouped bars: one group per value of ``group``, one bar per value of ``bars``."""
    import polars as pl

    groups = sorted(summary[group].unique().to_list())
    kinds = sorted(summary[bars].unique().to_list(), key=lambda s: (s != "accept-all", s))
    width = 0.8 / max(1, len(kinds))
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    xs = np.arange(len(groups))
    for i, k in enumerate(kinds):
        vals = []
        for g in groups:
            d = summary.filter((pl.col(group) == g) & (pl.col(bars) == k))
            vals.append(float(d[metric].mean()) / unit_s if d.height else np.nan)
        ax.bar(xs + (i - (len(kinds) - 1) / 2) * width, vals, width, label=str(k))
    ax.set_xticks(xs, [str(g).upper() for g in groups])
    ax.set_xlabel(group)
    ax.set_ylabel(ylabel or f"{metric.removesuffix('_s').replace('_', ' ')} ({unit})")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(title=bars, fontsize="small")
    ax.set_title(title or f"{metric.removesuffix('_s').replace('_', ' ')} by {group} and {bars}")
    return _save(fig, stem)


def timeseries(series_by_label: dict, stem, title: str = "cluster state over time", unit_s: float = HOUR,
               unit: str = "h") -> list[Path]:
    """Three panels (free GPUs, queued jobs, GPU demand) over time, one line per label; each value
    a ``Result.series`` table (polars, columns ``t_s``, ``free_gpus``, ``queued_jobs``, ``gpu_demand``)."""
    panels = [("free_gpus", "free GPUs"), ("queued_jobs", "queued jobs"), ("gpu_demand", "GPU demand (GPUs)")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.2, 7.0), sharex=True)
    for i, (label, s) in enumerate(series_by_label.items()):
        t = s["t_s"].to_numpy() / unit_s
        for ax, (col, _) in zip(axes, panels):
            ax.plot(t, s[col].to_numpy(), label=str(label), linewidth=0.9, linestyle=_style(i)["linestyle"])
    for ax, (_, name) in zip(axes, panels):
        ax.set_ylabel(name)
        ax.grid(True, alpha=0.3)
    axes[0].legend(loc="upper right", fontsize="small")
    axes[0].set_title(title)
    axes[-1].set_xlabel(f"simulated time ({unit})")
    return _save(fig, stem)


def preemptions(series_by_label: dict, stem, title: str = "preemptions per step", unit_s: float = HOUR,
                unit: str = "h") -> list[Path]:
    """Preemptions in each scheduling step (round in compat mode) over time (top) and their running
    total (bottom), one line per label. Negative entries (unset rows) are ignored."""
    fig, (ax, axc) = plt.subplots(2, 1, figsize=(7.2, 6.0), sharex=True)
    for i, (label, s) in enumerate(series_by_label.items()):
        t = s["t_s"].to_numpy() / unit_s
        n = s["num_preemptions"].to_numpy().astype(np.float64)
        n = np.where(n >= 0, n, 0.0)
        ls = _style(i)["linestyle"]
        ax.plot(t, n, label=f"{label} (total {int(n.sum()):,})", linewidth=0.8, alpha=0.8, linestyle=ls)
        axc.plot(t, np.cumsum(n), label=str(label), linewidth=1.4, linestyle=ls)
    ax.set_ylabel("preemptions in the step")
    axc.set_ylabel("total preemptions so far")
    axc.set_xlabel(f"simulated time ({unit})")
    for a in (ax, axc):
        a.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize="small", framealpha=0.9)
    ax.set_title(title)
    return _save(fig, stem)
