"""Reader of the Alibaba PAI 2020 GPU trace (alibaba/clusterdata ``cluster-trace-gpu-v2020``).

The trace ships header-less CSVs; two of them describe jobs:

* ``pai_job_table.csv``: ``job_name,inst_id,user,status,start_time,end_time`` (start_time = submission);
* ``pai_task_table.csv``: ``job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,
  plan_gpu,gpu_type`` (a job has one or more tasks, each of ``inst_num`` instances; ``plan_gpu`` is
  percent of one GPU per instance, ``plan_cpu`` percent of one core, ``plan_mem`` GB).

Times are seconds (shifted by a constant by Alibaba; in UTC+8 they keep the time of day).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ConfigError, TraceError
from . import _core
from .csv_formats import FRACTIONAL, R_FRACTIONAL
from .registry import register_format

JOB_FIELDS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_FIELDS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time", "plan_cpu", "plan_mem",
               "plan_gpu", "gpu_type")
R_NO_TASK = "no task rows"


def _detect(path: Path, head: str) -> bool:
    n = path.name.lower()
    return n.startswith("pai_job_table") or n.startswith("pai_task_table")


def _read_table(path, fields, what):
    data = _core.read_bytes(path)
    first = _core.first_line(data).strip().lower()
    has_header = first.startswith("job_name,")
    df, lines = _core.read_csv_strings(path, data, has_header=has_header, what=what)
    if df.width != len(fields):
        raise TraceError(f"has {df.width} fields per line; {what} has {len(fields)} ({','.join(fields)})", path=path)
    df.columns = list(fields)
    return df, lines


def sibling_task_table(path) -> Path | None:
    p = Path(str(path))
    if "pai_job_table" not in p.name:
        return None
    name = p.name.replace("pai_job_table", "pai_task_table")
    for cand in (p.with_name(name), p.with_name(name + ".gz"), p.with_name(name.removesuffix(".gz"))):
        if cand.exists():
            return cand
    return None


@register_format(
    "pai-2020",
    description="Alibaba PAI 2020 (cluster-trace-gpu-v2020) header-less pai_job_table.csv + pai_task_table.csv "
                "(GPUs summed over tasks; fractional GPUs rounded up, share kept in gpu_fraction)",
    detect=_detect,
    self_contained=False,  # (the task table beside the job table)
    options={
        "task_table": "path of pai_task_table.csv (default: the file beside pai_job_table.csv)",
        "fractional": "'whole' (default: round a job's GPU request up to whole GPUs, share kept in gpu_fraction) "
                      "or 'drop' (drop jobs asking for a fraction, counted as 'fractional GPU')",
    },
)
def read_pai_2020(path, *, on_bad_rows="error", max_gpus=None, name=None, task_table=None, fractional="whole"):
    """Jobs of the PAI 2020 trace.

    * Give ``pai_job_table.csv`` (its ``pai_task_table.csv`` is found beside it, or pass
      ``task_table=``), or the task table alone.
    * GPUs: ``gpu_request`` = Σ over the job's tasks of inst_num × plan_gpu / 100 (kept as a column);
      fastblox allocates whole GPUs, so ``num_gpus`` = ⌈gpu_request⌉ and ``gpu_fraction`` =
      gpu_request / num_gpus (< 1 for jobs that share GPUs; ``fastblox trace inspect`` counts them).
      ``fractional="drop"`` drops those jobs instead (counted as ``'fractional GPU'``). A job asking
      for no GPU is CPU-only (a ``num_gpus<=0`` bad row).
    * ``submit_time_s`` = job start_time (submission) − the earliest one; ``duration_s`` = latest task
      end − earliest task start (queueing excluded). With the task table alone, submission is the
      earliest task start (no queueing is visible).
    * ``cpu_per_gpu`` = Σ inst_num × plan_cpu / 100 / num_gpus, ``mem_per_gpu_gb`` = Σ inst_num ×
      plan_mem / num_gpus, ``gpu_type`` = the type of the first task with GPUs, ``user``, ``status``,
      ``source_id`` = job_name, ``num_tasks``; ``job_id`` = 0-based line order of the job table.
    * A job with no task rows is a bad row (``'no task rows'``). Row numbers are job-table lines.
    """
    import polars as pl

    if fractional not in FRACTIONAL:
        raise ConfigError(f"fractional must be 'whole' or 'drop', got {fractional!r}")
    data = _core.read_bytes(path)
    nf = _core.first_line(data).count(",") + 1
    if nf == len(TASK_FIELDS) and task_table is None:
        tasks, _ = _read_table(path, TASK_FIELDS, "pai_task_table")
        jobs, job_path = None, path
        task_path = path
    else:
        jobs, job_lines = _read_table(path, JOB_FIELDS, "pai_job_table")
        job_path = path
        task_path = Path(str(task_table)) if task_table is not None else sibling_task_table(path)
        if task_path is None:
            raise TraceError("the job table lists no GPUs; pass task_table= (the pai_task_table.csv) or put it "
                             "beside the job table", path=path)
        tasks, _ = _read_table(task_path, TASK_FIELDS, "pai_task_table")

    t = tasks.select(
        pl.col("job_name").str.strip_chars(),
        pl.col("inst_num").str.strip_chars().cast(pl.Float64, strict=False).fill_null(0.0).alias("k"),
        pl.col("plan_gpu").str.strip_chars().cast(pl.Float64, strict=False).fill_null(0.0).alias("g"),
        pl.col("plan_cpu").str.strip_chars().cast(pl.Float64, strict=False).fill_null(0.0).alias("c"),
        pl.col("plan_mem").str.strip_chars().cast(pl.Float64, strict=False).fill_null(0.0).alias("m"),
        pl.col("start_time").str.strip_chars().cast(pl.Float64, strict=False).alias("t0"),
        pl.col("end_time").str.strip_chars().cast(pl.Float64, strict=False).alias("t1"),
        pl.col("gpu_type").str.strip_chars(),
        pl.col("status").str.strip_chars().alias("task_status"),
    ).with_columns((pl.col("k") * pl.col("g") / 100.0).alias("gk"))
    per_job = t.group_by("job_name", maintain_order=True).agg(
        pl.col("gk").sum().alias("gpu_request"),
        (pl.col("k") * pl.col("c") / 100.0).sum().alias("cpu"),
        (pl.col("k") * pl.col("m")).sum().alias("mem"),
        pl.col("t0").min().alias("t0"),
        pl.col("t1").max().alias("t1"),
        pl.col("gpu_type").filter(pl.col("gk") > 0).first().alias("gpu_type"),
        pl.col("task_status").first().alias("task_status"),
        pl.len().alias("num_tasks"),
    )
    if jobs is None:
        j = per_job.with_columns(pl.col("t0").alias("submit"), pl.lit(None, dtype=pl.String).alias("user"),
                                 pl.col("task_status").alias("status"), pl.lit(True).alias("_has_task"))
        nrows = j.height
        rows = np.arange(1, nrows + 1, dtype=np.int64)
        row_label, row_note = "job", "jobs are numbered from 1 in order of first appearance in the task table"
    else:
        j = jobs.select(
            pl.col("job_name").str.strip_chars(),
            pl.col("user").str.strip_chars(),
            pl.col("status").str.strip_chars(),
            pl.col("start_time").str.strip_chars().cast(pl.Float64, strict=False).alias("submit"),
        ).join(per_job.with_columns(pl.lit(True).alias("_has_task")), on="job_name", how="left", maintain_order="left")
        nrows = j.height
        rows = job_lines
        row_label, row_note = "line", "line numbers of the job table"


    submit = j["submit"].fill_null(float("nan")).to_numpy().astype(np.float64)
    finite = np.isfinite(submit)
    origin = float(submit[finite].min()) if finite.any() else 0.0
    req = j["gpu_request"].fill_null(float("nan")).to_numpy().astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        gpus = np.where(req > 0, np.ceil(req - 1e-9), np.where(np.isfinite(req), 0.0, np.nan))
        frac = np.where(gpus > 0, req / gpus, np.nan)
        dur = (j["t1"].fill_null(float("nan")).to_numpy() - j["t0"].fill_null(float("nan")).to_numpy()).astype(np.float64)
        has_task = j["_has_task"].fill_null(False).to_numpy().astype(bool)
        raw = _core.RawJobs(
            submit_s=submit - origin, duration_s=dur, num_gpus=np.where(has_task, gpus, 1.0), rows=rows,
            row_label=row_label, row_note=row_note, source_id=_core.text(j["job_name"]),
            columns={"submit_time_s": "start_time (job table)", "duration_s": "task end_time - start_time",
                     "num_gpus": "inst_num*plan_gpu/100", "source_id": "job_name"},
            origin_s=origin,
        )
        raw.problems.append((R_NO_TASK, finite & ~has_task, "job_name", f"has no rows in {Path(str(task_path)).name}"))
        raw.extra["gpu_request"] = req
        raw.extra["gpu_fraction"] = frac
        raw.extra["cpu_per_gpu"] = np.where(gpus > 0, j["cpu"].fill_null(float("nan")).to_numpy() / gpus, np.nan)
        raw.extra["mem_per_gpu_gb"] = np.where(gpus > 0, j["mem"].fill_null(float("nan")).to_numpy() / gpus, np.nan)
    raw.extra["gpu_type"] = _core.text(j["gpu_type"])
    raw.extra["user"] = _core.text(j["user"])
    raw.extra["status"] = _core.text(j["status"])
    raw.extra["num_tasks"] = j["num_tasks"].cast(pl.Float64).fill_null(0.0).to_numpy()
    if fractional == "drop":
        with np.errstate(invalid="ignore"):
            raw.filters.append((R_FRACTIONAL, frac < 1.0 - 1e-9))
    return _core.finish(raw, path=job_path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="pai-2020")
