"""Gavel (Narayanan et al., OSDI'20): heterogeneity-aware allocations solved as linear programs,
realised by Gavel's round-based mechanism.

**Allocation.** An allocation ``x[j, t]`` is the fraction of time job ``j`` should run on GPU type
``t`` with all its ``k_j`` GPUs (``sum_t x[j, t] <= 1``, ``sum_j k_j x[j, t] <= C_t``). It is
recomputed when the set of active jobs has changed, but at most once every ``recompute_s``
seconds (Gavel's simulator: 1,920 s); a job that arrived after the last recomputation waits for
the next one. Objectives (``thr[j, t]``: the job's whole-gang throughput on type ``t``):

* ``gavel`` / ``gavel-las`` — max-min fairness, heterogeneity-aware (Gavel's
  ``max_min_fairness_perf``): maximise ``min_j sum_t thr[j,t] k_j x[j,t] / P_j`` with
  ``P_j = sum_t thr[j,t] C_t / sum_t C_t`` (what an equal share of every type would give);
  among the optima, the one with the largest total normalised throughput (a small secondary
  objective; Gavel's ECOS returns an interior optimum instead, see docs/fidelity.md).
* ``gavel-las-agnostic`` — the same with every throughput 1 (Gavel's ``max_min_fairness``).
* ``gavel-ftf`` — finish-time fairness (Gavel's ``finish_time_fairness_perf``, Themis' metric):
  minimise ``max_j rho_j``, ``rho_j = (elapsed_j + R_j / sum_t thr[j,t] x[j,t]) / (c_j + R_j /
  iso_j)`` with ``R_j`` the remaining work, ``iso_j`` its throughput on a ``1/m`` share of every
  type and ``c_j`` the isolated time it has accrued, solved by bisection on ``rho`` (each probe
  an exact test when throughputs are proportional across types, else answered by bounds that
  earlier max-scale LPs proved or by one more: ``ftf_allocation``; the LP-per-probe reference is
  ``ftf_allocation_lp``). ``gavel-ftf-agnostic``: every type's throughput taken as the reference type's.
* ``gavel-fifo`` — Gavel's ``fifo_perf``: jobs in arrival order, each given the fastest type with
  room for it, until one does not fit.

**Mechanism** (every round of ``--round-s``, 360 s by default as in Gavel): on type ``t`` job
``j``'s priority is ``x[j, t] / time[j, t]``, ``time`` the seconds it has run on ``t`` since the
last recomputation plus half a round (Gavel's ``job_time_so_far``); ties by Gavel's deficit, then
``x``, then arrival. Types are served one after the other (fastest first; agnostic policies in a
seeded random order each round, as Gavel shuffles them); on each, jobs are taken in priority
order while GPUs of that type remain, skipping jobs that do not fit (and, for ``gavel-fifo``,
jobs of zero priority). A job keeps its GPUs from one round to the next when it is chosen for the
same type again. LPs are solved with HiGHS (``scipy.optimize.linprog``).
"""

from __future__ import annotations

import time

import numpy as np

from .. import parts
from ..errors import ConfigError
from ..kernels import enums
from ..kernels import planners as kplanners
from ..planning import PlanContext
from ._opts import nonneg


def _scipy():
    """``(linprog, coo_matrix)``, or None without scipy (an optional dependency, extra "lp").
    Imported when a Gavel policy is built, not with fastblox: it is 0.3 s of every start."""
    try:
        from scipy.optimize import linprog
        from scipy.sparse import coo_matrix
    except ImportError:  # pragma: no cover - exercised only without scipy
        return None
    return linprog, coo_matrix


DEFAULT_ROUND_S = 360.0
DEFAULT_RECOMPUTE_S = 1920.0
EPS_EFFICIENCY = 1e-4  # weight of the secondary objective (total normalised throughput)


def _solve(c, a_ub, b_ub, bounds):
    linprog, _ = _scipy()
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0:
        return None
    return res.x


