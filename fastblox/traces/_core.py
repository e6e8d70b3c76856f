"""Shared machinery of the trace readers: file access, string-typed CSV parsing, and the one
bad-row pass every reader ends in.

Readers parse their format into :class:`RawJobs` (one entry per source row, NaN where a value is
missing or unparsable) and hand it to :func:`finish`, which applies the bad-row rules of
``docs/traces.md``: by default the first problem raises :class:`TraceError` naming the file, the
column, the first offending rows and the count; with ``on_bad_rows="drop"`` the rows are dropped
and counted per reason in ``Workload.dropped``. Nothing is dropped silently.
"""

from __future__ import annotations

import difflib
import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError, FastbloxError, TraceError
from ..workload import Workload

ON_BAD_ROWS = ("error", "drop")
SHOW_ROWS = 5  # offending rows quoted in an error message

# Reason keys of Workload.dropped (stable: users and tests match on them).
R_SUBMIT_NAN = "submit_time_s=NaN"
R_SUBMIT_NEG = "submit_time_s<0"
R_DUR_NAN = "duration_s=NaN"
R_DUR_NONPOS = "duration_s<=0"
R_GPU_NAN = "num_gpus=NaN"
R_GPU_NONPOS = "num_gpus<=0"
R_GPU_FRAC = "num_gpus not integer"
R_GPU_MAX = "num_gpus>max_gpus"
R_GPU_HUGE = "num_gpus>2^31"
MAX_GPUS_ANY = 2**31  # beyond any cluster; keeps int64 conversion exact
R_ID_NAN = "job_id=NaN"
R_ID_DUP = "duplicate job_id"
R_RESORTED = "resorted"


def parse_errors() -> tuple:
    """Exceptions the parsing libraries raise on malformed input (never our own bugs: TypeError,
    AttributeError, ... are not in the list). polars' PanicException derives from BaseException."""
    import polars as pl
    import pyarrow as pa

    return (pl.exceptions.PolarsError, pl.exceptions.PanicException, pa.ArrowException, ValueError,
            UnicodeError, OSError, EOFError, zlib.error)


# ---------------------------------------------------------------------------------------- options
def check_mode(on_bad_rows, max_gpus) -> None:
    if on_bad_rows not in ON_BAD_ROWS:
        raise ConfigError(f"on_bad_rows must be 'error' or 'drop', got {on_bad_rows!r}")
    if max_gpus is not None:
        if isinstance(max_gpus, bool) or not isinstance(max_gpus, (int, np.integer)) or max_gpus <= 0:
            raise ConfigError(f"max_gpus must be a positive whole number of GPUs, got {max_gpus!r}")


