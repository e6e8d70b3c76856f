"""Plain-Python twin of :func:`fastblox.compat_sia.solve_allocation` and
:func:`fastblox.compat_sia.place_fast`: every assignment of at most one configuration to each job
tried one by one (tiny instances only), and the placement written as ``sia.py`` describes it; and
the numpy twins of the compiled parts of :func:`fastblox.compat_sia.exact_allocation`
(``kernels.elastic.alloc_options``, ``alloc_bounded``); the plain-Python twin of a job's steps
(:func:`advance`: ``fastblox.compat_sia.SiaJob.advance``, compiled in ``kernels.sia.job_steps``);
the policy's goodput rows as the code before their kernels computed them, in numpy
(:func:`policy_row`), and those kernels in plain Python (:func:`packed_goodput`,
:func:`row_goodputs`); the cost matrix's kernels in numpy (:func:`restart_discount`,
:func:`power_costs`). The tests compare them."""

from __future__ import annotations

import itertools
import math

import numpy as np


def best_allocation(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n) -> tuple:
    """(choice per job, -1 none; objective) minimising ``sum cost[j][choice[j]] + lambda_n *
    (unallocated jobs)`` under each type's GPU capacity, jobs with ``fixed[j] >= 0`` on that
    configuration; the first best in enumeration order."""
    jobs = len(cost)
    configs = len(cost[0]) if jobs else 0
    best, best_val = None, float("inf")
    options = [[fixed[j]] if fixed[j] >= 0 else [-1, *range(configs)] for j in range(jobs)]
    for choice in itertools.product(*options):
        used = [0] * len(capacity)
        val = 0.0
        for j, c in enumerate(choice):
            if c < 0:
                val += lambda_n
            else:
                used[cfg_type[c]] += cfg_gpus[c]
                val += float(cost[j][c])
        if any(u > cap for u, cap in zip(used, capacity)):
            continue
        if val < best_val:
            best, best_val = list(choice), val
    return best, best_val


def place(allocs: list, nodes: int, per_node: int) -> dict:
    """Node index per GPU for each ``(job, GPUs)``, largest job first (stable), on empty nodes: whole
    free nodes from a cursor, then the remaining GPUs wherever free from where the search stopped;
    the next job starts where the last one stopped."""
    free = [per_node] * nodes
    order = sorted(range(len(allocs)), key=lambda i: (-allocs[i][1], i))
    cursor = 0
    out = {}
    for i in order:
        job, need = allocs[i]
        node = cursor
        got = []
        whole = need // per_node
        for _ in range(nodes):
            if whole == 0:
                break
            if free[node] == per_node:
                got.extend([node] * per_node)
                free[node] = 0
                need -= per_node
                whole -= 1
            node = (node + 1) % nodes
        while need > 0:
            take = min(need, free[node])
            if take:
                got.extend([node] * take)
                free[node] -= take
                need -= take
            node = (node + 1) % nodes
        out[job] = got
        cursor = node
    return out


def best_rigid_choice(cost, k, pin, cap, lambda_n) -> tuple:
    """(type per job, -1 waits; objective) minimising ``sum cost[j][type] + lambda_n * (waiting
    jobs)`` with at most ``cap[t]`` GPUs (gangs ``k``) per type, jobs with ``pin[j] >= 0`` on that
    type: every choice tried (tiny instances only; the native ``sia`` policy's twin)."""
    jobs, types = len(cost), len(cap)
    best, best_val = None, float("inf")
    options = [[pin[j]] if pin[j] >= 0 else [-1, *range(types)] for j in range(jobs)]
    for choice in itertools.product(*options):
        used = [0] * types
        val = 0.0
        for j, t in enumerate(choice):
            if t < 0:
                val += lambda_n
            else:
                used[t] += k[j]
                val += float(cost[j][t])
        if any(u > c for u, c in zip(used, cap)) or val == float("inf"):
            continue
        if val < best_val:
            best, best_val = list(choice), val
    return best, best_val


