"""Readers of the comma-separated trace layouts: fastblox's normalized CSV and Parquet, the
neutral peer CSV, Tiresias, Pollux/Sia, RFold, Helios (and Acme), and the Alibaba 2023 pod lists.

Each reader maps its columns onto the canonical schema (:mod:`fastblox.traces.schema`) and ends in
the shared bad-row pass (:func:`fastblox.traces._core.finish`). Row numbers in messages are file
line numbers (the header is line 1).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import ConfigError, TraceError
from . import _core
from .registry import register_format
from .schema import frame_to_raw, read_parquet


def header_cols(head: str, sep: str = ",") -> list[str]:
    line = head.lstrip("\ufeff").splitlines()[0] if head.strip() else ""
    return [c.strip().strip('"').lower() for c in line.split(sep)]


def _has(head: str, *names, sep: str = ",") -> bool:
    cols = set(header_cols(head, sep))
    return all(n in cols for n in names)


def _name_ends(path: Path, *ends) -> bool:
    n = path.name.lower()
    return any(n.endswith(e) or n.endswith(e + ".gz") for e in ends)


# ------------------------------------------------------------------------------------------ normalized
def _detect_normalized(path: Path, head: str) -> bool:
    return _has(head, "job_id", "submit_time_s", "duration_s", "num_gpus")


@register_format(
    "normalized",
    description="fastblox / shared-traces normalized CSV: job_id,submit_time_s,duration_s,num_gpus + optional "
                "columns (user, vc, status, model, iterations, gpu_type, ...); gzip or not",
    detect=_detect_normalized,
)
def read_normalized(path, *, on_bad_rows="error", max_gpus=None, name=None):
    """The normalized CSV: the four canonical columns first, any other column kept as an extra."""
    data = _core.read_bytes(path)
    df, lines = _core.read_csv_strings(path, data)
    raw = frame_to_raw(path, df, fmt="normalized", rows=lines)
    return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="normalized")


@register_format(
    "parquet",
    description="Parquet with the canonical columns (what `fastblox trace convert` writes)",
    detect=lambda p, head: head.startswith("PAR1"),
)
def read_parquet_format(path, *, on_bad_rows="error", max_gpus=None, name=None):
    return read_parquet(path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name)


# ------------------------------------------------------------------------------------------ neutral
def _detect_neutral(path: Path, head: str) -> bool:
    return _has(head, "job_id", "submit_time", "num_gpu", "duration", "job_type", "total_steps")


@register_format(
    "neutral",
    description="peer-traces neutral CSV: job_id,submit_time,num_gpu,duration,job_type,total_steps "
                "(model = job_type, iterations = total_steps)",
    detect=_detect_neutral,
)
def read_neutral(path, *, on_bad_rows="error", max_gpus=None, name=None):
    data = _core.read_bytes(path)
    df, lines = _core.read_csv_strings(path, data)
    f = _core.require_columns(path, df, ("job_id", "submit_time", "num_gpu", "duration"), "neutral")
    ids, source, missing = _core.job_ids(df[f["job_id"]])
    raw = _core.RawJobs(
        submit_s=_core.num(df[f["submit_time"]]), duration_s=_core.num(df[f["duration"]]),
        num_gpus=_core.num(df[f["num_gpu"]]), rows=lines,
        job_id=ids, job_id_missing=missing, source_id=source,
        columns={"job_id": f["job_id"], "submit_time_s": f["submit_time"], "duration_s": f["duration"], "num_gpus": f["num_gpu"]},
    )
    if "total_steps" in df.columns:
        raw.iterations = _core.num(df["total_steps"])
    if "job_type" in df.columns:
        raw.extra["model"] = _core.text(df["job_type"])
    return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="neutral")


# ------------------------------------------------------------------------------------------ tiresias
def _detect_tiresias(path: Path, head: str) -> bool:
    return (_has(head, "job_id", "num_gpu", "submit_time", "duration")
            and (_has(head, "iterations") or _has(head, "model_name"))
            and not _has(head, "total_steps"))


@register_format(
    "tiresias",
    description="Tiresias simulator CSV: job_id,num_gpu,submit_time,iterations,model_name,duration,interval "
                "(also Chronus' trace_job_Philly_*.csv, which adds user, job_type, ...)",
    detect=_detect_tiresias,
)
def read_tiresias(path, *, on_bad_rows="error", max_gpus=None, name=None):
    data = _core.read_bytes(path)
    df, lines = _core.read_csv_strings(path, data)
    f = _core.require_columns(path, df, ("job_id", "num_gpu", "submit_time", "duration"), "tiresias")
    ids, source, missing = _core.job_ids(df[f["job_id"]])
    raw = _core.RawJobs(
        submit_s=_core.num(df[f["submit_time"]]), duration_s=_core.num(df[f["duration"]]),
        num_gpus=_core.num(df[f["num_gpu"]]), rows=lines,
        job_id=ids, job_id_missing=missing, source_id=source,
        columns={"job_id": f["job_id"], "submit_time_s": f["submit_time"], "duration_s": f["duration"], "num_gpus": f["num_gpu"]},
    )
    if "iterations" in df.columns:
        raw.iterations = _core.num(df["iterations"])
    if "model_name" in df.columns:
        raw.extra["model"] = _core.text(df["model_name"])
    if "user" in df.columns:
        raw.extra["user"] = _core.text(df["user"])
    for c in ("job_type", "best_effort"):  # Chronus' SLO class
        if c in df.columns:
            raw.extra[c] = _core.auto_extra(df[c])
    return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="tiresias")


# ------------------------------------------------------------------------------------------ pollux / sia
def _detect_pollux(path: Path, head: str) -> bool:
    return ((_has(head, "name", "time", "application", "num_replicas") and not _detect_elastic_mix(path, head))
            or _has(head, "timestamp", "duration", "num_gpus", "cluster"))


def _detect_elastic_mix(path: Path, head: str) -> bool:
    return _has(head, "time", "application", "num_replicas", "duration")


def _load_table(value, what: str) -> dict:
    """A mapping given inline (dict) or as a JSON file path."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    try:
        return json.loads(Path(str(value)).read_text())
    except FileNotFoundError:
        raise ConfigError(f"{what}: no such file {str(value)!r}") from None
    except (OSError, ValueError) as e:
        raise ConfigError(f"{what}: cannot read {str(value)!r} as JSON ({e})") from None


