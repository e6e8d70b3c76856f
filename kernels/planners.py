"""Kernels of the planner policies (``fastblox.policies``): the per-round loops that run over every
active job, compiled. Plain-Python twins in ``fastblox.reference.planners``."""

from __future__ import annotations

import numpy as np

from ._calls import helper
from ._jit import jit
from .enums import NO_RUN, RUNNING


@jit
def gavel_select(type_order, prio, deficit, x, thr, sf, left, eligible, fifo, types_out, keys_out):
    """Gavel's round mechanism: serve the GPU types in ``type_order``; on type ``t`` take jobs by
    ``(prio, deficit, x)`` descending (ties: lower index) while ``left[t]`` GPUs remain, skipping
    jobs already taken, not ``eligible``, that cannot run on ``t`` (``thr <= 0``), that do not
    fit, and (``fifo``) jobs of zero priority. Writes each job's type (or ``NO_RUN``) and its
    selection rank; ``left`` is consumed. Returns the number of jobs chosen."""
    a = prio.shape[0]
    taken = np.empty(a, dtype=np.bool_)
    for i in range(a):
        taken[i] = not eligible[i]
        types_out[i] = NO_RUN
    rank = 0
    for k in range(type_order.shape[0]):
        t = type_order[k]
        if left[t] <= 0:
            continue
        # stable sorts from the least significant key up: x, then deficit, then priority
        o1 = np.argsort(-x[:, t], kind="mergesort")
        k2 = np.empty(a)
        for i in range(a):
            k2[i] = -deficit[o1[i], t]
        o2 = o1[np.argsort(k2, kind="mergesort")]
        for i in range(a):
            k2[i] = -prio[o2[i], t]
        order = o2[np.argsort(k2, kind="mergesort")]
        for r in range(a):
            if left[t] <= 0:
                break
            i = order[r]
            if taken[i] or thr[i, t] <= 0.0 or sf[i] > left[t]:
                continue
            if fifo and prio[i, t] <= 0.0:
                continue
            left[t] -= sf[i]
            taken[i] = True
            types_out[i] = t
            keys_out[i] = rank
            rank += 1
    for i in range(a):
        if types_out[i] == NO_RUN:
            keys_out[i] = rank
    return rank


@helper
def _gain_before(ga, ia, gb, ib):
    """Max-heap order of marginal gains: larger gain first, ties the lower job position."""
    return ga > gb or (ga == gb and ia < ib)


@helper
def _hpush(hg, hi, n, g, i):
    k = n
    hg[k] = g
    hi[k] = i
    while k > 0:
        p = (k - 1) >> 1
        if not _gain_before(hg[k], hi[k], hg[p], hi[p]):
            break
        hg[k], hg[p] = hg[p], hg[k]
        hi[k], hi[p] = hi[p], hi[k]
        k = p
    return n + 1


@helper
def _hpop(hg, hi, n):
    n -= 1
    hg[0] = hg[n]
    hi[0] = hi[n]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and _gain_before(hg[c + 1], hi[c + 1], hg[c], hi[c]):
            c += 1
        if not _gain_before(hg[c], hi[c], hg[k], hi[k]):
            break
        hg[k], hg[c] = hg[c], hg[k]
        hi[k], hi[c] = hi[c], hi[k]
        k = c
    return n


@jit
def optimus_sizes(S, T, cap, free, size):
    """Optimus' allocation: ``S[a, n]`` throughput and ``T[a, n]`` remaining time of job ``a`` on
    ``n`` GPUs. One GPU each, shortest ``T[:, 1]`` first (ties: lower position), while ``free``
    lasts and the job can run on one GPU; then one GPU at a time to the largest marginal gain
    ``T[a, n] - T[a, n + 1]`` (ties: lower position) while ``n < cap[a]`` and ``S`` grows.
    Writes ``size``; returns the GPUs left."""
    a = S.shape[0]
    for i in range(a):
        size[i] = 0
    order = np.argsort(T[:, 1], kind="mergesort")
    for r in range(a):
        if free == 0:
            break
        i = order[r]
        if S[i, 1] > 0.0:
            size[i] = 1
            free -= 1
    hg = np.empty(a + 1)
    hi = np.empty(a + 1, dtype=np.int64)
    n = 0
    for i in range(a):
        k = size[i]
        if k > 0 and k < cap[i] and S[i, k + 1] > S[i, k]:
            n = _hpush(hg, hi, n, T[i, k] - T[i, k + 1], i)
    while free > 0 and n > 0:
        i = hi[0]
        n = _hpop(hg, hi, n)
        size[i] += 1
        free -= 1
        k = size[i]
        if k < cap[i] and S[i, k + 1] > S[i, k]:
            n = _hpush(hg, hi, n, T[i, k] - T[i, k + 1], i)
    return free


