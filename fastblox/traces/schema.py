"""The canonical job table, as an Arrow schema, and its Parquet reader and writer.

Every trace reader produces a :class:`~fastblox.workload.Workload`; on disk (Parquet) and in Arrow
that workload is one row per job with these columns:

==================  ========  ==========================================================================
column              type      meaning
==================  ========  ==========================================================================
job_id              int64     job id, unique (ids that were not whole numbers are in ``source_id``)
submit_time_s       float64   submit time, seconds from the trace's origin (≥ 0, sorted ascending)
duration_s          float64   run time in seconds at the reference speed on ``num_gpus`` GPUs (> 0)
num_gpus            int64     whole GPUs the job asks for (≥ 1)
------------------  --------  --------------------------------------------------------------------------
iterations          float64   optional: total iterations / steps (NaN = unknown)
iter_time_s         float64   optional: seconds per iteration (NaN = unknown; fastblox extension)
model               string    optional: model / application / job type
user                string    optional: (hashed) user
vc                  string    optional: virtual cluster / queue
status              string    optional: final status in the source (Pass, Failed, COMPLETED, Running...)
gpu_type            string    optional: GPU model asked for or used ('|'-separated when several allowed)
cpu_per_gpu         float64   optional: CPU cores requested per GPU
mem_per_gpu_gb      float64   optional: host memory requested per GPU, GB
==================  ========  ==========================================================================

The first four are required. Optional columns appear only when the workload has them. Any other
``Workload.extra`` column (``source_id``, ``queue_s``, ``gpu_fraction``, ...) follows with its own
type (float64/int64/bool, or string). The table's metadata holds the workload name
(``fastblox.name``) and the per-reason counts of rows dropped while reading (``fastblox.dropped``,
JSON), so a Parquet round trip keeps both.

In memory, ``Workload.submit_s`` is the ``submit_time_s`` column and the optional columns live in
``Workload.extra``.
"""

from __future__ import annotations

import functools
import json

import numpy as np

from ..errors import FastbloxError, TraceError
from ..workload import Workload
from . import _core

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: imported lazily where used
    import pyarrow as pa

REQUIRED = ("job_id", "submit_time_s", "duration_s", "num_gpus")
# the optional columns and their Arrow types, by name: pyarrow is imported only where a table is
# built or read (``SCHEMA`` and ``OPTIONAL_TYPES`` are built on first use, by ``__getattr__``)
_OPTIONAL_KINDS = {
    "iterations": "float64",
    "iter_time_s": "float64",
    "model": "string",
    "user": "string",
    "vc": "string",
    "status": "string",
    "gpu_type": "string",
    "cpu_per_gpu": "float64",
    "mem_per_gpu_gb": "float64",
}
OPTIONAL = tuple(_OPTIONAL_KINDS)


@functools.cache
def _arrow_schema() -> tuple:
    """``(SCHEMA, OPTIONAL_TYPES)``: the canonical Arrow schema and the optional columns' types."""
    import pyarrow as pa

    optional = {k: getattr(pa, kind)() for k, kind in _OPTIONAL_KINDS.items()}
    schema = pa.schema(
        [pa.field("job_id", pa.int64(), nullable=False), pa.field("submit_time_s", pa.float64(), nullable=False),
         pa.field("duration_s", pa.float64(), nullable=False), pa.field("num_gpus", pa.int64(), nullable=False)]
        + [pa.field(k, t) for k, t in optional.items()]
    )
    return schema, optional


def __getattr__(name: str):
    if name == "SCHEMA":
        return _arrow_schema()[0]
    if name == "OPTIONAL_TYPES":
        return _arrow_schema()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


META_NAME = b"fastblox.name"
META_DROPPED = b"fastblox.dropped"
META_VERSION = b"fastblox.schema"


def _arrow_array(v: np.ndarray, typ=None) -> pa.Array:
    import pyarrow as pa

    if v.dtype == object or v.dtype.kind in "USOT":
        try:  # None and NaN become nulls
            arr = pa.array(v, type=pa.string(), from_pandas=True)
        except (pa.ArrowException, TypeError, ValueError):  # mixed objects: their text
            arr = pa.array([None if (x is None or (isinstance(x, float) and x != x)) else str(x) for x in v.tolist()],
                           type=pa.string())
    else:
        arr = pa.array(v)
    if typ is not None and arr.type != typ:
        arr = arr.cast(typ, safe=False)
    return arr


