"""Figures of runs and sweeps (matplotlib, Agg backend). Every function saves ``<stem>.png`` and
``<stem>.pdf`` and returns the two paths. Each takes ``caption=``: what the figure shows, stored
with its title in the PNG's text metadata (``Title``, ``Description``; :func:`caption_of` reads
them back), which is where ``fastblox report`` takes its figure captions from.

* :func:`jct_cdf` — CDF of job completion times per label (log-scale x axis, hours);
* :func:`avg_jct_vs_load` — a summary metric against the load, one line per group (policy);
* :func:`bar_chart` — a summary metric as grouped bars (e.g. policy × admission);
* :func:`timeseries` — free GPUs, queued jobs and GPU demand over time from ``Result.series``;
* :func:`preemptions` — preemptions per scheduling step (round) from ``Result.series``;
* :func:`policy_timeline` — the policy a dynamic run chose in each period, one strip per run;
* :func:`policy_shares` — the share of periods each candidate policy ran, per load;
* :func:`metric_by_group` — a per-job metric averaged per group (e.g. JCT by job size), grouped bars.
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


def _title_of(fig) -> str:
    return next((ax.get_title() for ax in fig.axes if ax.get_title()), "")


def _save(fig, stem, caption: str | None = None) -> list[Path]:
    """Write ``<stem>.png`` (with its title and ``caption`` as PNG text) and ``<stem>.pdf``."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".pdf")]
    title = _title_of(fig)
    fig.tight_layout()
    fig.savefig(paths[0], dpi=120, metadata={"Title": title, "Description": caption or title})
    # no creation date: the same figure gives the same bytes
    fig.savefig(paths[1], metadata={"Title": title, "Subject": caption or title, "CreationDate": None})
    plt.close(fig)
    return paths


def caption_of(png) -> str | None:
    """The caption stored in a PNG written by this module (its ``Description``, else its
    ``Title``); None for a PNG without them."""
    from PIL import Image

    try:
        with Image.open(png) as im:
            text = getattr(im, "text", {}) or {}
    except OSError:
        return None
    return text.get("Description") or text.get("Title") or None


def _as_array(x) -> np.ndarray:
    if hasattr(x, "to_numpy"):
        x = x.to_numpy()
    a = np.asarray(x, dtype=np.float64)
    return a[np.isfinite(a)]


def jct_cdf(jct_by_label: dict, stem, title: str = "JCT CDF", unit_s: float = HOUR, unit: str = "h",
            caption: str | None = None) -> list[Path]:
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
    return _save(fig, stem, caption)


def label_of(row: dict, cols) -> str:
    """A line's label from a row's values: the policy upper-cased (``SRTF``), the load as ``load 8``,
    look-ahead and period in hours, switches by name (``preempt`` / ``no preempt``), other numbers
    with their name (``restart_s=30``), other text as it is (``16x8``, ``load:1.2``)."""
    cols = [cols] if isinstance(cols, str) else list(cols)
    out = []
    for c in cols:
        v = row[c]
        if v is None:
            continue  # e.g. the look-ahead of a fixed policy
        if c in ("horizon_s", "period_s"):
            out.append(f"({v / HOUR:g} h {'look-ahead' if c == 'horizon_s' else 'period'})")
        elif c == "policy":
            out.append(str(v).upper())
        elif isinstance(v, bool):
            out.append(c if v else f"no {c}")  # a switch: "preempt" / "no preempt"
        elif isinstance(v, (int, float)):  # a number means nothing without its name: "load 8", "restart_s=30"
            v = int(v) if isinstance(v, float) and v.is_integer() else v
            out.append(f"{c} {v}" if c == "load" else f"{c}={v}")
        else:
            out.append(str(v))
    return " ".join(out)


#: what the error bars of :func:`avg_jct_vs_load` and :func:`bar_chart` span (legend and caption say so)
SPREAD = "min-max across seeds"


def _metric_name(metric: str) -> str:
    return metric.removesuffix("_s").replace("_", " ")


def _aggregate(df, keys: list, metric: str):
    """One row per distinct ``keys``: the mean, min and max of ``metric`` over the rows sharing
    them (the seeds of a point) and their count ``n``; NaN and null values left out."""
    import polars as pl

    v = pl.col(metric).cast(pl.Float64)
    d = df.filter(v.is_not_null() & v.is_not_nan())
    return d.group_by(keys, maintain_order=True).agg(
        v.mean().alias("mean"), v.min().alias("lo"), v.max().alias("hi"), v.count().alias("n"))