@register_format(
    "pollux",
    description="Pollux/Sia workload CSV (name,time,application,num_replicas,batch_size; needs app_duration_s) "
                "or the Pollux/Sia philly.csv (timestamp,duration,num_gpus,gpu_time,cluster)",
    detect=_detect_pollux,
    self_contained=False,  # (app_duration_s may name a JSON file)
    options={"app_duration_s": "application -> run time in seconds on the job's num_replicas GPUs (dict or JSON file); "
                               "Pollux workloads carry no run time"},
)
def read_pollux(path, *, on_bad_rows="error", max_gpus=None, name=None, app_duration_s=None):
    """Two layouts share this name.

    * Workloads (``name,time,application,num_replicas,batch_size``): a Pollux job trains its
      application to a target, so the file has no run time. Pass ``app_duration_s`` (application ->
      seconds on the job's ``num_replicas`` GPUs); without it reading stops and lists the
      applications. ``num_gpus`` = num_replicas, ``model`` = application, ``source_id`` = name,
      ``batch_size`` kept; ``job_id`` = 0-based row number.
    * ``philly.csv`` (``timestamp,duration,num_gpus,gpu_time,cluster``): ``submit_time_s`` =
      timestamp − earliest timestamp (no time zone), ``vc`` = cluster, ``job_id`` = 0-based row
      number (as in the shared ``jobs.csv.gz``). The raw file is not sorted: it is sorted stably
      on reading (the rows out of order counted as ``resorted``)."""
    data = _core.read_bytes(path)
    df, lines = _core.read_csv_strings(path, data)
    cols = {c.lower() for c in df.columns}
    rows = lines
    if {"timestamp", "duration", "num_gpus"} <= cols:
        f = _core.require_columns(path, df, ("timestamp", "duration", "num_gpus"), "pollux")
        t = _core.epoch_s(df[f["timestamp"]])
        origin = float(np.nanmin(t)) if np.isfinite(t).any() else 0.0
        raw = _core.RawJobs(
            submit_s=t - origin, duration_s=_core.num(df[f["duration"]]), num_gpus=_core.num(df[f["num_gpus"]]),
            rows=rows, columns={"submit_time_s": f["timestamp"], "duration_s": f["duration"], "num_gpus": f["num_gpus"]},
            origin_s=origin,
        )
        if "cluster" in cols:
            raw.extra["vc"] = _core.text(df[[c for c in df.columns if c.lower() == "cluster"][0]])
        return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="pollux")

    f = _core.require_columns(path, df, ("time", "application", "num_replicas"), "pollux")
    apps = _core.text(df[f["application"]])
    table = _load_table(app_duration_s, "app_duration_s")
    present = sorted({a for a in apps.tolist() if a is not None})
    if not table:
        raise TraceError(
            "Pollux/Sia workloads have no run time (each job trains its application to a target); pass "
            f"app_duration_s={{application: seconds}} for the applications {', '.join(present)} "
            "(e.g. read_trace(path, format='pollux', app_duration_s={...}) or --option app_duration_s=FILE.json)",
            path=path, column=f["application"],
        )
    lacking = [a for a in present if a not in table]
    if lacking:
        raise ConfigError(f"app_duration_s has no run time for application(s) {', '.join(lacking)} (of {path})")
    try:
        lut = {str(k): float(v) for k, v in table.items()}
    except (TypeError, ValueError):
        raise ConfigError("app_duration_s values must be numbers of seconds") from None
    dur = np.asarray([lut.get(a, np.nan) if a is not None else np.nan for a in apps.tolist()], dtype=np.float64)
    raw = _core.RawJobs(
        submit_s=_core.num(df[f["time"]]), duration_s=dur, num_gpus=_core.num(df[f["num_replicas"]]),
        rows=rows, columns={"submit_time_s": f["time"], "duration_s": f["application"], "num_gpus": f["num_replicas"]},
    )
    raw.extra["model"] = apps
    if "name" in df.columns:
        raw.source_id = _core.text(df["name"])
    if "batch_size" in df.columns:
        raw.extra["batch_size"] = _core.num(df["batch_size"])
    return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="pollux")


