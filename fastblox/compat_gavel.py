"""Gavel's simulator's semantics, for ``--compat gavel``: its policies as ``Scheduler.simulate``
runs them (stanford-futuredata/gavel at ``c4fa400``, ``scheduler/scheduler.py``), round by round.

fastblox's native ``gavel*`` policies are Gavel's allocations realised with exact times. Gavel's
simulator differs in ways that change results; this module reproduces each one (the method of
``scheduler.py`` it comes from in brackets; docs/fidelity.md lists them with the effect of each):

* **Integer steps** (``_get_num_steps``). A job scheduled on type ``t`` runs
  ``min(int(throughput × 360), steps left)`` steps and its micro-task ends after
  ``steps / throughput`` seconds. A round ends when its last micro-task does (``simulate``: the
  time jumps to the largest finish time of the running jobs), a little before 360 s, or earlier
  when every job in it finishes; with nothing running the clock jumps to the next arrival.
  Jobs that arrive during a round join at its end; their JCT counts from their arrival.
* **Allocation recomputed only at a reset** (``_update_priorities``): when the job set has
  changed (an arrival, a completion, a failed micro-task) *and* 1,920 s have passed since the last
  reset (``minimum_time_between_allocation_resets``) or the last reset was at time 0. Until then
  new jobs are not in the allocation.
* **Time accounting** (``_reset_time_run_so_far``, ``_done_callback``). Each job's time on each
  type starts at half a round (``time_per_iteration / 2``) at its arrival and at every reset; a
  finished micro-task adds ``finish - round start`` (the round start is the previous round's end,
  however long ago: idle gaps count) to the job's time and to the type's total; a reset adds
  ``allocation × elapsed - time received`` to the job's deficit.
* **Priorities** (``_update_priorities``): on type ``t``, ``allocation / (job time / type time)``;
  ``allocation × 1e9`` when the type's time is 0; 0 for a job not in the allocation, with a zero
  allocation or a zero throughput there.
* **The round's jobs** (``_schedule_jobs_on_workers_helper``). Types in the order v100, p100, k80
  (shuffled every round by ``random.Random(seed + 5)`` unless the policy is heterogeneity-aware);
  on each, jobs by (priority, deficit, allocation) descending, ties in arrival order (Python's
  stable sort); a job is taken when its type has GPUs left for it and it was not taken on an
  earlier type; it is skipped when its throughput there is 0 and, for FIFO, when its priority is
  0. A job taken that is not in the allocation holds its GPUs idle for the round
  (``_schedule_jobs_on_workers``: ``elif job_id not in self._allocation: continue``).
* **Drops** (``_done_callback``). A job's steps are split over its GPUs, ``steps // GPUs`` each
  and the rest on the last; a GPU given 0 steps fails the micro-task (no progress). After 5
  failures in a row (``MAX_FAILED_ATTEMPTS``) the job is removed without a completion time: a
  multi-GPU job whose last round has fewer steps left than GPUs is always dropped this way.
* **Allocations** (``policies/*.py``): ``fifo`` (``FIFOPolicy``, mode ``base``: a persistent
  allocation, a type drawn by ``random.Random(seed).randrange`` — and then ignored: the job goes
  to the last of the types with free GPUs in alphabetical order, v100 while it is in that list,
  even when it has no room), ``fifo_perf`` (recomputed each
  time, fastest type with room, first in alphabetical type order among equal throughputs),
  ``max_min_fairness[_perf]`` and ``finish_time_fairness[_perf]`` (the LPs of Gavel's code; the
  agnostic ones take every throughput as 1, resp. as the v100 throughput; finish-time fairness
  keeps each job's accrued isolated time across calls). Gavel solves them with cvxpy/ECOS; so
  does ``optimum=ecos``, the default (:mod:`fastblox.gavel_ecos`: cvxpy's problem data, written
  here, handed to the ``ecos`` package, the optional extra ``fastblox[gavel]``): every finish time
  then equals Gavel's. Without ECOS, ``optimum=central`` takes HiGHS' optimal level and the
  analytic centre of the optimal face (:func:`_central`), ``optimum=vertex`` HiGHS' vertex. Where
  the optimum is not unique, ECOS's interior point depends on ECOS's own path, and these two
  miss Gavel by a round for some jobs (docs/fidelity.md).
"""

from __future__ import annotations

import random
import re

import numpy as np

from .errors import ConfigError, SimulationError

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: imported lazily where used
    from .results import Result

#: Gavel's policy names -> (allocation, heterogeneity-aware)
POLICIES = {
    "fifo": ("fifo", False),
    "fifo_perf": ("fifo", True),
    "max_min_fairness": ("max_min", False),
    "max_min_fairness_perf": ("max_min", True),
    "finish_time_fairness": ("ftf", False),
    "finish_time_fairness_perf": ("ftf", True),
}
#: Gavel's GPU types: the order of a cluster spec ``V:P:K`` and of the round's type loop
WORKER_TYPES = ("v100", "p100", "k80")
ROUND_S = 360.0  # simulate_scheduler_with_trace.py --time_per_iteration
RESET_S = 1920.0  # Scheduler(minimum_time_between_allocation_resets=1920)
MAX_FAILED_ATTEMPTS = 5  # scheduler.py
DEFAULT_SEED = 0
_GAVEL_CLUSTER = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*:\s*(\d+)\s*$")


