"""The worker side of a sweep: build (and cache) a point's workload, run the point, render and
write its files. Every executor (local processes, threads, serial, Ray) runs points through
these functions; ``run`` (the driver) and ``ray_exec`` both import them, and neither imports
the other at import time."""

from __future__ import annotations

import io
import json
import os
import pickle
import threading
from pathlib import Path

from ..errors import FastbloxError
from ..outputs import json_text
from ..runner import build_workload
from .config import PARAM_TYPES, RESULTS_FORMAT, Point

_MAGIC = b"PAR1"  # the first and last 4 bytes of every Parquet file
#: summary keys left out of a point's JSON (they differ between runs of the same point)
DROPPED_SUMMARY_KEYS = ("compile_s",)

_CACHE: dict = {}
_CACHE_LOCK = threading.Lock()


def get_workload(spec: dict):
    """The workload of ``spec``, built once per process and cached (keyed by the spec's JSON)."""
    key = json.dumps(spec, sort_keys=True)
    w = _CACHE.get(key)
    if w is None:
        with _CACHE_LOCK:
            w = _CACHE.get(key)
            if w is None:
                w = _CACHE[key] = build_workload(spec)
    return w


def preload_workloads(refs: dict) -> None:
    """Fill the workload cache from Ray object references (``{spec JSON: ref}``) of pickled
    workloads the driver built; a worker then never reads the driver's trace files itself."""
    missing = {k: r for k, r in refs.items() if k not in _CACHE}
    if missing:
        import ray

        got = ray.get(list(missing.values()))
        with _CACHE_LOCK:
            for k, blob in zip(missing, got):
                if k not in _CACHE:
                    _CACHE[k] = pickle.loads(blob)


def _workloads(point: Point):
    """``get_workload`` for the point's run: a trace's cache key carries the SHA-256 of the bytes
    the point's id was made from (as :attr:`Point.workload_spec` does), so a process never reuses
    the jobs of a file that has changed since."""
    digest = point.inputs.get("trace")
    if digest is None:
        return get_workload
    return lambda key: get_workload({**key, "sha256": digest} if key["kind"] == "trace" else key)


def _simulate_point(point: Point):
    """Run one point; returns a fastblox Result (a DynamicResult for ``policy = "dynamic"``)."""
    from ..runner import run_spec

    dyn = point.dynamic_kwargs
    if dyn is None:
        return run_spec(point.spec, get_workload=_workloads(point))
    from ..dynamic import simulate_dynamic

    def run(w, r):
        # the candidates are the policies; a dynamic run takes no limits (its endless stream is still cut)
        skip = ("policy", "compat", "policy_opts", "max_sim_time", "max_jobs", "max_wall")
        kw = {k: v for k, v in r.api_kwargs().items() if k not in skip}
        return simulate_dynamic(w, **dyn, **kw)

    # a look-ahead that sees arrivals needs Blox's stream to reach past the end by its horizon
    margin = dyn["horizon_s"] if dyn["lookahead"] == "trace" else 0.0
    return run_spec(point.spec, get_workload=_workloads(point), runner=run, margin_s=margin)


