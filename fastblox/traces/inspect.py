"""What a workload looks like: size, span, GPU-size mix, durations, arrivals, load.

``inspect(w)`` returns plain numbers (JSON-ready); ``format_inspect`` prints them for people.
"""

from __future__ import annotations

import math

import numpy as np

from ..workload import Workload

QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)


def _f(x) -> float:
    return float(x) if x is not None and np.isfinite(x) else float("nan")


def inspect(workload: Workload, total_gpus: int | None = None) -> dict:
    """Summary statistics of a workload.

    Keys: ``name``, ``jobs``, ``span_s`` (first → last submit), ``gpu_mix`` ({GPUs: jobs}),
    ``gpu_hours``, ``duration_s`` (quantiles p0…p100 and mean), ``interarrival`` (mean, CV = std /
    mean of the gaps between consecutive submits; 1 for Poisson arrivals), ``hour_of_day`` (24
    submit counts; hour 0 = the hour of the trace's origin, as submit times are relative),
    ``peak_hour_ratio`` (busiest hour / mean hour), ``dropped`` (rows dropped while reading, per
    reason), ``columns`` (optional columns present), ``status`` (jobs per status, when known),
    ``fractional_gpu_jobs`` (jobs whose ``gpu_fraction`` < 1: GPU-sharing requests rounded up to a
    whole GPU) and, with ``total_gpus``: ``offered_load`` (GPU-seconds asked / (GPUs × span)) and
    ``jobs_larger_than_cluster``."""
    w = workload
    n = len(w)
    out: dict = {"name": w.name, "jobs": int(n)}
    sub, dur, gpus = w.submit_s, w.duration_s, w.num_gpus
    out["span_s"] = float(sub[-1] - sub[0]) if n else 0.0
    out["first_submit_s"] = float(sub[0]) if n else float("nan")
    sizes, counts = np.unique(gpus, return_counts=True) if n else (np.array([], dtype=np.int64), np.array([]))
    out["gpu_mix"] = {int(s): int(c) for s, c in zip(sizes, counts)}
    out["gpu_hours"] = float((dur * gpus).sum() / 3600.0) if n else 0.0
    out["mean_gpus"] = float(gpus.mean()) if n else float("nan")
    q = np.quantile(dur, QUANTILES) if n else np.full(len(QUANTILES), np.nan)
    out["duration_s"] = {f"p{int(round(p * 100))}": float(v) for p, v in zip(QUANTILES, q)}
    out["duration_s"]["mean"] = float(dur.mean()) if n else float("nan")
    if n > 1:
        gaps = np.diff(sub)
        mean = float(gaps.mean())
        out["interarrival"] = {"mean_s": mean, "cv": float(gaps.std() / mean) if mean > 0 else float("nan"),
                               "zero_gaps": int((gaps == 0).sum())}
    else:
        out["interarrival"] = {"mean_s": float("nan"), "cv": float("nan"), "zero_gaps": 0}
    hours = np.floor(np.mod(sub, 86400.0) / 3600.0).astype(np.int64) if n else np.array([], dtype=np.int64)
    prof = np.bincount(hours, minlength=24)[:24] if n else np.zeros(24, dtype=np.int64)
    out["hour_of_day"] = [int(x) for x in prof]
    out["peak_hour_ratio"] = float(prof.max() / prof.mean()) if n and prof.mean() > 0 else float("nan")
    out["dropped"] = {str(k): int(v) for k, v in w.dropped.items()}
    out["dropped_where"] = {str(k): {"rows": list(v[0]), "label": v[1], "note": v[2]}
                            for k, v in w.dropped_where.items()}
    cols = []
    if np.isfinite(w.iterations).any():
        cols.append("iterations")
    if np.isfinite(w.iter_time_s).any():
        cols.append("iter_time_s")
    cols += list(w.extra)
    out["columns"] = cols
    if "status" in w.extra:
        from ._core import str_series

        st = str_series(np.asarray(w.extra["status"], dtype=object)).alias("s")
        vc = st.fill_null("(none)").value_counts(sort=True)
        out["status"] = {str(k): int(c) for k, c in zip(vc["s"].to_list(), vc["count"].to_list())}
    if "gpu_fraction" in w.extra:
        fr = np.asarray(w.extra["gpu_fraction"], dtype=np.float64)
        out["fractional_gpu_jobs"] = int((fr < 1.0 - 1e-9).sum())
    if total_gpus is not None:
        out["total_gpus"] = int(total_gpus)
        out["offered_load"] = float(w.offered_load(int(total_gpus))) if n else float("nan")
        out["jobs_larger_than_cluster"] = int((gpus > total_gpus).sum())
    return out