@register_format(
    "elastic-mix",
    description="elastic and rigid jobs (name,time,application,num_replicas,batch_size,duration): a row with a "
                "Pollux application is elastic, a row without runs duration seconds on num_replicas GPUs; a Pollux "
                "workload CSV is all elastic (fastblox.mixed; docs/elastic.md)",
    detect=_detect_elastic_mix,
)
def read_elastic_mix(path, *, on_bad_rows="error", max_gpus=None, name=None):
    """:func:`fastblox.mixed.read_mixed`: an elastic row's ``duration_s`` is its run time alone
    on its ``num_replicas`` GPUs at its batch size (what the native policies run it for). Every
    row is checked: a bad one stops the reading whatever ``on_bad_rows`` says."""
    from ..mixed import read_mixed

    w = read_mixed(path, name=name)
    if max_gpus is not None and (w.num_gpus > max_gpus).any():
        j = int(np.flatnonzero(w.num_gpus > max_gpus)[0])
        raise TraceError(f"job {int(w.job_id[j])} asks for {int(w.num_gpus[j])} GPUs, more than the {max_gpus} the "
                         "cluster has", path=path, column="num_replicas")
    return w


# ------------------------------------------------------------------------------------------ rfold
def _detect_rfold(path: Path, head: str) -> bool:
    cols = header_cols(head)
    return bool(cols) and cols[0].lstrip("#").strip() == "job id" and "arrival time (sec)" in cols


@register_format(
    "rfold",
    description="RFold WorkloadGen CSV (philly_trace.csv, crux.csv): '#job id,arrival time (sec),topology,shape,"
                "size,duration (sec)'",
    detect=_detect_rfold,
)
def read_rfold(path, *, on_bad_rows="error", max_gpus=None, name=None):
    data = _core.read_bytes(path)
    df, lines = _core.read_csv_strings(path, data)
    df = df.rename({c: c.lstrip("#").strip() for c in df.columns})
    f = _core.require_columns(path, df, ("job id", "arrival time (sec)", "size", "duration (sec)"), "rfold")
    ids, source, missing = _core.job_ids(df[f["job id"]])
    raw = _core.RawJobs(
        submit_s=_core.num(df[f["arrival time (sec)"]]), duration_s=_core.num(df[f["duration (sec)"]]),
        num_gpus=_core.num(df[f["size"]]), rows=lines,
        job_id=ids, job_id_missing=missing, source_id=source,
        columns={"job_id": "#job id", "submit_time_s": "arrival time (sec)", "duration_s": "duration (sec)", "num_gpus": "size"},
    )
    if "shape" in df.columns:
        raw.extra["shape"] = _core.text(df["shape"])
    return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="rfold")