def to_arrow(workload: Workload) -> pa.Table:
    """The workload as an Arrow table in the canonical schema (see the module docstring)."""
    import pyarrow as pa

    SCHEMA, OPTIONAL_TYPES = _arrow_schema()
    w = workload
    cols = {
        "job_id": pa.array(np.asarray(w.job_id, dtype=np.int64)),
        "submit_time_s": pa.array(np.asarray(w.submit_s, dtype=np.float64)),
        "duration_s": pa.array(np.asarray(w.duration_s, dtype=np.float64)),
        "num_gpus": pa.array(np.asarray(w.num_gpus, dtype=np.int64)),
    }
    fields = [SCHEMA.field(k) for k in REQUIRED]
    for k in ("iterations", "iter_time_s"):
        v = getattr(w, k)
        if len(v) and np.isfinite(v).any():
            cols[k] = pa.array(np.asarray(v, dtype=np.float64))
            fields.append(SCHEMA.field(k))
    for k in OPTIONAL[2:]:
        if k in w.extra:
            cols[k] = _arrow_array(np.asarray(w.extra[k]), OPTIONAL_TYPES[k])
            fields.append(SCHEMA.field(k))
    for k, v in w.extra.items():
        if k in cols:
            continue
        arr = _arrow_array(np.asarray(v))
        cols[k] = arr
        fields.append(pa.field(k, arr.type))
    meta = {
        META_NAME: str(w.name).encode(),
        META_DROPPED: json.dumps({str(k): int(v) for k, v in w.dropped.items()}).encode(),
        META_VERSION: b"1",
    }
    return pa.Table.from_arrays(list(cols.values()), schema=pa.schema(fields, metadata=meta))


def write_parquet(workload: Workload, path) -> None:
    """Write the workload as Parquet (zstd) in the canonical schema."""
    import pyarrow.parquet as pq

    try:
        pq.write_table(to_arrow(workload), str(path), compression="zstd")
    except OSError as e:
        raise TraceError(f"cannot write Parquet: {e}", path=path) from None


def read_parquet(path, on_bad_rows: str = "error", max_gpus=None, name: str | None = None) -> Workload:
    """Read a Parquet file with the canonical columns into a Workload.

    The same bad-row rules as every reader apply (``docs/traces.md``); row numbers in messages are
    1-based data rows. Counts of rows dropped when the file was written are kept and added to."""
    import polars as pl
    import pyarrow.parquet as pq

    _core.check_mode(on_bad_rows, max_gpus)
    try:
        table = pq.read_table(str(path))
    except FileNotFoundError:
        raise TraceError("no such file", path=path) from None
    except FastbloxError:
        raise
    except _core.parse_errors() as e:  # pyarrow: not Parquet, truncated, bad footer
        raise TraceError(f"cannot read as Parquet: {str(e).splitlines()[0] if str(e) else type(e).__name__}",
                         path=path) from None
    meta = table.schema.metadata or {}
    try:
        prior = {str(k): int(v) for k, v in json.loads(meta.get(META_DROPPED, b"{}").decode()).items()}
    except (ValueError, TypeError, AttributeError, UnicodeDecodeError):
        prior = {}
    stored_name = meta.get(META_NAME, b"").decode("utf-8", "replace") or None
    try:
        df = pl.from_arrow(table)
    except _core.parse_errors() as e:
        raise TraceError(f"cannot convert the Parquet table: {e}", path=path) from None
    if not isinstance(df, pl.DataFrame):
        raise TraceError("cannot read as a table", path=path)
    raw = frame_to_raw(path, df, fmt="parquet", row_label="data row", row_note="data rows are 1-based",
                       rows=np.arange(1, df.height + 1, dtype=np.int64))
    w = _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name or stored_name, fmt="parquet")
    if prior:
        merged = dict(prior)
        for k, v in w.dropped.items():
            merged[k] = merged.get(k, 0) + v
        w.dropped.clear()
        w.dropped.update(merged)
    return w


def frame_to_raw(path, df, *, fmt: str, rows: np.ndarray, row_label: str = "line",
                 row_note: str = "line numbers count the header as line 1"):
    """A DataFrame with the canonical column names (normalized CSV, Parquet) -> RawJobs.

    The four required columns must be there; every other column becomes an extra (canonical
    optional columns get their canonical types)."""
    import polars as pl

    from . import _core

    found = _core.require_columns(path, df, REQUIRED, fmt, alternatives={"submit_time_s": ("submit_s",)})
    ids, source, missing = _core.job_ids(df[found["job_id"]])
    raw = _core.RawJobs(
        submit_s=_core.num(df[found["submit_time_s"]]),
        duration_s=_core.num(df[found["duration_s"]]),
        num_gpus=_core.num(df[found["num_gpus"]]),
        rows=rows, row_label=row_label, row_note=row_note,
        job_id=ids, job_id_missing=missing, source_id=source,
        columns={k: v for k, v in found.items()},
    )
    used = set(found.values())
    for c in df.columns:
        if c in used:
            continue
        s = df[c]
        key = c.lower() if c.lower() in _OPTIONAL_KINDS else c
        if key in ("source_id",) and source is not None:
            key = "source_id_file"
        if key in _OPTIONAL_KINDS:
            v = _core.num(s) if _OPTIONAL_KINDS[key] == "float64" else _core.text(s)
        elif s.dtype == pl.String:
            v = _core.auto_extra(s)
        elif s.dtype.is_numeric() or s.dtype == pl.Boolean:
            v = s.to_numpy()
            if v.dtype == object:  # integers with nulls
                v = s.cast(pl.Float64).fill_null(float("nan")).to_numpy()
        else:
            v = _core.text(s.cast(pl.String, strict=False))
        if key == "iterations":
            raw.iterations = v
        elif key == "iter_time_s":
            raw.iter_time_s = v
        else:
            raw.extra[key] = v
    return raw