def _dur(s: float) -> str:
    if not np.isfinite(s):
        return "-"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 172800:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def format_inspect(d: dict) -> str:
    """The dict of :func:`inspect` as readable text."""
    lines = [f"{d['name']}: {d['jobs']:,} jobs over {_dur(d['span_s'])} ({d['span_s']:,.0f} s)"]
    mix = d["gpu_mix"]
    n = max(d["jobs"], 1)
    shown = sorted(mix.items(), key=lambda t: t[0])
    if len(shown) > 12:
        top = sorted(mix.items(), key=lambda t: -t[1])[:12]
        rest = d["jobs"] - sum(c for _, c in top)
        shown = sorted(top) + [("other", rest)]
    lines.append("  GPUs/job   " + ", ".join(f"{k}: {c:,} ({100 * c / n:.1f}%)" for k, c in shown))
    lines.append(f"             mean {d['mean_gpus']:.2f} GPUs; {_amount(d['gpu_hours'])} GPU-hours in total")
    q = d["duration_s"]
    lines.append("  duration   " + " | ".join(f"{k} {_dur(q[k])}" for k in ("p0", "p10", "p50", "p90", "p99", "p100"))
                 + f" | mean {_dur(q['mean'])}")
    ia = d["interarrival"]
    cv = ia["cv"]
    lines.append(f"  arrivals   mean gap {_dur(ia['mean_s'])}, CV {cv:.2f}" + (" (Poisson ≈ 1)" if np.isfinite(cv) else "")
                 + (f", {ia['zero_gaps']:,} simultaneous" if ia["zero_gaps"] else ""))
    prof = d["hour_of_day"]
    peak = max(prof) if prof else 0
    bars = " ▁▂▃▄▅▆▇█"
    spark = "".join(bars[int(math.ceil(8 * c / peak))] if peak else " " for c in prof)
    lines.append(f"  hour/day   |{spark}| peak/mean {d['peak_hour_ratio']:.2f} (hour 0 = trace origin)")
    if "offered_load" in d:
        lines.append(f"  load       {d['offered_load']:.3f} on {d['total_gpus']:,} GPUs"
                     + (f"; {d['jobs_larger_than_cluster']:,} job(s) larger than the cluster"
                        if d["jobs_larger_than_cluster"] else ""))
    if "status" in d:
        lines.append("  status     " + ", ".join(f"{k}: {v:,}" for k, v in list(d["status"].items())[:8]))
    if d.get("fractional_gpu_jobs"):
        lines.append(f"  sharing    {d['fractional_gpu_jobs']:,} job(s) ask for a fraction of a GPU (rounded up to 1 "
                     "whole GPU; share in column gpu_fraction)")
    if d["columns"]:
        lines.append("  columns    " + ", ".join(d["columns"]))
    bad = {k: v for k, v in d["dropped"].items() if k != "resorted"}
    where = d.get("dropped_where", {})
    notes = sorted({w["note"] for w in where.values()})
    if bad:
        lines.append(f"  dropped    {sum(bad.values()):,} row(s) while reading, by reason"
                     + (f" ({'; '.join(notes)})" if notes else "") + ":")
        lines += [f"               {k}: {v:,}{_where(where.get(k), v)}" for k, v in bad.items()]
    if d["dropped"].get("resorted"):
        k = d["dropped"]["resorted"]
        lines.append(f"  resorted   {k:,} row(s) were out of submit order (kept, sorted stably){_where(where.get('resorted'), k)}")
    return "\n".join(lines)


def _where(w: dict | None, count: int) -> str:
    """`` (lines 4, 9 and 3 more)``: the first rows of a reason, as the trace numbers them."""
    if not w or not w["rows"]:
        return ""
    shown = ", ".join(str(r) for r in w["rows"])
    more = f" and {count - len(w['rows']):,} more" if count > len(w["rows"]) else ""
    return f" ({w['label']}{'s' if count > 1 else ''} {shown}{more})"


def _amount(x: float) -> str:
    """Whole units with thousands separators, three significant digits below 100 (0.0417, not 0)."""
    return f"{x:,.0f}" if abs(x) >= 100 or x == 0 else f"{x:.3g}"