@jit
def fifo_allocation(thr, sf, cap, x):
    """Gavel's ``fifo_perf`` allocation into ``x[a, T]`` (zeros on entry): jobs in arrival order,
    each given all of the fastest type (by its throughput ``thr[j]``; ties: the lower type) with
    ``sf[j]`` GPUs still free, stopping at the first job no type can take."""
    a, T = thr.shape
    avail = np.empty(T, dtype=np.int64)
    for t in range(T):
        avail[t] = np.int64(cap[t])
    for j in range(a):
        best = -1
        for t in range(T):
            if avail[t] >= sf[j] and thr[j, t] > 0 and (best < 0 or thr[j, t] > thr[j, best]):
                best = t
        if best < 0:
            break
        x[j, best] = 1.0
        avail[best] -= sf[j]


@helper
def _speed_below(c, s, u):
    """Speed-weighted capacity of the fastest ``u`` GPU units of the profile (types sorted by
    speed, ``c`` units of speed ``s`` each): ``F(u)``, flat beyond the last unit."""
    acc = 0.0
    tot = 0.0
    for t in range(c.shape[0]):
        take = min(c[t], max(u - acc, 0.0))
        tot += take * s[t]
        acc += c[t]
    return tot


@helper
def _take_window(c, p, length, y):
    """``y[t]`` = the GPU units of type ``t`` in the profile window ``[p, p + length)``."""
    acc = 0.0
    for t in range(c.shape[0]):
        y[t] = max(0.0, min(acc + c[t], p + length) - max(acc, p))
        acc += c[t]


@helper
def _window_for(c, s, k, w, y):
    """The slowest window of at most ``k`` units of the profile giving ``w`` speed-units, into
    ``y``: the slowest units alone when they suffice, else the window of exactly ``k`` units whose
    speed is ``w`` (``F(p + k) - F(p)`` decreases in ``p``: linear between the knots)."""
    T = c.shape[0]
    M = 0.0
    for t in range(T):
        M += c[t]
    tmax = min(k, M)
    if _speed_below(c, s, M) - _speed_below(c, s, M - tmax) >= w or M <= k:
        left = w
        for i in range(T):
            t = T - 1 - i
            y[t] = 0.0
            if left > 0.0:
                y[t] = min(c[t], left / s[t])
                left -= y[t] * s[t]
        return
    knots = np.empty(2 * T + 2)
    n = 0
    acc = 0.0
    knots[n] = 0.0
    knots[n + 1] = M - k
    n += 2
    for t in range(T):
        acc += c[t]
        for q in (acc, acc - k):
            if 0.0 < q < M - k:
                knots[n] = q
                n += 1
    q = np.sort(knots[:n])
    prev_p = q[0]
    prev_g = _speed_below(c, s, prev_p + k) - _speed_below(c, s, prev_p)
    p = prev_p  # the fastest window when even it falls short (an infeasible need: never asked)
    if prev_g > w:
        for i in range(1, n):
            g = _speed_below(c, s, q[i] + k) - _speed_below(c, s, q[i])
            if g <= w:
                p = prev_p + (prev_g - w) / (prev_g - g) * (q[i] - prev_p)
                break
            prev_p, prev_g = q[i], g
    _take_window(c, p, k, y)


