"""Run results: the per-job table (polars), the summary (dict), the optional time series, and
their writers (Parquet, JSON, and Blox's five JSON files).

polars is imported only when a table is built: a run's per-job table is kept as numpy columns
until first used (:class:`JobColumns`), and ``jobs.parquet`` is written from those columns by
whichever of polars and pyarrow is already imported (polars after reading a trace; else pyarrow,
which imports in about a third of polars' time). Both give the same table: the same Arrow schema
(strings ``large_string``, as polars writes them) and values."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .outputs import json_text

from .kernels import enums
from .kernels.state import gather_records

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: imported lazily where used
    import polars as pl
    import pyarrow as pa

SERIES_COLUMNS = ("t_s", "num_preemptions", "free_gpus", "queued_jobs", "running_jobs", "gpu_demand", "gpus_up")


def _nan_where_unset(a: np.ndarray) -> np.ndarray:
    out = a.astype(np.float64, copy=True)
    out[a < 0] = np.nan
    return out


def _pcts(x: np.ndarray, qs) -> list:
    """Percentiles ``qs`` of ``x`` in one partition pass (NaN when empty)."""
    return [float(v) for v in np.percentile(x, qs)] if len(x) else [float("nan")] * len(qs)


@dataclass
class Result:
    """``jobs``: one row per job (a polars DataFrame; given as a function, it is built on first use,
    so a run that only wants the summary never pays for it); ``summary``: averages over tracked
    jobs; ``series``: one row per scheduling step (native) or round (compat) when recorded;
    ``config``: the run's settings."""

    jobs: pl.DataFrame
    summary: dict
    config: dict
    series: pl.DataFrame | None = None
    _blox_builder: object = field(default=None, repr=False)
    _blox: dict | None = field(default=None, repr=False)

    def blox_files(self) -> dict:
        """Blox's five output files as Python objects (compat runs only; built on first use)."""
        if self._blox is None:
            if self._blox_builder is None:
                raise ValueError("Blox's JSON files exist for --blox-compat runs only")
            self._blox = self._blox_builder()
        return self._blox

    def __repr__(self) -> str:
        s = self.summary
        return (f"Result({s['num_jobs']} jobs, avg JCT {s['avg_jct_s']:.1f} s, p99 {s['p99_jct_s']:.1f} s, "
                f"makespan {s['makespan_s']:.0f} s)")

    # ---------------------------------------------------------------- writers
    def write(self, out_dir: str | os.PathLike, blox_json: bool = False, blox_prefix: str = "blox",
              blox_load: float | None = None) -> list[Path]:
        """Write ``jobs.parquet``, ``summary.json`` (and ``series.parquet`` when recorded, and
        Blox's five files with ``blox_json``) into ``out_dir``; returns the paths written. All or
        nothing: every file is written under a temporary name first and renamed once all are
        written (an interrupted write leaves no file of it behind)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        jobs = self.__dict__.get("jobs")
        if callable(jobs):  # a builder: its columns, kept for ``jobs``
            jobs = self.__dict__["jobs"] = jobs()
        if isinstance(jobs, JobColumns) and "polars" not in sys.modules:
            write_jobs = jobs.write_parquet  # pyarrow's writer; the table stays unbuilt
        else:
            write_jobs = self.jobs.write_parquet
        files = [(out / "jobs.parquet", write_jobs),
                 (out / "summary.json", lambda p: p.write_text(
                     json_text({"summary": self.summary, "config": self.config}, indent=2, sort_keys=True) + "\n"))]
        if self.series is not None:
            files.append((out / "series.parquet", self.series.write_parquet))
        if blox_json:
            files += self.blox_json_files(out, prefix=blox_prefix, load=blox_load)
        return _write_all(files)

    def blox_json_files(self, out_dir, prefix: str = "blox", load: float | None = None) -> list:
        """Blox's five output files, named and laid out as Blox writes them (compat runs only), as
        ``(path, writer)`` pairs."""
        b = self.blox_files()
        lo, hi = b["track"]
        load_s = str(float(load)) if load is not None else "trace"
        stem = f"{prefix}_{lo}_{hi}_{b['policy']}_{b['admission']}_load_{load_s}_"
        files = {
            "job_stats.json": b["job_stats"],
            "cluster_stats.json": b["cluster_stats"],
            "run_time_stats.json": b["run_time_stats"],
            "responsivness.json": b["responsiveness"],
            "custom_metrics.json": b["custom_metrics"],
        }
        return [(Path(out_dir) / (stem + suffix), lambda p, obj=obj: p.write_text(json_text(obj)))
                for suffix, obj in files.items()]

    def write_blox_json(self, out_dir, prefix: str = "blox", load: float | None = None) -> list[Path]:
        """Write Blox's five output files (compat runs only; all or nothing); returns their paths."""
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        return _write_all(self.blox_json_files(out_dir, prefix=prefix, load=load))


