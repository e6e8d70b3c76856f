"""search.png: the objective of every trial in order with the best so far, and the objective
against each knob (error bars: the standard deviation over the seeds; the best trial a star;
trials whose runs did not complete grey crosses; failed trials have no objective to draw)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

HOUR = 3600.0


def plot_search(table, cfg, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    knobs = cfg.knobs
    ncols = 1 + len(knobs)
    fig, axes = plt.subplots(1, ncols, figsize=(4.6 * ncols, 3.8), squeeze=False)
    axes = axes[0]
    ok = (table["status"] == "ok").to_numpy()
    unit = HOUR if cfg.objective.endswith("_s") else 1.0  # seconds are drawn in hours
    y = table["objective"].to_numpy() / unit
    err = table["objective_std"].to_numpy() / unit
    trial = table["trial"].to_numpy()
    label = (f"{cfg.objective.removesuffix('_s')}{' (h)' if unit == HOUR else ''}, "
             f"{'lower' if cfg.direction == 'min' else 'higher'} is better")
    seeds = int(table["num_seeds"].max() or 1)
    ebar = err if seeds > 1 else None

    ax = axes[0]
    ax.errorbar(trial[ok], y[ok], yerr=None if ebar is None else ebar[ok], fmt="o", ms=4, alpha=0.8, label="trial")
    ax.step(trial, table["best_so_far"].to_numpy() / unit, where="post", color="C3", label="best so far")
    _mark_incomplete(ax, trial, table, y)
    ax.set_xlabel("trial")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(label)
    ax.set_title(f"{cfg.sampler} search, {table.height} trials" + (f", mean of {seeds} seeds" if seeds > 1 else ""))
    ax.legend(fontsize=8)
    best_row = _best_index(y, ok, cfg.direction)
    for ax, k in zip(axes[1:], knobs):
        x, ticks = _positions(table[k.name].to_list(), k)
        ax.errorbar(x[ok], y[ok], yerr=None if ebar is None else ebar[ok], fmt="o", ms=4, alpha=0.8)
        if best_row is not None:
            ax.plot([x[best_row]], [y[best_row]], "*", ms=14, color="C3", label="best")
            ax.legend(fontsize=8)
        _mark_incomplete(ax, x, table, y)
        if ticks is not None:
            ax.set_xticks(range(len(ticks)), ticks, rotation=30 if max(map(len, ticks)) > 6 else 0)
        elif k.log:
            ax.set_xscale("log")
        ax.set_xlabel(k.name if k.option else f"{k.name}: " + ", ".join(
            f"{key} = {v!r}" for key, v in cfg.base.items() if "{" + k.name + "}" in str(v)))
        ax.set_ylabel(label)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _best_index(y, ok, direction: str):
    if not ok.any():
        return None
    idx = np.flatnonzero(ok)
    vals = y[idx] if direction == "min" else -y[idx]
    return int(idx[int(np.argmin(vals))])


def _positions(values: list, k):
    """x positions of a knob's values: numbers as they are, choices of text by their index."""
    if k.kind == "choice" and not all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in k.choices):
        names = [str(c) for c in k.choices]
        return np.array([names.index(str(v)) for v in values], dtype=float), names
    return np.array([math.nan if v is None else float(v) for v in values]), None


def _mark_incomplete(ax, x, table, y) -> None:
    """Trials whose runs stopped before their tracked jobs finished: grey crosses at their
    (biased: unfinished jobs are left out) objective. Failed trials have none and are not drawn."""
    inc = (table["status"] == "incomplete").to_numpy()
    if inc.any():
        ax.plot(x[inc], y[inc], "x", color="0.5", label="incomplete (not a candidate)")
        ax.legend(fontsize=8)