def _tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def _atomic_bytes(path: Path, write) -> None:
    tmp = _tmp(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _atomic_text(path: Path, text: str) -> None:
    _atomic_bytes(path, lambda t: t.write_text(text))


def _param_columns(params: dict, height: int):
    import polars as pl

    types = {"str": pl.Utf8, "int": pl.Int64, "float": pl.Float64, "bool": pl.Boolean}
    return [pl.Series(k, [params[k]] * height, dtype=types[PARAM_TYPES[k]]) for k in PARAM_TYPES]


def point_paths(out_dir: Path, pid: str) -> tuple[Path, Path]:
    d = Path(out_dir) / "points"
    return d / f"{pid}.parquet", d / f"{pid}.json"


def point_state(out_dir: Path, pid: str) -> str:
    """``"done"``, ``"missing"`` (no JSON yet: never run, or stopped before its JSON was written)
    or, for a point whose JSON exists but whose files cannot be read, why: the JSON does not parse
    or names another point, or a Parquet file it lists is missing or not whole
    (:func:`_parquet_problem`)."""
    pq, js = point_paths(out_dir, pid)
    if not js.exists():
        return "missing"
    try:
        doc = json.loads(js.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return f"{js.name}: not valid JSON ({type(e).__name__})"
    if not isinstance(doc, dict) or doc.get("point_id") != pid or not isinstance(doc.get("summary"), dict):
        return f"{js.name}: not this point's document"
    names = doc.get("files", [pq.name])
    if not isinstance(names, list) or pq.name not in names:
        return f"{js.name}: no list of the point's files"
    for name in names:
        bad = _parquet_problem(js.with_name(str(name)))
        if bad:
            return f"{name}: {bad}"
    return "done"


def _parquet_problem(path: Path) -> str | None:
    """Why ``path`` is not a whole Parquet file, or None. Checks the file's framing: ``PAR1`` at
    both ends and a footer length that fits in the file (what a truncated or partly written file
    lacks). Parsing the footer too (``pyarrow.parquet.read_metadata``) would cost ~10x more per
    point on every rerun and catches nothing more of a file cut short."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
            size = f.seek(0, os.SEEK_END)
            if size < 12:
                return f"not a whole Parquet file ({size} bytes)"
            f.seek(size - 8)
            tail = f.read(8)
    except FileNotFoundError:
        return "missing"
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    footer = int.from_bytes(tail[:4], "little")
    if head != _MAGIC or tail[4:] != _MAGIC or footer + 12 > size:
        return "not a whole Parquet file (truncated?)"
    return None


def _parquet_bytes(df) -> bytes:
    buf = io.BytesIO()
    df.write_parquet(buf)
    return buf.getvalue()


def compute_point(point: Point) -> tuple[str, list | None, str | None, str | None]:
    """Run one point and render its files in memory: ``(id, [(file name, bytes), ...], None, None)``
    with the point's JSON last, or ``(id, None, error message, error type)``; never raises for a
    problem of the point itself. Every executor writes these bytes as they are (the Ray executor
    in the driver), so the files do not depend on where a point ran."""
    try:
        res = _simulate_point(point)
        jobs = res.jobs.with_columns(_param_columns(point.params, res.jobs.height))
        files = []
        if res.series is not None:
            files.append((f"{point.id}.series.parquet", _parquet_bytes(res.series)))
        for suffix, table in getattr(res, "extra_tables", {}).items():
            files.append((f"{point.id}.{suffix}.parquet", _parquet_bytes(table)))
        files.append((f"{point.id}.parquet", _parquet_bytes(jobs)))
        summary = {k: v for k, v in res.summary.items() if k not in DROPPED_SUMMARY_KEYS}
        doc = {"point_id": point.id, "params": point.params, "summary": summary, "config": res.config,
               "inputs": point.inputs, "format": RESULTS_FORMAT, "files": [name for name, _ in files]}
        files.append((f"{point.id}.json", (json_text(doc, indent=1, sort_keys=True) + "\n").encode()))
        return point.id, files, None, None
    except FastbloxError as e:
        return point.id, None, str(e), type(e).__name__
    except Exception as e:  # a bug, or something the engine did not foresee: still never stop the others
        return point.id, None, f"{type(e).__name__}: {e}", type(e).__name__


def write_point_files(out_dir, files: list) -> None:
    """Write a point's rendered files into ``out_dir/points`` atomically, in order (JSON last)."""
    d = Path(out_dir) / "points"
    for name, data in files:
        _atomic_bytes(d / name, lambda t, data=data: t.write_bytes(data))


def run_point(point: Point, out_dir: str) -> tuple[str, str | None, str | None]:
    """Run one point and write its files. Returns ``(id, error message or None, error type)``;
    never raises for a problem of the point itself."""
    pid, files, msg, typ = compute_point(point)
    if files is not None:
        try:
            write_point_files(out_dir, files)
        except OSError as e:
            return pid, f"cannot write the point's files: {e}", type(e).__name__
    return pid, msg, typ