def _get_jobs(self) -> pl.DataFrame:
    j = self.__dict__["jobs"]
    if callable(j):  # a builder (a DataFrame is not callable)
        j = self.__dict__["jobs"] = j()
    if isinstance(j, JobColumns):
        j = self.__dict__["jobs"] = j.to_polars()
    return j


def _set_jobs(self, value) -> None:
    self.__dict__["jobs"] = value


# ``Result.jobs`` builds the table on first use (set after @dataclass, which takes a class
# attribute of a field's name as its default; subclasses that are dataclasses keep it)
Result.jobs = property(_get_jobs, _set_jobs, doc="One row per job (a polars DataFrame), built on first use.")


def _write_all(files: list) -> list[Path]:
    """Write each ``(path, writer)`` (``writer(path)``) under a temporary name, then rename them
    all: an interrupted or failed write leaves none of them (and no temporary file) behind."""
    tmps = [(p, p.with_name(f".{p.name}.{os.getpid()}.tmp")) for p, _ in files]
    try:
        for (_, write), (_, tmp) in zip(files, tmps):
            write(tmp)
        for p, tmp in tmps:
            os.replace(tmp, p)
    finally:
        for _, tmp in tmps:
            if tmp.exists():
                tmp.unlink()
    return [p for p, _ in files]


def _blox_num(x: float):
    """Blox keeps times as Python ints when they are whole (its round length is an int)."""
    return int(x) if float(x).is_integer() else float(x)


def fairness(jct: np.ndarray, alone: np.ndarray) -> dict:
    """Finish-time fairness ``rho = JCT / time alone`` (Themis' metric; time alone: the job's
    work on the GPUs it asked for at the reference speed, no queueing) and Jain's index of
    ``1 / rho`` (1: every job slowed down alike; 1/n: one job got everything)."""
    if len(jct) == 0:
        return {k: float("nan") for k in ("rho_mean", "rho_p50", "rho_p95", "rho_p99", "rho_max", "jain_index")}
    rho = jct / alone
    x = 1.0 / rho
    return {
        "rho_mean": float(rho.mean()), **dict(zip(("rho_p50", "rho_p95", "rho_p99"), _pcts(rho, [50, 95, 99]))),
        "rho_max": float(rho.max()), "jain_index": float(x.sum() ** 2 / (len(x) * (x * x).sum())),
    }


def offered_load(w, total_gpus: int) -> float:
    """The workload's GPU-seconds (durations at the reference speed × GPUs asked) over what
    ``total_gpus`` GPUs hold between its first and its last arrival; above 1 the queue grows for
    the whole run. NaN when that span is empty (fewer than two arrival times)."""
    load = w.offered_load(int(total_gpus))
    return float(load) if np.isfinite(load) else float("nan")


def _summary(w, cluster, tracked, finish, first_start, n_preempt, attained_gpu, t0, t_end, sim_s, compile_s,
             alone=None) -> dict:
    done = finish >= 0
    m = tracked & done
    jct = finish[m] - w.submit_s[m]
    queue = first_start[m] - w.submit_s[m]
    span = t_end - t0
    s = {
        "num_jobs": int(len(w)),
        "num_finished": int(done.sum()),
        "num_tracked": int(tracked.sum()),
        "avg_jct_s": float(jct.mean()) if len(jct) else float("nan"),
        **dict(zip(("p50_jct_s", "p95_jct_s", "p99_jct_s"), _pcts(jct, [50, 95, 99]))),
        "max_jct_s": float(jct.max()) if len(jct) else float("nan"),
        "avg_queue_s": float(queue.mean()) if len(queue) else float("nan"),
        "makespan_s": float(finish[done].max() - w.submit_s[done].min()) if done.any() else float("nan"),
        "utilisation": float(attained_gpu.sum() / (cluster.total_gpus * span)) if span > 0 else float("nan"),
        "num_preemptions": int(n_preempt.sum()),
        **fairness(jct, (w.duration_s if alone is None else alone)[m]),
        "total_gpus": int(cluster.total_gpus),
        "offered_load": offered_load(w, cluster.total_gpus),
        "end_s": float(t_end),
        "sim_wall_s": float(sim_s),
        "compile_s": float(compile_s),
    }
    if w.dropped:
        s["dropped_rows"] = {k: int(v) for k, v in w.dropped.items() if k != "resorted"}
        s["num_dropped_rows"] = int(sum(s["dropped_rows"].values()))
        if "resorted" in w.dropped:
            s["num_resorted_rows"] = int(w.dropped["resorted"])  # kept, only put in submit order
    return s