def is_gavel_cluster(spec) -> bool:
    return isinstance(spec, str) and _GAVEL_CLUSTER.match(spec) is not None


def cluster_from_gavel(spec: str) -> str:
    """Gavel's cluster spec ``V:P:K`` (v100, p100, k80 counts, one GPU per server) in fastblox's
    syntax: ``36:0:0`` -> ``v100:36x1``. Raises ConfigError when it has no GPU."""
    counts = [int(x) for x in _GAVEL_CLUSTER.match(spec).groups()]
    parts = [f"{t}:{c}x1" for t, c in zip(WORKER_TYPES, counts) if c > 0]
    if not parts:
        raise ConfigError(f"--cluster: Gavel's cluster spec {spec!r} (v100:p100:k80 counts) has no GPU")
    return ",".join(parts)


#: how the max-min and finish-time-fairness LPs are solved: ``ecos`` (Gavel's own solver on the
#: problem data cvxpy gives it, :mod:`fastblox.gavel_ecos`; the optional extra ``fastblox[gavel]``),
#: ``central`` (HiGHS' level, then the analytic centre of the optimal face: no extra package) or
#: ``vertex`` (HiGHS' vertex). The default is ``ecos``, and without the package an LP policy stops
#: with an error naming the extra and ``optimum=central``: a compat run is meant to be Gavel's, and
#: its result must not change with what happens to be installed (docs/fidelity.md).
OPTIMA = ("ecos", "central", "vertex")
DEFAULT_OPTIMUM = "ecos"


def parse_options(opts: dict) -> dict:
    """``--policy-opt`` values of ``--compat gavel``: ``seed`` (Gavel's ``--seed``, default 0),
    ``reset_s`` (its ``minimum_time_between_allocation_resets``, default 1920) and ``optimum``
    (how the LP policies are solved, :data:`OPTIMA`: ``ecos``, the default, ``central`` or
    ``vertex``)."""
    out = {"seed": DEFAULT_SEED, "reset_s": RESET_S, "optimum": DEFAULT_OPTIMUM}
    for k, v in opts.items():
        if k not in out:
            raise ConfigError(f"--compat gavel has no policy option {k!r} (its options: {', '.join(out)})")
        if k == "optimum":
            if str(v).lower() not in OPTIMA:
                raise ConfigError(f"optimum={v!r} for --compat gavel: expected one of {', '.join(OPTIMA)}")
            out[k] = str(v).lower()
            continue
        try:
            out[k] = int(v) if k == "seed" else float(v)
        except (TypeError, ValueError):
            raise ConfigError(f"{k}={v!r} for --compat gavel: expected a number") from None
        if k == "reset_s" and not out[k] >= 0:
            raise ConfigError(f"reset_s={v!r} for --compat gavel: expected zero or a positive number")
    return out


def type_counts(cluster) -> dict:
    """``{gavel type: GPUs}`` of a fastblox cluster whose types are Gavel's (v100, p100, k80).
    Gavel's simulator has no placement: only the GPU count of each type matters."""
    bad = [t for t in cluster.gpu_types if t not in WORKER_TYPES]
    if bad:
        raise ConfigError(f"--cluster: --compat gavel needs Gavel's GPU types ({', '.join(WORKER_TYPES)}), "
                          f"not {', '.join(map(repr, bad))}; e.g. 36:36:36 or v100:36x1,p100:36x1,k80:36x1")
    out = {}
    for k, t in enumerate(cluster.gpu_types):
        out[t] = int(cluster.node_gpus[cluster.node_type == k].sum())
    return out


def job_throughputs(workload, types) -> np.ndarray:
    """Gavel's oracle throughputs (whole job, steps/s) of each job on each of ``types``: the
    bundled copy of its ``simulation_throughputs.json`` at the job's (job type, scale factor);
    0 where Gavel has 0 (k80, ResNet-50 batch 128 on several GPUs). Raises ConfigError naming a
    job whose type or size Gavel has not measured."""
    from .throughput import ThroughputTable

    model = workload.extra.get("model")
    if model is None or not np.isfinite(workload.iterations).all():
        raise ConfigError("--compat gavel needs a Gavel trace (job types and step counts): "
                          "read_trace(path) of a Gavel *.trace file")
    table = ThroughputTable.builtin()
    codes = table.model_codes(np.asarray(model, dtype=object))
    sizes = list(table.sizes)
    out = np.zeros((len(workload), len(types)))
    for i, (c, g) in enumerate(zip(codes.tolist(), workload.num_gpus.tolist())):
        if c < 0 or g not in sizes:
            raise ConfigError(f"--compat gavel: job {int(workload.job_id[i])} ({model[i]!r} on {g} GPUs) is not "
                              "in Gavel's throughput table")
        for k, t in enumerate(types):
            v = table.iters_per_s[c, table.gpu_types.index(t), sizes.index(g)]
            out[i, k] = v if np.isfinite(v) else 0.0
    return out