# ------------------------------------------------------------------ exact_allocation's arrays, in numpy
def alloc_options(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n, prefer=None) -> tuple:
    """``kernels.elastic.alloc_options`` in numpy (its twin; the code ``exact_allocation`` ran
    before the kernel): the same (status, free jobs, start, option configurations, types, GPUs,
    values, GPUs left per type)."""
    c64 = np.asarray(cost, dtype=np.float64)
    J, C = c64.shape
    empty = np.zeros(0, dtype=np.int64)
    lam = round(lambda_n * 100)
    k = np.rint(c64 * 100)
    fixed = np.asarray(fixed, dtype=np.int64)
    pinned = fixed >= 0
    cfg_type, cfg_gpus = np.asarray(cfg_type, dtype=np.int64), np.asarray(cfg_gpus, dtype=np.int64)
    cap = np.asarray(capacity, dtype=np.int64).copy()
    np.subtract.at(cap, cfg_type[fixed[pinned]], cfg_gpus[fixed[pinned]])
    free = (c64 - lambda_n < 0) & ~pinned[:, None]
    if abs(lambda_n * 100 - lam) > 1e-6 or (np.abs(c64 - k / 100)[free] > 1e-6).any() or (cap < 0).any():
        return 1, empty, empty, empty, empty, empty, empty, cap
    free &= (cfg_gpus <= cap[cfg_type])[None, :]  # (more GPUs than its type has left: never taken)
    jobs = np.flatnonzero(~pinned)
    if len(jobs) == 0:
        return 2, empty, empty, empty, empty, empty, empty, cap
    val = (lam - k.astype(np.int64)) * (len(jobs) + 1)
    if prefer is not None:
        val += np.asarray(prefer, dtype=np.int64)[:, None] == np.arange(C)[None, :]
    free &= ~_dominated(np.where(free, val, -(1 << 62)), cfg_type, cfg_gpus)
    jobs = jobs[np.argsort(free[jobs].sum(axis=1), kind="stable")]  # (fewest choices first: a smaller search)
    rows, cols = np.nonzero(free[jobs])
    per = np.bincount(rows, minlength=len(jobs)) + 1  # (+ waiting)
    start = np.zeros(len(jobs) + 1, dtype=np.int64)
    np.cumsum(per, out=start[1:])
    n = int(start[-1])
    slot = np.arange(len(rows)) + rows  # (row-major: job i's options after those of the i jobs before, each + waiting)
    o_cfg = np.full(n, -1, dtype=np.int64)
    o_cfg[slot] = cols
    on = o_cfg >= 0
    o_type = np.where(on, cfg_type[np.maximum(o_cfg, 0)], -1)
    o_gpus = np.where(on, cfg_gpus[np.maximum(o_cfg, 0)], 0)
    o_val = np.zeros(n, dtype=np.int64)
    o_val[slot] = val[jobs[rows], cols]
    return 0, jobs, start, o_cfg, o_type, o_gpus, o_val, cap


def _dominated(val, cfg_type, cfg_gpus):
    """[job, configuration]: whether a configuration of as many GPUs or fewer of the same type has
    a greater value (then no optimum takes it: the other one in its place is better)."""
    out = np.zeros(val.shape, dtype=bool)
    for t in np.unique(cfg_type):
        idx = np.flatnonzero(cfg_type == t)
        idx = idx[np.argsort(cfg_gpus[idx], kind="stable")]
        v = val[:, idx]
        before = np.maximum.accumulate(v, axis=1)
        out[:, idx[1:]] = v[:, 1:] < before[:, :-1]
    return out


def alloc_bounded(start, o_cfg, o_type, o_gpus, o_val, cap, sweeps, node_limit) -> tuple:
    """``kernels.elastic.alloc_bounded`` with numpy between its kernels (its twin): (prices,
    Lagrangian bounds, plain bounds, the option of each job, nodes visited)."""
    from ..kernels.elastic import alloc_order, alloc_prices, alloc_search

    J = len(start) - 1
    n = int(start[-1])
    mu = np.zeros(len(cap))
    red = np.empty(n)
    alloc_prices(start, o_type, o_gpus, o_val.astype(np.float64), cap, mu, sweeps)
    alloc_order(start, o_cfg, o_type, o_gpus, o_val, mu, red)
    lag = np.zeros(J + 1)
    lag[:-1] = red[start[:-1]][::-1].cumsum()[::-1]
    most = np.zeros(J + 1, dtype=np.int64)
    most[:-1] = np.maximum.reduceat(o_val, start[:-1])[::-1].cumsum()[::-1]
    pick = np.flatnonzero(o_cfg < 0)
    _, nodes = alloc_search(start, o_type, o_gpus, o_val, red, cap, mu, node_limit, np.empty(J, dtype=np.int64), pick,
                            np.zeros(len(cap), dtype=np.int64), lag, most)
    return mu, lag, most, pick, nodes


def advance(job, t0: float, secs: float) -> None:
    """``SiaJob.advance`` of ``job`` (a :class:`fastblox.compat_sia.SiaJob`) in plain Python: progress
    over ``[t0, t0 + secs)`` on the placement held (``Job.step``), one step per epoch crossed, the
    batch chosen again after each (``SiaJob._choose_batch``), a configuration run the first time
    fitted (``SiaJob._observe``)."""
    from fastblox import elastic

    if not job.placement or job.finish is not None:
        return
    pr, n, r = job.profs[job.cluster], len(job.placement), sum(job.placement)
    d = min(job.rescale, secs)
    used = d
    job.attained_gpu += d * r
    job.rescale -= d
    secs -= d
    seen, ep, last = job.seen[job.cluster], pr.epoch_progress.tolist(), pr.max_epochs - 1
    while secs > 0 and job.finish is None:
        atomic = job.atomic
        batch = r * atomic * (job.accum + 1)
        step, sync = pr.step_time(job.placement, atomic)
        sqr, var = job.grad = pr.grad_stats_at(batch, job.epoch)
        g = elastic.gain(sqr, var, batch / pr.init_batch_size)
        if (n, r, atomic) not in seen:
            job._observe((n, r, atomic), step, sync)
        good = g / (step + (step - sync) * job.accum) * job.calib
        nxt = ep[job.epoch + 1]
        if job.progress + good * secs < nxt:
            job.progress += good * secs
            job.attained_gpu += secs * r
            secs = 0
        else:
            job.epoch += 1
            delta = round(float((nxt - job.progress) / good))
            if job.epoch > last:
                job.finish = t0 + used + delta
            job.progress = nxt
            job.attained_gpu += delta * r
            used += delta
            secs -= delta
        job._choose_batch()


