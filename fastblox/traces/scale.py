"""Faithful scale-up of a trace: more jobs, same kind of jobs, same kind of arrivals.

``scale_trace(w, num_jobs, seed=0)`` builds a synthetic workload of exactly ``num_jobs`` jobs from
a source workload ``w``:

* **Whole jobs are sampled**: each synthetic job is a copy of one source job, so every
  ``(num_gpus, duration_s)`` pair (and ``iterations``/``iter_time_s``/extra columns) occurs in the
  source; sizes and run times are never drawn independently.
* **Day-block bootstrap** (keeps the burst and diurnal structure): the source is cut into days of
  86,400 s counted from its first submit (day 0 starts at the first job). Each synthetic day is a
  random source day *of the same stratum*, copied with its jobs' within-day offsets. The draw is a
  *balanced* bootstrap by default: each stratum's source days are dealt out in shuffled rounds, so
  every source day is used equally often (±1) and the mix of jobs matches the source closely even
  when it has few days (``balanced=False``: independent draws, noisier). Strata: with
  ``first_weekday`` (0 = Monday … 6 = Sunday, the weekday day 0 falls on) the two strata are
  weekdays and weekends; without it (the default; traces hold only relative seconds) the stratum is
  the day-of-week index ``day mod 7``. All source days are drawn from, the last (partial) one too:
  a trace cut out of a longer one may hold many of its jobs there. A stratum without source days
  draws from all days. Balanced, each stream is then exactly a within-stratum shuffle of the
  source's days: it holds every source job once, at a new date.
* **Superposed streams** (widen, not stretch): ``K = ceil(num_jobs / len(w))`` independent
  bootstrapped streams (``streams`` overrides), each as long as the source, each shifted by a random
  offset in ``[0, shift_s)``. The default ``shift_s`` is one hour: a sub-day shift that breaks exact
  coincidences between streams without smearing the hour-of-day profile (a shift spread over the
  whole day would flatten it). If the K streams fall short of ``num_jobs`` (fewer streams given, or
  unbalanced draws), every stream is extended by more bootstrapped days. The result is truncated to
  exactly ``num_jobs`` by submit time, sorted, with job ids ``0 … num_jobs-1``.
* **The cluster must grow by K** to carry the same offered load: ``report["cluster_multiplier"]``.

All of it is numpy over arrays (no Python loop over jobs or days) and deterministic for a given
``seed`` (``numpy.random.default_rng(seed)``). The report (JSON-ready) compares source and synthetic:
KS distances of the duration and GPU-count distributions, GPU-hour shares by job size,
inter-arrival CV, the 24-hour submit profile and, with ``total_gpus``, the offered load of the source
on ``total_gpus`` GPUs and of the synthetic trace on ``K × total_gpus``.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError
from ..workload import Workload

DAY_S = 86400.0
#: GPU-hour share buckets: (label, lowest GPUs, highest GPUs)
SIZE_BUCKETS = (("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4), ("5-8", 5, 8), (">8", 9, np.iinfo(np.int64).max))


def ks_distance(a, b) -> float:
    """Two-sample Kolmogorov–Smirnov statistic: max |ECDF_a − ECDF_b| (works for discrete data too)."""
    a = np.sort(np.asarray(a, dtype=np.float64))
    b = np.sort(np.asarray(b, dtype=np.float64))
    if not len(a) or not len(b):
        return float("nan")
    x = np.union1d(a, b)
    fa = np.searchsorted(a, x, side="right") / len(a)
    fb = np.searchsorted(b, x, side="right") / len(b)
    return float(np.abs(fa - fb).max())


def _size_shares(w: Workload) -> dict:
    gh = w.duration_s * w.num_gpus
    tot = float(gh.sum())
    return {lab: (float(gh[(w.num_gpus >= lo) & (w.num_gpus <= hi)].sum()) / tot if tot > 0 else float("nan"))
            for lab, lo, hi in SIZE_BUCKETS}


def _cv(sub: np.ndarray) -> float:
    if len(sub) < 3:
        return float("nan")
    g = np.diff(sub)
    m = g.mean()
    return float(g.std() / m) if m > 0 else float("nan")


def _hours(w: Workload) -> list:
    """Share of submits per hour of day; hour 0 = the hour of the trace's first submit."""
    if not len(w):
        return [float("nan")] * 24
    h = np.floor(np.mod(w.submit_s - w.submit_s[0], DAY_S) / 3600.0).astype(np.int64)
    c = np.bincount(np.clip(h, 0, 23), minlength=24)[:24]
    return [float(x) for x in c / c.sum()]