# ---------------------------------------------------------------------------------------- file access
def read_bytes(path) -> bytes:
    """The file's bytes, gunzipped when it starts with the gzip magic (whatever its name)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise TraceError("no such file", path=path) from None
    except IsADirectoryError:
        raise TraceError("is a directory, not a trace file", path=path) from None
    except OSError as e:
        raise TraceError(f"cannot read: {e.strerror or e}", path=path) from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise TraceError(f"not a readable gzip file ({e}); is it truncated?", path=path) from None
    return data


def head_text(data: bytes, n: int = 4096) -> str:
    return data[:n].decode("utf-8", errors="replace")


def first_line(data: bytes) -> str:
    return head_text(data).lstrip("\ufeff").splitlines()[0] if data.strip() else ""


def strip_bom(data: bytes) -> bytes:
    return data[3:] if data[:3] == b"\xef\xbb\xbf" else data


def read_csv_strings(path, data: bytes, *, separator: str = ",", has_header: bool = True,
                     new_columns=None, quote_char: str | None = '"', what: str = "CSV"):
    """Parse delimited text with every column as a string (typing happens per column later, so a
    bad value is a bad row, not a failed file).

    Returns ``(df, lines)``: the polars DataFrame and each row's 1-based line number in the file
    (the header is line 1). Blank lines (every field empty) hold no job and are skipped."""
    import polars as pl

    data = strip_bom(data)
    if not data.strip():
        raise TraceError(f"is empty (expected {what} text)", path=path)
    try:
        df = pl.read_csv(
            data, has_header=has_header, separator=separator, infer_schema=False, quote_char=quote_char,
            encoding="utf8-lossy", new_columns=new_columns,
            raise_if_empty=True,
        )
    except FastbloxError:
        raise
    except parse_errors() as e:  # polars/arrow parse errors: the file is not valid delimited text
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "more fields than" in msg:
            msg = "a line has more fields than the header"
        raise TraceError(f"cannot parse as {what}: {msg}", path=path) from None
    if new_columns is None:
        df = df.rename({c: c.strip().lstrip("\ufeff") for c in df.columns})
    lines = np.arange(df.height, dtype=np.int64) + (2 if has_header else 1)
    if df.height and df.width:
        blank = df.select(pl.all_horizontal(pl.all().is_null() | (pl.all().str.strip_chars() == ""))).to_series()
        if blank.any():
            keep = ~blank.to_numpy()
            df = df.filter(~blank)
            lines = lines[keep]
    return df, lines


def require_columns(path, df, required, fmt: str, alternatives: dict | None = None) -> dict:
    """Map each required canonical name to the file's column (first of its accepted spellings),
    or raise TraceError listing what is missing, what the file has, and near misses."""
    have = list(df.columns)
    lower = {c.lower(): c for c in have}
    found, missing = {}, []
    alternatives = alternatives or {}
    for name in required:
        for cand in (name, *alternatives.get(name, ())):
            if cand in df.columns:
                found[name] = cand
                break
            if cand.lower() in lower:
                found[name] = lower[cand.lower()]
                break
        else:
            missing.append(name)
    if missing:
        hints = []
        for m in missing:
            close = difflib.get_close_matches(m, have, n=1, cutoff=0.6)
            if close:
                hints.append(f"{close[0]!r} for {m!r}?")
        raise TraceError(
            f"missing column(s) {', '.join(map(repr, missing))} for format {fmt!r}; the file has "
            f"{', '.join(map(repr, have[:20]))}{' ...' if len(have) > 20 else ''}"
            + (f" (did you mean {' '.join(hints)})" if hints else "")
            + "; pass format= if this is another format",
            path=path,
        )
    return found


# ---------------------------------------------------------------------------------------- column typing
def num(series) -> np.ndarray:
    """float64 values of a string column; NaN where empty or not a number."""
    import polars as pl

    if series.dtype == pl.String:
        series = series.str.strip_chars().cast(pl.Float64, strict=False)
    else:
        series = series.cast(pl.Float64, strict=False)
    return series.fill_null(float("nan")).to_numpy().astype(np.float64, copy=False)


def _blank_to_null(series):
    import polars as pl

    s = series.cast(pl.String, strict=False).str.strip_chars()
    return pl.DataFrame({"x": s}).select(pl.when(pl.col("x") == "").then(None).otherwise(pl.col("x"))).to_series()


def text(series) -> np.ndarray:
    """object array of str (None where empty)."""
    return _blank_to_null(series).to_numpy().astype(object, copy=False)


def epoch_s(series, fmt: str | None = "%Y-%m-%d %H:%M:%S") -> np.ndarray:
    """Seconds since 1970 (no time zone applied) of a date-time string column; NaN where unparsable."""
    import polars as pl

    s = series.cast(pl.String, strict=False).str.strip_chars()
    parsed = s.str.strptime(pl.Datetime("us"), fmt, strict=False) if fmt else s.str.to_datetime(time_unit="us", strict=False)
    if fmt and parsed.null_count() == len(s) and s.null_count() < len(s):
        try:  # another spelling (ISO 'T', fractional seconds): let polars infer it
            parsed = s.str.to_datetime(time_unit="us", strict=False)
        except parse_errors():
            pass
    return (parsed.dt.epoch("us").cast(pl.Float64) / 1e6).fill_null(float("nan")).to_numpy().astype(np.float64, copy=False)


def auto_extra(series) -> np.ndarray:
    """An extra column: float64 when every non-empty value is a number, else strings."""
    import polars as pl

    s = series.cast(pl.String, strict=False).str.strip_chars()
    nonempty = s.is_not_null() & (s != "")
    f = s.cast(pl.Float64, strict=False)
    if int(nonempty.sum()) > 0 and int((nonempty & f.is_null()).sum()) == 0:
        return f.fill_null(float("nan")).to_numpy().astype(np.float64, copy=False)
    return text(series)


def job_ids(series):
    """(int64 ids or None, object source ids or None, missing mask or None).

    Whole-number ids are kept; any other id (``application_...``, ``openb-pod-0001``) becomes
    ``source_id`` and the job id becomes the 0-based row number in the file."""
    import polars as pl

    if series.dtype.is_integer() and series.null_count() == 0:  # typed input (Parquet): no text round trip
        return series.cast(pl.Int64).to_numpy(), None, None
    s = series if series.dtype.is_numeric() else _blank_to_null(series)
    present = s.is_not_null().to_numpy()
    npres = int(present.sum())
    if npres:
        ints = s.cast(pl.Int64, strict=False) if not s.dtype.is_float() else None  # floats: checked below
        if ints is not None and ints.null_count() == len(s) - npres:
            ids = ints.fill_null(0).to_numpy().astype(np.int64, copy=False)
            return ids, None, (~present if not present.all() else None)
        f = s.cast(pl.Float64, strict=False)
        if f.null_count() == len(s) - npres:
            fv = f.fill_null(0.0).to_numpy()
            if np.all(np.isfinite(fv)) and np.all(fv == np.round(fv)) and np.all(np.abs(fv) < 2**53):
                return fv.astype(np.int64), None, (~present if not present.all() else None)
    return None, s.to_numpy().astype(object, copy=False), None


# ---------------------------------------------------------------------------------------- the bad-row pass
@dataclass
class RawJobs:
    """One entry per source row, before validation. NaN marks a missing or unparsable number."""

    submit_s: np.ndarray
    duration_s: np.ndarray
    num_gpus: np.ndarray  # float64: NaN / fractions are checked here, not by the caller
    rows: np.ndarray  # int64 position of each row in the file (line number, job index, ...)
    row_label: str = "line"  # what `rows` counts, for messages ("line", "job")
    row_note: str = "line numbers count the header as line 1"
    job_id: np.ndarray | None = None  # int64; None -> 0-based row order
    job_id_missing: np.ndarray | None = None
    source_id: np.ndarray | None = None  # object ids kept as `source_id` (job_id = row order)
    iterations: np.ndarray | None = None
    iter_time_s: np.ndarray | None = None
    extra: dict = field(default_factory=dict)
    columns: dict = field(default_factory=dict)  # canonical -> column name in the file, for messages
    # format-specific problems, checked before the generic ones: (reason, mask, column, what)
    problems: list = field(default_factory=list)
    # filters the user asked for (always applied and counted, whatever on_bad_rows says): (reason, mask)
    filters: list = field(default_factory=list)
    origin_s: float | None = None  # absolute time of submit_s == 0 (seconds since 1970), when known


def _rows_text(rows: np.ndarray, label: str) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:SHOW_ROWS])
    more = f" and {len(rows) - SHOW_ROWS} more" if len(rows) > SHOW_ROWS else ""
    return f"{label}{'s' if len(rows) > 1 else ''} {shown}{more}"


def finish(raw: RawJobs, *, path, on_bad_rows: str = "error", max_gpus=None, name: str | None = None,
           fmt: str = "") -> Workload:
    """Validate ``raw`` and build the Workload (see the module docstring for the rules)."""
    check_mode(on_bad_rows, max_gpus)
    n = int(raw.submit_s.shape[0])
    submit = np.asarray(raw.submit_s, dtype=np.float64)
    dur = np.asarray(raw.duration_s, dtype=np.float64)
    gpus = np.asarray(raw.num_gpus, dtype=np.float64)
    rows = np.asarray(raw.rows, dtype=np.int64)
    col = lambda c: raw.columns.get(c, c)  # noqa: E731

    with np.errstate(invalid="ignore"):
        checks = list(raw.problems)
        if raw.job_id_missing is not None:
            checks.append((R_ID_NAN, raw.job_id_missing, col("job_id"), "is empty"))
        checks += [
            (R_SUBMIT_NAN, ~np.isfinite(submit), col("submit_time_s"), "is empty, NaN or not a number"),
            (R_SUBMIT_NEG, submit < 0, col("submit_time_s"), "is negative"),
            (R_DUR_NAN, ~np.isfinite(dur), col("duration_s"), "is empty, NaN or not a number (e.g. a censored job)"),
            (R_DUR_NONPOS, dur <= 0, col("duration_s"), "is zero or negative"),
            (R_GPU_NAN, ~np.isfinite(gpus), col("num_gpus"), "is empty, NaN or not a number"),
            (R_GPU_NONPOS, gpus <= 0, col("num_gpus"), "is zero or negative (a CPU-only job?)"),
            (R_GPU_FRAC, gpus != np.round(gpus), col("num_gpus"), "is not a whole number of GPUs"),
            (R_GPU_HUGE, gpus > MAX_GPUS_ANY, col("num_gpus"), "is more than 2^31 GPUs"),
        ]
        if max_gpus is not None:
            checks.append((R_GPU_MAX, gpus > max_gpus, col("num_gpus"), f"asks for more GPUs than the cluster's {max_gpus}"))

    alive = np.ones(n, dtype=bool)
    dropped: dict = {}
    where: dict = {}  # reason -> the first rows' numbers

    def drop(reason: str, hit: np.ndarray) -> None:
        dropped[reason] = dropped.get(reason, 0) + int(hit.sum())
        where[reason] = (where.get(reason, []) + [int(r) for r in rows[hit][:SHOW_ROWS]])[:SHOW_ROWS]

    failures = []  # (reason, hit mask, column, what)
    for reason, mask, column, what in checks:
        hit = np.asarray(mask, dtype=bool) & alive
        if hit.any():
            if on_bad_rows == "drop":
                drop(reason, hit)
            else:
                failures.append((reason, hit, column, what))
            alive &= ~hit
    if failures:
        _raise_bad(path, raw, failures)

    for reason, mask in raw.filters:
        hit = np.asarray(mask, dtype=bool) & alive
        if hit.any():
            drop(reason, hit)
            alive &= ~hit

    # duplicate ids among the rows still alive: the first occurrence stays
    key = raw.job_id if raw.job_id is not None else raw.source_id
    if key is not None and alive.any():
        idx = np.flatnonzero(alive)
        dup = _later_duplicates(key[idx])
        if dup.any():
            bad = np.zeros(n, dtype=bool)
            bad[idx[dup]] = True
            if on_bad_rows == "drop":
                drop(R_ID_DUP, bad)
                alive &= ~bad
            else:
                idcol = col("job_id") if raw.job_id is not None else raw.columns.get("source_id", col("job_id"))
                _raise_bad(path, raw, [(R_ID_DUP, bad, idcol, "repeats an id seen on an earlier row")])

    keep = np.flatnonzero(alive)
    s_keep = submit[keep]
    order = None
    if len(keep) > 1:
        late = s_keep[1:] < np.maximum.accumulate(s_keep)[:-1]
        if late.any():  # not bad data: kept, sorted stably and counted (in either mode)
            hit = np.zeros(n, dtype=bool)
            hit[keep[1:][late]] = True
            drop(R_RESORTED, hit)
            order = np.argsort(s_keep, kind="stable")
    if order is not None:
        keep = keep[order]

    if len(keep) == 0:
        what = ", ".join(f"{k}: {v}" for k, v in dropped.items())
        raise TraceError(f"no usable job rows ({n} row(s) read{'; dropped ' + what if what else ''})", path=path)

    ids = raw.job_id[keep] if raw.job_id is not None else keep.astype(np.int64)
    extra = {k: v[keep] for k, v in raw.extra.items() if v is not None}
    if raw.source_id is not None:
        extra["source_id"] = raw.source_id[keep]
    w = Workload.from_arrays(
        submit[keep], gpus[keep].astype(np.int64), duration_s=dur[keep], job_id=ids,
        iterations=None if raw.iterations is None else raw.iterations[keep],
        iter_time_s=None if raw.iter_time_s is None else raw.iter_time_s[keep],
        name=name or default_name(path), dropped=dropped,
        dropped_where={k: (v, raw.row_label, raw.row_note) for k, v in where.items()}, **extra,
    )
    return w


def _later_duplicates(key: np.ndarray) -> np.ndarray:
    """True where a value already occurred earlier in the array (missing values never repeat)."""
    if key.dtype.kind in "iuf":
        if len(key) < 2 or (key[1:] > key[:-1]).all():
            return np.zeros(len(key), dtype=bool)  # strictly increasing (NaN fails the test): no repeats
        _, first = np.unique(key, return_index=True)
        out = np.ones(len(key), dtype=bool)
        out[first] = False
        return out
    s = str_series(key)
    return (~s.is_first_distinct() & s.is_not_null()).to_numpy()


def str_series(values: np.ndarray):
    """A polars String Series of an object array (None/NaN -> null; other objects by their text)."""
    import polars as pl
    import pyarrow as pa

    try:
        return pl.from_arrow(pa.array(values, type=pa.string(), from_pandas=True))
    except (pa.ArrowException, TypeError, ValueError):
        return pl.Series([None if (v is None or (isinstance(v, float) and v != v)) else str(v) for v in values.tolist()],
                         dtype=pl.String)


def _raise_bad(path, raw: RawJobs, failures) -> None:
    reason, hit, column, what = failures[0]
    rows = raw.rows[np.flatnonzero(hit)]
    count = int(hit.sum())
    also = "; ".join(f"{int(h.sum())} row(s) {r!r}" for r, h, _, _ in failures[1:])
    raise TraceError(
        f"{count} row(s) where the value {what} ({_rows_text(rows, raw.row_label)}; {raw.row_note})"
        + (f"; also {also}" if also else "")
        + f". Pass on_bad_rows='drop' (--on-bad-rows drop) to drop such rows; they are counted per reason "
        f"in Workload.dropped (here {reason!r})",
        path=path, column=column,
    )


def default_name(path) -> str:
    p = Path(str(path))
    stem = p.name
    for suf in (".gz", ".csv", ".tsv", ".json", ".parquet", ".swf", ".trace", ".neutral", ".tiresias"):
        if stem.lower().endswith(suf):
            stem = stem[: -len(suf)]
    return f"{p.parent.name}/{stem}" if p.parent.name else stem


