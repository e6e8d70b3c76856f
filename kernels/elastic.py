"""Kernels of the elastic job models: the fit's loss and exact gradient (``fastblox.elastic.FitLoss``,
whose plain-numpy twin is ``fastblox.elastic._fit_objective``), the best batch size's arithmetic
(``fastblox.elastic.best_batch``, whose twin is ``fastblox.elastic.best_batch_numpy``), Sia's goodput rows and
cost matrix (``fastblox.compat_sia.SiaPolicy``: ``speeds_pack``, ``packed_goodput``, ``row_goodputs``,
``restart_discount``, ``round_costs``; their twins are ``fastblox.reference.sia``'s ``packed_goodput`` (of the
first two), ``row_goodputs``, ``restart_discount`` and ``power_costs``, and the whole row's ``policy_row``) and
Sia's allocation search (``fastblox.compat_sia.exact_allocation``, whose twins are HiGHS and
``fastblox.reference.sia.best_allocation``; its preparation's, ``alloc_options`` and ``alloc_bounded``,
are ``fastblox.reference.sia``'s numpy functions of the same names); the tests compare them. The whole
fit is ``kernels.lbfgsb``'s."""

from __future__ import annotations

import math

import numpy as np

from ._jit import jit

TINY = 1e-8


# ---------------------------------------------------------------------------------------------------------------
# The numpy loss's bits. A kernel computing the whole loss differs from ``fastblox.elastic._fit_objective`` in
# the last bits (its fit then stops elsewhere): numpy's log and power (on AVX-512: its own SIMD log, SVML's
# pow) are not libm's (numba's), and numpy sums arrays pairwise. The two kernels below do the loss's arithmetic
# between numpy's transcendental calls (which ``fastblox.elastic.FitLoss`` makes, on the same values as the
# numpy loss) in the numpy loss's order, with numpy's pairwise sum: the loss and its gradient bit for bit.
@jit(nrt=False)
def pairwise_sum(a, lo, n):
    """numpy's float64 sum of ``a[lo:lo + n]`` (``add.reduce``: ``pairwise_sum`` of
    numpy/_core/src/umath/loops_utils.h.src: below 8 in order, up to 128 in 8 partial sums,
    above that halves at a multiple of 8)."""
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
        r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
        i = 8
        while i < n - (n % 8):
            r0 += a[lo + i]
            r1 += a[lo + i + 1]
            r2 += a[lo + i + 2]
            r3 += a[lo + i + 3]
            r4 += a[lo + i + 4]
            r5 += a[lo + i + 5]
            r6 += a[lo + i + 6]
            r7 += a[lo + i + 7]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += a[lo + i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return pairwise_sum(a, lo, n2) + pairwise_sum(a, lo + n2, n - n2)


@jit(nrt=False)
def fit_terms(p, nodes, reps, atomic, out):
    """``out[:n]`` = compute times A = alpha_c + beta_c * atomic, ``out[n:]`` = network times N
    (``_network_time``) of parameters ``p`` on the n observations."""
    n = nodes.shape[0]
    for i in range(n):
        out[i] = p[0] + p[1] * atomic[i]
        if nodes[i] > 1:
            a, b = p[2], p[3]
        elif reps[i] > 1:
            a, b = p[4], p[5]
        else:
            a, b = TINY, TINY
        out[n + i] = a + b * max(reps[i] - 2.0, TINY)


@jit(nrt=False)
def batch_times(pp, atomic, link, spread, accum_time, network):
    """``fastblox.elastic.best_batch``'s compute times ``accum_time`` [point, config] = alpha_c +
    beta_c * atomic and network times ``network`` [config] (``_network_time``; ``link`` 0:
    inter-node, 1: intra-node, 2: none; ``spread``: GPUs beyond 2, at least TINY)."""
    P, K = atomic.shape
    for i in range(P):
        for c in range(K):
            accum_time[i, c] = pp[0] + pp[1] * atomic[i, c]
    for c in range(K):
        if link[c] == 0:
            a, b = pp[2], pp[3]
        elif link[c] == 1:
            a, b = pp[4], pp[5]
        else:
            a, b = TINY, TINY
        network[c] = a + b * spread[c]


@jit(nrt=False)
def batch_pick(batch, accum, accum_time, optim, scale, ok, sqr, var, atomic, good_out, atomic_out, accum_out):
    """The rest of ``best_batch`` given numpy's ``optim`` (= exp(log(A^g + N^g) / g)): each config's
    goodput (throughput x statistical efficiency, 0 where not ``ok``) at its best point (the first
    of the greatest, or the first NaN, as numpy's argmax), and that point's atomic batch and
    accumulation steps."""
    P, K = batch.shape
    vs = var + sqr
    for c in range(K):
        best = 0.0
        k = -1
        for i in range(P):
            if ok[i, c]:
                thr = batch[i, c] / (accum[i, c] * accum_time[i, c] + optim[i, c])
                denom = var / scale[i, c] + sqr
                eff = (vs / denom if denom > 0 else 1.0) / scale[i, c]
                g = thr * eff
            else:
                g = 0.0
            if k < 0 or g > best or (math.isnan(g) and not math.isnan(best)):
                best, k = g, i
        good_out[c] = best
        atomic_out[c] = atomic[k, c]
        accum_out[c] = accum[k, c]


@jit(nrt=False)
def speeds_pack(batch, accum, accum_time, optim, scale, ok, out):
    """``fastblox.elastic.batch_speeds``' candidates [point, config] packed for :func:`row_goodputs`:
    ``out[c]`` = (throughput of each point as ``batch_pick`` computes it, its scale, 1.0 where allowed
    else 0.0) [3, point]."""
    P, K = batch.shape
    for c in range(K):
        for i in range(P):
            out[c, 0, i] = batch[i, c] / (accum[i, c] * accum_time[i, c] + optim[i, c])
            out[c, 1, i] = scale[i, c]
            out[c, 2, i] = 1.0 if ok[i, c] else 0.0


@jit(nrt=False, error_model="numpy")
def packed_goodput(s, sqr, var, work):
    """``batch_pick``'s goodput on one :func:`speeds_pack` column ``s`` [3, point]: the greatest over
    the allowed points (the first NaN, as numpy's argmax; 0.0 where none is allowed). ``work``: a
    float per point of scratch. (Every point's goodput first, then the pick: the first loop has no
    branch and numpy's error model raises on no division, so it runs on SIMD lanes; the same
    operations on each point.)"""
    vs = var + sqr
    thr, scale, ok = s[0], s[1], s[2]
    n = s.shape[1]
    for i in range(n):
        denom = var / scale[i] + sqr
        q = vs / denom
        eff = (q if denom > 0 else 1.0) / scale[i]
        work[i] = thr[i] * eff if ok[i] != 0.0 else 0.0
    best = work[0]
    for i in range(1, n):
        g = work[i]
        if g > best or (math.isnan(g) and not math.isnan(best)):
            best = g
    return best


@jit(nrt=False, error_model="numpy")
def row_goodputs(speeds, cols, ratio, sqr, var, zero, row, work):
    """Sia's goodput row (``fastblox.compat_sia.SiaPolicy._new_row``) into ``row`` (float32):
    configuration c's goodput is :func:`packed_goodput` on the :func:`speeds_pack` column
    ``speeds[cols[c]]`` times ``ratio[c]`` (``cols[c]`` -1: not offered, ``zero``); the row is then
    scaled by float32 1 / its smallest value above ``zero`` and raised to at least ``zero`` (numpy's
    float32 arithmetic). ``work``: a float per point of scratch. Returns how many values were above
    ``zero`` (0: none, the row not scaled)."""
    C = cols.shape[0]
    above = 0
    least = np.float32(np.inf)
    for c in range(C):
        if cols[c] < 0:
            row[c] = zero
            continue
        row[c] = np.float32(packed_goodput(speeds[cols[c]], sqr, var, work) * ratio[c])
        if row[c] > zero:
            above += 1
            least = min(least, row[c])
    if above == 0:
        return 0
    by = np.float32(1.0) / least
    for c in range(C):
        row[c] = row[c] * by
        if row[c] <= zero:
            row[c] = zero
    return above


@jit(nrt=False)
def restart_discount(goodput, held, factor):
    """Sia's restart discount in place (``fastblox.compat_sia.SiaPolicy.costs``): each row ``i`` of
    ``goodput`` (float32) whose job holds configuration ``held[i]`` (-1: none, left alone) times
    float32 ``factor[i]``, but at ``held[i]``."""
    for i in range(goodput.shape[0]):
        c = held[i]
        if c < 0:
            continue
        keep = goodput[i, c]
        f = np.float32(factor[i])
        for k in range(goodput.shape[1]):
            goodput[i, k] = goodput[i, k] * f
        goodput[i, c] = keep


@jit(nrt=False)
def round_costs(cost, clip):
    """``fastblox.compat_sia.power_costs``' rounding in place: each float32 ``cost`` to 2 decimals as
    numpy's ``round`` does (times 100, to the nearest integer, ties to even, over 100, in float32),
    at most ``clip``."""
    hundred = np.float32(100.0)
    for i in range(cost.shape[0]):
        y = np.float32(np.rint(np.float32(cost[i] * hundred)))
        y = np.float32(y / hundred)
        cost[i] = clip if y > clip else y


@jit(nrt=False)
def fit_sums(g, g2, AN, powAN, logAN, S, logS, log_acc, log_step, nodes, reps, atomic, work, sums):
    """The loss's sums given numpy's powers (``powAN`` = ``AN ** g``) and logs: ``sums`` = [e1, e2,
    sum dA, sum dA*atomic, sum dN*inter, sum dN*inter*m, sum dN*intra, sum dN*intra*m, sum dg-terms]
    (``work``: 9 n floats of scratch). ``g2`` = ``g ** 2`` as numpy computes it."""
    n = nodes.shape[0]
    d1 = work[0:n]
    d2 = work[n:2 * n]
    for i in range(n):
        d1[i] = logAN[i] - log_acc[i]
        d2[i] = logS[i] / g - log_step[i]
    t = work[2 * n:3 * n]
    for i in range(n):
        t[i] = d1[i] * d1[i]
    e1 = math.sqrt(pairwise_sum(t, 0, n) / n)
    for i in range(n):
        t[i] = d2[i] * d2[i]
    e2 = math.sqrt(pairwise_sum(t, 0, n) / n)
    sums[0] = e1
    sums[1] = e2
    for k in range(7):
        col = work[(2 + k) * n:(3 + k) * n]
        for i in range(n):
            w1 = d1[i] / (n * e1) if e1 > 0 else 0.0
            w2 = d2[i] / (n * e2) if e2 > 0 else 0.0
            A, N = AN[i], AN[n + i]
            Ag, Ng = powAN[i], powAN[n + i]
            inter = 1.0 if nodes[i] > 1 else 0.0
            intra = 1.0 if nodes[i] <= 1 and reps[i] > 1 else 0.0
            m = max(reps[i] - 2.0, TINY)
            if k <= 1:
                v = w1 / A + w2 * Ag / (A * S[i])
                if k == 1:
                    v = v * atomic[i]
            elif k <= 5:
                v = w2 * Ng / (N * S[i]) * (inter if k <= 3 else intra)
                if k == 3 or k == 5:
                    v = v * m
            else:
                v = w2 * (-logS[i] / g2 + (Ag * logAN[i] + Ng * logAN[n + i]) / (g * S[i]))
            col[i] = v
        sums[2 + k] = pairwise_sum(col, 0, n)


# ---------------------------------------------------------------------------------------------------------------
# Sia's allocation (fastblox.compat_sia.solve_allocation) on integer gains: a branch and bound with Lagrangian
# bounds (GPU prices per type) that proves the optimum. Twins: HiGHS's MILP and fastblox.reference.sia.
@jit(nrt=False)
def _price_value(start, o_type, o_gpus, o_val, cap, mu):
    """The Lagrangian bound at GPU prices ``mu``: per job its best of ``val - mu[type] * gpus``
    (0: no GPUs) plus ``mu`` times each type's GPUs."""
    tot = 0.0
    for t in range(cap.shape[0]):
        tot += mu[t] * cap[t]
    for d in range(start.shape[0] - 1):
        b = 0.0
        for k in range(start[d], start[d + 1]):
            if o_type[k] >= 0:
                r = o_val[k] - mu[o_type[k]] * o_gpus[k]
                if r > b:
                    b = r
        tot += b
    return tot


@jit(nrt=False)
def _price_slope(start, o_type, o_gpus, o_val, cap, mu, t):
    """The bound's slope along ``mu[t]`` from above: ``cap[t]`` less the GPUs of type ``t`` the
    jobs' best options take (ties: the fewest GPUs of ``t``)."""
    s = float(cap[t])
    for d in range(start.shape[0] - 1):
        b = 0.0
        g = 0
        for k in range(start[d], start[d + 1]):
            if o_type[k] >= 0:
                r = o_val[k] - mu[o_type[k]] * o_gpus[k]
                gk = o_gpus[k] if o_type[k] == t else 0
                if r > b or (r == b and gk < g):
                    b = r
                    g = gk
        s -= g
    return s


@jit(nrt=False)
def alloc_prices(start, o_type, o_gpus, o_val, cap, mu, sweeps):
    """Lower the Lagrangian bound by minimising it along one type's price at a time (``sweeps``
    passes): along ``mu[t]`` it is convex and piecewise linear, so a bisection on the sign of its
    slope finds its least value (to 1e-9 of the price's range). ``mu`` in place; returns the bound."""
    T = cap.shape[0]
    for _ in range(sweeps):
        for t in range(T):
            hi = 0.0
            for k in range(o_type.shape[0]):
                if o_type[k] == t and o_gpus[k] > 0 and o_val[k] / o_gpus[k] > hi:
                    hi = o_val[k] / o_gpus[k]
            mu[t] = 0.0
            if hi <= 0.0 or _price_slope(start, o_type, o_gpus, o_val, cap, mu, t) >= 0.0:
                continue
            lo = 0.0
            span = hi
            while hi - lo > 1e-9 * span:
                mid = 0.5 * (lo + hi)
                mu[t] = mid
                if _price_slope(start, o_type, o_gpus, o_val, cap, mu, t) >= 0.0:
                    hi = mid
                else:
                    lo = mid
            mu[t] = lo
            v_lo = _price_value(start, o_type, o_gpus, o_val, cap, mu)
            mu[t] = hi
            if v_lo < _price_value(start, o_type, o_gpus, o_val, cap, mu):
                mu[t] = lo
    return _price_value(start, o_type, o_gpus, o_val, cap, mu)


@jit(nrt=False)
def _rint(x):
    """``np.rint``: to the nearest integer, halves to even (as a float)."""
    r = math.floor(x)
    d = x - r
    if d > 0.5 or (d == 0.5 and r % 2 != 0):
        r += 1.0
    return r


@jit
def alloc_options(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n, lam, prefer):
    """``fastblox.compat_sia.exact_allocation``'s variables in integer hundredths (its numpy twin:
    ``fastblox.reference.sia.alloc_options``). ``cost`` [job, configuration] float64, ``lam`` =
    round(``lambda_n`` * 100), ``prefer`` -1 where none. Returns (status: 0 ok, 1 not in whole
    hundredths or pinned jobs over a type's GPUs, 2 every job pinned; the free jobs by fewest
    options, stable; each one's options ``start[d]:start[d + 1]``: configuration (-1: waiting,
    last), its type (-1), GPUs (0), value ((lam - hundredths) x (free jobs + 1), + 1 where
    preferred; waiting 0); the GPUs left of each type)."""
    J, C = cost.shape
    T = capacity.shape[0]
    cap = capacity.copy()
    nfree = 0
    for j in range(J):
        if fixed[j] >= 0:
            cap[cfg_type[fixed[j]]] -= cfg_gpus[fixed[j]]
        else:
            nfree += 1
    empty = np.zeros(0, np.int64)
    bad = abs(lambda_n * 100 - lam) > 1e-6
    for t in range(T):
        bad |= cap[t] < 0
    free = np.zeros((J, C), np.bool_)
    val = np.empty((J, C), np.int64)
    for j in range(J):
        for c in range(C):
            k = _rint(cost[j, c] * 100)
            val[j, c] = (lam - np.int64(k)) * (nfree + 1) + (1 if prefer[j] == c else 0)
            if fixed[j] < 0 and cost[j, c] - lambda_n < 0:
                bad |= abs(cost[j, c] - k / 100) > 1e-6
                free[j, c] = cfg_gpus[c] <= cap[cfg_type[c]]
    if bad:
        return 1, empty, empty, empty, empty, empty, empty, cap
    if nfree == 0:
        return 2, empty, empty, empty, empty, empty, empty, cap
    # (dominated: a configuration of as many GPUs or fewer of its type, earlier in GPU order, has more value)
    order = np.argsort(cfg_gpus, kind="mergesort")
    count = np.zeros(J, np.int64)
    for j in range(J):
        for t in range(T):
            best = -(1 << 62)
            first = True
            for q in range(C):
                c = order[q]
                if cfg_type[c] != t:
                    continue
                v = val[j, c] if free[j, c] else -(1 << 62)
                if not first and v < best:
                    free[j, c] = False
                if first or v > best:
                    best = v
                first = False
        for c in range(C):
            count[j] += free[j, c]
    jobs = np.empty(nfree, np.int64)
    i = 0
    for m in range(C + 1):  # (stable by the number of options)
        for j in range(J):
            if fixed[j] < 0 and count[j] == m:
                jobs[i] = j
                i += 1
    start = np.zeros(nfree + 1, np.int64)
    for d in range(nfree):
        start[d + 1] = start[d] + count[jobs[d]] + 1
    n = start[nfree]
    o_cfg, o_type, o_gpus, o_val = np.full(n, -1, np.int64), np.full(n, -1, np.int64), np.zeros(n, np.int64), \
        np.zeros(n, np.int64)
    for d in range(nfree):
        k = start[d]
        j = jobs[d]
        for c in range(C):
            if free[j, c]:
                o_cfg[k], o_type[k], o_gpus[k], o_val[k] = c, cfg_type[c], cfg_gpus[c], val[j, c]
                k += 1
    return 0, jobs, start, o_cfg, o_type, o_gpus, o_val, cap


@jit
def alloc_bounded(start, o_cfg, o_type, o_gpus, o_val, cap, sweeps, node_limit):
    """``fastblox.compat_sia.exact_allocation``'s search on :func:`alloc_options`' options: GPU
    prices (:func:`alloc_prices`), each job's options by reduced value (:func:`alloc_order`), the
    bounds of the jobs after each one (Lagrangian: their best reduced values, summed from the last;
    plain: their best values), then :func:`alloc_search` from every job waiting. Returns (prices,
    Lagrangian bounds, plain bounds, the option of each job, nodes visited; -1: gave up)."""
    J = start.shape[0] - 1
    n = start[J]
    mu = np.zeros(cap.shape[0])
    red = np.empty(n)
    alloc_prices(start, o_type, o_gpus, o_val.astype(np.float64), cap, mu, sweeps)  # (0 where the best fit)
    alloc_order(start, o_cfg, o_type, o_gpus, o_val, mu, red)
    lag = np.zeros(J + 1)
    most = np.zeros(J + 1, np.int64)
    s, m = 0.0, 0
    for d in range(J - 1, -1, -1):
        s += red[start[d]]
        lag[d] = s
        top = o_val[start[d]]
        for k in range(start[d] + 1, start[d + 1]):
            top = max(top, o_val[k])
        m += top
        most[d] = m
    pick = np.empty(J, np.int64)
    i = 0
    for k in range(n):  # (every job waits: a choice, should the search stop before its first)
        if o_cfg[k] < 0:
            pick[i] = k
            i += 1
    _, nodes = alloc_search(start, o_type, o_gpus, o_val, red, cap, mu, node_limit, np.empty(J, np.int64), pick,
                            np.zeros(cap.shape[0], np.int64), lag, most)
    return mu, lag, most, pick, nodes


@jit(nrt=False)
def alloc_order(start, o_cfg, o_type, o_gpus, o_val, mu, red):
    """Each job's options (in place) by decreasing reduced value ``val - mu[type] * gpus`` (ties: more
    value, then the smaller configuration; no GPUs: -1), ``red`` their reduced values."""
    for d in range(start.shape[0] - 1):
        for k in range(start[d], start[d + 1]):
            red[k] = o_val[k] - (mu[o_type[k]] * o_gpus[k] if o_type[k] >= 0 else 0.0)
            i = k  # (insertion sort: a job has a few tens of options)
            while i > start[d] and (red[i] > red[i - 1] or (red[i] == red[i - 1] and (
                    o_val[i] > o_val[i - 1] or (o_val[i] == o_val[i - 1] and o_cfg[i] > o_cfg[i - 1])))):
                red[i], red[i - 1] = red[i - 1], red[i]
                o_cfg[i], o_cfg[i - 1] = o_cfg[i - 1], o_cfg[i]
                o_type[i], o_type[i - 1] = o_type[i - 1], o_type[i]
                o_gpus[i], o_gpus[i - 1] = o_gpus[i - 1], o_gpus[i]
                o_val[i], o_val[i - 1] = o_val[i - 1], o_val[i]
                i -= 1


@jit(nrt=False)
def alloc_search(start, o_type, o_gpus, o_val, red, cap, mu, node_limit, cur, best_pick, used, lag_rest, max_rest):
    """The greatest sum of one option per job (job ``d``'s options: ``start[d]:start[d + 1]``, by
    decreasing reduced value ``red``; ``o_type`` -1: no GPUs, value 0) with each type's GPUs at
    most ``cap``; integer values. Depth first, the first leaf each job's best reduced option; a
    branch is cut when no completion can beat the best found by 1: bounded by the sum of the
    remaining jobs' largest values (``max_rest[d]``: of jobs ``d..``) and by the Lagrangian bound
    at ``mu`` (``lag_rest[d]``: the sum of their largest reduced values, plus ``mu`` times the GPUs
    left). Returns (best value, nodes visited; -1: more than ``node_limit``, nothing proven);
    ``best_pick[d]``: job ``d``'s option. ``cur``, ``used``: scratch (jobs, types)."""
    J = start.shape[0] - 1
    T = cap.shape[0]
    best = -1
    nodes = 0
    for t in range(T):
        used[t] = 0
    if J == 0:
        return 0, 0
    val = 0
    d = 0
    cur[0] = -1
    while d >= 0:
        k = cur[d]
        if k >= 0:  # undo the option tried last at this depth
            val -= o_val[k]
            if o_type[k] >= 0:
                used[o_type[k]] -= o_gpus[k]
            k += 1
        else:
            k = start[d]
        left = 0.0
        for t in range(T):
            left += mu[t] * (cap[t] - used[t])
        nxt = -1
        while k < start[d + 1]:
            if val + red[k] + lag_rest[d + 1] + left < best + 1 - 1e-6:
                break  # (by decreasing reduced value: no later option can do better)
            if val + o_val[k] + max_rest[d + 1] > best and (
                    o_type[k] < 0 or used[o_type[k]] + o_gpus[k] <= cap[o_type[k]]):
                nxt = k
                break
            k += 1
        if nxt < 0:
            cur[d] = -1
            d -= 1
            continue
        nodes += 1
        if nodes > node_limit:
            return best, -1
        cur[d] = nxt
        val += o_val[nxt]
        if o_type[nxt] >= 0:
            used[o_type[nxt]] += o_gpus[nxt]
        if d == J - 1:
            if val > best:
                best = val
                for i in range(J):
                    best_pick[i] = cur[i]
        else:
            d += 1
            cur[d] = -1
    return best, nodes


@jit(nrt=False)
def alloc_improve(start, o_type, o_gpus, o_val, cap, pick, used):
    """Improve the choice ``pick`` (an option per job, within ``cap``) in place by local search: a
    job to another option, or two jobs to other options at once, whenever that fits and adds
    value (the first such move, then again from the start), until none does. Returns its value.
    ``used`` [type]: scratch."""
    J = start.shape[0] - 1
    T = cap.shape[0]
    for t in range(T):
        used[t] = 0
    val = 0
    for d in range(J):
        k = pick[d]
        val += o_val[k]
        if o_type[k] >= 0:
            used[o_type[k]] += o_gpus[k]
    moved = True
    while moved:
        moved = False
        for d in range(J):
            a = pick[d]
            if o_type[a] >= 0:
                used[o_type[a]] -= o_gpus[a]
            for k in range(start[d], start[d + 1]):
                if o_val[k] > o_val[a] and (o_type[k] < 0 or used[o_type[k]] + o_gpus[k] <= cap[o_type[k]]):
                    val += o_val[k] - o_val[a]
                    a = k
                    pick[d] = k
                    moved = True
            if o_type[a] >= 0:
                used[o_type[a]] += o_gpus[a]
        if moved:
            continue
        for d in range(J):
            for e in range(d + 1, J):
                a, b = pick[d], pick[e]
                if o_type[a] >= 0:
                    used[o_type[a]] -= o_gpus[a]
                if o_type[b] >= 0:
                    used[o_type[b]] -= o_gpus[b]
                for k in range(start[d], start[d + 1]):
                    if o_type[k] >= 0:
                        if used[o_type[k]] + o_gpus[k] > cap[o_type[k]]:
                            continue
                        used[o_type[k]] += o_gpus[k]
                    for m in range(start[e], start[e + 1]):
                        if o_val[k] + o_val[m] > o_val[a] + o_val[b] and (
                                o_type[m] < 0 or used[o_type[m]] + o_gpus[m] <= cap[o_type[m]]):
                            val += o_val[k] + o_val[m] - o_val[a] - o_val[b]
                            a, b = k, m
                            moved = True
                    if o_type[k] >= 0:
                        used[o_type[k]] -= o_gpus[k]
                pick[d], pick[e] = a, b
                if o_type[a] >= 0:
                    used[o_type[a]] += o_gpus[a]
                if o_type[b] >= 0:
                    used[o_type[b]] += o_gpus[b]
    return val


@jit(nrt=False)
def alloc_dp(start, o_type, o_gpus, o_val, cap, mu, lag_rest, max_rest, best, stride, used, dp, nxt, live, born,
             choice, pick):
    """``alloc_search``'s problem by dynamic programming over the GPUs used of each type (state ``s``
    = sum of used[t] * ``stride[t]``), keeping only the states whose bounds (``alloc_search``'s, at
    prices ``mu``) can still beat ``best`` (the value of ``pick``, found by the search) by 1: exact
    whatever the bounds' gap, in time jobs x options x live states. ``used`` [type], ``dp``, ``nxt``
    [state] (all -2^62 on entry, left so), ``live``, ``born`` [state], ``choice`` [job, state]:
    scratch. Returns the best value; where it beats ``best``, ``pick[d]`` is job ``d``'s option
    (ties: the states in the order they were reached, each job's options in order)."""
    J = start.shape[0] - 1
    T = cap.shape[0]
    neg = -(1 << 62)
    n = 1
    live[0] = 0
    dp[0] = 0
    top = best
    for d in range(J):
        m = 0
        for i in range(n):
            s = live[i]
            left = 0.0
            for t in range(T):
                used[t] = (s // stride[t]) % (cap[t] + 1)
                left += mu[t] * (cap[t] - used[t])
            for k in range(start[d], start[d + 1]):
                t = o_type[k]
                g = o_gpus[k]
                if t >= 0 and used[t] + g > cap[t]:
                    continue
                v = dp[s] + o_val[k]
                lag = v + lag_rest[d + 1] + left - (mu[t] * g if t >= 0 else 0.0)
                if lag < best + 1 - 1e-6:
                    break  # (the options by decreasing reduced value: the later ones' bounds are lower)
                if v + max_rest[d + 1] <= best:
                    continue
                s2 = s + (g * stride[t] if t >= 0 else 0)
                if nxt[s2] == neg:
                    born[m] = s2
                    m += 1
                if v > nxt[s2]:
                    nxt[s2] = v
                    choice[d, s2] = k - start[d]
        for i in range(n):
            dp[live[i]] = neg
        for i in range(m):
            live[i] = born[i]
            dp[born[i]] = nxt[born[i]]
            nxt[born[i]] = neg
        n = m
    at = -1
    for i in range(n):
        if dp[live[i]] > top:
            top = dp[live[i]]
            at = live[i]
    for i in range(n):
        dp[live[i]] = neg
    if at < 0:
        return best
    for d in range(J - 1, -1, -1):
        k = start[d] + choice[d, at]
        pick[d] = k
        if o_type[k] >= 0:
            at -= o_gpus[k] * stride[o_type[k]]
    return top


# ---------------------------------------------------------------------------------------------------------------
# Pollux's plan (``fastblox.compat_pollux.PolluxPolicy._sizes``; its numpy twin is ``_sizes_numpy``): each job's
# GPUs minimising the sum of its values, by a dynamic programme over the GPUs used, with numpy's argmin ties
# (the first option) and the same additions, so the same plan bit for bit.
@jit(nrt=False)
def pollux_sizes(vals, offs, keep_r, keep_v, total, choice, dp, nxt, out_r, out_keep):
    """Job j's options: GPUs r = 0..offs[j+1]-offs[j]-1 of value ``vals[offs[j] + r]``, and, when
    ``keep_r[j] >= 0``, keeping its allocation (``keep_r[j]`` GPUs, value ``keep_v[j]``). Writes
    each job's GPUs and whether it keeps its allocation (``out_r``, ``out_keep``) of the least sum
    over at most ``total`` GPUs. ``choice`` (jobs x total+1, int64), ``dp`` and ``nxt``
    (total+1): scratch."""
    nj = len(keep_r)
    for c in range(total + 1):
        dp[c] = 0.0
    for j in range(nj):
        lo = offs[j]
        n = offs[j + 1] - lo
        m = n + (1 if keep_r[j] >= 0 else 0)
        for c in range(total + 1):
            nxt[c] = math.inf
            choice[j, c] = 0
        # (each sum c takes the first option of the least sum, as numpy's argmin: the options in their
        # order, each over every c; an option of value inf never gives a sum below inf, so it is skipped)
        for k in range(m):
            r = k if k < n else keep_r[j]
            v = vals[lo + k] if k < n else keep_v[j]
            if v == math.inf:
                continue
            for c in range(r, total + 1):
                cand = dp[c - r] + v
                if cand < nxt[c]:
                    nxt[c] = cand
                    choice[j, c] = k
        for c in range(total + 1):
            dp[c] = nxt[c]
    c = 0
    for i in range(1, total + 1):
        if dp[i] < dp[c]:
            c = i
    for j in range(nj - 1, -1, -1):
        k = choice[j, c]
        n = offs[j + 1] - offs[j]
        if k < n:
            out_r[j] = k
            out_keep[j] = False
        else:
            out_r[j] = keep_r[j]
            out_keep[j] = True
        c -= out_r[j]
