"""Plain-Python twins of ``kernels.planners`` (lists and sorted(), no tricks)."""

from __future__ import annotations

NO_RUN = -2


def gavel_select_reference(type_order, prio, deficit, x, thr, sf, left, eligible, fifo):
    """Returns ``(types, keys, left)`` as ``kernels.planners.gavel_select`` computes them."""
    a = len(prio)
    left = [int(v) for v in left]
    taken = [not bool(e) for e in eligible]
    types = [NO_RUN] * a
    keys = [0.0] * a
    rank = 0
    for t in type_order:
        if left[t] <= 0:
            continue
        order = sorted(range(a), key=lambda i: (-prio[i][t], -deficit[i][t], -x[i][t], i))
        for i in order:
            if left[t] <= 0:
                break
            if taken[i] or thr[i][t] <= 0 or sf[i] > left[t]:
                continue
            if fifo and prio[i][t] <= 0:
                continue
            left[t] -= sf[i]
            taken[i] = True
            types[i] = t
            keys[i] = rank
            rank += 1
    for i in range(a):
        if types[i] == NO_RUN:
            keys[i] = rank
    return types, keys, left


def optimus_sizes_reference(S, T, cap, free):
    """Returns ``(sizes, free left)`` as ``kernels.planners.optimus_sizes`` computes them."""
    import heapq

    a = len(S)
    size = [0] * a
    for i in sorted(range(a), key=lambda i: (T[i][1], i)):
        if free == 0:
            break
        if S[i][1] > 0:
            size[i] = 1
            free -= 1
    heap = []

    def push(i):
        k = size[i]
        if 0 < k < cap[i] and S[i][k + 1] > S[i][k]:
            heapq.heappush(heap, (-(T[i][k] - T[i][k + 1]), i))

    for i in range(a):
        push(i)
    while free > 0 and heap:
        _, i = heapq.heappop(heap)
        size[i] += 1
        free -= 1
        push(i)
    return size, free


def fifo_allocation_reference(thr, sf, cap):
    """``kernels.planners.fifo_allocation`` with numpy: ``x[a, T]``."""
    import numpy as np

    a, T = thr.shape
    x = np.zeros((a, T))
    avail = cap.astype(np.int64).copy()
    for j in range(a):
        ok = (avail >= sf[j]) & (thr[j] > 0)
        if not ok.any():
            break
        t = int(np.argmax(np.where(ok, thr[j], -1.0)))
        x[j, t] = 1.0
        avail[t] -= sf[j]
    return x


def uniform_rate_allocation_reference(s, amax, sf, cap, need):
    """``kernels.planners.uniform_rate_allocation`` with its preparation (``gavel._uniform_alloc``),
    plain: returns ``x`` as a list of rows. The window search bisects on the window's start
    instead of walking the knots (same window up to rounding)."""
    a, T = len(need), len(s)
    types = sorted((t for t in range(T) if s[t] > 0 and cap[t] > 0), key=lambda t: (-s[t], t))
    c = [float(cap[t]) for t in types]
    sp = [float(s[t]) for t in types]
    x = [[0.0] * T for _ in range(a)]

    def F(u):
        tot, acc = 0.0, 0.0
        for ct, st_ in zip(c, sp):
            tot += min(ct, max(u - acc, 0.0)) * st_
            acc += ct
        return tot

    def window(p, length):
        out, acc = [], 0.0
        for ct in c:
            out.append(max(0.0, min(acc + ct, p + length) - max(acc, p)))
            acc += ct
        return out

    N = [need[j] / amax[j] if amax[j] > 0 else 0.0 for j in range(a)]
    for j in sorted(range(a), key=lambda j: (-N[j], j)):
        k, w = float(sf[j]), sf[j] * N[j]
        if w <= 0:
            continue
        M = sum(c)
        tmax = min(k, M)
        if F(M) - F(M - tmax) >= w or M <= k:
            y, left = [0.0] * len(c), w
            for t in reversed(range(len(c))):
                if left > 0:
                    y[t] = min(c[t], left / sp[t])
                    left -= y[t] * sp[t]
        else:
            lo, hi = 0.0, M - k  # F(p + k) - F(p) decreases in p
            if F(k) <= w:
                hi = 0.0
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                if F(mid + k) - F(mid) >= w:
                    lo = mid
                else:
                    hi = mid
            y = window(lo, k)
        for t, yt in enumerate(y):
            c[t] = max(0.0, c[t] - yt)
            x[j][types[t]] = yt / k
    fill = sorted((j for j in range(a) if amax[j] > 0), key=lambda j: (-amax[j] / sf[j], N[j], j))
    t = 0
    for j in fill:
        spare = sf[j] - sum(x[j][types[u]] * sf[j] for u in range(len(c)))
        while spare > 0 and t < len(c):
            amt = min(spare, c[t])
            x[j][types[t]] += amt / sf[j]
            c[t] -= amt
            spare -= amt
            if c[t] <= 0:
                t += 1
    return x


def sia_round_reference(idx, thr_all, gpus, submit, status, launch_t, held, held_type, attained_gpu, n_preempt, now,
                        restart_s, penalty_s, p, lambda_n, cap):
    """``(cost, best, pin, fits)`` as ``kernels.planners.sia_round`` computes them, from the
    array definitions of ``fastblox.policies.sia`` (``restart_factor``, ``job_costs``,
    ``cheapest``)."""
    import numpy as np

    from ..policies import sia

    running = status[idx] == 3  # RUNNING
    held_t = np.where(running, held_type[idx], -1)
    el = np.where(running, now - launch_t[idx], 0.0)
    inside = running & (el < restart_s)  # (inside its restart delay: factor 1, kept on its type if offered there)
    factor = sia.restart_factor(now - submit[idx], n_preempt[idx], attained_gpu[idx] + el * held[idx], penalty_s)
    k = gpus[idx]
    cost = sia.job_costs(thr_all[idx], k, held_t, np.where(inside, 1.0, factor), cap, p)
    offered = np.isfinite(cost[np.arange(len(idx)), np.maximum(held_t, 0)])
    pin = np.where(inside & offered, held_t, -1)
    best = sia.cheapest(cost, pin, held_t, lambda_n)
    on = best >= 0
    fits = bool((np.bincount(best[on], weights=k[on], minlength=len(cap)) <= cap).all())
    return cost, best, pin, fits


def sia_prices_reference(gain, k, count, cap, mu, pin, sweeps):
    """``(mu, bound)`` as ``kernels.planners.sia_prices`` computes them: per type in turn, the
    price among 0 and the kinks of the bound along it with the least bound (the first on ties)."""
    from ..policies.sia import lagrangian_bound

    mu = [float(v) for v in mu]
    C, T = len(gain), len(cap)

    def bound(m):
        import numpy as np

        return lagrangian_bound(np.asarray(gain), np.asarray(k), np.asarray(count), np.asarray(cap), np.asarray(m),
                                np.asarray(pin))

    best = bound(mu)
    for _ in range(sweeps):
        for t in range(T):
            cands = []
            for c in range(C):
                if pin[c] >= 0 or not gain[c][t] > 0:
                    continue
                other = max([0.0] + [gain[c][s] - k[c] * mu[s] for s in range(T) if s != t])
                cand = (gain[c][t] - other) / k[c]
                if cand >= 0:
                    cands.append(cand)
            at = mu[t]
            for cand in cands + [0.0]:
                d = bound(mu[:t] + [cand] + mu[t + 1:])
                if d < best - 1e-12:
                    best, at = d, cand
            mu[t] = at
    return mu, best
