"""Reader of Gavel's job trace (stanford-futuredata/gavel ``*.trace``).

One job per line, 10 tab-separated fields, no header::

    job_type  command  working_dir  num_steps_arg  needs_data_dir  total_steps  scale_factor
    priority_weight  SLO  arrival_time

``num_gpus`` = scale_factor, ``iterations`` = total_steps, ``model`` = job_type, ``submit_time_s`` =
arrival_time. A Gavel trace has no run time: Gavel derives it from a throughput table (steps per
second per job type, GPU count and GPU type). The reader therefore needs one of, in this order:

1. ``steps_per_s=``: ``"builtin"`` (Gavel's published throughputs bundled with fastblox,
   :meth:`fastblox.throughput.ThroughputTable.builtin`), a :class:`~fastblox.throughput.ThroughputTable`
   or the path of a throughput CSV (``*.csv[.gz]``, :meth:`ThroughputTable.read`), which must have a
   measurement for each (job_type, scale_factor) as Gavel does (no interpolated run times); or a
   dict or JSON file, either
   ``{job_type: steps/s}``, ``{job_type: {scale_factor: steps/s}}``, or Gavel's own throughput file
   (``{worker_type: {"('job_type', scale)": {"null": steps/s, ...}}}``, e.g. ``oracle_throughputs.json``).
   ``worker_type=`` (default ``"v100"``) picks the GPU type of a table or Gavel file. Throughputs are
   whole-gang steps/s on scale_factor GPUs, so ``duration_s`` = total_steps / steps/s (as Gavel's
   ``generate_trace.py`` and simulator use them);
2. ``neutral=``: the matching neutral CSV (``job_id,submit_time,num_gpu,duration,job_type,total_steps``,
   as in ``peer-traces/*.neutral.csv``), whose ``duration`` is taken row by row after checking that
   every row matches (arrival time, GPUs, steps, job type);
3. nothing: the built-in table, as ``steps_per_s="builtin"`` with ``worker_type=`` (V100 by default).
   A ``<stem>.neutral.csv[.gz]`` beside the trace is not read (a stale one would change the run
   times unseen); a :class:`~fastblox.errors.FastbloxWarning` says it is there and how to use it.

Row numbers in messages are line numbers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

from ..errors import ConfigError, TraceError
from . import _core
from .csv_formats import _load_table
from .registry import register_format

FIELDS = ("job_type", "command", "working_dir", "num_steps_arg", "needs_data_dir", "total_steps", "scale_factor",
          "priority_weight", "SLO", "arrival_time")


def _detect(path: Path, head: str) -> bool:
    if path.name.lower().endswith((".trace", ".trace.gz")):
        return True
    line = head.splitlines()[0] if head.strip() else ""
    return line.count("\t") == 9


def sibling_neutral(path) -> Path | None:
    p = Path(str(path))
    stem = p.name[:-3] if p.name.lower().endswith(".gz") else p.name
    stem = stem[: -len(".trace")] if stem.lower().endswith(".trace") else stem
    for cand in (p.with_name(stem + ".neutral.csv"), p.with_name(stem + ".neutral.csv.gz")):
        if cand.exists():
            return cand
    return None


def _throughput_lookup(table: dict, worker_type: str):
    """(job_type, scale) -> steps/s from any of the accepted table layouts."""
    if not table:
        raise ConfigError("steps_per_s is empty")
    sample = next(iter(table.values()))
    if isinstance(sample, dict) and any(isinstance(v, dict) for v in sample.values()):
        # Gavel's own layout: {worker_type: {"('job_type', scale)": {"null": steps/s, ...}}}
        if worker_type not in table:
            raise ConfigError(f"steps_per_s has no worker type {worker_type!r}; it has {', '.join(map(str, table))}")
        lut = {}
        for key, val in table[worker_type].items():
            try:
                jt, sf = ast.literal_eval(key)
                lut[(str(jt), int(sf))] = float(val["null"] if isinstance(val, dict) else val)
            except (ValueError, SyntaxError, TypeError, KeyError):
                raise ConfigError(f"steps_per_s[{worker_type!r}] has an entry {key!r} that is not "
                                  "\"('job_type', scale_factor)\" -> {'null': steps/s}") from None
        return lambda jt, sf: lut.get((jt, sf))
    lut_any, lut_sf = {}, {}
    for jt, val in table.items():
        try:
            if isinstance(val, dict):
                for sf, v in val.items():
                    lut_sf[(str(jt), int(sf))] = float(v)
            else:
                lut_any[str(jt)] = float(val)
        except (TypeError, ValueError):
            raise ConfigError(f"steps_per_s[{jt!r}] must be steps/s or {{scale_factor: steps/s}}") from None
    return lambda jt, sf: lut_sf.get((jt, sf), lut_any.get(jt))


@register_format(
    "gavel",
    description="Gavel job trace (*.trace): 10 tab-separated fields, no header; run time from steps_per_s, "
                "a neutral CSV, or the <stem>.neutral.csv beside it",
    detect=_detect,
    self_contained=False,  # (a neutral table beside the trace, or one named by an option)
    options={
        "steps_per_s": "throughput table: 'builtin' (Gavel's published table), a throughput CSV (*.csv[.gz]), "
                       "{job_type: steps/s}, {job_type: {gpus: steps/s}} or Gavel's throughputs JSON (dict or file)",
        "worker_type": "GPU type to take from the table or Gavel throughputs JSON (default v100)",
        "neutral": "path of the matching neutral CSV whose durations to use",
    },
)
def read_gavel(path, *, on_bad_rows="error", max_gpus=None, name=None, steps_per_s=None, worker_type="v100",
               neutral=None):
    data = _core.read_bytes(path)
    df, lines = _core.read_csv_strings(path, data, separator="\t", has_header=False, new_columns=list(FIELDS),
                                quote_char=None, what="a Gavel trace (10 tab-separated fields)")
    if df.width != len(FIELDS):
        raise TraceError(f"has {df.width} tab-separated fields per line; a Gavel trace has {len(FIELDS)}", path=path)
    steps = _core.num(df["total_steps"])
    gpus = _core.num(df["scale_factor"])
    submit = _core.num(df["arrival_time"])
    jtypes = _core.text(df["job_type"])
    n = df.height

    if steps_per_s is None and neutral is None:
        steps_per_s = "builtin"
        _note_sibling(path)
    table = _as_throughput_table(steps_per_s)
    if table is not None:
        sps, missing = _table_steps_per_s(table, str(worker_type), jtypes, gpus)
        if missing:
            shown = ", ".join(f"({jt!r}, {sf})" for jt, sf in sorted(missing)[:5])
            raise ConfigError(f"steps_per_s: the throughput table has no {str(worker_type).strip().lower()} "
                              f"throughput for {len(missing)} "
                              f"(job_type, GPUs) pair(s) of {path}: {shown}")
        with np.errstate(divide="ignore", invalid="ignore"):
            dur = np.where(sps > 0, steps / sps, np.nan)
        dcol = f"total_steps/{worker_type} steps_per_s"
    elif steps_per_s is not None:
        look = _throughput_lookup(_load_table(steps_per_s, "steps_per_s"), str(worker_type))
        sps = np.full(n, np.nan)
        missing = set()
        for i, (jt, sf) in enumerate(zip(jtypes.tolist(), gpus.tolist())):
            if jt is None or not np.isfinite(sf) or sf != round(sf):
                continue  # reported as a bad row below
            v = look(jt, int(sf))
            if v is None:
                missing.add((jt, int(sf)))
            else:
                sps[i] = v
        if missing:
            shown = ", ".join(f"({jt!r}, {sf})" for jt, sf in sorted(missing)[:5])
            raise ConfigError(f"steps_per_s has no throughput for {len(missing)} (job_type, GPUs) pair(s) of {path}: {shown}")
        with np.errstate(divide="ignore", invalid="ignore"):
            dur = np.where(sps > 0, steps / sps, np.nan)
        dcol = "total_steps/steps_per_s"
    else:
        src = Path(str(neutral))
        dur = _neutral_durations(path, src, jtypes, gpus, steps, submit)
        dcol = f"duration of {src.name}"

    raw = _core.RawJobs(
        submit_s=submit, duration_s=dur, num_gpus=gpus, rows=lines,
        row_note="lines are numbered from 1 (no header)", iterations=steps,
        columns={"submit_time_s": "arrival_time", "duration_s": dcol, "num_gpus": "scale_factor"},
    )
    raw.extra["model"] = jtypes
    raw.extra["priority_weight"] = _core.num(df["priority_weight"])
    raw.extra["slo"] = _core.num(df["SLO"])
    return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="gavel")


def _note_sibling(path) -> None:
    import warnings

    from ..errors import FastbloxWarning

    sib = sibling_neutral(path)
    if sib is not None:
        warnings.warn(f"{path}: run times from the built-in throughput table (V100); {sib.name} beside it is not "
                      f"read (to take its durations: `fastblox trace convert TRACE OUT.parquet -o neutral={sib}`"
                      f", or read_trace(path, neutral=...))", FastbloxWarning, stacklevel=4)


def _as_throughput_table(value):
    """A ThroughputTable for steps_per_s='builtin', a table, or a *.csv[.gz] path; None for the other forms."""
    from ..throughput import ThroughputTable

    if isinstance(value, ThroughputTable):
        return value
    if isinstance(value, str) and value.strip().lower() == "builtin":
        return ThroughputTable.builtin()
    if isinstance(value, (str, Path)) and str(value).lower().endswith((".csv", ".csv.gz")):
        return ThroughputTable.read(value)
    return None


def _table_steps_per_s(table, worker_type: str, jtypes, gpus):
    """Whole-gang steps/s per row from a ThroughputTable's measurements, and the (job_type, GPUs) pairs it lacks.

    Rows the trace itself cannot read (no job type, GPUs not a whole number >= 1) are left NaN and
    reported by the bad-row pass."""
    try:
        table.rates_at(np.zeros(0, dtype=np.int64), np.zeros(0), worker_type)  # checks the type
    except ConfigError as e:
        raise ConfigError(f"worker_type={worker_type!r}: {e}") from None
    codes = table.model_codes(jtypes)
    with np.errstate(invalid="ignore"):
        usable = np.array([jt is not None for jt in jtypes.tolist()], dtype=bool) & np.isfinite(gpus) \
            & (gpus == np.round(gpus)) & (gpus >= 1)
    sps = table.rates_at(np.where(usable, codes, -1), np.where(usable, gpus, np.nan), worker_type)
    # Gavel needs a measurement for the exact (job_type, scale_factor): no interpolated run times here
    t = table.gpu_types.index(str(worker_type).strip().lower())
    size_idx = np.searchsorted(np.asarray(table.sizes), np.where(usable, gpus, 0))
    size_idx = np.minimum(size_idx, len(table.sizes) - 1)
    measured = usable & (codes >= 0) & (np.asarray(table.sizes)[size_idx] == gpus)
    measured[measured] = np.isfinite(table.iters_per_s[codes[measured], t, size_idx[measured]])
    sps = np.where(measured, sps, np.nan)
    lack = usable & ~measured
    missing = {(jt, int(sf)) for jt, sf in zip(jtypes[lack].tolist(), gpus[lack].tolist())}
    return sps, missing


def _neutral_durations(path, src: Path, jtypes, gpus, steps, submit) -> np.ndarray:
    ndata = _core.read_bytes(src)
    ndf, _ = _core.read_csv_strings(src, ndata)
    f = _core.require_columns(src, ndf, ("submit_time", "num_gpu", "duration", "total_steps", "job_type"), "neutral")
    if ndf.height != len(jtypes):
        raise TraceError(f"has {ndf.height} jobs but the Gavel trace {Path(str(path)).name} has {len(jtypes)}; "
                         "it is not the matching neutral CSV", path=src)
    with np.errstate(invalid="ignore"):
        bad = ~((_core.num(ndf[f["submit_time"]]) == submit) & (_core.num(ndf[f["num_gpu"]]) == gpus)
                & (_core.num(ndf[f["total_steps"]]) == steps)
                & (_core.text(ndf[f["job_type"]]) == jtypes))
    # rows the trace itself cannot read are reported by the bad-row pass, not as a mismatch
    bad &= np.isfinite(submit) & np.isfinite(gpus) & np.isfinite(steps)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise TraceError(
            f"does not match the Gavel trace {Path(str(path)).name}: {int(bad.sum())} job(s) differ in arrival time, "
            f"GPUs, steps or job type (first: trace line {first + 1}, neutral line {first + 2})",
            path=src,
        )
    return _core.num(ndf[f["duration"]])