def _caps_rows(a: int, T: int, sf: np.ndarray):
    """COO entries of ``sum_t x[j,t] <= 1`` (rows 0..a-1) and ``sum_j k_j x[j,t] <= C_t``
    (rows a..a+T-1) over the flattened ``x`` (index ``j * T + t``)."""
    j = np.repeat(np.arange(a), T)
    t = np.tile(np.arange(T), a)
    col = j * T + t
    rows = np.concatenate([j, a + t])
    cols = np.concatenate([col, col])
    vals = np.concatenate([np.ones(a * T), sf[j].astype(np.float64)])
    return rows, cols, vals


def max_min_allocation(thr: np.ndarray, sf: np.ndarray, cap: np.ndarray, aware: bool = True) -> np.ndarray:
    """Gavel's max-min fairness allocation ``x[a, T]`` (see the module docstring).

    Jobs alike (same throughputs and size) get the same allocation: averaging any optimum over
    them keeps it feasible and optimal, so the LP is solved once per class of alike jobs (with
    the class size as a multiplicity) — tens of variables instead of thousands on real traces."""
    a, T = thr.shape
    if a == 0:
        return np.zeros((0, T))
    key = np.concatenate([np.where(thr > 0, thr if aware else 1.0, 0.0), sf[:, None].astype(np.float64)], axis=1)
    uniq, inv, counts = np.unique(key, axis=0, return_inverse=True, return_counts=True)
    inv = inv.reshape(-1)
    if len(uniq) < a:
        xc = _max_min_classes(uniq[:, :T], uniq[:, T].astype(np.int64), counts, cap, True)
        return xc[inv]
    return _max_min_classes(thr, sf, np.ones(a, dtype=np.int64), cap, aware)


def _max_min_classes(thr, sf, mult, cap, aware):
    """The max-min LP over classes of ``mult`` alike jobs each (``mult`` = 1: one job a class)."""
    a, T = thr.shape
    can = thr > 0
    t_eff = np.where(can, thr if aware else 1.0, 0.0)
    p = (t_eff * cap[None, :]).sum(axis=1) / cap.sum()
    p = np.where(p > 0, p, 1.0)
    coef = t_eff * sf[:, None] / p[:, None]
    nx = a * T
    # variables: x (nx), z; minimise -z - eps * (mean normalised throughput)
    c = np.concatenate([-EPS_EFFICIENCY * coef.reshape(-1) / mult.sum(), [-1.0]])
    r1, c1, v1 = _caps_rows(a, T, sf * mult)
    c[:nx] *= np.repeat(mult, T)
    # z - sum_t coef[j, t] x[j, t] <= 0   (rows a+T .. 2a+T-1)
    j = np.repeat(np.arange(a), T)
    rows = np.concatenate([r1, a + T + j, a + T + np.arange(a)])
    cols = np.concatenate([c1, np.arange(nx), np.full(a, nx)])
    vals = np.concatenate([v1, -coef.reshape(-1), np.ones(a)])
    coo_matrix = _scipy()[1]
    m = coo_matrix((vals, (rows, cols)), shape=(2 * a + T, nx + 1)).tocsr()
    b = np.concatenate([np.ones(a), cap.astype(np.float64), np.zeros(a)])
    bounds = np.zeros((nx + 1, 2))
    bounds[:nx, 1] = np.where(can, 1.0, 0.0).reshape(-1)
    bounds[nx, 1] = np.inf
    x = _solve(c, m, b, bounds)
    if x is None:
        raise ConfigError("Gavel's max-min LP has no solution (HiGHS); this should not happen — please report it")
    return np.clip(x[:nx].reshape(a, T), 0.0, 1.0)