@jit
def uniform_rate_allocation(s, c, types, order, w, k, fill_order, x):
    """An allocation meeting every job's need when throughputs are ``amax[j] * speed[t]``
    (``gavel.uniform_rate_feasible`` holds): jobs by decreasing need (``order``) each take the
    slowest window of the remaining speed profile that meets ``w[j] = k[j] * need / amax`` with
    at most ``k[j]`` GPU units (this keeps the rest feasible: every unit before the window is at
    least as fast as the window's average); then the capacity left goes to the jobs in
    ``fill_order`` (decreasing throughput per GPU), fastest type first, up to ``k[j]`` units each.
    ``s``/``c``: speeds (decreasing) and GPUs of the usable types, ``types`` their columns in
    ``x`` (jobs x all types, zeros in; ``x[j, t]`` = GPU units / ``k[j]``); ``c`` is consumed."""
    T = c.shape[0]
    y = np.empty(T)
    for r in range(order.shape[0]):
        j = order[r]
        if w[j] <= 0.0:
            continue
        _window_for(c, s, k[j], w[j], y)
        for t in range(T):
            c[t] = max(0.0, c[t] - y[t])
            x[j, types[t]] = y[t] / k[j]
    t = 0
    for r in range(fill_order.shape[0]):
        j = fill_order[r]
        spare = k[j]
        for tt in range(T):
            spare -= x[j, types[tt]] * k[j]
        while spare > 0.0 and t < T:
            amt = min(spare, c[t])
            x[j, types[t]] += amt / k[j]
            c[t] -= amt
            spare -= amt
            if c[t] <= 0.0:
                t += 1


@jit
def sia_round(idx, thr_all, gpus, submit, status, launch_t, held, held_type, attained_gpu, n_preempt, now, restart_s,
              penalty_s, p, lambda_n, clip, cap, cost, best, pin, keys, types):
    """Sia's costs of the active jobs ``idx`` (``fastblox.policies.sia``: ``job_costs`` of
    ``restart_factor``, its plain twin) into ``cost[a, T]`` (``inf``: not offered), each job's
    cheapest choice on its own into ``best`` (ties: the type it holds, then the first; -1: waiting
    is as cheap; a pinned job: its type) and the pinned type into ``pin`` (-1: none; a running job
    inside its restart delay). Returns whether every type holds the cheapest choices' gangs; then
    ``keys`` and ``types`` are the plan of these choices (``fastblox.policies.sia.plan_of``)."""
    a = idx.shape[0]
    T = cap.shape[0]
    used = np.zeros(T, dtype=np.int64)
    for i in range(a):
        j = idx[i]
        k = gpus[j]
        running = status[j] == RUNNING
        h = held_type[j] if running else -1
        el = now - launch_t[j] if running else 0.0
        pinned = running and el < restart_s
        pin[i] = h if pinned else -1
        f = 1.0
        if not pinned and attained_gpu[j] + el * held[j] >= penalty_s:
            age = now - submit[j]
            f = max(age - n_preempt[j] * penalty_s, 0.0) / (age + penalty_s)
        low = np.inf
        for t in range(T):
            if thr_all[j, t] > 0.0 and thr_all[j, t] < low:
                low = thr_all[j, t]
        b = -1
        bc = np.inf
        for t in range(T):
            x = thr_all[j, t]
            if x <= 0.0 or k > cap[t]:
                cost[i, t] = np.inf
                continue
            g = k * x / low
            if h >= 0 and t != h:
                g = g * f
            c = clip if g == 0.0 else np.rint(g ** p * 100.0) / 100.0
            if c > clip:
                c = clip
            cost[i, t] = c
            if c < bc or (c == bc and t == h):
                b, bc = t, c
        if pinned and cost[i, h] < np.inf:
            b = h
        else:
            if pinned:
                pin[i] = -1  # (not offered the type it holds any more: not kept there)
            if bc >= lambda_n:
                b = -1
        best[i] = b
        if b >= 0:
            used[b] += k
        keys[i] = (0.0 if running and b == h else 1e7) - k
        types[i] = b if b >= 0 else NO_RUN
    for t in range(T):
        if used[t] > cap[t]:
            return False
    return True


