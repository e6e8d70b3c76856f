"""``run_search``: find the knob values that optimise a summary figure, by random search or
Optuna's TPE, on the sweep's executors, resumably.

A search runs in rounds: the sampler proposes ``batch`` trials, each trial is one sweep point per
seed (``fastblox.sweep.config.Point``: the same parameters, ids and files as a sweep's), the
round's points run on the executor, and the sampler is told each trial's objective (the mean over
its seeds). Output layout (``out_dir``)::

    search.toml         the config (verbatim copy, or a rendering of the dict)
    search.json         the search's definition (what decides its trials); a rerun must match it
    points/<id>.*       every run, as a sweep writes it (the trials' run folders)
    search.parquet      one row per trial: trial, round, status, the knobs, objective (+ std over seeds), ...
    best.json           the best trial: its knob values, objective, seeds and points
    search.png          the objective per trial with the best so far, and the objective against each knob
    errors.json         the runs that failed in this call

**Resume.** The samplers are deterministic functions of the seed and of the objectives they are
told, and a point whose files are in the folder is not run again; so rerunning the same command
replays the finished trials from their files (no run) and continues where it stopped, with the
same trials and bytes as an uninterrupted search. ``trials`` is not part of the definition: a
rerun with more trials extends the search.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..outputs import json_text, prepare_dir
from .points import _atomic_bytes, _atomic_text, point_paths, point_state
from .pool import ignore_sigint, restore_sigint
from .run import _check_args, _clean_tmp, _execute, _fmt_s, _remove_point_files, sweep_lock
from .samplers import make_sampler
from .search_config import KNOBS_AFTER, TRIAL_COLUMNS, SearchConfig, load_search_config

#: Version of search.json's definition document.
SEARCH_FORMAT = 1
STATUSES = ("ok", "incomplete", "failed")


@dataclass
class SearchResult:
    """What a search did. ``trials`` is the table of ``search.parquet``; ``best`` the content of
    ``best.json`` (None when no trial succeeded); ``ran`` the point ids run by this call,
    ``reused`` how many of the trials' points were already in the folder."""

    out_dir: Path
    objective: str
    direction: str
    num_trials: int
    trials: object = None  # polars DataFrame
    best: dict | None = None
    ran: list = field(default_factory=list)
    reused: int = 0
    errors: dict = field(default_factory=dict)
    wall_s: float = 0.0
    executor: str = "local"

    @property
    def num_done(self) -> int:
        return 0 if self.trials is None else self.trials.height

    def __repr__(self) -> str:
        b = "none" if self.best is None else f"{self.best['value']:.6g} at {self.best['params']}"
        return (f"SearchResult({self.num_done}/{self.num_trials} trials, best {self.objective} {b}, "
                f"{len(self.ran)} runs, {self.reused} reused, {self.wall_s:.2f} s, out {str(self.out_dir)!r})")


class SearchInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped a search; the finished trials are written (``result``). Rerun to resume."""

    def __init__(self, result: SearchResult):
        self.result = result
        super().__init__(f"{result.num_done} of {result.num_trials} trials done (written to {result.out_dir}); "
                         "run the same command again to resume")


# ----------------------------------------------------------------------------- progress
class _Progress:
    """One line on stderr (a TTY only): trials done, the runs of the round, best so far, time."""

    def __init__(self, total: int, objective: str, enabled: bool):
        self.total, self.objective = total, objective
        self.enabled = enabled and sys.stderr.isatty()
        self.t0 = time.perf_counter()
        self.trials = self.runs = self.round_runs = self.failed = 0
        self.best = None
        self.last = 0.0

    def round(self, trials_done: int, runs: int, best) -> None:
        self.trials, self.round_runs, self.runs, self.best = trials_done, runs, 0, best
        self._draw(force=True)

    def step(self, failed: bool = False) -> None:  # a run finished (the executors call it)
        self.runs += 1
        self.failed += failed
        self._draw()

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if not force and now - self.last < 0.1:
            return
        self.last = now
        best = "-" if self.best is None else f"{self.best['value']:,.6g} (trial {self.best['trial']})"
        runs = f" | round: {self.runs}/{self.round_runs} runs" if self.round_runs else ""
        fail = f", {self.failed} failed" if self.failed else ""
        sys.stderr.write(f"\rsearch: {self.trials}/{self.total} trials{runs}{fail} | best {self.objective} {best} | "
                         f"{_fmt_s(now - self.t0)}   ")
        sys.stderr.flush()

    def end_line(self) -> None:
        if self.enabled and self.last:
            sys.stderr.write("\n")
            sys.stderr.flush()


# ----------------------------------------------------------------------------- executors
class _Executor:
    """The sweep's executors, kept open across the rounds of a search: the ``local`` executor's
    worker processes start once, a Ray connection is made once."""

    def __init__(self, executor: str, workers, ray_address, point_timeout, notice, out: Path):
        self.executor, self.ray_address, self.timeout, self.notice = executor, ray_address, point_timeout, notice
        self.nworkers = workers or os.cpu_count() or 1
        self.out = out
        self.pool = None
        self.ray_started = False

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.close()
        if self.ray_started:
            from . import ray_exec

            ray_exec.disconnect()

    def _pooled(self) -> bool:
        return self.timeout is not None or (self.executor == "local" and self.nworkers > 1)

    def run(self, todo: list, prog) -> list:
        results: list = []
        if not todo:
            return results
        if self.executor in ("local", "ray"):
            from .. import engine

            engine.warm_for(p.spec.resolved() for p in todo)  # compiled once here, loaded by every worker
        if self.executor == "ray" and not self.ray_started:
            from . import ray_exec

            self.ray_started = ray_exec.connect(self.ray_address, self.nworkers)
        if self._pooled():
            if self.pool is None:
                from .pool import worker_pool

                n = 1 if self.executor == "serial" else self.nworkers
                self.pool = worker_pool(str(self.out), n, self.timeout, self.notice)
            self.pool.submit(todo, prog, results)
        else:
            _execute(todo, self.out, self.executor, self.nworkers, prog, results, None, self.notice)
        return results


# ----------------------------------------------------------------------------- trials
def _trial_row(cfg: SearchConfig, trial: int, rnd: int, values: dict, points: list, err: str | None,
               failures: dict, out: Path) -> dict:
    """One row of search.parquet: the trial's knob values, status and objective (mean over its
    points, one per seed; the standard deviation over them, 0 for one seed)."""
    row = {"trial": trial, "round": rnd, "status": "failed", **values, "objective": math.nan,
           "objective_std": math.nan, "num_seeds": len(points), "complete": False, "unfinished": 0,
           "seeds": ",".join(str(p.params["seed"]) for p in points),
           "point_ids": ",".join(p.id for p in points), "error": err}
    vals, complete = [], True
    for p in points:
        if p.id in failures:
            row["error"] = f"run {p.id}: {failures[p.id]}"
            return row
        js = point_paths(out, p.id)[1]
        try:
            summary = json.loads(js.read_text())["summary"]
        except (OSError, ValueError, KeyError) as e:
            row["error"] = f"run {p.id}: its results cannot be read ({type(e).__name__})"
            return row
        vals.append(float(summary.get(cfg.objective, math.nan)))
        if not summary.get("complete", True):
            complete = False
            row["unfinished"] += _unfinished(out, p.id)
    if err is not None or not vals:
        return row
    a = np.asarray(vals)
    row["objective"] = float(a.mean())
    row["objective_std"] = float(a.std(ddof=1)) if len(a) > 1 else 0.0
    row["complete"] = complete
    if not math.isfinite(row["objective"]):
        row["error"] = f"{cfg.objective} is not a number (no tracked job finished?)"
    elif not complete:
        row["status"] = "incomplete"
        row["error"] = (f"{row['unfinished']} tracked jobs had not finished when the runs stopped (see their "
                        "stop_reason): the objective leaves them out; not a candidate")
    else:
        row["status"] = "ok"
    return row


def _unfinished(out: Path, pid: str) -> int:
    """Tracked jobs of a run that had not finished when it stopped (from its per-job table)."""
    import polars as pl

    jobs = pl.read_parquet(point_paths(out, pid)[0], columns=["tracked", "finish_s"])
    return int((jobs["tracked"] & jobs["finish_s"].is_nan()).sum())


def _better(cfg: SearchConfig, a: float, b: float) -> bool:
    return a < b if cfg.direction == "min" else a > b


def _best(cfg: SearchConfig, rows: list) -> dict | None:
    """best.json: the first trial with the best objective among the successful ones; ``ties``: the
    other trials with exactly that objective (e.g. thresholds at which admission never binds)."""
    best = None
    for r in rows:
        if r["status"] == "ok" and (best is None or _better(cfg, r["objective"], best["objective"])):
            best = r
    if best is None:
        return None
    return {"objective": cfg.objective, "direction": cfg.direction, "value": best["objective"],
            "std": best["objective_std"], "trial": best["trial"], "params": {k.name: best[k.name] for k in cfg.knobs},
            "ties": [r["trial"] for r in rows if r is not best and r["status"] == "ok" and r["objective"] == best["objective"]],
            "seeds": [int(s) for s in best["seeds"].split(",")], "point_ids": best["point_ids"].split(","),
            "num_trials": len(rows), "num_ok": sum(r["status"] == "ok" for r in rows), "sampler": cfg.sampler}


def _knob_dtype(k, pl):
    if k.kind == "int" or (k.kind == "choice" and all(isinstance(c, int) and not isinstance(c, bool) for c in k.choices)):
        return pl.Int64
    if k.kind == "float" or (k.kind == "choice" and all(isinstance(c, (int, float)) and not isinstance(c, bool)
                                                        for c in k.choices)):
        return pl.Float64
    if k.kind == "choice" and all(isinstance(c, bool) for c in k.choices):
        return pl.Boolean
    return pl.Utf8


def trials_table(cfg: SearchConfig, rows: list):
    """search.parquet's table (one schema whatever the rows hold), with ``best_so_far``."""
    import polars as pl

    best, so_far = None, []
    for r in rows:
        if r["status"] == "ok" and (best is None or _better(cfg, r["objective"], best)):
            best = r["objective"]
        so_far.append(math.nan if best is None else best)
    types = {"str": pl.Utf8, "int": pl.Int64, "float": pl.Float64, "bool": pl.Boolean}
    schema = {}
    for name, t in TRIAL_COLUMNS.items():
        schema[name] = types[t]
        if name == KNOBS_AFTER:
            schema.update((k.name, _knob_dtype(k, pl)) for k in cfg.knobs)
    cols = {k: [r.get(k) for r in rows] for k in schema}
    cols["best_so_far"] = so_far
    for k in cfg.knobs:
        if schema[k.name] == pl.Utf8:
            cols[k.name] = [None if v is None else str(v) for v in cols[k.name]]
    return pl.DataFrame([pl.Series(k, v, dtype=t) for (k, t), v in zip(schema.items(), cols.values())])


