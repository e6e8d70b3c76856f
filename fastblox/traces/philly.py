"""Reader of Microsoft Philly's raw ``cluster_job_log`` JSON (msr-fiddle/philly-traces).

The file is one JSON list of jobs::

    {"jobid": "application_...", "user": "...", "vc": "...", "status": "Pass|Killed|Failed",
     "submitted_time": "YYYY-MM-DD HH:MM:SS",
     "attempts": [{"start_time": "...", "end_time": "...", "detail": [{"ip": "m1", "gpus": ["gpu0", ...]}]}]}

Also accepted: the flattened layout of the DRE sample (``start_time``, ``end_time`` and ``detail``
at the top level of each job, no ``attempts``), read as a job with one attempt.

Parsing is vectorized (polars reads the nested JSON; attempts are exploded and aggregated).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError, FastbloxError, TraceError
from . import _core
from .registry import register_format

DURATIONS = ("sum", "last", "span")
BLOX_MIN_S = math.pow(10, 1.5) * 60  # Blox's Gavel-like window: 10^1.5 min < duration < 10^4 min
BLOX_MAX_S = math.pow(10, 4) * 60
R_NO_ATTEMPT = "no valid attempt"
R_BLOX = "blox duration filter"
TIME_FMT = "%Y-%m-%d %H:%M:%S"


def _schema():
    import polars as pl

    detail = pl.List(pl.Struct({"ip": pl.String, "gpus": pl.List(pl.String)}))
    return {
        "jobid": pl.String, "user": pl.String, "vc": pl.String, "status": pl.String, "submitted_time": pl.String,
        "attempts": pl.List(pl.Struct({"start_time": pl.String, "end_time": pl.String, "detail": detail})),
        "start_time": pl.String, "end_time": pl.String, "detail": detail,
    }


def _detect(path, head: str) -> bool:
    n = path.name.lower()
    return (n.endswith(".json") or n.endswith(".json.gz")) or (head.lstrip().startswith("[") and '"jobid"' in head)


@register_format(
    "philly-log",
    description="Microsoft Philly raw cluster_job_log JSON (jobid,user,vc,status,submitted_time,attempts[...]); "
                "also the flattened DRE sample layout",
    detect=_detect,
    options={
        "duration": "'sum' of the attempts' run times (default, as Blox), 'last' attempt only, or 'span' "
                    "(first start -> last end, as RFold)",
        "blox_filter": "keep only Blox's window 10^1.5 min < duration < 10^4 min (dropped rows counted as "
                       "'blox duration filter'); default False",
    },
)
def read_philly_log(path, *, on_bad_rows="error", max_gpus=None, name=None, duration="sum", blox_filter=False):
    """Read ``cluster_job_log``.

    * ``submit_time_s`` = submitted_time − the earliest submitted_time in the file (no time zone).
    * An attempt counts when both its times parse (Philly writes ``None`` for unknown ones), it ends
      after it starts and its ``detail`` lists at least one GPU. A job with no such attempt is a bad
      row (``'no valid attempt'``).
    * ``duration_s``: ``duration="sum"`` (default, Blox's ``sum_attempts=True``) sums the counted
      attempts' end − start; ``"last"`` takes the last counted attempt; ``"span"`` takes the first
      counted start → last counted end (RFold's ``philly_trace.csv``).
    * ``num_gpus`` = GPUs listed in the last counted attempt's ``detail`` (summed over machines).
    * ``blox_filter=True`` keeps only 10^1.5·60 s < duration_s < 10^4·60 s, as Blox's
      ``parse_philly_trace_full.py`` does; the rest are counted as ``'blox duration filter'``.
    * Kept columns: ``user``, ``vc``, ``status``, ``source_id`` (= jobid; ``job_id`` is the 0-based
      position in the list), ``queue_s`` (first counted start − submit), ``num_attempts`` (counted
      attempts) and ``num_machines`` (machines of the last counted attempt).
    * Row numbers in messages are 1-based positions in the JSON list.
    """
    import polars as pl

    if duration not in DURATIONS:
        raise ConfigError(f"duration must be one of {', '.join(DURATIONS)}, got {duration!r}")
    if not isinstance(blox_filter, (bool, np.bool_)):
        raise ConfigError(f"blox_filter must be True or False, got {blox_filter!r}")
    data = _core.strip_bom(_core.read_bytes(path))
    if not data.lstrip().startswith(b"["):
        raise TraceError("is not a JSON list of jobs (a Philly cluster_job_log starts with '[')", path=path)
    try:
        jobs = pl.read_json(data, schema=_schema())
    except FastbloxError:
        raise
    except _core.parse_errors() as e:  # malformed JSON or values of the wrong shape
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TraceError(f"cannot read as a Philly cluster_job_log JSON list: {msg}", path=path) from None
    n = jobs.height
    if n == 0:
        raise TraceError("holds an empty job list", path=path)
    try:
        agg = _attempts(jobs, duration)
    except FastbloxError:
        raise
    except _core.parse_errors() as e:  # a shape polars cannot aggregate (should not happen with the fixed schema)
        raise TraceError(f"cannot read the attempts: {str(e).splitlines()[0]}", path=path) from None

    submitted = _core.epoch_s(jobs["submitted_time"], TIME_FMT)
    origin = float(np.nanmin(submitted)) if np.isfinite(submitted).any() else 0.0
    dur = agg["duration_s"]
    has_attempt = np.isfinite(dur)
    raw = _core.RawJobs(
        submit_s=submitted - origin,
        duration_s=dur,
        num_gpus=np.where(has_attempt, agg["num_gpus"], 1.0),  # no-attempt jobs are reported as such, not as 0 GPUs
        rows=np.arange(1, n + 1, dtype=np.int64), row_label="job", row_note="jobs are numbered from 1 in the JSON list",
        source_id=_core.text(jobs["jobid"]),
        columns={"submit_time_s": "submitted_time", "duration_s": "attempts", "num_gpus": "attempts.detail.gpus",
                 "source_id": "jobid"},
        origin_s=origin,
    )
    # a missing submit time is reported as such; a job without a counted attempt as 'no valid attempt'
    raw.problems.append((R_NO_ATTEMPT, np.isfinite(submitted) & ~has_attempt, "attempts",
                         "has no attempt with a start, a later end and at least one GPU"))
    for c in ("user", "vc", "status"):
        raw.extra[c] = _core.text(jobs[c])
    raw.extra["queue_s"] = agg["first_start"] - submitted
    raw.extra["num_attempts"] = agg["num_attempts"]
    raw.extra["num_machines"] = agg["num_machines"]
    if blox_filter:
        with np.errstate(invalid="ignore"):
            raw.filters.append((R_BLOX, ~((dur > BLOX_MIN_S) & (dur < BLOX_MAX_S))))
    return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="philly-log")


def _attempts(jobs, duration: str) -> dict:
    """Per-job aggregates over the counted attempts (NaN where a job has none)."""
    import polars as pl

    n = jobs.height
    flat = pl.struct(pl.col("start_time"), pl.col("end_time"), pl.col("detail"))
    att = (
        jobs.lazy()
        .with_row_index("_job")
        .select(
            "_job",
            pl.when(pl.col("attempts").is_null()).then(pl.concat_list(flat)).otherwise(pl.col("attempts")).alias("a"),
        )
        .explode("a")
        .filter(pl.col("a").is_not_null())
        .unnest("a")
        .with_columns(
            pl.col("start_time").str.strip_chars().str.strptime(pl.Datetime("us"), TIME_FMT, strict=False).alias("t0"),
            pl.col("end_time").str.strip_chars().str.strptime(pl.Datetime("us"), TIME_FMT, strict=False).alias("t1"),
            pl.col("detail").list.eval(pl.element().struct.field("gpus").list.len()).list.sum().fill_null(0).alias("g"),
            pl.col("detail").list.len().fill_null(0).alias("m"),
        )
        .with_columns(((pl.col("t1") - pl.col("t0")).dt.total_microseconds().cast(pl.Float64) / 1e6).alias("d"))
        .filter(pl.col("t0").is_not_null() & pl.col("t1").is_not_null() & (pl.col("d") > 0) & (pl.col("g") > 0))
        .group_by("_job", maintain_order=True)
        .agg(
            pl.col("d").sum().alias("sum"),
            pl.col("d").last().alias("last"),
            ((pl.col("t1").max() - pl.col("t0").min()).dt.total_microseconds().cast(pl.Float64) / 1e6).alias("span"),
            (pl.col("t0").min().dt.epoch("us").cast(pl.Float64) / 1e6).alias("first_start"),
            pl.col("g").last().cast(pl.Float64).alias("num_gpus"),
            pl.col("m").last().cast(pl.Float64).alias("num_machines"),
            pl.len().cast(pl.Float64).alias("num_attempts"),
        )
        .collect()
    )
    idx = att["_job"].to_numpy().astype(np.int64)
    out = {}
    for key, src in (("duration_s", duration), ("first_start", "first_start"), ("num_gpus", "num_gpus"),
                     ("num_machines", "num_machines"), ("num_attempts", "num_attempts")):
        v = np.full(n, np.nan)
        v[idx] = att[src].fill_null(float("nan")).to_numpy()
        out[key] = v
    out["num_attempts"] = np.where(np.isnan(out["num_attempts"]), 0.0, out["num_attempts"])
    return out