# ------------------------------------------------------------------ the policy's goodput rows
def policy_row(pol, job, maxr: int) -> np.ndarray:
    """``fastblox.compat_sia.SiaPolicy._new_row`` in numpy (its twin; the code before
    ``kernels.elastic.row_goodputs``): per type ``elastic.best_batch_numpy`` on its configurations of
    at most ``maxr`` GPUs, with the job's model there or projected from its first type with one."""
    from .. import elastic
    from ..compat_sia import ZERO_ALLOC_GAIN

    row = np.full(pol.C, ZERO_ALLOC_GAIN, dtype=np.float32)
    has = [t.name for t in pol.types if job.grad is not None and job.pp[t.name] is not None]
    if not has:
        row[pol.cfg_gpus == 1] = 1.0
        return row
    for t in pol.types:
        ok = t.cfg_gpus <= maxr
        d = t.name if t.name in has else has[0]
        nodes = t.cfg_nodes[ok] if d == t.name else np.ceil(t.cfg_gpus[ok] / pol._per[d])
        pr = job.profs[d]
        g = elastic.best_batch_numpy(job.pp[d], job.grad, pr.init_batch_size, nodes, t.cfg_gpus[ok], job.target_bs,
                                     pr.min_local_bsz, pr.max_local_bsz)[0]
        row[t.first:t.first + len(t.cfg_gpus)][ok] = g if d == t.name else g * pol.ratio[job.app, t.name, d]
    row *= 1.0 / row[row > ZERO_ALLOC_GAIN].min()
    row[row <= ZERO_ALLOC_GAIN] = ZERO_ALLOC_GAIN
    return row


def packed_goodput(speeds: tuple, k: int, grad: tuple) -> float:
    """``kernels.elastic.speeds_pack`` and ``packed_goodput`` in plain Python (their twin): the goodput
    of configuration ``k`` of ``elastic.batch_speeds``' outputs ``speeds`` under the gradient
    statistics ``grad``: the first NaN, else the first greatest over the allowed points, 0.0 where
    none is allowed."""
    sqr, var = grad
    atomic, accum, batch, ok, scale, accum_time, optim = speeds
    best = None
    for i in range(batch.shape[0]):
        g = 0.0
        if ok[i, k]:
            thr = float(batch[i, k]) / (float(accum[i, k]) * float(accum_time[i, k]) + float(optim[i, k]))
            denom = var / float(scale[i, k]) + sqr
            g = thr * (((var + sqr) / denom if denom > 0 else 1.0) / float(scale[i, k]))
        if best is None or g > best or (math.isnan(g) and not math.isnan(best)):
            best = g
    return best


def row_goodputs(speeds: list, cols: list, ratio: list, grad: tuple, zero: float) -> list | None:
    """``kernels.elastic.row_goodputs`` in plain Python (its twin): the row's float32 values, or None
    if none is above ``zero``. ``speeds``: ``elastic.batch_speeds`` outputs; ``cols[c]``: (index into
    ``speeds``, configuration there) of the row's configuration ``c``, None where not offered
    (``zero``); its :func:`packed_goodput` times ``ratio[c]``; then float32 1 / the smallest above
    ``zero`` times each, at least ``zero``."""
    zero = np.float32(zero)
    row = [zero if at is None else np.float32(packed_goodput(speeds[at[0]], at[1], grad) * ratio[c])
           for c, at in enumerate(cols)]
    above = [x for x in row if x > zero]
    if not above:
        return None
    by = np.float32(1.0) / min(above)
    return [max(x * by, zero) for x in row]  # (NaN stays: max keeps its first argument unless the second is greater)


def restart_discount(goodput: np.ndarray, held: list, factor: list) -> np.ndarray:
    """``kernels.elastic.restart_discount`` in numpy (its twin; the loop ``SiaPolicy.costs`` ran
    before it): a copy of ``goodput`` with each row whose job holds a configuration (not -1) times
    its factor, but at that configuration."""
    out = np.array(goodput, dtype=np.float32)
    for i, (c, f) in enumerate(zip(held, factor)):
        if c >= 0:
            keep = out[i, c]
            out[i] *= f
            out[i, c] = keep
    return out


def power_costs(goodput: np.ndarray, p: float, clip: float) -> np.ndarray:
    """``fastblox.compat_sia.power_costs`` in numpy (its twin, the code before
    ``kernels.elastic.round_costs``): ``round(goodput ** p, 2)`` in float32, at most ``clip``."""
    a = np.round(np.power(goodput.astype(np.float32), np.float32(p)), decimals=2)
    a[a > clip] = clip
    return a