# ----------------------------------------------------------------------------- the folder
def _check_definition(out: Path, cfg: SearchConfig) -> None:
    """A folder holds one search: a rerun must have the same definition (``trials`` may differ)."""
    path = out / "search.json"
    if not path.exists():
        return
    try:
        old = json.loads(path.read_text())["definition"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # damaged: written again below
    new = json.loads(json_text(cfg.definition(), sort_keys=True))
    if old == new:
        return
    diff = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    raise ConfigError(f"--out {out}: holds another search (its {', '.join(diff)} differ from this config's); "
                      "give another --out, or delete its search.json to replace that search (runs whose "
                      "parameters match are reused)")


def _write_definition(out: Path, cfg: SearchConfig) -> None:
    doc = {"format": SEARCH_FORMAT, "definition": cfg.definition(), "digest": cfg.definition_digest()}
    _atomic_text(out / "search.json", json_text(doc, indent=1, sort_keys=True) + "\n")


def _write_results(out: Path, cfg: SearchConfig, rows: list):
    table = trials_table(cfg, rows)
    _atomic_bytes(out / "search.parquet", table.write_parquet)
    best = _best(cfg, rows)
    _atomic_text(out / "best.json", json_text(best, indent=1, sort_keys=True) + "\n")
    return table, best


# ----------------------------------------------------------------------------- driver
@dataclass
class _Run:
    """The state of one call of :func:`run_search`."""

    cfg: SearchConfig
    out: Path
    ex: _Executor
    prog: _Progress
    notice: object
    rows: list = field(default_factory=list)
    ran: list = field(default_factory=list)
    reused: set = field(default_factory=set)
    ran_ids: set = field(default_factory=set)
    errors: dict = field(default_factory=dict)

    def round(self, sampler, n: int, rnd: int) -> None:
        """Ask ``n`` trials, run the points that are not in the folder yet, tell the objectives."""
        asked = sampler.ask(n)
        trials = []
        for values in asked:
            try:
                trials.append((values, self.cfg.points_for(values), None))
            except ConfigError as e:  # a value the up-front check could not foresee: this trial fails
                trials.append((values, [], str(e)))
        todo = self._todo([p for _, pts, _ in trials for p in pts])
        self.prog.round(len(self.rows), len(todo), _best(self.cfg, self.rows))
        failures = {}
        for pid, msg, typ in self.ex.run(todo, self.prog):
            if msg is None:
                self.ran.append(pid)
                self.ran_ids.add(pid)
            else:
                failures[pid] = msg
                self.errors[pid] = {"error": msg, "type": typ, "params": next(p.params for p in todo if p.id == pid)}
        first = len(self.rows)
        new = [_trial_row(self.cfg, first + i, rnd, v, pts, err, failures, self.out)
               for i, (v, pts, err) in enumerate(trials)]
        sampler.tell([(None if r["status"] == "failed" else r["objective"], r["unfinished"]) for r in new])
        self.rows.extend(new)
        _write_results(self.out, self.cfg, self.rows)

    def _todo(self, points: list) -> list:
        todo, seen = [], set()
        for p in points:
            if p.id in seen:
                continue
            seen.add(p.id)
            state = point_state(self.out, p.id)
            if state == "done":
                if p.id not in self.ran_ids:  # in the folder before this call (not a value drawn again)
                    self.reused.add(p.id)
                continue
            if state != "missing":
                if self.notice:
                    self.notice(f"point {p.id}: damaged ({state}); running it again")
                _remove_point_files(self.out, p.id)
            todo.append(p)
        return todo


def run_search(config, out_dir, executor: str = "local", workers: int | None = None, trials: int | None = None,
               progress: bool = True, ray_address: str | None = None, point_timeout: float | None = None,
               notice=None, plot: bool = True) -> SearchResult:
    """Run the search of ``config`` (a TOML path, a dict or a :class:`SearchConfig`) into ``out_dir``.

    ``trials`` overrides the config's number of trials. ``executor``, ``workers``,
    ``ray_address``, ``point_timeout`` and ``notice`` are those of
    :func:`fastblox.sweep.run_sweep`; the results do not depend on them. Trials already in
    ``out_dir`` are replayed from their files, not run. ``plot``: draw search.png at the end.

    Raises :class:`~fastblox.errors.ConfigError` for a bad config (before anything runs; the TPE
    sampler without Optuna included) or a folder holding another search,
    :class:`~fastblox.errors.SweepBusyError` if a sweep or search is running into ``out_dir``, and
    :class:`SearchInterrupted` (a ``KeyboardInterrupt``) on Ctrl-C, after writing what finished."""
    t0 = time.perf_counter()
    cfg = load_search_config(config)
    n = cfg.trials if trials is None else trials
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ConfigError(f"--trials must be a positive integer, got {n!r}")
    _check_args(executor, workers, ray_address, point_timeout)
    sampler = make_sampler(cfg.sampler, cfg.knobs, cfg.seed, cfg.direction, cfg.batch)  # Optuna's hint, if missing
    if executor == "ray":
        from . import ray_exec

        ray = ray_exec.import_ray()
        if ray_address and not ray.is_initialized():
            ray_exec.check_address(ray_address)
    out = prepare_dir(out_dir)
    with sweep_lock(out, "sweep or search"):
        _check_definition(out, cfg)
        pdir = out / "points"
        pdir.mkdir(parents=True, exist_ok=True)
        _clean_tmp(pdir)
        _atomic_text(out / "search.toml", cfg.to_toml())
        _write_definition(out, cfg)
        prog = _Progress(n, cfg.objective, progress)
        interrupted = False
        with _Executor(executor, workers, ray_address, point_timeout, notice, out) as ex:
            state = _Run(cfg, out, ex, prog, notice)
            try:
                rnd = 0
                while len(state.rows) < n:
                    state.round(sampler, min(cfg.batch, n - len(state.rows)), rnd)
                    rnd += 1
                prog.round(len(state.rows), 0, _best(cfg, state.rows))
            except KeyboardInterrupt:
                interrupted = True
            finally:
                prog.end_line()
        old = ignore_sigint()  # a second Ctrl-C must not cut the files short
        try:
            res = _finish(state, executor, n, t0, plot and not interrupted)
        finally:
            restore_sigint(old)
    if interrupted:
        raise SearchInterrupted(res)
    return res


def _finish(state: _Run, executor: str, n: int, t0: float, plot: bool) -> SearchResult:
    cfg, out = state.cfg, state.out
    table, best = _write_results(out, cfg, state.rows)
    _atomic_text(out / "errors.json", json_text(state.errors, indent=1, sort_keys=True) + "\n")
    if plot and state.rows:
        from .search_plot import plot_search

        plot_search(table, cfg, out / "search.png")
    return SearchResult(out, cfg.objective, cfg.direction, n, table, best, sorted(state.ran), len(state.reused),
                        state.errors, time.perf_counter() - t0, executor)