# ------------------------------------------------------------------------------ allocations
# Gavel's LPs often have many optima (the max-min level leaves capacity over; finish-time fairness
# binds only its worst jobs). Gavel's ECOS, an interior-point method, returns the optimum at the end
# of the central path: the analytic centre of the optimal face. HiGHS returns a vertex. Both are
# computed here: HiGHS gives the optimal level (and the vertex, ``optimum=vertex``); the central
# optimum is found by a log-barrier path over the same constraints as Gavel's cvxpy problem
# (:func:`_central`), and its level is checked against HiGHS'. docs/fidelity.md measures both.
def _linprog(c, a_ub, b_ub, bounds):
    from scipy.optimize import linprog

    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    return None if res.status != 0 else res.x


def _capacity_rows(m: int, n: int, sf: np.ndarray, nvar: int):
    """Gavel's ``get_base_constraints``: ``sum_t x[j,t] <= 1`` and ``sum_j sf_j x[j,t] <= C_t``
    as dense rows over ``nvar`` variables (x flattened first)."""
    a = np.zeros((m + n, nvar))
    j = np.repeat(np.arange(m), n)
    t = np.tile(np.arange(n), m)
    a[j, j * n + t] = 1.0
    a[m + t, j * n + t] = np.asarray(sf, dtype=np.float64)[j]
    return a


def _max_min_coef(thr, sf, cap):
    """``thr[j,t] sf_j / P_j``, ``P_j`` the throughput of the proportional share, in Gavel's own
    arithmetic (``ProportionalPolicy``: ``C_t / m`` scaled by the largest row sum; then
    ``MaxMinFairnessPolicyWithPerf``'s products): the overloaded runs are chaotic enough that
    rounding the coefficients differently moves results (docs/fidelity.md)."""
    m = thr.shape[0]
    x = np.repeat((cap / m)[None, :], m, axis=0)
    x = x / np.sum(x, axis=1).max()
    prop = np.sum(np.multiply(thr, x), axis=1).reshape((m, 1))
    weights = np.multiply(np.ones((m, 1)), 1.0 / prop)
    return np.multiply(thr * weights.reshape((m, 1)), np.repeat(sf[:, None], thr.shape[1], axis=1))


def max_min_vertex(thr: np.ndarray, sf: np.ndarray, cap: np.ndarray) -> tuple:
    """``MaxMinFairnessPolicyWithPerf`` by HiGHS: maximise ``min_j sum_t coef[j,t] x[j,t]`` over
    the base constraints. Returns (a vertex optimum, the optimal level)."""
    m, n = thr.shape
    coef = _max_min_coef(thr, sf, cap)
    nx = m * n
    a = np.zeros((2 * m + n, nx + 1))
    a[:m + n, :nx] = _capacity_rows(m, n, sf, nx)
    j = np.repeat(np.arange(m), n)  # z - sum_t coef[j,t] x[j,t] <= 0
    a[m + n + j, np.arange(nx)] = -coef.reshape(-1)
    a[m + n:, nx] = 1.0
    b = np.concatenate([np.ones(m), cap, np.zeros(m)])
    c = np.zeros(nx + 1)
    c[nx] = -1.0
    x = _linprog(c, a, b, [(0, None)] * nx + [(None, None)])
    if x is None:
        raise SimulationError("Gavel's max-min LP has no solution (HiGHS); this should not happen — please report it")
    return np.clip(x[:nx].reshape(m, n), 0.0, 1.0), float(x[nx])


def max_min_lp(thr: np.ndarray, sf: np.ndarray, cap: np.ndarray, central: bool = True) -> np.ndarray:
    """Gavel's max-min allocation: the central optimum (as ECOS), or HiGHS' vertex. Alike jobs
    (same coefficients and size) share one block with their count as weight: the centre of a
    symmetric problem is symmetric, so they get the same allocation either way."""
    x_v, level = max_min_vertex(thr, sf, cap)
    if not central:
        return x_v
    coef = _max_min_coef(thr, sf, cap)
    key = np.concatenate([coef, sf[:, None]], axis=1)
    uniq, inv, cnt = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    c_coef, c_sf = uniq[:, :-1], uniq[:, -1]
    m, n = c_coef.shape
    # one block per class: y = x (n entries); the level t: coef.x - t >= 0
    lin = c_coef
    y, t = _central(lin, -np.ones(m), np.zeros(m), None, c_sf, cap, cnt.astype(np.float64), maximise=True)
    if not abs(t - level) <= 1e-6 * max(1.0, abs(level)):  # (not the optimum: keep HiGHS' vertex)
        return x_v
    return np.clip(y[:, :n], 0.0, 1.0)[inv]