class _RateLP:
    """The LPs of one finish-time-fairness allocation over ``x`` (index ``j * T + t``): the
    constraint matrix is built once, each probe changes only the ``need`` right-hand side (the
    feasibility LP) or the ``need`` column of the scale variable (the max-scale LP)."""

    def __init__(self, thr, sf, cap, can):
        a, T = thr.shape
        self.thr, self.cap, self.a, self.T = thr, cap.astype(np.float64), a, T
        nx = a * T
        r1, c1, v1 = _caps_rows(a, T, sf)
        j = np.repeat(np.arange(a), T)
        self.rows = np.concatenate([r1, a + T + j])
        self.cols = np.concatenate([c1, np.arange(nx)])
        self.vals = np.concatenate([v1, -thr.reshape(-1)])
        self.m = _scipy()[1]((self.vals, (self.rows, self.cols)), shape=(2 * a + T, nx)).tocsr()
        self.bounds = np.zeros((nx, 2))
        self.bounds[:, 1] = np.where(can, 1.0, 0.0).reshape(-1)

    def feasible(self, need):
        """An allocation giving every job throughput >= ``need`` (None if there is none)."""
        b = np.concatenate([np.ones(self.a), self.cap, -need])
        # among feasible points, prefer more throughput (a deterministic, efficient vertex)
        c = -self.thr.reshape(-1) / np.maximum(need.max(), 1e-12) * EPS_EFFICIENCY
        return _solve(c, self.m, b, self.bounds)

    def max_scale(self, need):
        """``(s, x)``: the largest ``s`` such that some allocation gives every job ``s * need``
        (``s`` capped at ``MAX_SCALE``); None if HiGHS fails."""
        a, T = self.a, self.T
        nx = a * T
        rows = np.concatenate([self.rows, a + T + np.arange(a)])
        cols = np.concatenate([self.cols, np.full(a, nx)])
        vals = np.concatenate([self.vals, need])
        m = _scipy()[1]((vals, (rows, cols)), shape=(2 * a + T, nx + 1)).tocsr()
        b = np.concatenate([np.ones(a), self.cap, np.zeros(a)])
        bounds = np.concatenate([self.bounds, [[0.0, MAX_SCALE]]])
        c = np.zeros(nx + 1)
        c[nx] = -1.0
        x = _solve(c, m, b, bounds)
        if x is None:
            return None
        return float(x[nx]), np.clip(x[:nx].reshape(a, T), 0.0, 1.0)


def _feasible_rate(thr, sf, cap, need, can):
    """An allocation giving every job throughput >= ``need`` (None if there is none)."""
    return _RateLP(thr, sf, cap, can).feasible(need)


MAX_SCALE = 1e9
CERT_MARGIN = 1e-6  # relative margin of certified rho bounds (HiGHS's feasibility tolerance is 1e-7)
SCALE_DOUBT = 1e-6  # a max-scale LP whose optimum is within this of 1 does not decide: the feasibility LP does


def _proportional(thr):
    """``(s, a)`` with ``thr = a[:, None] * s[None, :]`` (every job's throughputs in the same
    proportions across types, as for jobs without a measured profile), else None."""
    amax = thr.max(axis=1)
    pos = amax > 0
    if not pos.any():
        return None
    j0 = int(np.argmax(pos))
    s = thr[j0] / amax[j0]
    if np.abs(thr[pos] / amax[pos, None] - s[None, :]).max() > 1e-12:
        return None
    return s, amax


def uniform_rate_feasible(s, amax, sf, cap, need) -> bool:
    """Exact feasibility of the FTF probe when ``thr = amax[:, None] * s``: is there ``x >= 0``
    with ``sum_t x[j,t] <= 1``, ``sum_j sf[j] x[j,t] <= cap[t]``, ``sum_t thr[j,t] x[j,t] >= need[j]``?

    Job ``j`` is ``sf[j]`` unit jobs each needing ``need[j] / amax[j]`` on ``cap[t]`` machines of
    speed ``s[t]`` (averaging the copies' allocations gives the job's), and unit jobs with rate
    requirements on uniform machines are feasible iff, needs sorted in decreasing order, the ``i``
    largest never exceed the ``i`` fastest machine units' speed (Horvath, Lam and Sethi 1977;
    Gonzalez and Sahni 1978). Between two jobs' boundaries both sides are linear resp. concave in
    ``i``, so testing at the boundaries is exact. ``O(a log a)``; the LP is its reference."""
    zero = amax <= 0
    if (need[zero] > 0).any():
        return False
    N = np.where(zero, 0.0, need / np.where(zero, 1.0, amax))
    keep = (s > 0) & (cap > 0)
    sp, cp = s[keep], cap[keep].astype(np.float64)
    o = np.argsort(-sp, kind="stable")
    knot_x = np.concatenate([[0.0], np.cumsum(cp[o])])
    knot_y = np.concatenate([[0.0], np.cumsum(cp[o] * sp[o])])
    order = np.argsort(-N, kind="stable")
    k = sf[order].astype(np.float64)
    top = np.interp(np.cumsum(k), knot_x, knot_y)  # the best machine units' speed (flat beyond all)
    return bool((np.cumsum(k * N[order]) <= top * (1.0 + 1e-12)).all())