def _spread_note(n: int) -> str:
    return (f"Each point is the mean of {n} seeds; error bars span the {SPREAD}." if n > 1
            else "One run per point (no seeds to show a spread).")


def _joinable(xs) -> bool:
    """Lines between points only where they suggest no curve that was not measured: at least 4
    distinct x values, no gap more than twice the smallest."""
    xs = np.unique(np.asarray(xs, dtype=np.float64))
    if len(xs) < 4:
        return False
    gaps = np.diff(xs)
    return bool(gaps.max() <= 2 * gaps.min())


def _key_order(keys):
    return sorted(keys, key=lambda t: tuple((v is not None, str(v)) for v in t))


def avg_jct_vs_load(summary, stem, metric: str = "avg_jct_s", by="policy", x: str = "load",
                    ylabel: str | None = None, xlabel: str = "load (jobs per hour)", title: str | None = None,
                    unit_s: float = HOUR, unit: str = "h", logy: bool = False, caption: str | None = None,
                    connect: bool | None = None, reference=None, reference_label: str = "published") -> list[Path]:
    """``metric`` (seconds) of a summary table (polars DataFrame) against ``x``, one line per value
    of ``by`` (a column, or a list of columns: one line per combination). Rows sharing ``by`` and
    ``x`` (the seeds of a point) are drawn as their mean with error bars spanning their min-max.
    ``connect``: join the points with lines (default: only when the x values are dense enough,
    :func:`_joinable`; else markers only, and the caption says why). ``reference``: a table with
    columns ``x``, ``metric`` and any of ``by``, drawn as black hollow markers labelled
    ``reference_label`` (e.g. a paper's published points)."""
    import polars as pl

    cols = [by] if isinstance(by, str) else list(by)
    agg = _aggregate(summary, cols + [x], metric).sort(x)
    keys = _key_order({tuple(r[c] for c in cols) for r in agg.iter_rows(named=True)})
    if connect is None:
        connect = _joinable(agg[x].to_list())
    nmax = int(agg["n"].max() or 0) if agg.height else 0
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    firsts = sorted({k[0] for k in keys}, key=str)
    # line styles by the second column; an unset value (None) gets the solid line
    seconds = sorted({k[1] for k in keys}, key=lambda v: (v is not None, str(v))) if len(cols) > 1 else []
    markers = {}
    # with error bars, lines side by side at each x (1.2 % of the x range apart) so each bar shows
    span = float(agg[x].max() - agg[x].min()) if agg.height else 0.0
    dodge = 0.012 * span if nmax > 1 and len(keys) > 1 else 0.0
    for i, key in enumerate(keys):
        d = agg.filter(*[pl.col(c).is_null() if v is None else pl.col(c) == v for c, v in zip(cols, key)])
        if seconds:  # colour and marker by the first column, line style by the second
            j = firsts.index(key[0])
            st = {"color": f"C{j % 10}", "marker": _STYLES[j % len(_STYLES)][1],
                  "linestyle": _STYLES[seconds.index(key[1]) % len(_STYLES)][0], "markersize": 6}
        else:
            st = {**_style(i), "color": f"C{i % 10}", "markersize": max(3, 7 - i)}
        if not connect:
            st["linestyle"] = "none"
        markers[key] = st["marker"]
        mean = d["mean"].to_numpy() / unit_s
        err = None
        if nmax > 1:
            err = np.vstack([mean - d["lo"].to_numpy() / unit_s, d["hi"].to_numpy() / unit_s - mean])
        ax.errorbar(d[x].to_numpy() + dodge * (i - (len(keys) - 1) / 2), mean, yerr=err, capsize=3 if err is not None else 0, elinewidth=1.0,
                    label=label_of(dict(zip(cols, key)), cols), linewidth=1.6, **st)
    if reference is not None and reference.height:
        _draw_reference(ax, reference, cols, x, metric, unit_s, markers, reference_label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel or f"{_metric_name(metric)} ({unit})")
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    names = {"horizon_s": "look-ahead", "period_s": "period"}
    legend_title = " / ".join(names.get(c, c) for c in cols)
    if nmax > 1:
        legend_title += f"\n(mean of {nmax} seeds, bars: min-max)"
    ax.legend(title=legend_title, fontsize="small", title_fontsize="small")
    title = title or f"{_metric_name(metric)} vs {x}"
    ax.set_title(title)
    notes = [caption or title.rstrip(".") + ".", _spread_note(nmax)]
    if not connect:
        nx = agg[x].n_unique()
        notes.append(f"Points are not joined by lines: {nx} values of {x} are too few or too far apart to show "
                     "the curve between them.")
    if reference is not None:
        notes.append(f"Black hollow markers: {reference_label} ({reference.height} points)." if reference.height
                     else f"{reference_label}: no numeric values available, none drawn.")
    return _save(fig, stem, " ".join(notes))