def _max_step(p, p_full):
    """The largest step in (0, 1] along which the linear slacks ``p`` (now) -> ``p_full`` (after a
    full step) stay positive (the cone's slack, last, is left to the line search)."""
    best = 1.0
    for q, q2 in zip(p[:4], p_full[:4]):
        d = q2 - q
        neg = d < 0
        if neg.any():
            best = min(best, float(np.min(-q[neg] / d[neg])))
    return best


def _central(lin, alpha, beta, prod_thr, sf, cap, w, maximise, tol=1e-10):
    """The analytic centre of the optimal face (the central path's end) of Gavel's problem in
    block form: per job ``j`` a block ``y_j`` (its allocation ``x_j`` over the ``n`` types, then
    for finish-time fairness its ``u_j`` >= 1 / throughput), one level ``t``; barrier terms (job
    terms weighted by ``w_j``, alike jobs merged) for ``x >= 0``, ``sum_t x_j <= 1``,
    ``sum_j w_j sf_j x_jt <= C_t``, ``lin_j . y_j + alpha_j t + beta_j >= 0`` and, with
    ``prod_thr``, the second-order cone ``(thr_j . x_j) u_j >= 1``. Newton steps on the barrier
    with a shrinking weight on the objective (``t`` maximised or minimised) until the duality gap
    is below ``tol``. Returns ``(y, t)``; the callers check ``t`` against HiGHS.""" 
    m, k = lin.shape
    n = len(cap)
    has_u = prod_thr is not None
    x0 = 0.5 * min(1.0 / n, float(np.min(cap / max((w * sf).sum(), 1e-300))))
    y = np.zeros((m, k))
    y[:, :n] = x0
    if has_u:
        a = (prod_thr * y[:, :n]).sum(axis=1)
        y[:, n] = 2.0 / a
    g_lin = (lin * y).sum(axis=1) + beta
    t = float(np.min(g_lin) * 0.5) if maximise else float(np.max(-g_lin / alpha) + 1.0)
    sgn = -1.0 if maximise else 1.0
    nu = float(w.sum() * (n + 2) + n + (m if has_u else 0))

    def parts(y, t):
        x = y[:, :n]
        s1 = x
        s2 = 1.0 - x.sum(axis=1)
        s3 = cap - (w[:, None] * sf[:, None] * x).sum(axis=0)
        s4 = (lin * y).sum(axis=1) + alpha * t + beta
        s5 = (prod_thr * x).sum(axis=1) * y[:, n] - 1.0 if has_u else None
        return s1, s2, s3, s4, s5

    def ok(p):
        return all(q is None or (q > 0).all() for q in p)

    def change(dt, mu, p, p2):
        """The barrier function's change from ``p`` to ``p2`` (as log ratios: exact at any scale)."""
        f = sgn * dt / mu
        for q, q2, wq in zip(p, p2, (w[:, None], w, 1.0, w, 1.0)):
            if q is not None:
                f -= float((wq * np.log(q2 / q)).sum())
        return f

    def newton(y, t, mu, p):
        s1, s2, s3, s4, s5 = p
        # gradient and Hessian blocks: B_j (k x k), h_j (coupling with t), h_tt; capacity rows low-rank
        gy = np.zeros((m, k))
        gy[:, :n] += -w[:, None] / s1 + (w / s2)[:, None]
        gy[:, :n] += (sf[:, None] * w[:, None]) / s3[None, :]
        gy += -(w / s4)[:, None] * lin
        gt = sgn / mu - float((w * alpha / s4).sum())
        B = np.zeros((m, k, k))
        idx = np.arange(n)
        B[:, idx, idx] += w[:, None] / s1 ** 2
        B[:, :n, :n] += (w / s2 ** 2)[:, None, None]
        B += (w / s4 ** 2)[:, None, None] * lin[:, :, None] * lin[:, None, :]
        h = (w * alpha / s4 ** 2)[:, None] * lin
        htt = float((w * alpha ** 2 / s4 ** 2).sum())
        if has_u:
            a = (prod_thr * y[:, :n]).sum(axis=1)
            u = y[:, n]
            dg = np.zeros((m, k))
            dg[:, :n] = prod_thr * u[:, None]
            dg[:, n] = a
            gy += -dg / s5[:, None]
            B += dg[:, :, None] * dg[:, None, :] / (s5 ** 2)[:, None, None]
            B[:, :n, n] -= prod_thr / s5[:, None]
            B[:, n, :n] -= prod_thr / s5[:, None]
        # capacity: U[:, t] has w_j sf_j at x_jt; weight 1 / s3_t^2
        U = np.zeros((m, k, n))
        U[:, idx, idx] = (w * sf)[:, None]
        d = 1.0 / s3 ** 2

        def m_inv(r):  # (B + U diag(d) U^T)^-1 r, r: (m, k, c)
            bi_r = np.linalg.solve(B, r)
            bi_u = np.linalg.solve(B, U)
            cap_m = np.diag(1.0 / d) + np.einsum("jkt,jks->ts", U, bi_u)
            corr = np.linalg.solve(cap_m, np.einsum("jkt,jkc->tc", U, bi_r))
            return bi_r - np.einsum("jkt,tc->jkc", bi_u, corr)

        sol = m_inv(np.stack([-gy, h], axis=2))
        my, mh = sol[:, :, 0], sol[:, :, 1]
        schur = htt - float((h * mh).sum())
        dt = (-gt - float((h * my).sum())) / schur
        dy = my - mh * dt
        dec = -(float((gy * dy).sum()) + gt * dt)
        return dy, dt, dec

    mu = 1.0
    p = parts(y, t)
    stuck = False
    for _ in range(200):
        for _ in range(60):
            try:
                with np.errstate(all="ignore"):
                    dy, dt, dec = newton(y, t, mu, p)
            except np.linalg.LinAlgError:  # slacks underflowed: as far as float64 goes
                stuck = True
                break
            if not np.isfinite(dec) or dec < 1e-12:
                stuck = stuck or not np.isfinite(dec)
                break
            step = min(1.0, 0.99 * _max_step(p, parts(y + dy, t + dt)))
            while step > 1e-12:
                y2, t2 = y + step * dy, t + step * dt
                p2 = parts(y2, t2)
                if ok(p2) and change(step * dt, mu, p, p2) <= -0.25 * step * dec:
                    break
                step *= 0.5
            if step <= 1e-12:
                break
            y, t, p = y2, t2, p2
            if dec < 1e-10:
                break
        if stuck or nu * mu < tol * max(1.0, abs(t)):
            break
        mu *= 0.02
    return y, t