def _strata(day_idx: np.ndarray, first_weekday) -> np.ndarray:
    if first_weekday is None:
        return day_idx % 7
    return (((day_idx + int(first_weekday)) % 7) >= 5).astype(np.int64)


def scale_trace(workload: Workload, num_jobs: int, seed: int = 0, streams: int | None = None, *,
                first_weekday: int | None = None, shift_s: float = 3600.0, balanced: bool = True, total_gpus: int | None = None,
                source_path=None) -> tuple[Workload, dict]:
    """Scale ``workload`` up (or down) to exactly ``num_jobs`` jobs; returns ``(synthetic, report)``.

    See the module docstring for the method. ``streams`` = K (default ``ceil(num_jobs/len)``),
    ``first_weekday`` (0 = Monday) switches the strata from day-of-week index to weekday/weekend,
    ``shift_s`` bounds each stream's random shift, ``balanced=False`` draws source days independently
    (plain bootstrap) instead of in shuffled rounds, ``total_gpus`` (the source cluster) adds offered
    loads to the report, ``source_path`` is only recorded in it."""
    w = workload
    n_src = len(w)
    num_jobs = int(num_jobs)
    if n_src == 0:
        raise ConfigError("cannot scale an empty trace")
    if num_jobs <= 0:
        raise ConfigError(f"the number of jobs must be positive, got {num_jobs}")
    if first_weekday is not None and not 0 <= int(first_weekday) <= 6:
        raise ConfigError(f"first_weekday must be 0 (Monday) … 6 (Sunday), got {first_weekday}")
    if not shift_s >= 0:
        raise ConfigError(f"shift_s must be >= 0, got {shift_s}")
    k = int(streams) if streams is not None else max(1, math.ceil(num_jobs / n_src))
    if k <= 0:
        raise ConfigError(f"streams must be positive, got {streams}")
    rng = np.random.default_rng(seed)

    t0 = float(w.submit_s[0])
    rel = w.submit_s - t0
    day = np.floor(rel / DAY_S).astype(np.int64)
    within = rel - day * DAY_S
    n_days = int(day[-1]) + 1
    counts = np.bincount(day, minlength=n_days)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))  # jobs are sorted by submit: days are contiguous
    pool_days = np.arange(n_days)  # all days, the last (partial) one too: it may hold many of the jobs
    pool_strata = _strata(pool_days, first_weekday)
    # per stratum, the source days it may draw from (sorted by stratum; empty strata fall back to all)
    n_strata = 7 if first_weekday is None else 2
    order = np.argsort(pool_strata, kind="stable")
    by_stratum = pool_days[order]
    s_count = np.bincount(pool_strata, minlength=n_strata)
    s_start = np.concatenate(([0], np.cumsum(s_count)[:-1]))

    def draw(day_numbers: np.ndarray) -> np.ndarray:
        """A source day of the same stratum for each synthetic day slot ((K, D) array of day numbers).

        Balanced (default): per stratum, the slots (stream-major order) are dealt the stratum's source
        days in shuffled rounds, so every source day is used equally often (±1 round) and each stream
        is close to a within-stratum shuffle of the source. Otherwise: independent uniform draws."""
        st = _strata(day_numbers, first_weekday)
        st = np.where(s_count[st] > 0, st, -1)  # -1: an empty stratum draws from all pool days
        flat = st.ravel()
        out = np.empty(flat.shape, dtype=np.int64)
        for s in np.unique(flat):  # at most 7 strata: a loop over strata, not over jobs or days
            slots = np.flatnonzero(flat == s)
            pool = pool_days if s < 0 else by_stratum[s_start[s]:s_start[s] + s_count[s]]
            if balanced:
                rounds = -(-len(slots) // len(pool))
                out[slots] = rng.permuted(np.tile(pool, (rounds, 1)), axis=1).ravel()[:len(slots)]
            else:
                out[slots] = pool[rng.integers(0, len(pool), len(slots))]
        return out.reshape(day_numbers.shape)

    shifts = rng.random(k) * shift_s
    # synthetic day grid: K streams × D days; extend D until there are enough jobs
    d_total = n_days
    src_days = draw(np.broadcast_to(np.arange(d_total), (k, d_total)))
    while counts[src_days].sum() < num_jobs:
        deficit = num_jobs - int(counts[src_days].sum())
        extra = max(1, math.ceil(1.1 * deficit / (k * n_src / n_days)))  # ~enough days at the mean rate
        more = draw(np.broadcast_to(np.arange(d_total, d_total + extra), (k, extra)))
        src_days = np.concatenate([src_days, more], axis=1)
        d_total += extra

    # expand synthetic days into jobs (vectorized ragged gather)
    flat_src = src_days.ravel()
    per = counts[flat_src]
    total = int(per.sum())
    syn_day = np.repeat(np.arange(flat_src.size), per)  # which synthetic (stream, day) each job belongs to
    first_of = np.concatenate(([0], np.cumsum(per)[:-1]))
    job_src = starts[flat_src][syn_day] + (np.arange(total) - first_of[syn_day])
    stream = syn_day // d_total
    day_no = syn_day % d_total
    submit = t0 + shifts[stream] + day_no * DAY_S + within[job_src]
    keep = np.argsort(submit, kind="stable")[:num_jobs]
    idx = job_src[keep]

    out = Workload.from_arrays(
        submit[keep], w.num_gpus[idx], duration_s=w.duration_s[idx], job_id=np.arange(num_jobs),
        iterations=w.iterations[idx], iter_time_s=w.iter_time_s[idx],
        name=f"{w.name}-x{num_jobs}-seed{seed}", **{c: v[idx] for c, v in w.extra.items()},
    )
    report = validation_report(w, out, k=k, seed=seed, total_gpus=total_gpus, source_path=source_path)
    report.update({"first_weekday": first_weekday, "strata": "weekday/weekend" if first_weekday is not None
                   else "day index mod 7", "shift_s": float(shift_s), "balanced": bool(balanced), "source_days": n_days,
                   "synthetic_days_per_stream": d_total})
    return out, report


def validation_report(src: Workload, syn: Workload, *, k: int, seed=None, total_gpus=None, source_path=None) -> dict:
    """Source-vs-synthetic figures (JSON-ready)."""
    rep = {
        "seed": seed, "streams": int(k), "cluster_multiplier": int(k),
        "source_name": src.name, "source_path": None if source_path is None else str(source_path),
        "source_jobs": len(src), "jobs": len(syn),
        "source_span_s": float(src.submit_s[-1] - src.submit_s[0]),
        "span_s": float(syn.submit_s[-1] - syn.submit_s[0]) if len(syn) else 0.0,
        "ks_duration": ks_distance(src.duration_s, syn.duration_s),
        "ks_num_gpus": ks_distance(src.num_gpus, syn.num_gpus),
        "gpu_hour_share": {"source": _size_shares(src), "synthetic": _size_shares(syn)},
        "interarrival_cv": {"source": _cv(src.submit_s), "synthetic": _cv(syn.submit_s)},
        "hour_of_day": {"source": _hours(src), "synthetic": _hours(syn)},
    }
    hs, hy = np.array(rep["hour_of_day"]["source"]), np.array(rep["hour_of_day"]["synthetic"])
    rep["hour_of_day_max_abs_diff"] = float(np.abs(hs - hy).max())
    if total_gpus is not None:
        rep["total_gpus"] = int(total_gpus)
        rep["offered_load"] = {"source": src.offered_load(int(total_gpus)),
                               "synthetic": syn.offered_load(int(total_gpus) * int(k)),
                               "synthetic_gpus": int(total_gpus) * int(k)}
    return rep


def format_report(rep: dict) -> str:
    """A short table for people."""
    L = [f"scaled {rep['source_name']} ({rep['source_jobs']:,} jobs) to {rep['jobs']:,} jobs: "
         f"K = {rep['streams']} streams (seed {rep['seed']}); grow the cluster by x{rep['cluster_multiplier']}",
         f"  {'':24s}{'source':>12s}{'synthetic':>12s}",
         f"  {'span (days)':24s}{rep['source_span_s'] / DAY_S:12.1f}{rep['span_s'] / DAY_S:12.1f}",
         f"  {'inter-arrival CV':24s}{rep['interarrival_cv']['source']:12.3f}{rep['interarrival_cv']['synthetic']:12.3f}"]
    for lab in rep["gpu_hour_share"]["source"]:
        s, y = rep["gpu_hour_share"]["source"][lab], rep["gpu_hour_share"]["synthetic"][lab]
        L.append(f"  {'GPU-hours, ' + lab + ' GPU':24s}{s:12.1%}{y:12.1%}")
    if "offered_load" in rep:
        ol = rep["offered_load"]
        L.append(f"  {'offered load':24s}{ol['source']:12.3f}{ol['synthetic']:12.3f}"
                 f"   ({rep['total_gpus']} vs {ol['synthetic_gpus']} GPUs)")
    L.append(f"  KS distance: duration {rep['ks_duration']:.4f}, GPU count {rep['ks_num_gpus']:.4f}; "
             f"hour-of-day share max |diff| {rep['hour_of_day_max_abs_diff']:.4f}")
    return "\n".join(L)