def _draw_reference(ax, ref, cols, x, metric, unit_s, markers, label) -> None:
    """Black hollow markers at ``ref``'s points, each in the marker of its line when ``ref`` names it."""
    first = True
    for r in ref.iter_rows(named=True):
        key = tuple(r.get(c) for c in cols)
        ax.plot([float(r[x])], [float(r[metric]) / unit_s], linestyle="none", marker=markers.get(key, "o"), markersize=9,
                markerfacecolor="none", markeredgecolor="black", markeredgewidth=1.4,
                label=label if first else None)
        first = False


def bar_chart(summary, stem, group: str = "policy", bars: str | None = "admission", metric: str = "avg_jct_s",
              ylabel: str | None = None, title: str | None = None, unit_s: float = HOUR, unit: str = "h",
              caption: str | None = None) -> list[Path]:
    """Grouped bars: one group per value of ``group``, one bar per value of ``bars`` (None: one
    bar per group). Rows sharing both (the seeds of a point) give the bar's mean, with an error bar
    spanning their min-max."""
    import polars as pl

    keys = [group] + ([bars] if bars else [])
    agg = _aggregate(summary, keys, metric)
    groups = sorted(summary[group].unique().to_list(), key=lambda v: (v is not None, str(v)))
    kinds = (sorted(summary[bars].unique().to_list(), key=lambda s: (s != "accept-all", str(s))) if bars
             else [None])
    nmax = int(agg["n"].max() or 0) if agg.height else 0
    width = 0.8 / max(1, len(kinds))
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    xs = np.arange(len(groups))
    for i, k in enumerate(kinds):
        mean, lo, hi = [], [], []
        for g in groups:
            d = agg.filter(pl.col(group) == g, *([pl.col(bars) == k] if bars else []))
            m = d.row(0, named=True) if d.height else {"mean": np.nan, "lo": np.nan, "hi": np.nan}
            mean.append(m["mean"] / unit_s)
            lo.append(m["lo"] / unit_s)
            hi.append(m["hi"] / unit_s)
        mean = np.asarray(mean)
        err = np.vstack([mean - np.asarray(lo), np.asarray(hi) - mean]) if nmax > 1 else None
        ax.bar(xs + (i - (len(kinds) - 1) / 2) * width, mean, width, yerr=err, capsize=3 if err is not None else 0,
               label=str(k) if bars else None, color=f"C{i % 10}")
    ax.set_xticks(xs, [str(g).upper() if group == "policy" else str(g) for g in groups])
    ax.set_xlabel(group)
    ax.set_ylabel(ylabel or f"{_metric_name(metric)} ({unit})")
    ax.grid(True, axis="y", alpha=0.3)
    if bars:
        ax.legend(title=bars + (f" (mean of {nmax} seeds, bars: min-max)" if nmax > 1 else ""), fontsize="small",
                  title_fontsize="small")
    title = title or f"{_metric_name(metric)} by {group}" + (f" and {bars}" if bars else "")
    ax.set_title(title)
    return _save(fig, stem, " ".join([caption or title.rstrip(".") + ".", _spread_note(nmax)]))


def timeseries(series_by_label: dict, stem, title: str = "cluster state over time", unit_s: float = HOUR,
               unit: str = "h", caption: str | None = None) -> list[Path]:
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
    return _save(fig, stem, caption)


def preemptions(series_by_label: dict, stem, title: str = "preemptions per step", unit_s: float = HOUR,
                unit: str = "h", caption: str | None = None) -> list[Path]:
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
    return _save(fig, stem, caption)


