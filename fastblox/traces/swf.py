"""Reader of the Standard Workload Format (SWF) of the Parallel Workloads Archive (HPC job logs).

One job per line, 18 whitespace-separated numeric fields; lines starting with ``;`` are header
comments; ``-1`` means "unknown". The fields: 1 job number, 2 submit time (s), 3 wait time (s),
4 run time (s), 5 allocated processors, 6 average CPU time, 7 used memory, 8 requested processors,
9 requested time, 10 requested memory, 11 status (1 completed, 0 failed, 5 cancelled), 12 user id,
13 group id, 14 executable, 15 queue, 16 partition, 17 preceding job, 18 think time.

SWF counts *processors*, fastblox *GPUs*: ``num_gpus`` = ⌈processors / procs_per_gpu⌉ with
``procs_per_gpu=1`` by default (a processor is a GPU: right for logs of GPU clusters written as
SWF); for a CPU log choose how many processors stand for one GPU. ``procs="allocated"`` (default)
uses field 5 and falls back to field 8 where field 5 is -1; ``procs="requested"`` uses field 8.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from . import _core
from .registry import register_format

NFIELDS = 18
R_MALFORMED = "malformed line"
STATUS = {1.0: "completed", 0.0: "failed", 5.0: "cancelled", 2.0: "partial", 3.0: "partial-last", 4.0: "partial-failed"}
_START = re.compile(r"^;\s*UnixStartTime:\s*(-?\d+(?:\.\d*)?)", re.IGNORECASE)


def _detect(path: Path, head: str) -> bool:
    n = path.name.lower()
    return n.endswith((".swf", ".swf.gz")) or head.lstrip().startswith(";")


@register_format(
    "swf",
    description="Standard Workload Format (HPC logs): 18 whitespace-separated fields, ';' comments; "
                "num_gpus = ceil(processors / procs_per_gpu)",
    detect=_detect,
    options={
        "procs_per_gpu": "processors that make one GPU (default 1: a processor is a GPU)",
        "procs": "'allocated' (field 5, default; falls back to field 8) or 'requested' (field 8)",
    },
)
def read_swf(path, *, on_bad_rows="error", max_gpus=None, name=None, procs_per_gpu=1, procs="allocated"):
    """SWF -> Workload: ``job_id`` = field 1, ``submit_time_s`` = field 2, ``duration_s`` = field 4
    (run time), ``num_gpus`` from the processors (see the module docstring), ``queue_s`` = field 3,
    ``status`` (completed/failed/cancelled/...), ``user`` = field 12, ``queue`` = field 15,
    ``partition`` = field 16. A line that does not hold 18 numbers is a bad row (``'malformed
    line'``). Row numbers in messages are file line numbers (comments included)."""
    import polars as pl

    try:
        ppg = float(procs_per_gpu)
    except (TypeError, ValueError):
        ppg = float("nan")
    if not (ppg > 0 and np.isfinite(ppg)):
        raise ConfigError(f"procs_per_gpu must be a positive number, got {procs_per_gpu!r}")
    if procs not in ("allocated", "requested"):
        raise ConfigError(f"procs must be 'allocated' or 'requested', got {procs!r}")
    data = _core.read_bytes(path)
    df, line_no = _core.read_csv_strings(path, data, separator="\x1f", has_header=False, quote_char=None,
                                         what="SWF text")
    lines = df.to_series(0)
    s = lines.str.strip_chars()
    is_comment = s.str.starts_with(";").fill_null(False)
    is_blank = (s.is_null() | (s == "")).fill_null(True)
    job_line = (~is_comment & ~is_blank).to_numpy()
    origin = None
    for c in s.filter(is_comment).head(200).to_list():
        m = _START.match(c or "")
        if m:
            origin = float(m.group(1))
            break
    body = s.filter(pl.Series(job_line))
    rows = line_no[job_line]
    fields = body.str.extract_all(r"\S+")
    nf = fields.list.len().fill_null(0).to_numpy()
    vals = np.full((len(body), NFIELDS), np.nan)
    for i in range(NFIELDS):  # 18 columns, each vectorized over all jobs
        vals[:, i] = _core.num(fields.list.get(i, null_on_oob=True))
    malformed = (nf != NFIELDS) | ~np.isfinite(vals).all(axis=1)
    unknown = vals == -1
    v = np.where(unknown, np.nan, vals)

    alloc, req = v[:, 4], v[:, 7]
    p = req if procs == "requested" else np.where(np.isnan(alloc), req, alloc)
    with np.errstate(invalid="ignore"):
        gpus = np.ceil(p / ppg - 1e-9)
    ids = vals[:, 0]
    id_ok = np.isfinite(ids) & (ids == np.round(ids)) & (np.abs(ids) < 2**53)
    raw = _core.RawJobs(
        submit_s=v[:, 1], duration_s=v[:, 3], num_gpus=gpus, rows=rows,
        row_note="line numbers count every line of the file from 1, comments included",
        job_id=np.where(id_ok, ids, 0).astype(np.int64),
        columns={"job_id": "field 1 (job number)", "submit_time_s": "field 2 (submit time)",
                 "duration_s": "field 4 (run time)",
                 "num_gpus": "field 8 (requested processors)" if procs == "requested" else "field 5 (allocated processors)"},
        origin_s=origin,
    )
    raw.problems.append((R_MALFORMED, malformed, "line", f"does not hold {NFIELDS} numbers"))
    raw.problems.append(("job_id=NaN", ~id_ok, "field 1 (job number)", "is not a whole number"))
    raw.extra["queue_s"] = v[:, 2]
    codes = pl.Series("st", vals[:, 10]).fill_nan(None)
    named = codes.replace_strict(STATUS, default=None, return_dtype=pl.String)
    other = codes.cast(pl.Int64, strict=False).cast(pl.String)
    raw.extra["status"] = _core.text(named.fill_null(other).set(codes == -1, None) if len(codes) else named)
    users = pl.Series("u", v[:, 11]).fill_nan(None).cast(pl.Int64, strict=False).cast(pl.String)
    raw.extra["user"] = _core.text(users)
    raw.extra["queue"] = v[:, 14]
    raw.extra["partition"] = v[:, 15]
    raw.extra["processors"] = p
    return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="swf")
