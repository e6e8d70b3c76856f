"""Dynamic policy selection (Blox, EuroSys 2024, Figures 14-15): every period, simulate each
candidate policy ahead from a copy of the run's state and run the next period with the best.

``simulate_dynamic(workload, candidates=("fifo", "las", "srtf"), period_s=3600, horizon_s=21600,
lookahead="known", **simulate_kwargs)`` replays ``workload`` on the native engine (events or
rounds; the compat engine cannot pause) and returns a :class:`DynamicResult`: the usual per-job
table and summary, plus ``periods`` (one row per period: the policy chosen and every
candidate's look-ahead score).

The loop, for the decision times ``T_k = t0 + k * period_s`` (``t0`` the first submit time):

1. the real run is paused just before ``T_k`` (``NativeState.drive``: every step at a time
   ``< T_k`` has run, none at ``T_k``), so the policy chosen at ``T_k`` already makes the step at
   ``T_k``;
2. for each candidate, an independent copy of the state (``NativeState.copy``) switches to it
   (``set_policy``, with the candidate's own preemption default unless ``preempt`` is given)
   and runs until ``T_k + horizon_s`` (steps at that time included);
3. the candidate with the lowest look-ahead score runs the real run until just before
   ``T_(k+1)``. Ties keep the current policy when it is among the best, else the first best in
   ``candidates`` order. A period with no job in the system makes no look-ahead and keeps the
   current policy; the first period starts with ``candidates[0]``.

**The look-ahead score** is an estimate of the mean JCT of the jobs the scheduler knows at
``T_k``: every job submitted at or before ``T_k`` and not finished by then (running, waiting, or
held back by admission), for ``lookahead="known"`` (default; like Blox's own predictor, which
simulates the pending jobs only). ``lookahead="trace"`` also counts (and simulates) the jobs
that arrive before ``T_k + horizon_s``, an oracle of the arrivals. For each counted job ``j``,
with ``H = T_k + horizon_s``:

* finished by ``H``: its JCT, ``finish - submit``;
* not finished: ``(H - submit) + remaining_j(H)``, where ``remaining_j(H)`` is its work left at
  ``H`` in seconds at the reference speed: the least time it still needs, were it to run alone
  from ``H`` on.

The score is the mean over the counted jobs, in seconds. Why this and not the mean JCT of the
jobs that finish within the horizon: that mean rewards a policy for finishing *fewer* long jobs
(a policy that finishes only short ones looks best) and is undefined when none finishes. The
score above is the sum of the time every known job spends in the system up to ``H`` (the same
``∫ jobs in system dt`` that the mean JCT adds up) plus a lower bound on what each still needs,
so a policy is charged both for the jobs it keeps waiting and for the work it leaves undone;
when every counted job finishes within the horizon it is their exact mean JCT. The part of
each job's JCT before ``T_k`` is the same for every candidate, so it shifts all scores alike.
The look-ahead counts every job, tracked or not (a scheduler does not know which jobs an
experiment measures). Look-ahead copies never end early on the tracked jobs: they run to ``H``.

A look-ahead only ever touches its copy: the real run continues from the state it paused in,
whatever the candidates did (tests check this byte for byte).
"""

from __future__ import annotations

import inspect
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from . import engine, parts
from .errors import ConfigError, SimulationError
from .kernels import engine as kengine
from .kernels import enums
from .results import Result
from .workload import Workload

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: imported lazily where used
    import polars as pl

DEFAULT_CANDIDATES = ("fifo", "las", "srtf")
DEFAULT_PERIOD_S = 3600.0
#: Six hours: on Blox's and Gavel's workloads (jobs of hours to days) a one-hour look-ahead sees
#: few completions and mostly compares work done, which favours keeping FIFO's running jobs;
#: from about six hours on the choices, and the JCT they give, barely change (docs/sweeps.md).
DEFAULT_HORIZON_S = 6 * 3600.0
LOOKAHEADS = ("known", "trace")
#: keywords of ``fastblox.simulate`` that a dynamic run takes as they are
PASSED_KWARGS = ("cluster", "placement", "admission", "time_model", "round_s", "restart_s", "preempt", "track",
                 "record_series", "checkpoint_s", "throughput", "multi_node_factor", "rack_factor", "cluster_events",
                 "reference_gpu", "placement_effects")


@dataclass
class DynamicResult(Result):
    """A :class:`fastblox.results.Result` plus ``periods``: one row per period (``period``,
    ``start_s``, ``end_s``, ``policy`` chosen, ``switched``, ``num_jobs_scored`` in the look-ahead,
    and ``score_<candidate>_s`` for each candidate, NaN when no look-ahead was made)."""

    periods: pl.DataFrame | None = None

    @property
    def extra_tables(self) -> dict:
        """Tables beside the per-job one (a sweep writes them as ``points/<id>.<name>.parquet``)."""
        return {"periods": self.periods}

    def write(self, out_dir, **kw) -> list[Path]:
        """As :meth:`Result.write`, plus ``periods.parquet``."""
        written = super().write(out_dir, **kw)
        p = Path(out_dir) / "periods.parquet"
        self.periods.write_parquet(p)
        return written + [p]


