"""``run_sweep``: run every point of a sweep config, resumably, on a choice of executors.

Output layout (``out_dir``)::

    sweep.toml              the config (a verbatim copy of the file, or a rendering of the dict)
    points/<id>.parquet     one point's per-job table, with the point's parameters as extra columns
    points/<id>.json        {"point_id", "params", "summary", "config"}; written last: it marks the point done
    points/<id>.series.parquet   only with record_series = true
    summary.parquet         one row per finished point: parameters + summary figures, sorted by point_id
    errors.json             {point_id: {"error", "type", "params"}} of the points that failed in this run

Every file is written to a temporary name and moved into place with ``os.replace``, so a killed
sweep leaves only whole files; a point whose ``.parquet`` and ``.json`` both exist is skipped on
the next run. A failing point never stops the others. The data files hold no timestamps except
the ``sim_wall_s`` figure (``compile_s`` is left out: it depends on which worker ran first).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, FastbloxError
from .config import PARAM_TYPES, Point, SweepConfig, load_config

EXECUTORS = ("local", "threads", "serial", "ray")
DROPPED_SUMMARY_KEYS = ("compile_s",)


@dataclass
class SweepResult:
    """What a sweep did. ``summary`` is the table written to ``summary.parquet``; ``ran`` the ids
    run by this call, ``skipped`` those already done, ``errors`` id -> message of failed points."""

    out_dir: Path
    num_points: int
    ran: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    errors: dict = field(default_factory=dict)
    wall_s: float = 0.0
    executor: str = "local"
    summary: object = None  # polars DataFrame

    @property
    def ok(self) -> bool:
        return not self.errors

    def __repr__(self) -> str:
        return (f"SweepResult({self.num_points} points: {len(self.ran)} run, {len(self.skipped)} skipped, "
                f"{len(self.errors)} failed, {self.wall_s:.2f} s, executor {self.executor!r}, out {str(self.out_dir)!r})")


# ----------------------------------------------------------------------------- worker side
_CACHE: dict = {}
_CACHE_LOCK = threading.Lock()


def _build_workload(spec: dict):
    kind = spec["kind"]
    if kind == "trace":
        from ..traces import read_trace

        return read_trace(spec["path"], format=spec["format"], on_bad_rows=spec["on_bad_rows"], max_gpus=spec.get("max_gpus"))
    if kind == "blox":
        from ..generators import blox_paper_workload

        return blox_paper_workload(spec["load"], spec["num_jobs"], spec["seed"])
    if kind == "gavel":
        from ..generators import gavel_like_workload

        if spec.get("load") is not None:  # jobs per hour
            return gavel_like_workload(spec["num_jobs"], mean_interarrival_s=3600.0 / spec["load"], seed=spec["seed"])
        return gavel_like_workload(spec["num_jobs"], seed=spec["seed"])
    if kind == "sample":
        from ..datasets import load_sample

        w = load_sample()
        return w.head(spec["num_jobs"]) if spec["num_jobs"] else w
    raise ConfigError(f"unknown workload kind {kind!r}")


def get_workload(spec: dict):
    """The workload of ``spec``, built once per process and cached (keyed by the spec's JSON)."""
    key = json.dumps(spec, sort_keys=True)
    w = _CACHE.get(key)
    if w is None:
        with _CACHE_LOCK:
            w = _CACHE.get(key)
            if w is None:
                w = _CACHE[key] = _build_workload(spec)
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


def _simulate_point(point: Point):
    """Run one point; returns a fastblox Result (a DynamicResult for ``policy = "dynamic"``)."""
    from ..engine import simulate

    spec = point.workload_spec
    kw = point.run_kwargs
    dyn = point.dynamic_kwargs
    if dyn is not None:
        from ..dynamic import simulate_dynamic

        kw = {k: v for k, v in kw.items() if k not in ("scheduler", "blox_compat")}

        def run(w, **limits):  # a dynamic run takes no limits (endless_stream: can_stop=False)
            return simulate_dynamic(w, **dyn, **kw)
    else:
        def run(w, **limits):
            return simulate(w, **kw, **limits)
    if spec["kind"] == "blox" and spec["num_jobs"] is None:
        # Blox's endless stream, as simulate_blox_workload emulates it (with its default bound),
        # with cached generations; a look-ahead that sees arrivals needs the stream to reach past
        # the end by its horizon
        from ..engine import endless_stream

        margin = dyn["horizon_s"] if dyn is not None and dyn["lookahead"] == "trace" else 0.0
        return endless_stream(lambda n: get_workload({**spec, "num_jobs": n}), run, kw["track"], margin=margin,
                              can_stop=dyn is None, what=f"load {spec['load']:g} jobs/h")
    return run(get_workload(spec))


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


def is_done(out_dir: Path, pid: str) -> bool:
    a, b = point_paths(out_dir, pid)
    return a.exists() and b.exists()


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
        doc = {"point_id": point.id, "params": point.params, "summary": summary, "config": res.config}
        files.append((f"{point.id}.json", (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()))
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


def _run_points(points: list, out_dir: str) -> list:
    return [run_point(p, out_dir) for p in points]


# ----------------------------------------------------------------------------- progress
class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.failed = total, 0, 0
        self.enabled = enabled and total > 0 and sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self.last = 0.0

    def step(self, failed: bool = False) -> None:
        self.done += 1
        self.failed += failed
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.last < 0.1 and self.done < self.total:
            return
        self.last = now
        el = now - self.t0
        rate = self.done / el if el > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        fail = f", {self.failed} failed" if self.failed else ""
        sys.stderr.write(f"\rsweep: {self.done}/{self.total} points{fail} | {rate:,.1f}/s | ETA {_fmt_s(eta)}   ")
        if self.done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _fmt_s(s: float) -> str:
    if s != s or s == float("inf"):
        return "?"
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s // 60:.0f}m{s % 60:02.0f}s"
    return f"{s // 3600:.0f}h{(s % 3600) // 60:02.0f}m"


# ----------------------------------------------------------------------------- executors
def _init_worker():
    """Process-pool initializer: keep numba's compile threads quiet and warm the kernels once."""
    from .. import engine

    engine._warm("native")


def _pool_run(pool, todo, out_dir, prog, chunk=1):
    results = []
    chunks = [todo[i:i + chunk] for i in range(0, len(todo), chunk)]
    pending = {pool.submit(_run_points, c, out_dir) for c in chunks}
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for f in done:
            for r in f.result():
                results.append(r)
                prog.step(r[1] is not None)
    return results


# ----------------------------------------------------------------------------- driver
def _summary_table(config: SweepConfig, out: Path):
    import polars as pl

    rows = []
    for p in sorted(config.points, key=lambda p: p.id):
        js = point_paths(out, p.id)[1]
        if not js.exists():
            continue
        doc = json.loads(js.read_text())
        row = dict(p.params)
        for k, v in doc["summary"].items():
            if isinstance(v, (dict, list)):
                continue  # nested counts (dropped_rows), sequences (policy_per_period): in the point's JSON
            row[k] = v
        rows.append(row)
    types = {"str": pl.Utf8, "int": pl.Int64, "float": pl.Float64, "bool": pl.Boolean}
    schema = {k: types[t] for k, t in PARAM_TYPES.items()}
    if not rows:
        return pl.DataFrame(schema=schema)
    extra = []
    for r in rows:
        for k in r:
            if k not in schema and k not in extra:
                extra.append(k)
    cols = {k: [r.get(k) for r in rows] for k in list(schema) + sorted(extra)}
    series = []
    for k, vals in cols.items():
        if k in schema:
            series.append(pl.Series(k, vals, dtype=schema[k]))
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in vals if v is not None):
            series.append(pl.Series(k, vals, dtype=pl.Int64))
        elif any(isinstance(v, (str, bool)) for v in vals):  # e.g. throughput_table = "gavel"
            series.append(pl.Series(k, [None if v is None else str(v) for v in vals], dtype=pl.Utf8))
        else:
            series.append(pl.Series(k, [None if v is None else float(v) for v in vals], dtype=pl.Float64))
    return pl.DataFrame(series)


def _clean_tmp(points_dir: Path) -> None:
    for t in points_dir.glob(".*.tmp"):
        try:
            t.unlink()
        except OSError:
            pass


def _execute(cfg: SweepConfig, out: Path, todo: list, executor: str, workers, progress: bool) -> list:
    pdir = out / "points"
    pdir.mkdir(parents=True, exist_ok=True)
    _clean_tmp(pdir)
    _atomic_text(out / "sweep.toml", cfg.to_toml())
    prog = _Progress(len(todo), progress)
    nworkers = workers or os.cpu_count() or 1
    sout = str(out)
    if not todo:
        return []
    if executor == "serial" or (executor in ("local", "threads") and nworkers == 1):
        results = []
        for p in todo:
            r = run_point(p, sout)
            results.append(r)
            prog.step(r[1] is not None)
        return results
    if executor == "threads":
        with ThreadPoolExecutor(max_workers=nworkers) as pool:
            return _pool_run(pool, todo, sout, prog)
    if executor == "local":
        import multiprocessing as mp

        # spawn: polars and numba keep threads, which fork must not copy
        nworkers = min(nworkers, len(todo))
        chunk = max(1, min(16, len(todo) // (4 * nworkers)))
        with ProcessPoolExecutor(max_workers=nworkers, mp_context=mp.get_context("spawn"), initializer=_init_worker) as pool:
            return _pool_run(pool, todo, sout, prog, chunk=chunk)
    from . import ray_exec

    return ray_exec.run(todo, sout, prog)


def run_sweep(config, out_dir, executor: str = "local", workers: int | None = None, progress: bool = True,
              ray_address: str | None = None) -> SweepResult:
    """Run every point of ``config`` (a :class:`SweepConfig`, a TOML path or a dict) into ``out_dir``.

    ``executor``: ``local`` (a process pool of ``workers``, default ``os.cpu_count()``), ``threads``
    (a thread pool; the kernels release the GIL), ``serial``, or ``ray`` (needs ``fastblox[ray]``;
    ``ray_address`` of an existing cluster, else a local Ray instance of ``workers`` CPUs is
    started and stopped; a process already connected to Ray keeps its connection, see
    :mod:`fastblox.sweep.ray_exec`). Points already done in ``out_dir`` are skipped. The
    results are the same bytes whichever executor runs them (``sim_wall_s`` aside)."""
    t0 = time.perf_counter()
    cfg = load_config(config)
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor: unknown executor {executor!r}; choose one of: {', '.join(EXECUTORS)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers <= 0):
        raise ConfigError(f"--workers must be a positive integer, got {workers!r}")
    if ray_address is not None and executor != "ray":
        raise ConfigError("--ray-address needs --executor ray")
    out = Path(out_dir)
    todo, skipped = [], []
    for p in cfg.points:
        (skipped if is_done(out, p.id) else todo).append(p)
    ray_started = False
    if executor == "ray":
        from . import ray_exec

        ray_exec.import_ray()  # the install hint, even when nothing is left to run
        if todo:  # connect (or fail on a bad address) before anything is written
            ray_started = ray_exec.connect(ray_address, workers)
    try:
        results = _execute(cfg, out, todo, executor, workers, progress)
    finally:
        if ray_started:
            ray_exec.disconnect()

    by_id = {p.id: p for p in cfg.points}
    errors = {}
    for pid, msg, typ in sorted(results, key=lambda r: r[0]):
        if msg is not None:
            errors[pid] = {"error": msg, "type": typ, "params": by_id[pid].params}
    ran = sorted(r[0] for r in results if r[1] is None)
    _atomic_text(out / "errors.json", json.dumps(errors, indent=1, sort_keys=True) + "\n")
    table = _summary_table(cfg, out)
    _atomic_bytes(out / "summary.parquet", table.write_parquet)
    return SweepResult(out, len(cfg.points), ran, sorted(p.id for p in skipped), errors,
                       time.perf_counter() - t0, executor, table)