def _ftf_feasible(thr, sf, cap, need):
    """HiGHS: an allocation with ``sum_t thr[j,t] x[j,t] >= need_j`` for every job (None if none)."""
    m, n = thr.shape
    nx = m * n
    a = np.zeros((2 * m + n, nx))
    a[:m + n] = _capacity_rows(m, n, sf, nx)
    j = np.repeat(np.arange(m), n)
    a[m + n + j, np.arange(nx)] = -thr.reshape(-1)
    b = np.concatenate([np.ones(m), cap, -need])
    return _linprog(np.zeros(nx), a, b, [(0, None)] * nx)


def ftf_lp(thr, sf, cap, since_start, remaining, isolated_time, central=True, rel_tol=1e-7, max_iter=80):
    """``FinishTimeFairnessPolicyWithPerf``: minimise ``max_j (since_start_j + R_j / sum_t thr[j,t]
    x[j,t]) / isolated_time_j`` over the base constraints. The central optimum (as ECOS; cvxpy
    writes ``inv_pos`` as the cone ``a u >= 1``) is checked by HiGHS: no allocation reaches a
    level 1e-5 below it. ``central=False``, or a failed check: HiGHS' vertex at the optimal level,
    found by bisection (each probe one feasibility LP: ``sum_t thr[j,t] x[j,t] >= R_j / (level
    isolated_time_j - since_start_j)``). None when no level is feasible (Gavel then falls back to
    the isolated allocation)."""
    best_thr = thr.max(axis=1)
    if (best_thr <= 0).any():
        return None
    m, n = thr.shape

    def probe(level):
        slack = level * isolated_time - since_start
        return None if (slack <= 0).any() else _ftf_feasible(thr, sf, cap, remaining / slack)

    if central:
        lin = np.zeros((m, n + 1))
        lin[:, n] = -remaining / isolated_time
        y, t = _central(lin, np.ones(m), -since_start / isolated_time, thr, sf.astype(np.float64), cap, np.ones(m),
                        maximise=False)
        if probe(t * (1.0 - 1e-5)) is None:
            return np.clip(y[:, :n], 0.0, 1.0)
    lo = float(np.max((since_start + remaining / best_thr) / isolated_time))
    hi, best = None, None
    level = max(lo, 1e-9) * 2.0
    for _ in range(max_iter):  # find a feasible upper level
        x = probe(level)
        if x is not None:
            hi, best = level, x
            break
        lo, level = level, level * 4.0
    if hi is None:
        return None
    for _ in range(max_iter):
        if hi - lo <= rel_tol * hi:
            break
        mid = 0.5 * (lo + hi)
        x = probe(mid)
        if x is None:
            lo = mid
        else:
            hi, best = mid, x
    return np.clip(best.reshape(m, n), 0.0, 1.0)