#: the per-job result columns of a native run (a user policy's state columns may not take these names)
JOB_COLUMNS = ("job_id", "submit_s", "num_gpus", "duration_s", "first_start_s", "finish_s", "jct_s", "queue_s", "rho",
               "gpu_type", "num_preemptions", "num_failures", "lost_s", "attained_s", "attained_gpu_s", "tracked")


def _jobs_table(w, first, finish, n_preempt, attained, attained_gpu, tracked, extra=None, more=None,
               alone=None) -> pl.DataFrame:
    """The per-job table (times in seconds, NaN where never reached)."""
    cols = {
        "job_id": w.job_id,
        "submit_s": w.submit_s,
        "num_gpus": w.num_gpus,
        "duration_s": w.duration_s,
        "first_start_s": _nan_where_unset(first),
        "finish_s": _nan_where_unset(finish),
        "jct_s": np.where(finish >= 0, finish - w.submit_s, np.nan),
        "queue_s": np.where(first >= 0, first - w.submit_s, np.nan),
        "rho": np.where(finish >= 0, finish - w.submit_s, np.nan) / (w.duration_s if alone is None else alone),
    }
    cols.update(extra or {})
    cols["num_preemptions"] = n_preempt
    cols.update(more or {})
    cols.update({"attained_s": attained, "attained_gpu_s": attained_gpu, "tracked": tracked.copy()})
    return JobColumns(cols)


class JobColumns(dict):
    """The per-job table as columns (name -> numpy array; ``gpu_type`` a list of str or None), in
    table order: what :attr:`Result.jobs` builds its polars DataFrame from, and what
    ``jobs.parquet`` is written from when polars is not imported."""

    STRINGS = ("gpu_type",)

    def to_polars(self) -> pl.DataFrame:
        import polars as pl

        return pl.DataFrame({k: pl.Series(k, v, dtype=pl.Utf8) if k in self.STRINGS else v for k, v in self.items()})

    def to_arrow(self) -> pa.Table:
        """The table polars' ``to_arrow`` gives for :meth:`to_polars` (strings as ``large_string``)."""
        import pyarrow as pa

        return pa.table({k: pa.array(v, type=pa.large_string()) if k in self.STRINGS else pa.array(v)
                         for k, v in self.items()})

    def write_parquet(self, path) -> None:
        """As polars' ``DataFrame.write_parquet`` (zstd), through pyarrow."""
        import pyarrow.parquet as pq

        pq.write_table(self.to_arrow(), str(path), compression="zstd")


def build_result(w, cluster, cfg, tracked, native_state=None, compat_out=None, sim_s=0.0, compile_s=0.0,
                 blox_policy=None, blox_admission=None) -> Result:
    if compat_out is not None:
        return _build_compat(w, cluster, cfg, tracked, compat_out, sim_s, compile_s, blox_policy, blox_admission)
    st = native_state

    r = st.run
    t_end = st.now
    # most per-job fields are strided views into the run's records: one compiled pass copies them out
    launch_t, attained, attained_gpu, held, finish, first, alone, ref_rate, n_pre, held_type = gather_records(
        st.rec, [("run", "launch_t"), ("run", "attained"), ("run", "attained_gpu"), ("run", "held"), ("run", "finish"),
                 ("run", "first_start"), ("jobs", "work"), ("jobs", "ref_rate"), ("run", "n_preempt"),
                 ("run", "held_type")])
    running = r.status == enums.RUNNING
    el = np.where(running, t_end - launch_t, 0.0)
    attained += el
    el *= held
    attained_gpu += el
    alone /= ref_rate  # work / reference rate: the job's run time alone
    del launch_t, held, el, ref_rate
    # the table reads the run's arrays when it is built (the run is over: they no longer change)
    n_fail, lost = r.n_fail, r.lost_s

    def jobs():
        extra = {}
        if len(cluster.gpu_types) > 1:
            # the GPU type of each job's last launch
            types = np.asarray(cluster.gpu_types, dtype=object)
            names = types[np.maximum(held_type, 0)]
            extra["gpu_type"] = [str(x) if h >= 0 else None for x, h in zip(names, held_type)]  # None: never launched
        more = {"num_failures": n_fail, "lost_s": lost}
        for c, _, _ in getattr(st.policy, "state", ()):  # a user policy's state columns, as it left them
            more[c] = st.pp.state[c].copy()
        return _jobs_table(w, first, finish, n_pre, attained, attained_gpu, tracked, extra, more=more, alone=alone)

    summ = _summary(w, cluster, tracked, finish, first, n_pre, attained_gpu, float(w.submit_s.min()), t_end,
                    sim_s, compile_s, alone)
    summ["num_steps"] = st.counter("steps")
    summ["num_failures"] = st.counter("failures")
    summ["lost_gpu_s"] = st.lost_gpu_s
    if st.counter("migrations"):
        summ["num_migrations"] = st.counter("migrations")
    if cfg.time_model == "rounds":
        summ["num_rounds"] = int(round(t_end / cfg.round_s))
    series = None
    if cfg.record_series:
        n = st.counter("series_rows")
        import polars as pl

        series = pl.DataFrame({c: st.series[:n, i] for i, c in enumerate(SERIES_COLUMNS)})
    return Result(jobs, summ, cfg.as_dict(), series)


