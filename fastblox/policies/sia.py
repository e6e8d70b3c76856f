"""Sia (Jayaram Subramanya et al., SOSP'23) for rigid jobs on a cluster of several GPU types, in
the native engine: each round, every active job gets one GPU type for its whole gang, or waits.

**The rule** (the Sia simulator's ``sia.py``: ``_compute_rigid_job_goodput_single`` and
``__solve_mip_rescaled``, its rigid-job branch). A rigid job's gang size ``k_j`` is fixed; its
goodput on type ``t`` is its throughput there (the run's throughput table, the one the Gavel
policies use: ``thr[j, t]`` for the whole gang on one node) normalised so that its slowest
type gives ``k_j``: ``g[j, t] = k_j * thr[j, t] / min_t thr[j, t]``. A job that ran in the last
round keeps ``g`` on the type it holds and has every other type's ``g`` multiplied by its
restart factor ``max(age - restarts * penalty_s, 0) / (age + penalty_s)`` (``age``: seconds since
it was submitted; ``restarts``: its preemptions; 1 while its attained GPU-seconds are below
``penalty_s``; Sia's ``get_restart_penalty`` gives 30 s to jobs not named after its
applications). The cost of ``t`` is ``round(g ** p, 2)`` (float64, as Sia's rigid branch; capped
at 3,000), of waiting ``lambda_n``; Sia minimises the sum of the costs (``p < 0``) with each
type's GPUs in service as its capacity. A job still inside its restart delay (``--restart-s``)
keeps its type (Sia's "checkpoint-restore underway" constraint) if it is still offered. Types
where a job has no throughput, or fewer GPUs than its gang, are not offered to it. Like Sia, a
job is not penalised for being preempted to wait, only for changing type.

**How it is solved** (``SiaSolver``): with a proof of how far each answer is from the optimum, at
most ``gap`` (default 0.5 %) of Sia's objective, or exactly (``gap=0``). Jobs alike in gang size, costs and pinned type
are interchangeable, so the integer programme is solved over classes of alike jobs (tens of
classes, not thousands of jobs), and each answer comes with a proof, the first of: (1) every
job's cheapest choice fits every type (compiled: ``kernels.planners.sia_round``); (2) the same
class problem as the last one solved: its answer; (3) a greedy fill by gain less the type's GPU
price ``mu`` (from scratch, or from the last answer carried over) within a hundredth of the
Lagrangian bound at ``mu`` (the costs are whole hundredths, so that is an optimum), or within
``gap``; ``mu`` the last prices, then a search along each type's price, then (4) the class LP's
duals (HiGHS) with its floor as the start; (5) the class integer programme (HiGHS) with its gap
below half a hundredth of the objective's bound, or ``gap`` where that is wider. Inside a
class, the jobs that hold a type keep it first, then the earlier arrivals get the rest.
``fastblox.reference.sia.best_rigid_choice`` (every choice tried) is the plain twin hypothesis
compares the solver with; ``fastblox.reference.planners.sia_round_reference`` the kernel's.

**The round.** Jobs that keep their type keep their GPUs; the others are placed by the run's
placement part (``--placement``) on nodes of their type, largest gang first, and a gang that does
not fit the type's free nodes (fragmentation) waits for the next round. Admission
(``--admission``) decides which arrivals become active, as for every policy. Rounds of 60 s
(Sia's interval) by default.
"""

from __future__ import annotations

import time

import numpy as np

from .. import parts
from ..compat_sia import CLIP, LAMBDA_N, MIP_GAP, P_FAIRNESS, policy_restart_s
from ..errors import ConfigError
from ..highs import quiet
from ..kernels import enums
from ..kernels import planners as kplanners
from ..planning import PlanContext
from ._opts import fraction, positive

INTERVAL_S = 60.0  # the Sia simulator's --interval
GAP = 0.005  # the optimality gap accepted by default (docs/policies.md: why)
PENALTY_S = policy_restart_s("")  # sia.py's get_restart_penalty for a name it does not know: 30 s


def negative(v) -> float:
    x = float(v)
    if not x < 0:
        raise ValueError(f"must be negative (Sia minimises sum goodput ** p; its default -0.5), got {x:g}")
    return x


def hundredths(v) -> float:
    x = positive(v)
    if abs(x * 100 - round(x * 100)) > 1e-9:
        raise ValueError(f"must be a whole number of hundredths, as Sia's rounded costs are (its default 1.1), got {x!r}")
    return x