# ------------------------------------------------------------------------------------------ helios
def _detect_helios(path: Path, head: str) -> bool:
    return _has(head, "gpu_num", "submit_time") and (_has(head, "duration") or _has(head, "end_time")) \
        and (_has(head, "state") or _has(head, "vc") or _has(head, "node_num"))


@register_format(
    "helios",
    description="SenseTime Helios cluster_log.csv (job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,"
                "start_time,end_time,duration,queue); also reads Acme (Seren/Kalos) job traces",
    detect=_detect_helios,
)
def read_helios(path, *, on_bad_rows="error", max_gpus=None, name=None):
    """Helios' per-cluster job log. Times are date-time strings (``YYYY-MM-DD HH:MM:SS``, no time
    zone); ``submit_time_s`` = submit_time − earliest submit_time. ``duration_s`` = ``duration``
    (seconds) or, where that is empty, end_time − start_time. ``num_gpus`` = gpu_num (0 = CPU-only
    job: a bad row), ``status`` = state, ``vc``, ``user``; ``cpu_per_gpu`` = cpu_num / gpu_num;
    ``queue_s`` = queue (seconds waited) when present; ``node_num`` kept. Non-numeric job ids go to
    ``source_id``."""
    data = _core.read_bytes(path)
    df, lines = _core.read_csv_strings(path, data)
    f = _core.require_columns(path, df, ("gpu_num", "submit_time"), "helios")
    lower = {c.lower(): c for c in df.columns}
    t = _core.epoch_s(df[f["submit_time"]])
    origin = float(np.nanmin(t)) if np.isfinite(t).any() else 0.0
    if "duration" in lower:
        dur = _core.num(df[lower["duration"]])
        dcol = lower["duration"]
    else:
        dur = np.full(df.height, np.nan)
        dcol = "end_time"
    if "start_time" in lower and "end_time" in lower:
        span = _core.epoch_s(df[lower["end_time"]]) - _core.epoch_s(df[lower["start_time"]])
        dur = np.where(np.isnan(dur), span, dur)
    elif "duration" not in lower:
        raise TraceError("needs a 'duration' column or 'start_time' and 'end_time'", path=path)
    gpus = _core.num(df[f["gpu_num"]])
    raw = _core.RawJobs(
        submit_s=t - origin, duration_s=dur, num_gpus=gpus, rows=lines,
        columns={"submit_time_s": f["submit_time"], "duration_s": dcol, "num_gpus": f["gpu_num"]}, origin_s=origin,
    )
    if "job_id" in lower:
        raw.job_id, raw.source_id, raw.job_id_missing = _core.job_ids(df[lower["job_id"]])
        raw.columns["job_id"] = lower["job_id"]
    for src, dst in (("user", "user"), ("vc", "vc"), ("state", "status"), ("jobname", "jobname"), ("type", "job_type")):
        if src in lower:
            raw.extra[dst] = _core.text(df[lower[src]])
    if "cpu_num" in lower:
        with np.errstate(divide="ignore", invalid="ignore"):
            raw.extra["cpu_per_gpu"] = np.where(gpus > 0, _core.num(df[lower["cpu_num"]]) / gpus, np.nan)
    if "node_num" in lower:
        raw.extra["node_num"] = _core.num(df[lower["node_num"]])
    if "queue" in lower:
        raw.extra["queue_s"] = _core.num(df[lower["queue"]])
    return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="helios")


# ------------------------------------------------------------------------------------------ alibaba 2023
def _detect_alibaba_2023(path: Path, head: str) -> bool:
    return _has(head, "name", "num_gpu", "gpu_milli")


FRACTIONAL = ("whole", "drop")
R_FRACTIONAL = "fractional GPU"