# ----------------------------------------------------------------------------- validation
def _candidates(candidates) -> list:
    if isinstance(candidates, (str, parts.Policy)) or callable(candidates):
        candidates = [candidates]
    try:
        cands = list(candidates)
    except TypeError:
        raise ConfigError(f"dynamic: candidates must be a list of policy names, got {candidates!r}") from None
    if not cands:
        raise ConfigError("dynamic: give at least one candidate policy")
    pols = []
    for c in cands:
        try:
            pol = parts.resolve_policy(c.lower() if isinstance(c, str) else c)
        except ConfigError as e:
            raise ConfigError(f"dynamic: candidate {c!r}: {e}") from None
        why = engine.not_switchable(pol)
        if why:
            raise ConfigError(f"dynamic: candidate {pol.name!r} {why}; it cannot be a candidate")
        if any(p.name == pol.name for p in pols):
            raise ConfigError(f"dynamic: candidate {pol.name!r} given twice")
        pols.append(pol)
    return pols


def _seconds(v, name: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v <= 0:
        raise ConfigError(f"dynamic: {name} must be a positive number of seconds, got {v!r}")
    return float(v)


def check_dynamic_args(candidates, period_s, horizon_s, lookahead) -> tuple[list, float, float, str]:
    """Validated ``(policies, period_s, horizon_s, lookahead)``; ``horizon_s`` None means the default."""
    pols = _candidates(candidates)
    period = _seconds(period_s, "period_s")
    horizon = DEFAULT_HORIZON_S if horizon_s is None else _seconds(horizon_s, "horizon_s")
    if lookahead not in LOOKAHEADS:
        raise ConfigError(f"dynamic: lookahead must be one of {', '.join(LOOKAHEADS)}, got {lookahead!r}")
    return pols, period, horizon, lookahead


# ----------------------------------------------------------------------------- the state
def _common(pols, attr):
    """The candidates' shared default (time model, round length), else None."""
    vals = {getattr(p, attr) for p in pols}
    return vals.pop() if len(vals) == 1 else None


def _prepare(workload: Workload, policy: parts.Policy, preempt=None, _defaults=None, **simulate_kwargs) -> engine.NativeRun:
    """The native run of ``policy`` (with its default options) built as ``fastblox.simulate``
    builds it (``engine.prepare_native``: same checks, same defaults), its config naming the run
    ``dynamic`` with the ``preempt`` asked for (None: each candidate's own)."""
    run = engine.prepare_native(workload, policy=policy, preempt=preempt, defaults=_defaults, **simulate_kwargs)
    run.config = replace(run.config, policy="dynamic", preempt=preempt, policy_opts=())
    return run


def _switch(st: engine.NativeState, policy: parts.Policy, preempt) -> None:
    st.set_policy(policy, None, preempt=policy.preemptive if preempt is None else bool(preempt))


# ----------------------------------------------------------------------------- look-ahead
def _scored_jobs(st: engine.NativeState, t: float, horizon_end: float, lookahead: str) -> np.ndarray:
    """Indices of the jobs a look-ahead from ``t`` scores (see the module's docstring)."""
    submit = st.w.submit_s
    upto = horizon_end if lookahead == "trace" else t
    n_known = int(np.searchsorted(submit, upto, side="right"))
    return np.flatnonzero(st.run.status[:n_known] != enums.DONE)


def lookahead_score(st: engine.NativeState, policy: parts.Policy, t: float, horizon_s: float, lookahead: str,
                    preempt=None, jobs: np.ndarray | None = None) -> float:
    """The look-ahead score (seconds) of running ``policy`` from the paused state ``st`` (whose
    next step is at ``t`` or later) until ``t + horizon_s``; ``st`` itself is not changed."""
    end = t + horizon_s
    idx = _scored_jobs(st, t, end, lookahead) if jobs is None else jobs
    if not len(idx):
        return float("nan")
    la = st.copy()
    if lookahead == "known":
        # the jobs that arrive after t do not exist for the look-ahead
        n_known = int(np.searchsorted(la.w.submit_s, t, side="right"))
        la.jobs.submit[n_known:] = np.inf  # the copy's own records (the layout stays: no second kernel)
    la.never_stop_on_tracked()
    la.stop_recording()
    _switch(la, policy, preempt)
    code = la.drive(end)
    if code not in (kengine.PAUSED, kengine.DEADLOCK):  # DEADLOCK: nothing left that can happen
        raise SimulationError(f"dynamic: the look-ahead of {policy.name!r} stopped with code {code}")
    r = la.run
    done = r.status[idx] == enums.DONE
    fin = r.finish[idx]
    submit = la.w.submit_s[idx]
    running = r.status[idx] == enums.RUNNING
    el = np.where(running, end - r.launch_t[idx], 0.0)
    restart = la.restart_s
    left = r.work_left[idx] - np.maximum(0.0, el - restart) * r.rate[idx] * running
    remaining = np.maximum(left, 0.0) / la.jobs.ref_rate[idx]
    est = np.where(done, fin - submit, (end - submit) + remaining)
    return float(est.mean())


def _choose(scores: list, current: int) -> int:
    best = min(scores)
    tied = [i for i, s in enumerate(scores) if s == best]
    return current if current in tied else tied[0]


# ----------------------------------------------------------------------------- the run
def simulate_dynamic(workload: Workload, candidates=DEFAULT_CANDIDATES, period_s: float = DEFAULT_PERIOD_S,
                     horizon_s: float = DEFAULT_HORIZON_S, lookahead: str = "known", **simulate_kwargs) -> DynamicResult:
    """Replay ``workload`` switching policy every ``period_s`` seconds to the candidate whose
    look-ahead of ``horizon_s`` scores best (see the module's docstring). A horizon longer than
    the run (e.g. ``1e9``) scores each candidate by the exact mean JCT the known jobs would have
    if no other job arrived (Blox's "run to completion" prediction), at more cost.

    ``simulate_kwargs`` are keywords of :func:`fastblox.simulate` (cluster, placement,
    admission, time_model, round_s, restart_s, preempt, track, record_series, ...); ``preempt``
    None lets each candidate use its own default (FIFO non-preemptive, LAS and SRTF preemptive);
    ``time_model``/``round_s`` None: the candidates' shared defaults if they have one (Themis:
    rounds), else events and 300 s.
    Returns a :class:`DynamicResult`; its summary adds ``policy_per_period`` (the sequence),
    ``num_periods``, ``num_switches``, ``num_lookaheads`` and ``share_<candidate>`` (fraction of
    periods run with it); ``sim_wall_s`` covers the real run and every look-ahead."""
    if simulate_kwargs.get("compat") or simulate_kwargs.get("blox_compat"):
        raise ConfigError("dynamic: a compat engine cannot pause a run; dynamic selection runs on the native "
                          "engine (drop compat)")
    simulate_kwargs.pop("compat", None)
    simulate_kwargs.pop("blox_compat", None)
    sig = inspect.signature(engine.simulate).parameters
    for k in simulate_kwargs:
        if k not in PASSED_KWARGS:
            why = "the candidates are the policies" if k in ("policy", "policy_opts") else (
                "not a keyword of fastblox.simulate" if k not in sig else "not available with dynamic selection")
            raise ConfigError(f"dynamic: unexpected keyword {k!r} ({why})")
    pols, period, horizon, lookahead = check_dynamic_args(candidates, period_s, horizon_s, lookahead)
    preempt = simulate_kwargs.get("preempt")
    # the run's time model and round length are the candidates' shared defaults (Themis: rounds),
    # else events and 300 s, unless given
    shared = parts.Policy("candidates", pols[0].code, pols[0].preemptive, pols[0].dynamic, "",
                          default_time_model=_common(pols, "default_time_model"),
                          default_round_s=_common(pols, "default_round_s"))
    run = _prepare(workload, pols[0], _defaults=shared, **simulate_kwargs)
    st = run.state
    compile_s = engine._warm(engine.state_kind(st))

    t0 = float(workload.submit_s[0])
    current = 0
    rows = []
    t_wall = time.perf_counter()
    k = 0
    while True:
        t = t0 + k * period
        nxt = t0 + (k + 1) * period
        idx = _scored_jobs(st, t, t + horizon, lookahead)
        scores = [float("nan")] * len(pols)
        if len(idx):
            scores = [lookahead_score(st, p, t, horizon, lookahead, preempt, jobs=idx) for p in pols]
            chosen = _choose(scores, current)
        else:
            chosen = current
        switched = chosen != current
        if switched:
            _switch(st, pols[chosen], preempt)
            current = chosen
        code = st.drive(np.nextafter(nxt, -np.inf))
        rows.append((k, t, nxt, pols[chosen].name, switched, len(idx), *scores))
        if code == kengine.FINISHED:
            break
        run.raise_if_stuck(code)
        k += 1
    sim_s = time.perf_counter() - t_wall

    res = run.result(sim_s, compile_s)
    names = [p.name for p in pols]
    end_t = st.now
    cols = {"period": [r[0] for r in rows], "start_s": [r[1] for r in rows],
            "end_s": [min(r[2], end_t) if i == len(rows) - 1 else r[2] for i, r in enumerate(rows)],
            "policy": [r[3] for r in rows], "switched": [r[4] for r in rows],
            "num_jobs_scored": [r[5] for r in rows]}
    for i, n in enumerate(names):
        cols[f"score_{n}_s"] = [r[6 + i] for r in rows]
    import polars as pl

    periods = pl.DataFrame(cols, schema_overrides={"period": pl.Int64, "num_jobs_scored": pl.Int64})
    seq = cols["policy"]
    s = res.summary
    s["policy_per_period"] = seq
    s["num_periods"] = len(seq)
    s["num_switches"] = int(sum(cols["switched"]))
    s["num_lookaheads"] = int(sum(len(pols) for r in rows if r[5]))
    for n in names:
        s[f"share_{n}"] = seq.count(n) / len(seq)
    res.config["dynamic"] = {"candidates": names, "period_s": period, "horizon_s": horizon, "lookahead": lookahead,
                             "preempt": preempt}
    return DynamicResult(res.jobs, res.summary, res.config, res.series, periods=periods)