class _Fifo:
    """``FIFOPolicy``: base mode keeps its allocation between calls; perf mode recomputes it."""

    def __init__(self, aware: bool, seed: int):
        self.aware = aware
        self.rng = random.Random(seed)  # FIFOPolicy(seed=seed): self._rng.seed(seed)
        self.alloc = {}  # job -> type index (alphabetical)

    def allocate(self, jobs, thr, sf, cap, types_abc):
        sfd = dict(zip(jobs, sf.tolist()))
        thd = {j: thr[k] for k, j in enumerate(jobs)}
        avail = {t: int(c) for t, c in zip(types_abc, cap)}
        if self.aware:
            self.alloc = {}
        queue = [j for j in jobs if j not in self.alloc]
        for j in sorted(self.alloc):
            t = self.alloc[j]
            if j not in sfd:  # completed: the head of the queue may take its type
                if queue:
                    h = queue[0]
                    if sfd[h] <= avail[types_abc[t]] and thd[h][t] > 0.0:
                        queue.pop(0)
                        self.alloc[h] = t
                        avail[types_abc[t]] -= sfd[h]
                del self.alloc[j]
            else:
                avail[types_abc[t]] -= sfd[j]
        free = sorted(t for t in avail if avail[t] > 0)
        while queue and free:
            j = queue.pop(0)
            fits = [(i, t) for i, t in enumerate(free) if avail[t] >= sfd[j]]
            if not fits:
                break
            if not self.aware:
                idx = self.rng.randrange(len(fits))
                # Gavel's bug: the drawn type is never read; `worker_type` is what the loop over
                # the free types (alphabetical) left in it: the last of them
                wt = free[-1]
            else:
                wt, idx, best = None, None, -1.0
                for i, (_, t) in enumerate(fits):
                    v = thd[j][types_abc.index(t)]
                    if v > best:
                        best, wt, idx = v, t, i
            ti = types_abc.index(wt)
            if thd[j][ti] > 0.0:
                self.alloc[j] = ti
                avail[wt] -= sfd[j]
                if avail[wt] == 0:
                    free.pop(fits[idx][0])
        x = np.zeros(thr.shape)
        pos = {j: k for k, j in enumerate(jobs)}
        for j, t in self.alloc.items():
            if j in pos:
                x[pos[j], t] = 1.0
        return x


class _Ftf:
    """``FinishTimeFairnessPolicy[WithPerf]``: keeps each job's accrued isolated time."""

    def __init__(self):
        self.cum = {}
        self.prev_rem, self.prev_iso = {}, {}

    def allocate(self, jobs, thr, sf, cap, since_start, remaining, optimum="central"):
        m = len(jobs)
        x_iso = (cap[None, :] / m) / sf[:, None]
        x_iso = x_iso / np.maximum(x_iso.sum(axis=1), 1.0)[:, None]
        iso = (thr * x_iso).sum(axis=1)
        for k, j in enumerate(jobs):
            self.cum.setdefault(j, 0.0)
            if j in self.prev_rem:
                self.cum[j] += (self.prev_rem[j] - remaining[k]) / self.prev_iso[j]
        expected_iso = np.array([self.cum[j] for j in jobs]) + remaining / iso
        if optimum == "ecos":
            from . import gavel_ecos

            x = gavel_ecos.ftf(thr, sf, cap, since_start, remaining, expected_iso)
        else:
            x = ftf_lp(thr, sf, cap, since_start, remaining, expected_iso, optimum == "central")
        self.prev_rem = dict(zip(jobs, remaining.tolist()))
        self.prev_iso = dict(zip(jobs, iso.tolist()))
        return x_iso if x is None else x