@jit
def sia_bound(gain, k, count, cap, mu, pin):
    """The Lagrangian bound on the total gain of Sia's class problem at GPU prices ``mu``
    (``fastblox.policies.sia.lagrangian_bound``, its plain twin): per class the best of ``gain -
    k * mu`` or 0 (a pinned class: its type's), times its jobs, plus ``mu`` times the GPUs."""
    C, T = gain.shape
    tot = 0.0
    for t in range(T):
        tot += mu[t] * cap[t]
    for c in range(C):
        if pin[c] >= 0:
            tot += (gain[c, pin[c]] - k[c] * mu[pin[c]]) * count[c]
            continue
        b = 0.0
        for t in range(T):
            r = gain[c, t] - k[c] * mu[t]
            if r > b:
                b = r
        tot += b * count[c]
    return tot


@jit
def sia_greedy(gain, k, count, cap, mu, start, free, y):
    """``fastblox.policies.sia.greedy_fill`` (its plain twin) into ``y``: ``start``, then by
    decreasing ``gain - k * mu`` (ties: more gain, then class, then type) as many more jobs of
    each free class on each type as its jobs left and the type's GPUs left allow."""
    C, T = gain.shape
    left = np.empty(T, dtype=np.int64)
    for t in range(T):
        left[t] = cap[t]
    rest = np.empty(C, dtype=np.int64)
    for c in range(C):
        rest[c] = count[c]
        for t in range(T):
            y[c, t] = start[c, t]
            left[t] -= start[c, t] * k[c]
            rest[c] -= start[c, t]
    n = 0
    oc = np.empty(C * T, dtype=np.int64)
    ot = np.empty(C * T, dtype=np.int64)
    for c in range(C):
        if free[c]:
            for t in range(T):
                if gain[c, t] > 0.0:
                    oc[n], ot[n] = c, t
                    n += 1
    neg_gain = np.empty(n)
    for i in range(n):
        neg_gain[i] = -gain[oc[i], ot[i]]
    o = np.argsort(neg_gain, kind="mergesort")
    neg_red = np.empty(n)
    for i in range(n):
        neg_red[i] = -(gain[oc[o[i]], ot[o[i]]] - k[oc[o[i]]] * mu[ot[o[i]]])
    o = o[np.argsort(neg_red, kind="mergesort")]
    for i in range(n):
        c, t = oc[o[i]], ot[o[i]]
        m = min(rest[c], left[t] // k[c]) if left[t] > 0 else 0
        if m > 0:
            y[c, t] += m
            rest[c] -= m
            left[t] -= m * k[c]


@jit
def sia_prices(gain, k, count, cap, mu, pin, sweeps):
    """Lower ``sia_bound`` by exact minimisation along one type's price at a time (``sweeps``
    passes over the types): along ``mu[t]`` the bound is convex and piecewise linear, its kinks
    where a class's best choice changes, so its least value is at a kink or at 0. ``mu`` is
    updated in place; returns the bound at the final ``mu``."""
    C, T = gain.shape
    best = sia_bound(gain, k, count, cap, mu, pin)
    for _ in range(sweeps):
        for t in range(T):
            keep = mu[t]
            at = keep
            for c in range(C + 1):
                if c == C:
                    cand = 0.0
                else:
                    if pin[c] >= 0 or not gain[c, t] > 0.0:
                        continue
                    other = 0.0
                    for s in range(T):
                        if s != t:
                            r = gain[c, s] - k[c] * mu[s]
                            if r > other:
                                other = r
                    cand = (gain[c, t] - other) / k[c]
                    if cand < 0.0:
                        continue
                mu[t] = cand
                d = sia_bound(gain, k, count, cap, mu, pin)
                if d < best - 1e-12:
                    best, at = d, cand
            mu[t] = at
    return best


@jit
def sia_spread(y, inv, held, choice):
    """``fastblox.policies.sia.spread`` (its plain twin): each job's type from its class's counts
    ``y[c, t]``, the jobs that hold ``t`` first, then the rest in index order, types in order."""
    C, T = y.shape
    a = inv.shape[0]
    left = y.copy()
    for j in range(a):
        choice[j] = -1
        c, h = inv[j], held[j]
        if h >= 0 and left[c, h] > 0:
            choice[j] = h
            left[c, h] -= 1
    for j in range(a):
        if choice[j] >= 0:
            continue
        c = inv[j]
        for t in range(T):
            if left[c, t] > 0:
                choice[j] = t
                left[c, t] -= 1
                break
