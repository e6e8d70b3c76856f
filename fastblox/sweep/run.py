"""``run_sweep``: run every point of a sweep config, resumably, on a choice of executors.

Output layout (``out_dir``)::

    sweep.toml              the config (a verbatim copy of the file, or a rendering of the dict)
    points/<id>.parquet     one point's per-job table, with the point's parameters as extra columns
    points/<id>.json        {"point_id", "params", "summary", "config", "inputs", "format", "files"}; written last
    points/<id>.series.parquet   only with record_series = true
    summary.parquet         one row per finished point: parameters + summary figures, sorted by point_id
    errors.json             {point_id: {"error", "type", "params"}} of the points that failed in this run
    .lock                   held (``flock``) by the sweep running in the folder; a second one is refused

Every file is written to a temporary name and moved into place with ``os.replace``, so a killed
sweep leaves only whole files; a point whose JSON and the Parquet files it lists read back is
skipped on the next run, one whose files are damaged is reported and run again. A failing
point never stops the others. The data files hold no timestamps except the ``sim_wall_s``
figure (``compile_s`` is left out: it depends on which worker ran first). The guarantees are
listed in docs/sweeps.md ("Guarantees").
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, SweepBusyError
from ..outputs import json_text, prepare_dir
from .config import PARAM_TYPES, SweepConfig, load_config
from .points import _atomic_bytes, _atomic_text, point_paths, point_state, run_point
from .pool import ignore_sigint, restore_sigint, run_pool

EXECUTORS = ("local", "threads", "serial", "ray")
#: Executors that can stop a point over ``point_timeout`` (serial then runs each point in one
#: worker process; a thread cannot be stopped, and Ray's tasks are not watched).
TIMEOUT_EXECUTORS = ("local", "serial")
LOCK_NAME = ".lock"


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
    damaged: dict = field(default_factory=dict)  # id -> what was wrong with its files (run again)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def num_done(self) -> int:
        """Points of the config whose files are in the folder now (the rows of ``summary``)."""
        return self.summary.height if self.summary is not None else len(self.ran) + len(self.skipped)

    def __repr__(self) -> str:
        return (f"SweepResult({self.num_points} points: {len(self.ran)} run, {len(self.skipped)} skipped, "
                f"{len(self.errors)} failed, {self.wall_s:.2f} s, executor {self.executor!r}, out {str(self.out_dir)!r})")


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a sweep; the points that finished are written, as is the summary of the
    folder's finished points (``result``). Running the sweep again resumes it."""

    def __init__(self, result: SweepResult):
        self.result = result
        super().__init__(f"{result.num_done} of {result.num_points} points done (written to {result.out_dir}); "
                         "run the same command again to resume")


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


    def end_line(self) -> None:
        """End a progress line cut short (Ctrl-C), so that the next line starts on its own."""
        if self.enabled and self.done < self.total:
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
def _threads_run(todo, out_dir, nworkers, prog, results):
    pool = ThreadPoolExecutor(max_workers=nworkers)
    try:
        pending = {pool.submit(run_point, p, out_dir) for p in todo}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                r = f.result()
                results.append(r)
                prog.step(r[1] is not None)
    finally:
        # on Ctrl-C: drop the queued points; the running ones (a thread cannot be stopped) end first
        pool.shutdown(wait=True, cancel_futures=True)


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


def _execute(todo: list, out: Path, executor: str, workers, prog, results: list, point_timeout, notice) -> None:
    """Run ``todo``, appending ``(id, error or None, error type)`` to ``results`` as points finish."""
    nworkers = workers or os.cpu_count() or 1
    sout = str(out)
    if not todo:
        return
    if point_timeout is not None:  # local or serial (checked): worker processes that can be killed
        run_pool(todo, sout, 1 if executor == "serial" else nworkers, prog, results, point_timeout, notice)
    elif executor == "serial" or (executor in ("local", "threads") and nworkers == 1):
        for p in todo:
            r = run_point(p, sout)
            results.append(r)
            prog.step(r[1] is not None)
    elif executor == "threads":
        _threads_run(todo, sout, nworkers, prog, results)
    elif executor == "local":
        run_pool(todo, sout, nworkers, prog, results, None, notice)
    else:
        from . import ray_exec

        ray_exec.run(todo, sout, prog, results)