# ------------------------------------------------------------------------------------------ costs
def normalised_goodput(thr: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``k_j * thr[j, t] / (the job's smallest positive thr)``; 0 where ``thr <= 0``."""
    pos = thr > 0
    low = np.where(pos, thr, np.inf).min(axis=1)
    low = np.where(np.isfinite(low), low, 1.0)
    return np.where(pos, k[:, None] * thr / low[:, None], 0.0)


def restart_factor(age_s, restarts, attained_gpu_s, penalty_s: float) -> np.ndarray:
    """Sia's re-allocation factor of rigid jobs: ``max(age - restarts * penalty, 0) / (age +
    penalty)``, 1 while the attained GPU-seconds are below ``penalty``."""
    f = np.maximum(age_s - restarts * penalty_s, 0.0) / (age_s + penalty_s)
    return np.where(attained_gpu_s < penalty_s, 1.0, f)


def job_costs(thr, k, held, factor, cap, p: float = P_FAIRNESS) -> np.ndarray:
    """Cost ``[job, type]`` of Sia's objective (whole hundredths, ``inf`` where not offered):
    ``round(g ** p, 2)`` capped at ``CLIP`` (float64, as Sia's rigid branch), every type but the
    held one (``held[j] >= 0``) with ``g`` scaled by ``factor[j]``."""
    g = normalised_goodput(thr, k)
    T = g.shape[1]
    move = (held[:, None] >= 0) & (np.arange(T)[None, :] != held[:, None])
    g = np.where(move, g * factor[:, None], g)
    with np.errstate(divide="ignore"):
        c = np.round(np.power(g, p), 2)
    c[c > CLIP] = CLIP
    offered = (thr > 0) & (k[:, None] <= cap[None, :])
    return np.where(offered, c, np.inf)


def cheapest(cost, pin, held, lambda_n: float = LAMBDA_N) -> np.ndarray:
    """Each job's cheapest choice on its own (ties: the held type, then the first; -1: waiting is
    as cheap; a pinned job: its type)."""
    a, T = cost.shape
    c = cost.copy()
    rows = np.flatnonzero(held >= 0)
    c[rows, held[rows]] -= 1e-9  # (costs are whole hundredths: this only breaks ties)
    best = np.argmin(c, axis=1) if T else np.zeros(a, dtype=np.int64)
    best = np.where(cost[np.arange(a), best] < lambda_n, best, -1)
    return np.where(pin >= 0, pin, best)


def objective(cost, choice, lambda_n: float = LAMBDA_N) -> float:
    """Sia's objective of a choice (type per job, -1: waits)."""
    on = choice >= 0
    return float(cost[np.flatnonzero(on), choice[on]].sum() + lambda_n * (~on).sum())


# ------------------------------------------------------------------------------------------ the optimum
#: passes over the types of the price search before an LP is solved
PRICE_SWEEPS = 2
#: a choice within this of a proven bound is optimal: costs are whole hundredths, and the tie-break
#: below adds less than ``STAY_TOTAL`` to any choice (0.005 + 0.004 < 0.01)
CERTAIN = 0.005
#: among optima, keep running jobs on their type: a job that stays gains ``STAY_TOTAL / jobs`` more
STAY_TOTAL = 0.004


class SiaSolver:
    """``solve``: a choice proven optimal, or within ``gap`` of Sia's objective of the optimum
    (``class_optimum``: the ways, in order). ``how`` counts the answers by way; ``inexact`` those
    not proven optimal, ``worst_gap`` the largest proven gap among them (relative to the optimum)."""

    def __init__(self, lambda_n: float = LAMBDA_N, gap: float = 0.0):
        self.lambda_n, self.gap = lambda_n, gap
        self.inexact = 0  # answers not proven optimal (only with gap > 0)
        self.worst_gap = 0.0  # the largest proven gap of those, relative to the objective
        self._last = None
        self._last_rows = None
        self.mu = None
        self.how = {"fit": 0, "same": 0, "bound": 0, "prices": 0, "lp": 0, "milp": 0}
        self.solve_s = 0.0

    def solve(self, cost, k, pin, held, cap) -> np.ndarray:
        """Type per job (-1: waits) minimising :func:`objective` with ``sum k_j <= cap[t]`` per type
        and ``pin[j] >= 0`` kept. ``held``: the type each job holds (-1), kept among equals."""
        T = cost.shape[1]
        cap = np.asarray(cap, dtype=np.int64)
        pin = _drop_pins_over(pin, k, cap, cost)
        best = cheapest(cost, pin, held, self.lambda_n)
        on = best >= 0
        if (np.bincount(best[on], weights=k[on], minlength=T) <= cap).all():
            self.how["fit"] += 1
            return best
        t0 = time.perf_counter()
        uniq, inv, counts = _classes(cost, k, pin, held)
        key = (uniq.tobytes(), counts.tobytes(), cap.tobytes())
        if self._last is not None and self._last[0] == key:
            self.how["same"] += 1
            y, gap = self._last[1], self._last[2]
        else:
            k_c, pin_c, held_c = (uniq[:, i].astype(np.int64) for i in range(3))
            warm = carry_over(uniq, counts, cap, k_c, self._last_rows)
            y, how, self.mu, slack = class_optimum(uniq[:, 3:], k_c, pin_c, counts, cap, self.lambda_n, self.mu, warm,
                                                   self.gap, held_c)
            self.how[how] += 1
            gap = 0.0
            if slack > CERTAIN:
                obj = float(self.lambda_n * counts.sum() - _value(self.lambda_n - uniq[:, 3:], y))
                gap = slack / max(obj - slack, 1e-12)  # (the optimum is at least obj - slack)
            self._last = (key, y, gap)
            self._last_rows = (uniq, y)
        if gap > 0:
            self.inexact += 1
            self.worst_gap = max(self.worst_gap, gap)
        choice = np.empty(len(inv), dtype=np.int64)
        kplanners.sia_spread(y, inv, held, choice)
        self.solve_s += time.perf_counter() - t0
        return choice


def _drop_pins_over(pin, k, cap, cost):
    """Pins to a type not offered, or of a type whose pinned gangs exceed its capacity (nodes went
    out of service), are dropped."""
    T = len(cap)
    pin = np.where((pin >= 0) & np.isfinite(cost[np.arange(len(pin)), np.maximum(pin, 0)]), pin, -1)
    on = pin >= 0
    used = np.bincount(pin[on], weights=k[on], minlength=T)
    over = used > cap
    if not over.any():
        return pin
    return np.where(on & over[np.maximum(pin, 0)], -1, pin)


def _classes(cost, k, pin, held=None):
    """``(rows [k, pin, held, cost...], class of each job, jobs per class)`` of the jobs alike in
    all four (``held`` None: all -1)."""
    held = np.full(len(k), -1) if held is None else held
    key = np.concatenate([k[:, None].astype(np.float64), pin[:, None].astype(np.float64),
                          held[:, None].astype(np.float64), cost], axis=1)
    order = np.lexsort(key.T[::-1])
    srt = key[order]
    new = np.ones(len(srt), dtype=bool)
    new[1:] = (srt[1:] != srt[:-1]).any(axis=1)
    cls_sorted = np.cumsum(new) - 1
    inv = np.empty(len(srt), dtype=np.int64)
    inv[order] = cls_sorted
    return srt[new], inv, np.bincount(cls_sorted).astype(np.int64)


def class_optimum(cost, k, pin, count, cap, lambda_n: float = LAMBDA_N, mu=None, warm=None, gap: float = 0.0,
                  held=None) -> tuple:
    """``(y, how, mu, slack)``: jobs per class and type ``y[c, t]`` minimising ``sum (cost -
    lambda_n) * y`` with ``sum_t y[c] <= count[c]`` (all of a pinned class on its type) and
    ``sum_c k[c] y[c, t] <= cap[t]``; ``how`` the way (``bound``, ``lp``, ``milp``), ``mu`` the GPU
    prices (per type) to try first next time, ``slack`` how far its objective is proven to be at
    most from the optimum (under a hundredth: it is an optimum; the MILP's: 0). With ``gap`` 0
    the answer is an optimum; with ``gap > 0`` it may be any answer proven within ``gap`` times
    its objective of the optimum. ``mu`` and ``warm`` (a feasible start, e.g. the last answer
    carried over: :func:`carry_over`) are only tried: they change the proof, never the guarantee.
    ``held``: the type each class's jobs hold (-1): among optima, the one keeping most of them there
    (a gain of ``STAY_TOTAL / jobs`` each, too small to outweigh a hundredth)."""
    C, T = cost.shape
    gain = np.where(np.isfinite(cost), lambda_n - cost, -np.inf)
    if held is not None and (held >= 0).any():
        hc = np.flatnonzero((held >= 0) & (pin < 0))
        gain[hc, held[hc]] += STAY_TOTAL / max(1.0, float(count.sum()))
    pinned = np.zeros((C, T), dtype=bool)
    pc = np.flatnonzero(pin >= 0)
    pinned[pc, pin[pc]] = True
    base = np.zeros((C, T), dtype=np.int64)
    base[pinned] = count[pc]
    free = pin < 0
    total = lambda_n * float(count.sum())

    def proven(starts, prices, bound=None):
        if bound is None:
            bound = kplanners.sia_bound(gain, k, count, cap, prices, pin)
        best, best_v = None, -np.inf
        for st in starts:
            if st is None or ((st * k[:, None]).sum(axis=0) > cap).any():
                continue
            y = np.empty_like(st)
            kplanners.sia_greedy(gain, k, count, cap, prices, st, free, y)
            v = _value(gain, y)
            if v > best_v:
                best, best_v = y, v
        if best is None:
            return None, np.inf
        slack = max(bound - best_v, 0.0)
        return (best, slack) if slack <= max(CERTAIN, gap * (total - best_v)) else (None, slack)

    starts = (base, None if warm is None else base + warm)
    if mu is not None and len(mu) == T:
        y, slack = proven(starts, mu)
        if y is not None:
            return y, "bound", mu, slack
        mu = mu.copy()  # (better prices, one type at a time: no LP)
        y, slack = proven(starts, mu, kplanners.sia_prices(gain, k, count, cap, mu, pin, PRICE_SWEEPS))
        if y is not None:
            return y, "prices", mu, slack
    lp = _class_lp(gain, k, count, cap, pinned, free)
    if lp is not None:
        x, mu = lp
        start = base.copy()
        start[free] = np.floor(x[free] + 1e-9).astype(np.int64)
        y, slack = proven((start, starts[1]), mu)
        if y is not None:
            return y, "lp", mu, slack
    y, slack = _class_milp(gain, k, pin, count, cap, pinned, gap, lambda_n)
    return y, "milp", mu, slack


def carry_over(rows, count, cap, k, last) -> np.ndarray | None:
    """The last answer (``(rows, y)`` of the last class problem) on these classes: each class
    alike a last one keeps its jobs per type, fewer where it has fewer jobs (from its last types
    first); None if that does not fit ``cap`` (pinned classes are left to the caller's start)."""
    if last is None or last[0].shape[1] != rows.shape[1]:
        return None
    idx = {r.tobytes(): i for i, r in enumerate(last[0])}
    y = np.zeros((len(rows), len(cap)), dtype=np.int64)
    for c in range(len(rows)):
        i = idx.get(rows[c].tobytes())
        if i is None or rows[c, 1] >= 0:
            continue
        y[c] = last[1][i]
        for t in range(len(cap) - 1, -1, -1):
            extra = int(y[c].sum() - count[c])
            if extra <= 0:
                break
            y[c, t] -= min(extra, y[c, t])
    return y if ((y * k[:, None]).sum(axis=0) <= cap).all() else None


def _value(gain, y) -> float:
    return float((np.where(y > 0, gain, 0.0) * y).sum())


def lagrangian_bound(gain, k, count, cap, mu, pin) -> float:
    """An upper bound on the total gain of any feasible ``y`` (pinned classes on their type): each
    class's best of ``gain - k * mu`` (or 0: waiting), times its jobs, plus ``mu`` times the GPUs."""
    red = gain - k[:, None] * mu[None, :]
    per = np.maximum(np.max(red, axis=1, initial=-np.inf), 0.0)
    pc = np.flatnonzero(pin >= 0)
    per[pc] = red[pc, pin[pc]]
    return float(per @ count + mu @ cap)


def greedy_fill(gain, k, count, cap, mu, start, free) -> np.ndarray:
    """``start`` (pinned classes and a partial answer) then, by decreasing ``gain - k * mu`` (ties:
    more gain, then class and type order), as many more jobs of each free class on each type as
    its jobs left and the type's GPUs left allow (choices that gain something only)."""
    y = start.copy()
    left = cap - (y * k[:, None]).sum(axis=0)
    rest = count - y.sum(axis=1)
    red = gain - k[:, None] * mu[None, :]
    cls, typ = np.nonzero(free[:, None] & (gain > 0))
    order = np.lexsort((typ, cls, -gain[cls, typ], -red[cls, typ]))
    for c, t in zip(cls[order], typ[order]):
        n = min(rest[c], left[t] // k[c])
        if n > 0:
            y[c, t] += n
            rest[c] -= n
            left[t] -= n * k[c]
    return y


def _class_lp(gain, k, count, cap, pinned, free):
    """``(x, mu)``: the class LP's optimum (free classes; pinned ones take their GPUs first) and
    its capacity duals (GPU prices, >= 0), or None if HiGHS fails."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    C, T = gain.shape
    left = cap - (np.where(pinned, 1, 0) * count[:, None] * k[:, None]).sum(axis=0)
    cls, typ = np.nonzero(free[:, None] & (gain > 0))
    n = len(cls)
    if n == 0:
        return np.zeros((C, T)), np.zeros(T)
    var = np.arange(n)
    m = coo_matrix((np.concatenate([np.ones(n), k[cls].astype(np.float64)]),
                    (np.concatenate([cls, C + typ]), np.concatenate([var, var]))), shape=(C + T, n)).tocsr()
    b = np.concatenate([count.astype(np.float64), np.maximum(left, 0).astype(np.float64)])
    res = linprog(-gain[cls, typ], A_ub=m, b_ub=b, bounds=(0, None), method="highs")
    if res.status != 0:
        return None
    x = np.zeros((C, T))
    x[cls, typ] = res.x
    return x, np.maximum(-res.ineqlin.marginals[C:], 0.0)


def _class_milp(gain, k, pin, count, cap, pinned, gap: float = 0.0, lambda_n: float = LAMBDA_N) -> tuple:
    """``(y, slack)``: the class integer programme (HiGHS) with a gap below half a hundredth of its
    bound (an exact optimum of costs in whole hundredths), or ``gap`` of the objective if that is
    wider; ``slack`` bounds how far it is from the optimum (HiGHS's dual bound)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    C, T = gain.shape
    use = ((gain > 0) & (pin[:, None] < 0)) | pinned  # (a choice no cheaper than waiting is never needed)
    cls, typ = np.nonzero(use)
    y = np.zeros((C, T), dtype=np.int64)
    n = len(cls)
    if n == 0:
        return y, 0.0
    var = np.arange(n)
    m = coo_matrix((np.concatenate([np.ones(n), k[cls].astype(np.float64)]),
                    (np.concatenate([cls, C + typ]), np.concatenate([var, var]))), shape=(C + T, n)).tocsr()
    ub = np.concatenate([count.astype(np.float64), cap.astype(np.float64)])
    lo = np.where(pinned[cls, typ], count[cls], 0).astype(np.float64)
    c = np.where(pinned[cls, typ], 0.0, -gain[cls, typ])  # (a pinned class's gain is the same in every answer)
    lambda_total = lambda_n * float(count.sum())
    bound = float(np.minimum(c, 0.0) @ count[cls].astype(np.float64))
    rel = min(MIP_GAP, 0.004 / max(1.0, abs(bound)))
    # HiGHS's relative gap is on its own objective f = -(gain of the free jobs), |f| <= |bound|; Sia's
    # objective of any answer is at least the gain bound's complement, ``headroom``: a gap of ``gap`` of it
    headroom = lambda_total - abs(bound)
    if gap > 0 and headroom > 0:
        rel = max(rel, gap * headroom / max(1.0, abs(bound)))
    with quiet():
        res = milp(c, constraints=LinearConstraint(m, -np.inf, ub), bounds=Bounds(lo, count[cls].astype(np.float64)),
                   integrality=np.ones(n), options={"mip_rel_gap": rel})
    if res.x is None:
        raise ConfigError(f"the Sia allocation over GPU types has no solution (HiGHS: {res.message}); "
                          "this should not happen, please report it")
    y[cls, typ] = np.rint(res.x).astype(np.int64)
    dual = getattr(res, "mip_dual_bound", None)
    slack = rel * abs(res.fun) if dual is None or not np.isfinite(dual) else max(res.fun - dual, 0.0)
    return y, slack


def spread(y, inv, held) -> np.ndarray:
    """The jobs' types from the classes' counts ``y[c, t]``: in each class the jobs holding ``t``
    take its places first, then the rest in arrival (index) order."""
    choice = np.full(len(inv), -1, dtype=np.int64)
    for c in np.flatnonzero(y.sum(axis=1)):
        members = np.flatnonzero(inv == c)
        for t in np.flatnonzero(y[c]):
            stay = members[held[members] == t][: y[c, t]]
            choice[stay] = t
        left = members[choice[members] < 0]
        for t in np.flatnonzero(y[c]):
            need = y[c, t] - int((choice[members] == t).sum())
            choice[left[:need]] = t
            left = left[need:]
    return choice


def plan_of(choice, running, held, k) -> tuple:
    """``(keys, types)`` of a choice for the engine: the jobs that keep their type first, then the
    largest gangs (ties: arrival), each on its type or ``NO_RUN``."""
    stay = running & (choice == held)
    return np.where(stay, 0.0, 1e7) - k, np.where(choice >= 0, choice, enums.NO_RUN)


# ------------------------------------------------------------------------------------------ the planner
class SiaPlanner:
    def __init__(self, state, opts: dict):
        self.ctx = PlanContext(state)
        self.p = float(opts["p"])
        self.penalty_s = float(opts["penalty_s"])
        self.solver = SiaSolver(float(opts["lambda_n"]), float(opts["gap"]))
        n, T = len(state.w), self.ctx.n_types
        allj = np.arange(n, dtype=np.int64)
        self.thr_all = np.ascontiguousarray(
            np.stack([self.ctx.rate(allj, t, state.jobs.gpus) for t in range(T)], axis=1) if n else np.zeros((0, T)))
        self.gpus = state.jobs.gpus.astype(np.int64)
        self.plan_s = 0.0
        self.rounds = 0

    def plan(self, idx: np.ndarray, now: float):
        t0 = time.perf_counter()
        st = self.ctx.st
        r = st.run
        a, T = len(idx), self.ctx.n_types
        cap = self.ctx.type_gpus()
        cost = np.empty((a, T))
        best, pin, types = np.empty(a, dtype=np.int64), np.empty(a, dtype=np.int64), np.empty(a, dtype=np.int64)
        keys = np.empty(a)
        fits = kplanners.sia_round(idx, self.thr_all, self.gpus, st.jobs.submit, r.status, r.launch_t, r.held,
                                   r.held_type, r.attained_gpu, r.n_preempt, now, st.restart_s, self.penalty_s,
                                   self.p, self.solver.lambda_n, CLIP, cap, cost, best, pin, keys, types)
        k = self.gpus[idx]
        if fits:
            self.solver.how["fit"] += 1
        else:
            running = r.status[idx] == enums.RUNNING
            held = np.where(running, r.held_type[idx], -1)
            keys, types = plan_of(self.solver.solve(cost, k, pin, held, cap), running, held, k)
        self.rounds += 1
        self.plan_s += time.perf_counter() - t0
        return keys, types, k

    def stats(self) -> dict:
        s = self.solver
        return {"allocations": self.rounds, "answers": dict(s.how), "not_proven_optimal": s.inexact,
                "largest_proven_gap": s.worst_gap, "lp_solves": s.how["lp"] + s.how["milp"],
                "lp_s": round(s.solve_s, 6), "lp_ms_per_allocation": round(1e3 * s.solve_s / max(self.rounds, 1), 3),
                "plan_s": round(self.plan_s, 6)}


POLICY = parts.POLICIES.register("sia", parts.Policy(
    "sia", enums.POL_PLAN, True, True,
    "Sia's objective for rigid jobs over GPU types: each round one type per job (or wait) minimising sum "
    "round(goodput ** p, 2) with a restart penalty for a type change; proven within gap= of the optimum (classes of "
    "alike jobs, Lagrangian bounds, HiGHS)",
    kind=enums.KIND_PLAN, planner=SiaPlanner, default_time_model="rounds", default_round_s=INTERVAL_S,
    options=(
        parts.Option("p", P_FAIRNESS, negative, "Sia's fairness power p (--policy_p_val; negative: it minimises)"),
        parts.Option("lambda_n", LAMBDA_N, hundredths, "cost of a job left waiting (Sia's --mip_lambda_n; in hundredths)"),
        parts.Option("gap", GAP, fraction, "accept an answer proven within this share of its objective of the "
                     "optimum (0: every round exact; Sia's own solver stops at 0.0001)"),
        parts.Option("penalty_s", PENALTY_S, positive,
                     "restart penalty in seconds of Sia's re-allocation factor (its get_restart_penalty: 30)"),
    ),
))