@register_format(
    "alibaba-2023",
    description="Alibaba cluster-trace-gpu-v2023 (FGD, ATC'23) openb_pod_list_*.csv: GPU-sharing pods; "
                "gpu_milli < 1000 -> 1 GPU, the share kept in gpu_fraction",
    detect=_detect_alibaba_2023,
    options={"fractional": "'whole' (default: a GPU-sharing pod takes 1 whole GPU, its share kept in gpu_fraction) "
                           "or 'drop' (drop and count them as 'fractional GPU')"},
)
def read_alibaba_2023(path, *, on_bad_rows="error", max_gpus=None, name=None, fractional="whole"):
    """Alibaba's 2023 pod list (``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
    creation_time,deletion_time,scheduled_time``).

    * ``submit_time_s`` = creation_time; ``duration_s`` = deletion_time − scheduled_time (empty
      scheduled_time: never scheduled → a ``duration_s=NaN`` bad row).
    * GPUs: fastblox allocates whole GPUs. A GPU-sharing pod (``num_gpu`` = 1, ``gpu_milli`` < 1000)
      becomes a 1-GPU job and ``gpu_fraction`` = gpu_milli / 1000 keeps its share (1.0 for whole
      GPUs); ``fastblox trace inspect`` counts them. ``fractional="drop"`` drops them instead (counted
      as ``'fractional GPU'``). ``num_gpu`` = 0 pods are CPU-only (``num_gpus<=0`` bad rows).
    * ``cpu_per_gpu`` = cpu_milli / 1000 / num_gpu, ``mem_per_gpu_gb`` = memory_mib / 1024 / num_gpu,
      ``gpu_type`` = gpu_spec, ``status`` = pod_phase, ``qos`` and ``queue_s`` (scheduled − creation)
      kept, ``source_id`` = name, ``job_id`` = 0-based row number.
    * The ``multigpu*`` variants carry no times and cannot be replayed."""
    if fractional not in FRACTIONAL:
        raise ConfigError(f"fractional must be 'whole' or 'drop', got {fractional!r}")
    data = _core.read_bytes(path)
    df, lines = _core.read_csv_strings(path, data)
    f = _core.require_columns(path, df, ("name", "num_gpu", "creation_time", "deletion_time", "scheduled_time"), "alibaba-2023")
    created = _core.num(df[f["creation_time"]])
    sched = _core.num(df[f["scheduled_time"]])
    deleted = _core.num(df[f["deletion_time"]])
    gpus = _core.num(df[f["num_gpu"]])
    milli = _core.num(df["gpu_milli"]) if "gpu_milli" in df.columns else np.full(df.height, 1000.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        frac_pod = (gpus == 1) & np.isfinite(milli) & (milli > 0) & (milli < 1000)
        gpu_fraction = np.where(frac_pod, milli / 1000.0, np.where(gpus >= 1, 1.0, np.nan))
        raw = _core.RawJobs(
            submit_s=created, duration_s=deleted - sched, num_gpus=gpus, rows=lines,
            source_id=_core.text(df[f["name"]]),
            columns={"submit_time_s": f["creation_time"], "duration_s": f"{f['deletion_time']}-{f['scheduled_time']}",
                     "num_gpus": f["num_gpu"], "source_id": f["name"]},
        )
        raw.extra["gpu_fraction"] = gpu_fraction
        if "cpu_milli" in df.columns:
            raw.extra["cpu_per_gpu"] = np.where(gpus > 0, _core.num(df["cpu_milli"]) / 1000.0 / gpus, np.nan)
        if "memory_mib" in df.columns:
            raw.extra["mem_per_gpu_gb"] = np.where(gpus > 0, _core.num(df["memory_mib"]) / 1024.0 / gpus, np.nan)
        raw.extra["queue_s"] = sched - created
    for src, dst in (("gpu_spec", "gpu_type"), ("pod_phase", "status"), ("qos", "qos")):
        if src in df.columns:
            raw.extra[dst] = _core.text(df[src])
    if fractional == "drop":
        raw.filters.append((R_FRACTIONAL, frac_pod))
    return _core.finish(raw, path=path, on_bad_rows=on_bad_rows, max_gpus=max_gpus, name=name, fmt="alibaba-2023")