@contextlib.contextmanager
def sweep_lock(out: Path, what: str = "sweep"):
    """Hold an exclusive ``flock`` on ``out/.lock`` (which then names this process) for the
    duration; raise :class:`SweepBusyError` at once when another process holds it. The OS
    drops the lock when its holder exits, however it exits."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot create {path}: {e.strerror or e}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise SweepBusyError(f"--out {out}: another {what} is running into this folder (pid {holder}); "
                                 "wait for it to end, or give another --out") from None
        except OSError as e:  # a file system without locks (some network mounts)
            raise ConfigError(f"--out {out}: cannot lock {path}: {e.strerror or e}; give a folder on a local "
                              "file system") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _sort_points(cfg: SweepConfig, out: Path, notice) -> tuple[list, list, dict]:
    """(to run, already done, {id: damage}) of the config's points; a damaged point's files are
    removed (its JSON first) so that nothing reads them, and it runs again."""
    todo, skipped, damaged = [], [], {}
    for p in cfg.points:
        state = point_state(out, p.id)
        if state == "done":
            skipped.append(p)
            continue
        if state != "missing":
            damaged[p.id] = state
            if notice:
                notice(f"point {p.id}: damaged ({state}); running it again")
            _remove_point_files(out, p.id)
        todo.append(p)
    return todo, skipped, damaged


def _remove_point_files(out: Path, pid: str) -> None:
    js = point_paths(out, pid)[1]
    for f in [js] + sorted((out / "points").glob(f"{pid}.*")):
        with contextlib.suppress(FileNotFoundError):
            f.unlink()


def run_sweep(config, out_dir, executor: str = "local", workers: int | None = None, progress: bool = True,
              ray_address: str | None = None, point_timeout: float | None = None, notice=None) -> SweepResult:
    """Run every point of ``config`` (a :class:`SweepConfig`, a TOML path or a dict) into ``out_dir``.

    ``executor``: ``local`` (worker processes, ``workers`` of them, default ``os.cpu_count()``),
    ``threads`` (a thread pool; the kernels release the GIL), ``serial``, or ``ray`` (needs
    ``fastblox[ray]``; ``ray_address`` of an existing cluster, else a local Ray instance of
    ``workers`` CPUs is started and stopped; a process already connected to Ray keeps its
    connection, see :mod:`fastblox.sweep.ray_exec`). Points already done in ``out_dir`` are
    skipped; damaged ones run again. ``point_timeout``: seconds of wall time a point may run
    (``local`` and ``serial`` only). ``notice(line)`` is told of damaged points and of points
    whose worker died. The results are the same bytes whichever executor runs them
    (``sim_wall_s`` aside).

    Raises :class:`SweepBusyError` if another sweep holds ``out_dir``, and
    :class:`SweepInterrupted` (a ``KeyboardInterrupt``) on Ctrl-C, after writing what finished."""
    t0 = time.perf_counter()
    cfg = load_config(config)
    _check_args(executor, workers, ray_address, point_timeout)
    if executor == "ray":
        from . import ray_exec

        ray = ray_exec.import_ray()  # the install hint, even when nothing is left to run
        if ray_address and not ray.is_initialized():
            ray_exec.check_address(ray_address)  # a bad address fails before anything is written
    out = prepare_dir(out_dir)
    with sweep_lock(out):
        todo, skipped, damaged = _sort_points(cfg, out, notice)
        pdir = out / "points"
        pdir.mkdir(parents=True, exist_ok=True)
        _clean_tmp(pdir)
        _atomic_text(out / "sweep.toml", cfg.to_toml())
        results: list = []
        prog = _Progress(len(todo), progress)
        interrupted = False
        try:
            _run_on(executor, todo, out, workers, ray_address, prog, results, point_timeout, notice)
        except KeyboardInterrupt:
            interrupted = True
            prog.end_line()
        old = ignore_sigint()  # a second Ctrl-C must not cut the summary short
        try:
            res = _finish(cfg, out, results, skipped, damaged, executor, t0)
        finally:
            restore_sigint(old)
    if interrupted:
        raise SweepInterrupted(res)
    return res


def _check_args(executor, workers, ray_address, point_timeout) -> None:
    if executor not in EXECUTORS:
        raise ConfigError(f"--executor: unknown executor {executor!r}; choose one of: {', '.join(EXECUTORS)}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers <= 0):
        raise ConfigError(f"--workers must be a positive integer, got {workers!r}")
    if ray_address is not None and executor != "ray":
        raise ConfigError("--ray-address needs --executor ray")
    if point_timeout is not None:
        if isinstance(point_timeout, bool) or not isinstance(point_timeout, (int, float)) or not point_timeout > 0:
            raise ConfigError(f"--point-timeout must be a positive number of seconds, got {point_timeout!r}")
        if executor not in TIMEOUT_EXECUTORS:
            raise ConfigError(f"--point-timeout needs --executor {' or '.join(TIMEOUT_EXECUTORS)} (a {executor} "
                              "executor cannot stop a running point)")


def _run_on(executor, todo, out, workers, ray_address, prog, results, point_timeout, notice) -> None:
    ray_started = False
    if executor == "ray" and todo:  # connect (or fail on a bad address) before anything runs
        from . import ray_exec

        ray_started = ray_exec.connect(ray_address, workers)
    if executor in ("local", "ray") and todo:
        from .. import engine

        engine.warm_for(p.spec.resolved() for p in todo)  # compiled once here, loaded by every worker
    try:
        _execute(todo, out, executor, workers, prog, results, point_timeout, notice)
    finally:
        if ray_started:
            ray_exec.disconnect()


def _finish(cfg, out, results, skipped, damaged, executor, t0) -> SweepResult:
    """Write errors.json and summary.parquet; the :class:`SweepResult` of this run."""
    by_id = {p.id: p for p in cfg.points}
    errors = {}
    for pid, msg, typ in sorted(results, key=lambda r: r[0]):
        if msg is not None:
            errors[pid] = {"error": msg, "type": typ, "params": by_id[pid].params}
    ran = sorted(r[0] for r in results if r[1] is None)
    _atomic_text(out / "errors.json", json_text(errors, indent=1, sort_keys=True) + "\n")
    table = _summary_table(cfg, out)
    _atomic_bytes(out / "summary.parquet", table.write_parquet)
    return SweepResult(out, len(cfg.points), ran, sorted(p.id for p in skipped), errors,
                       time.perf_counter() - t0, executor, table, damaged)