def uniform_rate_allocation(s, amax, sf, cap, need):
    """An allocation meeting ``need`` when ``uniform_rate_feasible`` holds, built without an LP
    (compiled: ``kernels.planners.uniform_rate_allocation``, which describes it; plain twin
    ``reference.planners.uniform_rate_allocation_reference``)."""
    a, T = len(need), len(s)
    zero = amax <= 0
    N = np.where(zero, 0.0, need / np.where(zero, 1.0, amax))
    usable = np.flatnonzero((s > 0) & (cap > 0))
    types = usable[np.argsort(-s[usable], kind="stable")].astype(np.int64)
    k = np.asarray(sf, dtype=np.float64)
    fill = np.flatnonzero(~zero)
    # the capacity left goes to the jobs with the most throughput per GPU first, among them to the
    # smallest needs (a tie-break of the LP's optima: docs/performance.md)
    fill = fill[np.lexsort((N[fill], -(amax[fill] / k[fill])))].astype(np.int64)
    x = np.zeros((a, T))
    kplanners.uniform_rate_allocation(np.ascontiguousarray(s[types], dtype=np.float64),
                                      cap[types].astype(np.float64), types,
                                      np.argsort(-N, kind="stable").astype(np.int64), k * N, k, fill, x)
    return x


def _class_demands(N, k, lams):
    """``D[l] = max_i (P_i - lams[l] * u_i)`` over the prefixes of a class's jobs by decreasing
    ``N`` (``u_i = k i`` GPU units, ``P_i = k * sum of the i largest N``), and 0."""
    P = np.concatenate([[0.0], np.cumsum(np.sort(N)[::-1]) * k])
    u = k * np.arange(len(P), dtype=np.float64)
    return (P[None, :] - lams[:, None] * u[None, :]).max(axis=1)