def _build_compat(w, cluster, cfg, tracked, out, sim_s, compile_s, blox_policy, blox_admission) -> Result:
    code, n_rounds, t_end, finish, first_credit, first_launch, n_pre, attained, executed, prio, series = out
    n_rounds = int(n_rounds)
    attained_gpu = attained * w.num_gpus
    resp = {"responsiveness_s": np.where(first_credit >= 0, first_credit - w.submit_s, np.nan)}
    jobs = lambda: _jobs_table(w, first_launch, finish, n_pre, attained, attained_gpu, tracked, resp)  # noqa: E731
    summ = _summary(w, cluster, tracked, finish, first_launch, n_pre, attained_gpu, 0.0, float(t_end), sim_s, compile_s)
    m = tracked & (first_credit >= 0)
    summ["avg_responsiveness_s"] = float((first_credit[m] - w.submit_s[m]).mean()) if m.any() else float("nan")
    summ["num_rounds"] = n_rounds
    summ["num_steps"] = n_rounds
    series_df = None
    if cfg.record_series:
        import polars as pl

        series_df = pl.DataFrame({c: series[:, i] for i, c in enumerate(SERIES_COLUMNS[:6])})
        series_df = series_df.with_columns(pl.lit(float(cluster.total_gpus)).alias("gpus_up"))

    def build() -> dict:
        # Blox's five files. Its ids are its admission counter, i.e. arrival order, as here.
        ids = np.arange(len(w))
        tr = np.flatnonzero(tracked)
        lo, hi = (int(ids[tr].min()), int(ids[tr].max())) if cfg.track is None else cfg.track
        done_tr = tr[finish[tr] >= 0]
        # Blox logs completions as they happen: by round, then in admission order within a round
        by_finish = done_tr[np.lexsort((done_tr, finish[done_tr]))]
        job_stats = {str(int(j)): [_blox_num(w.submit_s[j]), _blox_num(finish[j])] for j in by_finish}
        cred = tr[first_credit[tr] >= 0]
        by_cred = cred[np.lexsort((cred, first_credit[cred]))]
        resp = {str(int(j)): [_blox_num(w.submit_s[j]), _blox_num(first_credit[j])] for j in by_cred}
        custom = {str(_blox_num(series[r, 0])): {"num_preemptions": int(series[r, 1])} for r in range(n_rounds)}
        last = series[n_rounds]
        # Blox keys its cluster stats by a clock that never advances: one entry, the final round's.
        cluster_stats = {"0": {"total_jobs": int(last[3] + last[4]), "jobs_in_queue": int(last[3]),
                               "jobs_running": int(last[4]), "free_gpus": int(last[2]), "gpu_demand": int(last[5])}}
        its = w.total_iters
        itt = w.blox_iter_time
        run_time = {
            str(int(j)): {
                "job_id": int(j),
                "job_arrival_time": _blox_num(w.submit_s[j]),
                "submit_time": _blox_num(w.submit_s[j]),
                "job_iteration_time": _blox_num(itt[j]),
                "job_total_iteration": float(its[j]),
                "job_executed_iteration": float(executed[j]),
                "job_gpu_demand": int(w.num_gpus[j]),
                "num_GPUs": int(w.num_gpus[j]),
                "tracked_metrics": {"per_iter_time": _blox_num(itt[j]), "attained_service": _blox_num(attained[j]), "job_exit": True},
                "time_since_scheduled": 0,
                "job_priority": int(prio[j]),
                "previously_launched": True,
                "is_running": True,
                "simulation": True,
            }
            for j in by_finish
        }
        return {"track": (lo, hi), "policy": blox_policy, "admission": blox_admission, "job_stats": job_stats,
                "responsiveness": resp, "custom_metrics": custom, "cluster_stats": cluster_stats, "run_time_stats": run_time}
    return Result(jobs, summ, cfg.as_dict(), series_df, build)