# ------------------------------------------------------------------------------ the simulation
class _Run:
    """One run of :func:`simulate`: ``Scheduler.simulate``'s loop, a method per part."""

    def __init__(self, arrival, steps, sf, thr, counts, policy, seed, round_s, reset_s, optimum=DEFAULT_OPTIMUM):
        self.arrival, self.steps, self.sf, self.thr = arrival, steps, sf, thr
        self.optimum = optimum
        self.kind, self.aware = POLICIES[policy]
        self.round_s, self.reset_s = float(round_s), float(reset_s)
        types = [t for t in WORKER_TYPES if counts.get(t, 0) > 0]
        self.types = types  # the columns of thr
        self.abc = sorted(types)  # the LPs' and FIFO's type order
        self.abc_col = [types.index(t) for t in self.abc]
        self.cap = np.array([counts[t] for t in types], dtype=np.float64)
        self.shuffler = random.Random(seed + 5)
        self.fifo = _Fifo(self.aware, seed) if self.kind == "fifo" else None
        self.ftf = _Ftf() if self.kind == "ftf" else None
        n, T = thr.shape
        self.done_steps = np.zeros(n, dtype=np.int64)
        self.job_time = np.zeros((n, T))
        self.deficit = np.zeros((n, T))
        self.worker_time = np.zeros(T)
        self.fails = np.zeros(n, dtype=np.int64)
        self.finish = np.full(n, -1.0)
        self.first = np.full(n, -1.0)
        self.dropped = np.zeros(n, dtype=bool)
        self.rounds_run = np.zeros(n, dtype=np.int64)
        self.last_round = np.full(n, -2, dtype=np.int64)
        self.preempted = np.zeros(n, dtype=np.int64)
        self.run_s = np.zeros(n)
        self.active = []  # Gavel's self._jobs, in arrival order
        self.alloc = {}  # job -> allocation row (columns as thr)
        self.need_update = False
        self.last_reset = 0.0
        self.now = 0.0
        self.n_alloc = 0
        self.rounds = 0

    # -- jobs arriving and leaving
    def _add(self, j):
        self.active.append(j)
        self.job_time[j] = self.round_s / 2.0
        self.deficit[j] = 0.0
        self.need_update = True

    def _remove(self, j):
        self.active.remove(j)
        self.need_update = True

    # -- the allocation
    def _allocation(self):
        jobs = list(self.active)
        self.n_alloc += 1
        if not jobs:
            return {}
        idx = np.array(jobs)
        x = self._allocate(jobs, idx, self.thr[idx][:, self.abc_col], self.cap[self.abc_col])
        out = np.zeros((len(jobs), len(self.types)))
        out[:, self.abc_col] = x
        return {j: out[k] for k, j in enumerate(jobs)}

    def _allocate(self, jobs, idx, thr, cap):
        """Gavel's policy's ``x`` for ``jobs`` (rows) over the round's type columns, given their
        throughputs ``thr`` and the capacities ``cap`` in that column order."""
        sf = self.sf[idx].astype(np.float64)
        if self.kind == "fifo":
            return self.fifo.allocate(jobs, thr, self.sf[idx], cap, self.abc)
        if self.kind == "max_min":
            return self._max_min(thr if self.aware else np.ones_like(thr), sf, cap)
        t_eff = thr if self.aware else np.repeat(self.thr[idx][:, [self.types.index("v100")]]
                                                 if "v100" in self.types else thr[:, :1], len(self.abc), axis=1)
        rem = (self.steps[idx] - self.done_steps[idx]).astype(np.float64)
        return self.ftf.allocate(jobs, t_eff, sf, cap, self.now - self.arrival[idx], rem, self.optimum)

    def _max_min(self, thr, sf, cap):
        if self.optimum == "ecos":
            from . import gavel_ecos

            return gavel_ecos.max_min(_max_min_coef(thr, sf, cap), sf, cap)
        return max_min_lp(thr, sf, cap, self.optimum == "central")

    def _reset_time(self):
        elapsed = self.now - self.last_reset
        half = self.round_s / 2.0
        for j in self.active:
            should = self.alloc[j] * elapsed if j in self.alloc else 0.0
            self.deficit[j] += should - (self.job_time[j] - half)
            self.job_time[j] = half
        self.worker_time[:] = half * len(self.active)
        self.last_reset = self.now

    def _priorities(self):
        since = self.now - self.last_reset
        if self.need_update and (since >= self.reset_s or self.last_reset == 0):
            self._reset_time()
            self.alloc = self._allocation()
            self.need_update = False
        T = len(self.types)
        prio = {}
        for j in self.active:
            a = self.alloc.get(j)
            row = [0.0] * T
            if a is not None:
                for t in range(T):
                    w = self.worker_time[t]
                    frac = 0.0 if w == 0.0 else self.job_time[j, t] / w
                    if a[t] == 0.0 or self.thr[j, t] == 0:
                        row[t] = 0.0
                    elif frac > 0.0:
                        row[t] = a[t] / frac
                    else:
                        row[t] = a[t] * 1e9
            prio[j] = row
        return prio

    # -- one round
    def _select(self):
        prio = self._priorities()
        order = list(range(len(self.types)))  # v100, p100, k80 (those present)
        if not self.aware:
            self.shuffler.shuffle(order)
        queue = []
        for t in order:
            entries = [(j, t, prio[j][t], self.deficit[j, t], self.alloc[j][t] if j in self.alloc else 0.0)
                       for j in self.active]
            queue += sorted(entries, key=lambda e: (e[2], e[3], e[4]), reverse=True)
        left = self.cap.astype(np.int64).tolist()
        taken, out = set(), []
        for j, t, p, *_ in queue:
            if left[t] == 0 or j in taken or self.thr[j, t] <= 0:
                continue
            if self.kind == "fifo" and p <= 0.0:
                continue
            if self.sf[j] > left[t]:
                continue
            left[t] -= self.sf[j]
            taken.add(j)
            if j in self.alloc:  # (a job not in the allocation holds its GPUs idle)
                out.append((j, t))
        return out

    def _dispatch(self, chosen):
        """Each chosen job's micro-task ``(finish time, job, type, steps)``; a job that ran before
        and not in the previous round counts one preemption."""
        running = []
        for j, t in chosen:
            if 0 <= self.last_round[j] < self.rounds - 1:
                self.preempted[j] += 1
            self.last_round[j] = self.rounds
            r = float(self.thr[j, t])
            s = min(int(r * self.round_s), int(self.steps[j] - self.done_steps[j]))
            running.append((self.now + s / r, j, t, s))
            if self.first[j] < 0:
                self.first[j] = self.now
        return running

    def _complete(self, running, round_start):
        """``_done_callback`` of each micro-task (largest finish time first, as the heap pops)."""
        for f, j, t, s in sorted(running, key=lambda e: (-e[0], e[1])):
            ex = f - round_start
            if s // self.sf[j] <= 0 or ex <= 0:  # a GPU given no steps: the micro-task failed
                self.fails[j] += 1
                self.need_update = True
                if self.fails[j] >= MAX_FAILED_ATTEMPTS:
                    self.dropped[j] = True
                    self._remove(j)
                continue
            self.fails[j] = 0
            self.done_steps[j] += s
            self.rounds_run[j] += 1
            self.run_s[j] += s / self.thr[j, t]
            self.job_time[j, t] += ex
            self.worker_time[t] += ex
            if self.done_steps[j] >= self.steps[j]:
                self.finish[j] = f
                self._remove(j)

    def run(self):
        n = len(self.arrival)
        q, left = 0, n
        running = []
        round_start, round_end = 0.0, None
        self.now = float(self.arrival[0]) if n else 0.0
        idle_loops = 0
        while left > 0:
            nxt = float(self.arrival[q]) if q < n else None
            if nxt is None and not running:
                self.last_reset = 0.0  # "force a reset"
            if running:
                mx = max(r[0] for r in running)
                if round_end is not None:
                    round_start = round_end
                round_end = mx
                self.now = mx
            elif nxt is not None:
                self.now = nxt
            before = left
            self._complete(running, round_start)
            left = n - q + len(self.active)
            while q < n and self.arrival[q] <= self.now:
                self._add(q)
                q += 1
            left = n - q + len(self.active)
            running = self._dispatch(self._select())
            self.rounds += 1
            idle_loops = idle_loops + 1 if (not running and nxt is None and left == before) else 0
            if idle_loops > 2:
                raise SimulationError(f"--compat gavel: {len(self.active)} job(s) can never run on this cluster "
                                      "(Gavel's simulator loops forever here)")