def _policy_colors(names) -> dict:
    fixed = {"fifo": "tab:blue", "las": "tab:orange", "srtf": "tab:green", "sjf": "tab:red", "las-gpu": "tab:purple"}
    extra = iter(["tab:brown", "tab:pink", "tab:gray", "tab:olive", "tab:cyan"])
    return {n: fixed.get(n) or next(extra, "black") for n in names}


def policy_timeline(periods_by_label: dict, stem, title: str = "policy chosen per period", unit_s: float = HOUR,
                    unit: str = "h", caption: str | None = None) -> list[Path]:
    """One horizontal strip per label (e.g. a load): each period a bar in the colour of the policy
    the dynamic run chose for it. Values: ``DynamicResult.periods`` tables (``start_s``, ``end_s``,
    ``policy``)."""
    labels = list(periods_by_label)
    names = sorted({p for t in periods_by_label.values() for p in t["policy"].to_list()})
    colors = _policy_colors(names)
    fig, ax = plt.subplots(figsize=(7.6, 1.0 + 0.55 * max(1, len(labels))))
    for row, label in enumerate(labels):
        t = periods_by_label[label]
        start = t["start_s"].to_numpy() / unit_s
        width = (t["end_s"].to_numpy() - t["start_s"].to_numpy()) / unit_s
        pol = t["policy"].to_list()
        for n in names:
            sel = [i for i, p in enumerate(pol) if p == n]
            if sel:
                ax.broken_barh(list(zip(start[sel], width[sel])), (row - 0.38, 0.76), facecolors=colors[n],
                               linewidth=0)
    ticks = []
    for label in labels:
        pol = periods_by_label[label]["policy"].to_list()
        switches = int(sum(a != b for a, b in zip(pol[1:], pol[:-1])))
        ticks.append(f"{label}\n({switches} switch{'es' if switches != 1 else ''})")
    ax.set_yticks(range(len(labels)), ticks, fontsize="small")
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_xlim(left=0)
    ax.grid(True, axis="x", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[n]) for n in names]
    ax.legend(handles, [n.upper() for n in names], loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small",
              title="policy")
    ax.set_title(title)
    return _save(fig, stem, caption)


def policy_shares(summary, stem, candidates, x: str = "load", xlabel: str = "load (jobs per hour)",
                  title: str = "share of periods run with each policy", caption: str | None = None) -> list[Path]:
    """Stacked bars: for each ``x`` the fraction of a dynamic run's periods each candidate ran
    (the summary's ``share_<candidate>`` columns; the mean over the rows of an ``x``, e.g. its seeds)."""
    import polars as pl

    df = summary.group_by(x).agg(pl.col("^share_.*$").mean()).sort(x)
    xs = [str(int(v)) if isinstance(v, float) and v.is_integer() else str(v) for v in df[x].to_list()]
    colors = _policy_colors(candidates)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    bottom = np.zeros(df.height)
    for n in candidates:
        col = f"share_{n}"
        vals = df[col].fill_null(0.0).to_numpy() if col in df.columns else np.zeros(df.height)
        ax.bar(xs, vals, bottom=bottom, color=colors[n], label=n.upper(), width=0.6)
        bottom += vals
    ax.set_ylim(0, 1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of periods")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", title="policy")
    ax.set_title(title)
    return _save(fig, stem, caption)


def metric_by_group(values_by_label: dict, stem, xlabel: str, ylabel: str, title: str, unit_s: float = HOUR, caption: str | None = None) -> list[Path]:
    """Grouped bars: ``values_by_label[label]`` is ``{group: seconds}`` (e.g. GPUs per job -> mean JCT)."""
    labels = list(values_by_label)
    groups = sorted({g for d in values_by_label.values() for g in d})
    width = 0.8 / max(1, len(labels))
    fig, ax = plt.subplots(figsize=(7.2, 4.2))
    xs = np.arange(len(groups))
    for i, label in enumerate(labels):
        d = values_by_label[label]
        ax.bar(xs + (i - (len(labels) - 1) / 2) * width, [d.get(g, np.nan) / unit_s for g in groups], width,
               label=str(label))
    ax.set_xticks(xs, [str(g) for g in groups])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(title)
    return _save(fig, stem, caption)