def uniform_rate_allocation_max(s, amax, sf, cap, need):
    """The allocation of ``uniform_rate_allocation`` with the largest total throughput (the
    feasibility LP's secondary objective), or None if HiGHS fails.

    Jobs alike in ``(amax, sf)`` form a class; how much of each type a class gets (``Y[c, t]``
    GPU units) decides the total throughput, and ``Y[c]`` can meet its jobs' needs iff for every
    prefix of them by decreasing need ``P_i <= F_Y(u_i)`` (the test of ``uniform_rate_feasible``
    on the class's own capacity), where ``F_Y(u) = min over lam in {speeds, 0} of
    lam u + sum_t (s_t - lam)^+ Y_t`` (LP duality): linear in ``Y``, so one small LP over classes
    x types, then ``uniform_rate_allocation`` inside each class (whose jobs' throughputs per GPU
    unit are equal, so the total does not depend on how a class shares its ``Y``)."""
    a, T = len(need), len(s)
    zero = amax <= 0
    N = np.where(zero, 0.0, need / np.where(zero, 1.0, amax))
    key = np.stack([amax, np.asarray(sf, dtype=np.float64)], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    ncls = len(uniq)
    usable = (s > 0) & (cap > 0)
    # lam = the fastest speed gives the rows 0 >= D (every need within reach: the test's), left out
    lams = np.concatenate([np.unique(s[usable])[:-1], [0.0]])
    pos = np.maximum(s[None, :] - lams[:, None], 0.0) * usable[None, :]  # (lams, T)
    b, a_ub = [], []
    nvar = ncls * T
    for c in range(ncls):
        members = inv == c
        kc = uniq[c, 1]
        d = _class_demands(N[members], kc, lams)
        blk = np.zeros((len(lams) + 1, nvar))
        blk[:len(lams), c * T:(c + 1) * T] = -pos  # -(sum_t (s_t - lam)^+ Y_t) <= -D
        blk[len(lams), c * T:(c + 1) * T] = 1.0  # the class's GPU units <= k * members
        a_ub.append(blk)
        b.append(np.concatenate([-d, [kc * members.sum()]]))
    capr = np.zeros((T, nvar))
    for t in range(T):
        capr[t, t::T] = 1.0
    a_ub = np.concatenate(a_ub + [capr])
    b = np.concatenate(b + [cap.astype(np.float64)])
    w = np.where(uniq[:, 0] > 0, uniq[:, 0] / uniq[:, 1], 0.0)
    cost = -(w[:, None] * s[None, :]).reshape(-1)
    bounds = np.zeros((nvar, 2))
    bounds[:, 1] = np.tile(np.where(usable, np.inf, 0.0), ncls)
    bounds[np.repeat(w <= 0, T), 1] = 0.0
    y = _solve(cost / max(np.abs(cost).max(), 1e-300), a_ub, b, bounds)
    if y is None:
        return None
    y = np.maximum(y.reshape(ncls, T), 0.0)
    x = np.zeros((a, T))
    for c in range(ncls):
        members = np.flatnonzero(inv == c)
        x[members] = uniform_rate_allocation(s, amax[members], np.asarray(sf)[members], y[c], need[members])
    return x


def _ftf_bounds(thr, sf, cap, elapsed, remaining, denom):
    """``(lo, hi, xiso)``: rho of every job alone on its fastest type (a lower bound) and rho of
    the isolated share of every type (feasible: an upper bound)."""
    a, T = thr.shape
    can = thr > 0
    best_tp = thr.max(axis=1)
    lo = float(np.max((elapsed + remaining / np.where(best_tp > 0, best_tp, np.inf)) / denom))
    xiso = np.where(can, (cap[None, :] / a) / sf[:, None], 0.0)
    xiso /= np.maximum(1.0, xiso.sum(axis=1, keepdims=True))
    iso = (thr * xiso).sum(axis=1)
    hi = float(np.max((elapsed + remaining / np.where(iso > 0, iso, np.inf)) / denom))
    if not np.isfinite(hi):
        hi = max(lo, 1.0) * 1e6
    return lo, hi, xiso


def ftf_allocation_lp(thr, sf, cap, elapsed, remaining, denom, tol=1e-3, max_iter=40):
    """Min-max finish-time fairness by bisection on ``rho``, each probe one feasibility LP: the
    reference of ``ftf_allocation`` (the algorithm fastblox used first). Returns ``(x, LPs)``."""
    a, T = thr.shape
    if a == 0:
        return np.zeros((0, T)), 0
    lo, hi, best = _ftf_bounds(thr, sf, cap, elapsed, remaining, denom)
    lp = _RateLP(thr, sf, cap, thr > 0)
    probes = 0
    while hi - lo > tol * max(lo, 1e-9) and probes < max_iter:
        mid = 0.5 * (lo + hi)
        slack = mid * denom - elapsed
        probes += 1
        x = None if (slack <= 0).any() else lp.feasible(remaining / slack)
        if x is None:
            lo = mid
        else:
            hi = mid
            best = x.reshape(a, T)
    return np.clip(best, 0.0, 1.0), probes


class _Certified:
    """What the probes so far prove about rho: infeasible below ``lo``, feasible from ``hi``.

    A max-scale LP at ``rho`` (largest ``s`` with rates ``>= s * need(rho)``, optimum ``x*``)
    proves both: ``x*`` reaches ``max_j rho_j(x*)``; and any ``rho'`` with
    ``need_j(rho') / need_j(rho) > s`` for every job is infeasible, i.e. every
    ``rho' < min_j (e_j + (rho d_j - e_j) / s) / d_j`` (``need_j(r) = R_j / (r d_j - e_j)``)."""

    def __init__(self, thr, elapsed, remaining, denom):
        self.thr, self.e, self.r, self.d = thr, elapsed, remaining, denom
        self.lo, self.hi = -np.inf, np.inf

    def learn(self, rho, s, x):
        rate = (self.thr * x).sum(axis=1)
        pos = self.r > 0
        wait = np.where(rate > 0, self.r / np.where(rate > 0, rate, 1.0), np.where(pos, np.inf, 0.0))
        reached = float(np.max((self.e + wait) / self.d))
        self.hi = min(self.hi, reached * (1.0 + CERT_MARGIN))
        if 0 < s < MAX_SCALE * (1.0 - 1e-6) and pos.any():  # a capped s proves no lower bound
            e, d = self.e[pos], self.d[pos]
            self.lo = max(self.lo, float(np.min((e + (rho * d - e) / s) / d)) * (1.0 - CERT_MARGIN))

    def decides(self, rho):
        """True / False when the bounds decide ``rho``'s feasibility, None when they do not."""
        if rho >= self.hi:
            return True
        if rho < self.lo:
            return False
        return None


def ftf_allocation(thr, sf, cap, elapsed, remaining, denom, tol=1e-3, max_iter=40):
    """Min-max finish-time fairness: the bisection of ``ftf_allocation_lp`` (same probes, same
    answers) with cheaper answers per probe. Returns ``(x, LPs solved)``.

    When every job's throughputs are proportional across types (jobs without a measured
    profile; the agnostic variant; one type) each probe is ``uniform_rate_feasible``'s exact
    test and ``uniform_rate_allocation_max`` builds the allocation with one LP over classes of
    alike jobs: every job's rho within the last feasible probe's and the same total throughput
    as the reference's final LP, but another of its optima.
    Otherwise a probe that the bounds proved so far (``_Certified``) do not decide solves a
    max-scale LP, which answers it and proves bounds that answer most later probes; the final
    LP is the reference's, hence the same allocation. Answers differ from the feasibility LP's
    only for a probe within HiGHS's tolerance of the optimum (a margin of 1e-6 keeps proofs
    away from it)."""
    a, T = thr.shape
    if a == 0:
        return np.zeros((0, T)), 0
    lo, hi, xiso = _ftf_bounds(thr, sf, cap, elapsed, remaining, denom)
    prop = _proportional(thr)
    lp = _RateLP(thr, sf, cap, thr > 0) if prop is None else None
    cert = _Certified(thr, elapsed, remaining, denom)
    n_lp, probes, best_need = 0, 0, None
    while hi - lo > tol * max(lo, 1e-9) and probes < max_iter:
        mid = 0.5 * (lo + hi)
        slack = mid * denom - elapsed
        probes += 1
        ok = False
        if not (slack <= 0).any():
            need = remaining / slack
            if prop is not None:
                ok = uniform_rate_feasible(prop[0], prop[1], sf, cap, need)
            else:
                ok, used = _probe(lp, cert, mid, need)
                n_lp += used
        if ok:
            hi, best_need = mid, need
        else:
            lo = mid
    if best_need is None:
        return np.clip(xiso, 0.0, 1.0), n_lp
    if prop is not None:
        x = uniform_rate_allocation_max(prop[0], prop[1], sf, cap, best_need)
        if x is None:  # (never seen) the allocation without the secondary objective
            x = uniform_rate_allocation(prop[0], prop[1], sf, cap, best_need)
        return np.clip(x, 0.0, 1.0), n_lp + 1
    x = lp.feasible(best_need)
    if x is None:  # a proof HiGHS's tolerances disagree with (never seen): the reference decides
        x, used = ftf_allocation_lp(thr, sf, cap, elapsed, remaining, denom, tol, max_iter)
        return x, n_lp + 1 + used
    return np.clip(x.reshape(a, T), 0.0, 1.0), n_lp + 1


def _probe(lp, cert, rho, need):
    """``(feasible?, LPs solved)`` of one probe in the general case."""
    known = cert.decides(rho)
    if known is not None:
        return known, 0
    res = lp.max_scale(need)
    if res is None:
        return lp.feasible(need) is not None, 2
    s, x = res
    cert.learn(rho, s, x)
    if abs(s - 1.0) <= SCALE_DOUBT:
        return lp.feasible(need) is not None, 2
    return s > 1.0, 1


def fifo_allocation(thr, sf, cap):
    """Gavel's ``fifo_perf``: arrival order, the fastest type with room, stop at the first misfit
    (compiled: ``kernels.planners.fifo_allocation``)."""
    x = np.zeros(thr.shape)
    kplanners.fifo_allocation(np.ascontiguousarray(thr, dtype=np.float64), np.ascontiguousarray(sf, dtype=np.int64),
                              np.ascontiguousarray(cap, dtype=np.float64), x)
    return x


class GavelPlanner:
    def __init__(self, state, opts: dict):
        if _scipy() is None:
            raise ConfigError("Gavel's policies solve linear programs with scipy: pip install 'fastblox[lp]'")
        self.ctx = PlanContext(state)
        self.objective = opts["_objective"]
        self.aware = opts["_aware"]
        self.recompute_s = float(opts["recompute_s"])
        self.round_s = state.round_s
        n = len(state.w)
        T = self.ctx.n_types
        self.x = np.zeros((n, T))
        self.job_time = np.zeros((n, T))
        self.deficit = np.zeros((n, T))
        self.in_alloc = np.zeros(n, dtype=bool)
        self.seen = np.zeros(n, dtype=bool)
        self.ftf_c = np.zeros(n)
        self.ftf_prev_rem = np.zeros(n)
        self.ftf_prev_iso = np.zeros(n)  # 0: not in the previous allocation
        self.ftf_prev_idx = np.zeros(0, dtype=np.int64)
        self.last_reset = None
        self.prev_idx = np.zeros(0, dtype=np.int64)
        self.prev_t = None
        self.need_update = False
        self.rng = np.random.default_rng(int(opts["seed"]))
        allj = np.arange(n, dtype=np.int64)
        self.thr_all = np.stack([self.ctx.rate(allj, t, state.jobs.gpus) for t in range(T)], axis=1) if n else np.zeros((0, T))
        speed = state.rates.type_speed
        self.type_order = np.argsort(-speed, kind="stable")  # fastest first, ties in cluster order
        self.n_alloc = 0
        self.n_lp = 0
        self.lp_s = 0.0

    # ------------------------------------------------------------------ allocation
    def _throughputs(self, idx, sf):
        return self.thr_all[idx]

    def _recompute(self, idx, v, now):
        ctx = self.ctx
        sf = v.num_gpus
        cap = ctx.type_gpus().astype(np.float64)
        thr = self._throughputs(idx, sf)
        t0 = time.perf_counter()
        if self.objective == "las":
            x = max_min_allocation(thr, sf, cap, self.aware)
            self.n_lp += 1
        elif self.objective == "fifo":
            x = fifo_allocation(thr, sf, cap)
        else:
            t_eff = thr
            if not self.aware:
                # Gavel's agnostic variant: the reference type's throughput stands for every type
                t_eff = np.where(thr > 0, ctx.ref_rate(idx)[:, None], 0.0)
            a = len(idx)
            m = max(a, 1)
            xiso = np.where(t_eff > 0, (cap[None, :] / m) / sf[:, None], 0.0)
            xiso /= np.maximum(1.0, xiso.sum(axis=1, keepdims=True))
            iso = (t_eff * xiso).sum(axis=1)
            rem = v.work_left
            # Gavel: cumulative isolated time since the job was first seen (jobs of the previous
            # allocation: the work done since, at that allocation's isolated throughput)
            seen = self.ftf_prev_iso[idx] > 0
            js = idx[seen]
            self.ftf_c[js] += (self.ftf_prev_rem[js] - rem[seen]) / self.ftf_prev_iso[js]
            self.ftf_prev_iso[self.ftf_prev_idx] = 0.0
            self.ftf_prev_rem[idx], self.ftf_prev_iso[idx], self.ftf_prev_idx = rem, iso, idx.copy()
            denom = self.ftf_c[idx] + rem / np.where(iso > 0, iso, np.inf)
            denom = np.where(denom > 0, denom, 1.0)
            x, probes = ftf_allocation(t_eff, sf, cap, now - v.submit_s, rem, denom)
            self.n_lp += probes
        self.lp_s += time.perf_counter() - t0
        self.n_alloc += 1
        return x

    # ------------------------------------------------------------------ the round
    def plan(self, idx: np.ndarray, now: float):
        ctx = self.ctx
        v = ctx.view(idx)
        a = len(idx)
        T = ctx.n_types
        half = self.round_s / 2.0
        if self.prev_t is not None:
            run = v.running
            self.job_time[idx[run], v.held_type[run]] += now - self.prev_t
        new = ~self.seen[idx]
        if new.any():
            self.job_time[idx[new]] = half
            self.seen[idx[new]] = True
        if a != len(self.prev_idx) or not np.array_equal(idx, self.prev_idx):
            self.need_update = True
        if self.need_update and (self.last_reset is None or now - self.last_reset >= self.recompute_s):
            if self.last_reset is not None:
                elapsed = now - self.last_reset
                self.deficit[idx] += self.x[idx] * elapsed - (self.job_time[idx] - half)
            self.job_time[idx] = half
            self.x[idx] = self._recompute(idx, v, now)
            self.in_alloc[:] = False
            self.in_alloc[idx] = True
            self.last_reset = now
            self.need_update = False
        self.prev_idx = idx.copy()
        self.prev_t = now
        # priorities per type, then the per-type greedy selection
        sf = v.num_gpus
        thr = self._throughputs(idx, sf)
        x = self.x[idx]
        prio = np.where(self.in_alloc[idx][:, None] & (x > 0) & (thr > 0), x / self.job_time[idx], 0.0)
        left = ctx.type_gpus().astype(np.int64)
        order = self.type_order if self.aware else self.rng.permutation(T)
        types = np.empty(a, dtype=np.int64)
        keys = np.empty(a)
        # jobs that arrived after the last allocation wait for the next one
        kplanners.gavel_select(np.asarray(order, dtype=np.int64), prio, np.ascontiguousarray(self.deficit[idx]),
                               np.ascontiguousarray(x), np.ascontiguousarray(thr), sf.astype(np.int64), left,
                               self.in_alloc[idx], self.objective == "fifo", types, keys)
        return keys, types, sf.copy()

    def stats(self) -> dict:
        return {"allocations": self.n_alloc, "lp_solves": self.n_lp, "lp_s": round(self.lp_s, 6),
                "lp_ms_per_allocation": round(1e3 * self.lp_s / max(self.n_alloc, 1), 3)}


def _make(name, objective, aware, desc):
    return parts.Policy(
        name, enums.POL_PLAN, True, True, desc, kind=enums.KIND_PLAN, planner=GavelPlanner,
        default_time_model="rounds", default_round_s=DEFAULT_ROUND_S,
        options=(
            parts.Option("recompute_s", DEFAULT_RECOMPUTE_S, nonneg,
                         "at most one allocation per this many seconds (Gavel's simulator: 1920; 0: every change)"),
            parts.Option("seed", 0, int, "seed of the per-round GPU type order of agnostic policies"),
            parts.Option("_objective", objective, str, "internal"),
            parts.Option("_aware", aware, bool, "internal"),
        ),
    )


for _p in (
    _make("gavel", "las", True, "Gavel: heterogeneity-aware max-min fairness (LAS normalised by throughput), LP + rounds"),
    _make("gavel-las", "las", True, "Gavel's max_min_fairness_perf (same as 'gavel')"),
    _make("gavel-las-agnostic", "las", False, "Gavel's max_min_fairness: heterogeneity-agnostic max-min fairness"),
    _make("gavel-ftf", "ftf", True, "Gavel's finish_time_fairness_perf: min-max finish-time fairness (Themis' metric)"),
    _make("gavel-ftf-agnostic", "ftf", False, "Gavel's finish_time_fairness: the same, heterogeneity-agnostic"),
    _make("gavel-fifo", "fifo", True, "Gavel's fifo_perf: FIFO on the fastest type with room"),
):
    parts.POLICIES.register(_p.name, _p)