def simulate(arrival, steps, sf, thr, counts: dict, policy: str, seed: int = DEFAULT_SEED,
             round_s: float = ROUND_S, reset_s: float = RESET_S, optimum: str = DEFAULT_OPTIMUM) -> dict:
    """Replay jobs (arrival order) as Gavel's ``Scheduler.simulate`` does. ``thr[j, k]``: job
    ``j``'s throughput (steps/s, whole job) on the ``k``-th of Gavel's types present in
    ``counts`` (in the order v100, p100, k80). Returns per-job ``start_s``, ``finish_s`` (-1:
    never; a dropped job has none), ``dropped``, ``rounds`` (micro-tasks that made progress),
    ``preemptions`` (returns after a round without the job), ``attained_s`` (seconds run), and
    ``end_s``, ``allocations``, ``num_rounds`` (scheduling passes, idle ones included).
    ``optimum``: how the LP policies are solved (:data:`OPTIMA`)."""
    if POLICIES[policy][0] in ("max_min", "ftf") and optimum == "ecos":
        from .gavel_ecos import require_ecos

        require_ecos()
    r = _Run(np.asarray(arrival, dtype=np.float64), np.asarray(steps, dtype=np.int64),
             np.asarray(sf, dtype=np.int64), np.asarray(thr, dtype=np.float64), counts, policy, seed, round_s, reset_s,
             optimum)
    r.run()
    done = r.finish >= 0
    return {"start_s": r.first, "finish_s": r.finish, "dropped": r.dropped, "rounds": r.rounds_run,
            "preemptions": r.preempted,
            "attained_s": r.run_s, "end_s": float(r.now), "allocations": r.n_alloc, "num_rounds": r.rounds,
            "num_finished": int(done.sum())}


def run(workload, r, cluster, tracked, sim_timer) -> "Result":
    """``--compat gavel``: replay ``workload`` with resolved spec ``r`` on ``cluster`` and build
    the run's :class:`~fastblox.results.Result` (dropped jobs: no finish time, counted in the
    summary as ``num_dropped``)."""
    from .results import Result, _jobs_table, _summary
    from .slices import mark

    opts = parse_options(dict(r.policy_opts))
    counts = type_counts(cluster)
    types = [t for t in WORKER_TYPES if counts.get(t, 0) > 0]
    thr = job_throughputs(workload, types)
    steps = workload.iterations.astype(np.int64)
    with sim_timer() as t:
        out = simulate(workload.submit_s, steps, workload.num_gpus, thr, counts, r.policy, opts["seed"],
                       r.round_s, opts["reset_s"], opts["optimum"])
    finish, first, att = out["finish_s"], out["start_s"], out["attained_s"]
    att_gpu = att * workload.num_gpus
    n_pre = out["preemptions"]
    dropped = out["dropped"]
    jobs = lambda: _jobs_table(workload, first, finish, n_pre, att, att_gpu, tracked,  # noqa: E731
                               more={"dropped": dropped.copy(), "rounds": out["rounds"]})
    summ = _summary(workload, cluster, tracked, finish, first, n_pre, att_gpu, float(workload.submit_s.min()),
                    out["end_s"], t.seconds, 0.0)
    summ["num_dropped"] = int((dropped & tracked).sum())
    summ["dropped_job_ids"] = [int(i) for i in workload.job_id[dropped & tracked]]
    summ["engine"] = "compat gavel (Gavel's Scheduler.simulate)"
    summ["allocations"] = out["allocations"]
    summ["num_rounds"] = out["num_rounds"]
    mark(summ, None)
    return Result(jobs, summ, r.as_dict())
