"""Pollux on rigid jobs, compiled: the elastic engine's replay (``fastblox.compat_pollux._run_pollux``
with ``fastblox.mixed.RigidJob``) and ``PolluxPolicy.optimize``'s rule for jobs that take their
gang or nothing, on nodes of any GPU types (``fastblox.mixed.simulate_rigid`` calls it; its
plain twin is that Python replay with ``PolluxPolicy(search=False)``, compared by hypothesis).

Each interval every running job advances (at the speed of the slowest GPU type it holds), jobs
that finished leave, arrivals are let in (the native admission, ``kernels.admission.admit_to``),
and Pollux's allocation is chosen, blind to GPU types: jobs in order of (attained GPU-seconds,
submit time), each valued ``1 / (speedup / per_node * factor + 1e-3)`` (``speedup``: gang / fair
share on its gang, 0 with no GPUs; ``factor``: the restart discount, 1 on its unchanged row),
the least sum of values over GPU counts (:func:`sizes`: an optimum over classes of alike gangs,
where the elastic engine runs ``kernels.elastic.pollux_sizes`` over every job and GPU count; among
equal optima the two may choose other jobs), packed onto nodes (``PolluxPolicy._pack``/
``_place_one``), planned again without the gangs the packing could not place, the best by
Pollux's power mean kept (the current allocation included). Rows are sparse: at most ``K``
(node, GPUs) pairs a job.

The local search the elastic engine runs after this (``kernels.pollux.search``) is left out:
when the first plan over the full relaxation packs every gang, the allocation kept is optimal
(the plan is optimal over GPU counts alone, a relaxation) and that search cannot improve it; the
other rounds are counted (``stats[0]``) and the search might have moved jobs there.
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import jit
from .admission import admit_to
from .elastic import pairwise_sum  # numpy's pairwise summation, so the objective has numpy's bits

MAX_NODES_PER_JOB = 16  # compat_pollux.MAX_NODES_PER_JOB: a spread row's nodes at most
PASSES = 8  # PolluxPolicy.PASSES
STACK = 2 * 64 + 4  # (the halving's stack: a row a level of halving, and two more)
POLLUX_P = -1.0  # compat_pollux.POLLUX_P
IDLE_V = 1.0 / (0.0 + 1e-3)  # a job's value without GPUs (``1 / (0 * factor + 1e-3)``, any finite factor)
# the replay's outcome codes
OK, TOO_LONG = 0, 1


@jit(nrt=False, inline=True)
def same_row(ja, na, nodes_a, cnt_a, jb, nb, nodes_b, cnt_b):
    """Whether row ``ja`` of (``nodes_a``, ``cnt_a``, ``na`` pairs) is row ``jb`` of the other."""
    if na != nb:
        return False
    for k in range(na):
        if nodes_a[ja, k] != nodes_b[jb, k] or cnt_a[ja, k] != cnt_b[jb, k]:
            return False
    return True


@jit(nrt=False, inline=True)
def _row_from_dense(dense, i, out_nodes, out_cnt, out_len):
    """Row ``i`` of the sparse arrays from ``dense`` GPUs per node (ascending nodes); ``dense`` zeroed."""
    m = 0
    for k in range(len(dense)):
        if dense[k] > 0:
            out_nodes[i, m] = k
            out_cnt[i, m] = dense[k]
            m += 1
            dense[k] = 0
    out_len[i] = m


@jit(nrt=False, inline=True)
def gang_fits(r, per_node, hist_all, hist_nd):
    """Whether :func:`place_one` gives all ``r`` GPUs (else the gang is not placed at all), from
    the count of nodes by free GPUs (``hist_all``) and of those without a multi-node job
    (``hist_nd``): a node that takes them; whole free nodes and a node for the rest; or the
    freest ``MAX_NODES_PER_JOB`` nodes without a multi-node job holding them."""
    P = per_node
    if r <= P:
        for f in range(r, P + 1):
            if hist_all[f] > 0:
                return True
    else:
        full = r // P
        rest = r % P
        if hist_all[P] >= full:
            if rest == 0:
                return True
            for f in range(rest, P):
                if hist_nd[f] > 0:
                    return True
            if hist_all[P] - full > 0:
                return True
    slots = MAX_NODES_PER_JOB
    tot = 0
    used = 0
    for f in range(P, 0, -1):
        c = hist_nd[f] if hist_nd[f] < slots else slots
        tot += c * f
        used += c
        slots -= c
        if tot >= r:
            return used > 1
    return False


@jit(nrt=False, inline=True)
def _take(k, cnt, multi, free, dist_on, hist_all, hist_nd):
    """``cnt`` GPUs of node ``k`` taken (by a multi-node row: ``multi``), the counts kept."""
    hist_all[free[k]] -= 1
    if not dist_on[k]:
        hist_nd[free[k]] -= 1
    free[k] -= cnt
    if multi:
        dist_on[k] = True
    hist_all[free[k]] += 1
    if not dist_on[k]:
        hist_nd[free[k]] += 1


@jit(nrt=False)
def place_one(r, free, dist_on, per_node, dense, order):
    """``PolluxPolicy._place_one``: ``r`` GPUs into ``dense`` (zeros in, GPUs per node out): one
    node, the fullest that takes them; else whole free nodes plus the fullest node for the rest
    (no other multi-node job on it); else spread over the freest nodes without another multi-node
    job (at most ``MAX_NODES_PER_JOB``); else part of the freest node. ``order``: scratch (nodes)."""
    N = len(free)
    P = per_node
    if r <= P:
        pick = -1
        for k in range(N):
            if free[k] >= r and (pick < 0 or free[k] < free[pick]):
                pick = k
        if pick >= 0:
            dense[pick] = r
            return
    else:
        full = r // P
        rest = r % P
        nwhole = 0
        for k in range(N):
            if free[k] == P:
                nwhole += 1
        if nwhole >= full:
            last = -1  # (the full-th whole node: the whole nodes used are those up to it)
            c = 0
            for k in range(N):
                if free[k] == P:
                    c += 1
                    if c == full:
                        last = k
                        break
            if rest:
                pick = -1
                for k in range(N):
                    if free[k] >= rest and not dist_on[k] and not (free[k] == P and k <= last):
                        if pick < 0 or free[k] < free[pick]:
                            pick = k
                if pick >= 0:
                    for k in range(last + 1):
                        if free[k] == P:
                            dense[k] = P
                    dense[pick] = rest
                    return
            else:
                for k in range(last + 1):
                    if free[k] == P:
                        dense[k] = P
                return
    # spread: nodes without another multi-node job, most free first (lowest index among equals)
    m = 0
    for f in range(P, 0, -1):
        for k in range(N):
            if free[k] == f and not dist_on[k]:
                order[m] = k
                m += 1
    if m > MAX_NODES_PER_JOB:
        m = MAX_NODES_PER_JOB
    left = r
    nz = 0
    tot = 0
    for p in range(m):
        k = order[p]
        take = free[k] if free[k] < left else left
        dense[k] = take
        nz += 1
        tot += take
        left -= take
        if left == 0:
            break
    if nz <= 1 and tot < r:  # one node can take part of it only
        for k in range(N):
            dense[k] = 0
        best = 0
        for k in range(1, N):
            if free[k] > free[best]:
                best = k
        if free[best] > 0:
            dense[best] = free[best] if free[best] < r else r


@jit(nrt=False)
def _class_step(F, Fn, pick, pref, base, cnt, g, rho, L, stack):
    """One class of ``cnt`` gangs of ``g`` GPUs added to the best totals ``F`` by capacity, at the
    capacities ``rho + g * s`` (s < ``L``): ``Fn = max over n <= cnt of F[c - g n] + W[n]`` (``W``:
    ``pref[base:]``, concave: the gains in decreasing order) and ``pick`` that ``n`` (the fewest
    among equals). The best source ``k = s - n`` does not decrease with ``s`` (W concave), so the
    capacities are solved by halving: the middle one's source is sought between the sources of
    the nearest ones solved (``stack``: scratch of 4 columns, a row a level of halving and two more)."""
    stack[0, 0] = 0
    stack[0, 1] = L - 1
    stack[0, 2] = 0
    stack[0, 3] = L - 1
    top = 1
    while top > 0:
        top -= 1
        sl = stack[top, 0]
        sr = stack[top, 1]
        kl = stack[top, 2]
        kr = stack[top, 3]
        if sl > sr:
            continue
        mid = (sl + sr) // 2
        lo = kl if kl > mid - cnt else mid - cnt
        hi = kr if kr < mid else mid
        best = -math.inf
        kb = hi
        for k in range(hi, lo - 1, -1):  # (the largest source, the fewest gangs, among equals)
            v = F[rho + g * k] + pref[base + mid - k]
            if v > best:
                best = v
                kb = k
        Fn[rho + g * mid] = best
        pick[rho + g * mid] = mid - kb
        stack[top, 0] = sl
        stack[top, 1] = mid - 1
        stack[top, 2] = kl
        stack[top, 3] = kb
        stack[top + 1, 0] = mid + 1
        stack[top + 1, 1] = sr
        stack[top + 1, 2] = kb
        stack[top + 1, 3] = kr
        top += 2


@jit(nrt=False, inline=True)
def _run_row(i, opt_r, opt_v, nopt, run, gain, g):
    """Job ``i``'s run option (its first least one with GPUs, taken only when below its no-GPU
    value; -1: none), its gain (the difference) and its GPUs (0: none)."""
    bk = -1
    for k in range(1, nopt[i]):
        if bk < 0 or opt_v[i, k] < opt_v[i, bk]:
            bk = k
    run[i] = -1
    gain[i] = 0.0
    g[i] = 0
    if bk > 0 and opt_v[i, bk] < opt_v[i, 0]:
        run[i] = bk
        gain[i] = opt_v[i, 0] - opt_v[i, bk]
        g[i] = opt_r[i, bk]


@jit(nrt=False)
def _runs(J, opt_r, opt_v, nopt, run, gain, g):
    """Every job's :func:`_run_row`. Returns the GPUs of all run options."""
    tot = 0
    for i in range(J):
        _run_row(i, opt_r, opt_v, nopt, run, gain, g)
        tot += g[i]
    return tot


@jit
def _classes(J, run, gain, g, srt, cls_g, cls_lo):
    """The candidates (run option > -1) by (gang, gain descending, position) into ``srt`` and
    their classes of alike gangs (``cls_g``, members ``srt[cls_lo[q]:cls_lo[q + 1]]``). Returns
    (candidates, classes)."""
    cand = np.flatnonzero(run > 0)
    o1 = np.argsort(-gain[cand], kind="mergesort")
    c1 = cand[o1]
    o2 = np.argsort(g[c1], kind="mergesort")
    m = len(c1)
    for a in range(m):
        srt[a] = c1[o2[a]]
    return m, _class_bounds(m, g, srt, cls_g, cls_lo)


@jit(nrt=False, inline=True)
def _cand_before(i1, i2, gain, g):
    """Whether candidate ``i1`` comes before ``i2`` in :func:`_classes`'s order."""
    if g[i1] != g[i2]:
        return g[i1] < g[i2]
    if gain[i1] != gain[i2]:
        return gain[i1] > gain[i2]
    return i1 < i2


@jit(nrt=False, inline=True)
def _job_before(j1, j2, attained, submit):
    """Whether job ``j1`` comes before ``j2`` in :func:`_order`'s order (attained GPU-seconds,
    submit time, index)."""
    if attained[j1] != attained[j2]:
        return attained[j1] < attained[j2]
    if submit[j1] != submit[j2]:
        return submit[j1] < submit[j2]
    return j1 < j2


@jit(nrt=False)
def _insert_sorted(x, m, key_a, key_b, cands, limit):
    """``x[:m]`` sorted in place by insertion (:func:`_cand_before` with ``cands``, keys ``gain``
    and ``g``; else :func:`_job_before`, keys ``attained`` and ``submit``): a linear pass when it
    is nearly in order. Gives up (False, ``x`` a permutation of itself) past ``limit`` moves."""
    moves = 0
    for a in range(1, m):
        v = x[a]
        p = a
        while p > 0:
            u = x[p - 1]
            if cands:
                if not _cand_before(v, u, key_a, key_b):
                    break
            elif not _job_before(v, u, key_a, key_b):
                break
            x[p] = u
            p -= 1
            moves += 1
        x[p] = v
        if moves > limit:
            return False
    return True


@jit(nrt=False)
def _all_numbers(x, idx, m):
    """Whether ``x[idx[:m]]`` has no NaN (the insertion's order is then numpy's sorts')."""
    for a in range(m):
        if x[idx[a]] != x[idx[a]]:
            return False
    return True


@jit
def _classes_from(J, run, gain, g, srt, cls_g, cls_lo, ord_j, carry, carry_n, rid, mark):
    """:func:`_classes`, sorting from the order of the last classes sorted (``carry[1,
    :carry_n[1]]``, job ids; the jobs of this round's ``ord_j`` at ``carry[2]``, stamped ``carry[3]
    >= 2 rid``), the candidates not in it after, in position order; by insertion
    (:func:`_insert_sorted`), a full sort when that gives up. Keeps this order there.
    ``mark``: scratch of ``J``."""
    for i in range(J):
        mark[i] = run[i] > 0
    m = 0
    for k in range(carry_n[1]):
        j = carry[1, k]
        if carry[3, j] >= 2 * rid:
            i = carry[2, j]
            if mark[i]:
                srt[m] = i
                m += 1
                mark[i] = False
    for i in range(J):
        if mark[i]:
            srt[m] = i
            m += 1
    if not (_all_numbers(gain, srt, m) and _insert_sorted(srt, m, gain, g, True, 8 * m + 64)):
        m, _ = _classes(J, run, gain, g, srt, cls_g, cls_lo)
    for k in range(m):
        carry[1, k] = ord_j[srt[k]]
    carry_n[1] = m
    return m, _class_bounds(m, g, srt, cls_g, cls_lo)


@jit(nrt=False)
def _class_bounds(m, g, srt, cls_g, cls_lo):
    """The classes of alike gangs of the candidates ``srt[:m]`` in :func:`_classes`'s order."""
    ncls = 0
    for a in range(m):
        if a == 0 or g[srt[a]] != g[srt[a - 1]]:
            cls_g[ncls] = g[srt[a]]
            cls_lo[ncls] = a
            ncls += 1
    cls_lo[ncls] = m
    return ncls


@jit(nrt=False, inline=True)
def _above(gain, mem, a0, a1, thr):
    """How many of the members ``mem[a0:a1]`` (gains not increasing) gain more than ``thr``."""
    lo = a0
    hi = a1
    while lo < hi:
        mid = (lo + hi) // 2
        if gain[mem[mid]] > thr:
            lo = mid + 1
        else:
            hi = mid
    return lo - a0


@jit(nrt=False)
def _core(mem, lo, hi, pref, gain, cls_g, ncls, G, nlo, nhi, cm):
    """How many of each class every optimum of the programme runs, at least ``nlo[q]`` and at
    most ``nhi[q]`` (its jobs of most gain), by the programme's Lagrangian bound: with a price
    ``lam`` a GPU (the greedy's break density, by bisection), every choice's total is at most
    ``UB = lam * G + sum(max(0, r_i))`` (``r_i = gain_i - lam * gang_i``) less ``r_i`` for each
    job of ``r_i > 0`` left out, ``-r_i`` for each of ``r_i < 0`` run and ``lam`` for each GPU
    left idle; the greedy (densest first, then what still fits) is a choice of total ``LB``; so an
    optimum falls short of ``UB`` by at most ``UB - LB``, which bounds each class's count
    (:func:`_box`). Decided with a margin above the rounding of the totals (``tol``), so ties among
    optima in floating point stay between the bounds. Class ``q``'s members: ``mem[lo[q]:hi[q]]``,
    their prefix sums of gains from ``pref[lo[q] + q]`` (:func:`_slot`). ``cm``: scratch of
    ``ncls``."""
    m = 0
    for q in range(ncls):
        m += hi[q] - lo[q]
    top = 0.0
    for q in range(ncls):
        if hi[q] > lo[q]:
            d = gain[mem[lo[q]]] / cls_g[q]
            if d > top:
                top = d
    lam = _price(mem, lo, hi, gain, cls_g, ncls, G, top, nlo, nhi, cm)
    ub = lam * G
    lb = 0.0
    s = G
    for q in range(ncls):
        t = nhi[q]  # (the class's jobs of density above lam)
        ub += pref[lo[q] + q + t] - lam * cls_g[q] * t
        lb += pref[lo[q] + q + t]
        s -= cls_g[q] * t
        nlo[q] = t  # (the greedy's count so far)
    while s > 0:  # the greedy fills what is left, densest first
        bq = -1
        bd = -1.0
        for q in range(ncls):
            if nlo[q] < hi[q] - lo[q] and cls_g[q] <= s:
                d = gain[mem[lo[q] + nlo[q]]] / cls_g[q]
                if d > bd:
                    bd = d
                    bq = q
        if bq < 0:
            break
        lb += gain[mem[lo[bq] + nlo[bq]]]
        s -= cls_g[bq]
        nlo[bq] += 1
    gap = ub - lb if ub > lb else 0.0
    tol = gap + 1e-12 * (m + ncls + 4) * (abs(ub) + lam * G + 1.0)
    _box(mem, lo, hi, gain, cls_g, ncls, G, lam, tol, nlo, nhi)


@jit(nrt=False)
def _price(mem, lo, hi, gain, cls_g, ncls, G, top, ca, cb, cm):
    """:func:`_core`'s price a GPU: bisection between ``a = 0`` (the jobs of density above it need
    more than ``G`` GPUs) and ``b = 2 top + 1`` (at most ``G``), 40 halvings (to about 1e-12 of the
    largest density ``top``: any price gives a bound). ``ca``/``cb``: each class's count of density
    above ``a``/``b`` (``cb`` at the end: at the price); a class whose counts agree keeps them inside
    (the count falls with the price) and the others are searched between them only, so each count
    is the one searched over the whole class (``cm``: scratch)."""
    a = 0.0
    b = 2.0 * top + 1.0
    for q in range(ncls):
        ca[q] = _above(gain, mem, lo[q], hi[q], a * cls_g[q])
        cb[q] = _above(gain, mem, lo[q], hi[q], b * cls_g[q])
    for _ in range(40):
        mid = 0.5 * (a + b)
        if not (a < mid < b):
            break
        c = 0
        for q in range(ncls):
            if ca[q] == cb[q]:
                cm[q] = ca[q]
            else:
                cm[q] = cb[q] + _above(gain, mem, lo[q] + cb[q], lo[q] + ca[q], mid * cls_g[q])
            c += cls_g[q] * cm[q]
        if c > G:
            a = mid
            for q in range(ncls):
                ca[q] = cm[q]
        else:
            b = mid
            for q in range(ncls):
                cb[q] = cm[q]
    return b


@jit(nrt=False)
def _box(mem, lo, hi, gain, cls_g, ncls, G, lam, tol, nlo, nhi):
    """:func:`_core`'s counts per class from its price ``lam`` and ``tol`` (the gap ``UB - LB``
    and a margin): a choice's shortfall from ``UB`` is ``P = sum of r_i of the jobs of r_i > 0
    left out + sum of -r_i of the others run + lam * (GPUs left idle)``, and every optimum has
    ``P <= tol``. Class ``q`` with ``D`` GPUs more than its ``t`` jobs of ``r_i > 0`` (``D < 0``:
    fewer) adds its own ``-r_i`` or ``r_i`` and, with ``R`` the GPUs the jobs of ``r_i > 0`` leave:
    while ``D <= R``, ``R - D`` GPUs idle or run by other classes' jobs of ``r_i <= 0``, each GPU at
    least ``c_abs`` (``lam`` less their greatest density; ``lam``: none); beyond, ``D - R`` GPUs
    freed from other classes' jobs of ``r_i > 0``, each at least ``c_exc`` (their least density
    less ``lam``; none: impossible). The other classes' parts are >= 0, so each class runs from
    ``nlo[q]`` to ``nhi[q]`` of its jobs of most gain, the counts whose own part is <= ``tol``."""
    inf = math.inf
    R = G
    p1 = inf  # (the least and second least density of the jobs of r_i > 0 by class, and its class)
    p2 = inf
    pq = -1
    n1 = -inf  # (the greatest and second greatest density of the others by class, and its class)
    n2 = -inf
    nq = -1
    for q in range(ncls):
        g = cls_g[q]
        t = _above(gain, mem, lo[q], hi[q], lam * g)
        nlo[q] = t
        R -= g * t
        if t > 0:
            d = gain[mem[lo[q] + t - 1]] / g
            if d < p1:
                p2 = p1
                p1 = d
                pq = q
            elif d < p2:
                p2 = d
        if lo[q] + t < hi[q]:
            d = gain[mem[lo[q] + t]] / g
            if d > n1:
                n2 = n1
                n1 = d
                nq = q
            elif d > n2:
                n2 = d
    for q in range(ncls):
        g = cls_g[q]
        t = nlo[q]
        dn = n2 if q == nq else n1
        c_abs = lam - dn if lam > dn else 0.0
        if c_abs > lam:
            c_abs = lam  # (no job of r_i <= 0 elsewhere: every GPU left stays idle)
        dp = p2 if q == pq else p1
        c_exc = dp - lam if dp > lam else 0.0
        _box_class(mem, lo[q], hi[q], gain, g, t, R, lam, c_abs, c_exc, tol, nlo, nhi, q)


@jit(nrt=False)
def _box_class(mem, a0, a1, gain, g, t, R, lam, c_abs, c_exc, tol, nlo, nhi, q):
    """:func:`_box` for one class (members ``mem[a0:a1]``, ``t`` of them of ``r_i > 0``): the
    counts ``n`` whose part of the shortfall, ``pen(n) + c_abs * (R - D)`` (``D = g (n - t)`` GPUs
    more than ``t``'s, at most ``R``) or ``pen(n) + c_exc * (D - R)`` (more), is at most ``tol``
    (convex in ``n``: an interval). None (not after a sound bound; rounding): every count."""
    lo_n = -1
    hi_n = -1
    if c_abs * R <= tol:
        pen = 0.0
        n = t
        while n > 0:  # (fewer: the shortfall grows with each job left out)
            pen += gain[mem[a0 + n - 1]] - lam * g
            if pen + c_abs * (R + g * (t - n + 1)) > tol:
                break
            n -= 1
        lo_n = n
        hi_n = t
    pen = 0.0
    n = t
    while a0 + n < a1:  # (more: falls while the GPUs taken are within R, then grows)
        pen += lam * g - gain[mem[a0 + n]]
        d = g * (n + 1 - t)
        if d <= R:
            ok = pen + c_abs * (R - d) <= tol
        else:
            ok = c_exc < math.inf and pen + c_exc * (d - R) <= tol
        if ok:
            if lo_n < 0:
                lo_n = n + 1
            hi_n = n + 1
        elif d >= R:
            break
        n += 1
    if lo_n < 0:
        lo_n = 0
        hi_n = a1 - a0
    nlo[q] = lo_n
    nhi[q] = hi_n


@jit
def _solve(srt, ncls, cls_g, cls_lo, alive, gain, run, G, Fs, pick, memo, memo_st, out_k):
    """:func:`_plan` over the candidates ``srt`` still ``alive`` (classes ``cls_g``, members
    ``srt[cls_lo[q]:cls_lo[q + 1]]`` in their order): its members' slots built anew."""
    m = cls_lo[ncls]
    mem = np.empty(m, dtype=np.int64)
    hi = np.empty(ncls, dtype=np.int64)
    pref = np.empty(m + ncls)
    for q in range(ncls):
        _slot(q, srt, cls_lo, alive, gain, mem, hi, pref, True)
    _plan(mem, cls_lo, hi, pref, ncls, cls_g, gain, run, G, Fs, pick, memo, memo_st, out_k,
          np.empty((3, ncls), dtype=np.int64), np.empty((STACK, 4), dtype=np.int64))


@jit(nrt=False)
def _slot(q, srt, cls_lo, alive, gain, mem, hi, pref, fresh):
    """Class ``q``'s members still ``alive`` (in their order ``srt[cls_lo[q]:cls_lo[q + 1]]``) at
    the front of its slot ``mem[cls_lo[q]:hi[q]]``, and their prefix sums of gains (``W[0] = 0``,
    ``W[n] = W[n - 1] + gain``) at ``pref[cls_lo[q] + q:]``. Not ``fresh``: the slot holds them as
    before some died since (none came back): those before the first that died, and their sums,
    stay; the sums after are the same additions in the same order."""
    a0 = cls_lo[q]
    base = a0 + q
    if fresh:
        k = a0
        pref[base] = 0.0
        for a in range(a0, cls_lo[q + 1]):
            i = srt[a]
            if alive[i]:
                mem[k] = i
                pref[base + k - a0 + 1] = pref[base + k - a0] + gain[i]
                k += 1
        hi[q] = k
        return
    k = a0
    while k < hi[q] and alive[mem[k]]:
        k += 1
    w = k
    for a in range(k, hi[q]):
        i = mem[a]
        if alive[i]:
            mem[w] = i
            pref[base + w - a0 + 1] = pref[base + w - a0] + gain[i]
            w += 1
    hi[q] = w


@jit(nrt=False)
def _slots_after(lost, nlost, ord_j, gang, srt, cls_g, cls_lo, ncls, alive, gain, mem, hi, pref, dirty):
    """:func:`_slot` again (not fresh) for each class of the jobs ``lost[:nlost]`` (positions in
    ``ord_j``) that died, once a class (``dirty``: scratch of classes, False in and out)."""
    for a in range(nlost):
        i = lost[a]
        q = _class_of(cls_g, ncls, gang[ord_j[i]])
        if q >= 0 and not alive[i]:
            dirty[q] = True
    for a in range(nlost):
        q = _class_of(cls_g, ncls, gang[ord_j[lost[a]]])
        if q >= 0 and dirty[q]:
            _slot(q, srt, cls_lo, alive, gain, mem, hi, pref, False)
            dirty[q] = False


@jit(nrt=False, inline=True)
def _class_of(cls_g, ncls, gg):
    """The class of gang ``gg`` (``cls_g[:ncls]`` ascending), -1: none."""
    lo = 0
    hi = ncls
    while lo < hi:
        mid = (lo + hi) // 2
        if cls_g[mid] < gg:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < ncls and cls_g[lo] == gg else -1


@jit(nrt=False)
def _plan(mem, lo, hi, pref, ncls, cls_g, gain, run, G, Fs, pick, memo, memo_st, out_k, work, stack):
    """The count per class maximising the total gain (module docstring of :func:`sizes`) over
    the members of each class ``q``, ``mem[lo[q]:hi[q]]`` in their order, prefix sums of gains
    from ``pref[lo[q] + q]`` (:func:`_slot`); ``Fs``, ``pick``: at least ``ncls + 1`` and ``ncls``
    rows of ``G + 1``, ``memo`` 4 rows of ``ncls`` and ``memo_st`` three: kept from a plan of the
    same classes before (jobs may have died since) or ``memo_st[2]`` 0. Sets ``out_k`` of the
    jobs run. ``work`` (3 x ``ncls``) and ``stack`` (``STACK`` x 4): scratch.

    The programme runs between the bounds :func:`_core` proves for every optimum: each class from
    its ``nlo`` jobs to its ``nhi``, capacities from the GPUs of every class's ``nlo`` up to what
    the 1-GPU class's ``nlo`` leaves; a choice's total is the same sum in the same order as over
    every count and capacity, and the optima and their ties are all inside, so the choice is the
    one the programme over every count and capacity makes (its plain twin). The rows of the
    classes before the first whose bounds or members changed since the last plan are kept."""
    nlo = work[0]
    nhi = work[1]
    _core(mem, lo, hi, pref, gain, cls_g, ncls, G, nlo, nhi, work[2])
    first = 1 if cls_g[0] == 1 else 0  # (the 1-GPU class, if any, fills what is left)
    cnt1 = hi[0] - lo[0] if first else 0
    cmax = G - nlo[0] if first else G
    c0 = 0  # (the GPUs of every class's nlo)
    for q in range(first, ncls):
        c0 += cls_g[q] * nlo[q]
    if c0 > cmax:  # (not after a sound reduction: the fixed jobs are in every optimum; all counts then)
        for q in range(ncls):
            nlo[q] = 0
            nhi[q] = hi[q] - lo[q]
        c0 = 0
        cmax = G
    # State d is capacity c0 + d, up to cmax. Rows solved before with the same c0 and cmax, for
    # the same classes with the same bounds and members, are kept (memo).
    width = cmax - c0
    start = 0
    if memo_st[0] == cmax and memo_st[1] == c0:
        while start < memo_st[2] and first + start < ncls:
            q = first + start
            if memo[0, q] != nlo[q] or memo[1, q] != nhi[q] or memo[2, q] != hi[q] - lo[q]:
                break
            start += 1
    D = memo[3, first + start - 1] if start > 0 else 0  # (the GPUs of every gang so far above nlo: more
    # capacity adds nothing, its totals and counts are D's)
    if start == 0:
        for d in range(width + 1):
            Fs[0, d] = 0.0
    for q in range(first + start, ncls):
        i = q - first
        gq = cls_g[q]
        cnt = nhi[q] - nlo[q]
        b = lo[q] + q + nlo[q]  # (the class's totals from its nlo jobs on: pref[b + n])
        flat = D == 0  # (no class before with a count to choose: the totals so far are F[0] at every capacity)
        D = min(width, D + gq * cnt)
        F = Fs[i]
        Fn = Fs[i + 1]
        if flat and _increasing(F[0], pref, b, cnt):
            _flat_class(Fn, pick[i], F[0], pref, b, cnt, gq, D)
        elif cnt == 0:  # (a count fixed: the halving's one source a capacity, itself, plus the class's total)
            for d in range(D + 1):
                Fn[d] = F[d] + pref[b]
                pick[i, d] = 0
        else:
            for rho in range(min(gq, D + 1)):
                _class_step(F, Fn, pick[i], pref, b, cnt, gq, rho, (D - rho) // gq + 1, stack)
        for d in range(D + 1, width + 1):
            Fn[d] = Fn[D]
            pick[i, d] = pick[i, D]
        memo[0, q] = nlo[q]
        memo[1, q] = nhi[q]
        memo[2, q] = hi[q] - lo[q]
        memo[3, q] = D
    memo_st[0] = cmax
    memo_st[1] = c0
    memo_st[2] = ncls - first
    F = Fs[ncls - first]
    d_best = 0
    v_best = -1.0
    for d in range(D + 1):  # (beyond D, the same totals with less left for the 1-GPU class)
        v = F[d]
        if first:
            left = G - c0 - d
            v = v + pref[cnt1 if cnt1 < left else left]
        if v > v_best:
            v_best = v
            d_best = d
    for a in range(len(out_k)):
        out_k[a] = 0
    if first:
        left = G - c0 - d_best
        n1 = cnt1 if cnt1 < left else left
        for a in range(lo[0], lo[0] + n1):
            out_k[mem[a]] = run[mem[a]]
    d = d_best
    for q in range(ncls - 1, first - 1, -1):
        nn = pick[q - first, d]
        for a in range(lo[q], lo[q] + nlo[q] + nn):
            out_k[mem[a]] = run[mem[a]]
        d -= cls_g[q] * nn


@jit(nrt=False)
def _increasing(C, pref, base, cnt):
    """Whether a class's totals added to ``C`` strictly increase (no gain lost to rounding)."""
    for n in range(cnt):
        if not C + pref[base + n + 1] > C + pref[base + n]:
            return False
    return True


@jit(nrt=False)
def _flat_class(Fn, pick, C, pref, base, cnt, g, D):
    """:func:`_class_step` over capacities up to ``D`` for a class added to totals that are ``C``
    at every capacity (the first class: 0; a class after classes of fixed counts only), with
    ``C + W[n]`` strictly increasing: there the halving's source at step ``s`` is ``max(0, s -
    cnt)`` (by induction over the steps solved: the least source in range is the unique best),
    so each capacity takes ``min(s, cnt)`` gangs and ``C + W[n]``, bit for bit."""
    for c in range(D + 1):
        s = c // g
        n = s if s < cnt else cnt
        Fn[c] = C + pref[base + n]
        pick[c] = n


@jit
def sizes(J, opt_r, opt_v, nopt, G, out_k):
    """Each job's option (index into its options: 0 no GPUs, then its gang changed and/or kept)
    of the least sum of values over at most ``G`` GPUs, as the elastic engine's dynamic
    programme answers it but over classes of gangs: a job's run option is its first least one
    with GPUs, taken only when below its no-GPU value (its gain: the difference); when those all
    fit, every job takes it (the programme's answer then, exactly); else, in each class of alike
    gangs the jobs of most gain (earliest position among equals) run, the count per class
    maximising the total gain (a programme over the classes of 2 GPUs or more, ascending, by
    capacity up to the GPUs of every gang so far, beyond which a capacity's totals and counts are
    that one's; the fewest jobs among equal totals; the 1-GPU class last, filling what is left; the
    least capacity among equal totals), run only between the counts a Lagrangian bound proves for
    every optimum (:func:`_core`, :func:`_solve`), where it chooses as over every count. An
    optimum of the same objective; among optima it may choose other jobs than the elastic
    engine's programme. Its plain twin (the programme over every count and capacity):
    ``fastblox.reference.pollux.rigid_sizes``. Returns whether the classes were needed.
    (:func:`optimize` runs its parts itself, to keep the classes of a round's plans from one plan
    to the next.)"""
    run = np.empty(J, dtype=np.int64)
    gain = np.empty(J)
    g = np.empty(J, dtype=np.int64)
    tot = _runs(J, opt_r, opt_v, nopt, run, gain, g)
    if tot <= G:
        for i in range(J):
            out_k[i] = run[i] if run[i] > 0 else 0
        return False
    srt = np.empty(J, dtype=np.int64)
    cls_g = np.empty(J, dtype=np.int64)
    cls_lo = np.empty(J + 1, dtype=np.int64)
    m, ncls = _classes(J, run, gain, g, srt, cls_g, cls_lo)
    alive = np.ones(J, dtype=np.bool_)
    Fs = np.empty((ncls + 1, G + 1))
    pick = np.zeros((ncls, G + 1), dtype=np.int64)
    _solve(srt, ncls, cls_g, cls_lo, alive, gain, run, G, Fs, pick, np.empty((4, ncls), dtype=np.int64),
           np.zeros(3, dtype=np.int64), out_k)
    return True


@jit(nrt=False)
def objective(J, ord_j, gang, per_node, x_of, keep_of, factor, c_r, c_same, s_buf, skip):
    """Pollux's power mean (p = -1) of the scaled speedups of candidate rows of ``c_r`` GPUs
    (by position in ``ord_j``), each discounted unless the job's row is unchanged (``c_same``),
    as ``PolluxPolicy.objective`` (``x_of``/``keep_of``: :func:`_gang_values`). ``s_buf`` holds the
    terms; those of positions ``skip`` (the rows kept as in the last call) are kept from it."""
    for i in range(J):
        if skip[i]:
            continue
        g = gang[ord_j[i]]
        r = c_r[i]
        f = factor[i]
        # (numpy's ``x ** -1.0`` on an array is its reciprocal: the same bits; a speedup of
        # ``g / fair / per_node``, times the factor unless unchanged, or 0)
        if r == g and r > 0:
            s_buf[i] = keep_of[g] if c_same[i] else 1.0 / (x_of[g] * f + 1e-3)
        elif c_same[i] or f - f == 0.0:
            s_buf[i] = IDLE_V
        else:
            s_buf[i] = 1.0 / (0.0 / per_node * f + 1e-3)
    return (pairwise_sum(s_buf, 0, J) / J) ** (1.0 / POLLUX_P)


@jit
def pack(J, ord_j, keep_k, r_of, b_nodes, b_cnt, b_len, per_node, gang, free, dist_on, dense, order, place_ord,
         c_nodes, c_cnt, c_len, c_r, c_same, kept_state, hists, reuse, placed):
    """``PolluxPolicy._pack``: rows (``c_*``, by position) with the options chosen (``keep_k[i]``:
    keeps its row; ``r_of[i]``: its GPUs): kept rows as they are, the others largest first (by
    position among equals) by :func:`place_one`; a gang the packing cannot give whole gets none.
    ``c_r[i]``: the GPUs of row ``i``; ``c_same[i]``: whether it is the job's row in ``b_*``.
    ``kept_state`` (2 x nodes: free GPUs, multi-node job on it) and ``hists`` rows 2-3 (the counts
    of nodes by free GPUs): the state after the kept rows, saved; with ``reuse`` (the same rows
    kept as in the last call, ``c_*`` untouched since) read back instead of packing the kept rows
    again. ``hists`` rows 0-1: scratch. ``placed[0]``: how many rows not kept it placed.
    Returns how many chosen gangs got none (the short ones: ``c_len[i]`` 0 with ``r_of[i]`` > 0)."""
    N = len(free)
    P1 = per_node + 1
    hist_all = hists[0]
    hist_nd = hists[1]
    m = 0
    if reuse:  # (the same rows kept as in the last packing: its state after them, its rows as they are)
        for k in range(N):
            free[k] = kept_state[0, k]
            dist_on[k] = kept_state[1, k] != 0
        for f in range(P1):
            hist_all[f] = hists[2, f]
            hist_nd[f] = hists[3, f]
        for i in range(J):
            if keep_k[i]:
                continue
            c_len[i] = 0
            c_r[i] = 0
            c_same[i] = b_len[ord_j[i]] == 0
            if r_of[i] > 0:
                place_ord[m] = i
                m += 1
    else:
        for k in range(N):
            free[k] = per_node
            dist_on[k] = False
        for f in range(P1):
            hist_all[f] = 0
            hist_nd[f] = 0
        hist_all[per_node] = N
        hist_nd[per_node] = N
        for i in range(J):
            j = ord_j[i]
            c_len[i] = 0
            c_r[i] = 0
            c_same[i] = b_len[j] == 0
            if keep_k[i]:
                c_len[i] = b_len[j]
                c_same[i] = True
                for k in range(b_len[j]):
                    c_nodes[i, k] = b_nodes[j, k]
                    c_cnt[i, k] = b_cnt[j, k]
                    c_r[i] += b_cnt[j, k]
                    _take(b_nodes[j, k], b_cnt[j, k], b_len[j] > 1, free, dist_on, hist_all, hist_nd)
            elif r_of[i] > 0:
                place_ord[m] = i
                m += 1
        for k in range(N):
            kept_state[0, k] = free[k]
            kept_state[1, k] = 1 if dist_on[k] else 0
        for f in range(P1):
            hists[2, f] = hist_all[f]
            hists[3, f] = hist_nd[f]
    # largest first, by position among equals (a stable insertion sort: few jobs start at once)
    for a in range(1, m):
        x = place_ord[a]
        p = a
        while p > 0 and r_of[place_ord[p - 1]] < r_of[x]:
            place_ord[p] = place_ord[p - 1]
            p -= 1
        place_ord[p] = x
    short = 0
    for a in range(m):
        i = place_ord[a]
        r = r_of[i]
        if not gang_fits(r, per_node, hist_all, hist_nd):  # (place_one would give part of it: none)
            short += 1
            continue
        place_one(r, free, dist_on, per_node, dense, order)
        _row_from_dense(dense, i, c_nodes, c_cnt, c_len)
        for k in range(c_len[i]):
            c_r[i] += c_cnt[i, k]
            _take(c_nodes[i, k], c_cnt[i, k], c_len[i] > 1, free, dist_on, hist_all, hist_nd)
        j = ord_j[i]
        c_same[i] = same_row(i, c_len[i], c_nodes, c_cnt, j, b_len[j], b_nodes, b_cnt)
    placed[0] = m - short
    return short


@jit(nrt=False, inline=True)
def _option_row(i, j, gang, per_node, x_of, keep_of, factor, b_len, caps, whole, opt_r, opt_v, nopt, keep_at):
    """Job ``j``'s options (at position ``i``), in the elastic engine's order (inf ones left
    out): no GPUs; its gang (changed: discounted by ``factor``; not with ``whole`` for a gang of
    more than a node that is not whole nodes, nor above its cap); keeping its row (running
    jobs). ``x_of``/``keep_of``: :func:`_gang_values`. ``keep_at[i]``: the keep option's index
    (-1: none)."""
    P = per_node
    g = gang[j]
    f = factor[i]
    opt_r[i, 0] = 0
    opt_v[i, 0] = IDLE_V if f - f == 0.0 else 1.0 / (0.0 / P * f + 1e-3)
    n = 1
    if caps[i] >= g and not (whole and g > P and g % P != 0):
        opt_r[i, n] = g
        opt_v[i, n] = 1.0 / (x_of[g] * f + 1e-3)
        n += 1
    keep_at[i] = -1
    if b_len[j] > 0:
        opt_r[i, n] = g
        opt_v[i, n] = keep_of[g]
        keep_at[i] = n
        n += 1
    nopt[i] = n


@jit(nrt=False)
def _gang_values(J, ord_j, gang, fair, per_node, x_of, keep_of):
    """For each gang ``g`` of the jobs ``ord_j[:J]``: ``x_of[g]``, its scaled speedup ``g / fair
    / per_node`` (undiscounted), and ``keep_of[g]``, its value on an unchanged row ``1 / (x + 1e-3)``
    (the same expressions as per job, so the same bits)."""
    for i in range(J):
        g = gang[ord_j[i]]
        x_of[g] = g / fair / per_node
        keep_of[g] = 1.0 / (x_of[g] + 1e-3)


@jit(nrt=False)
def _options(J, ord_j, gang, per_node, x_of, keep_of, factor, b_len, caps, whole, opt_r, opt_v, nopt, keep_at):
    """Every job's :func:`_option_row`, by position in ``ord_j``."""
    for i in range(J):
        _option_row(i, ord_j[i], gang, per_node, x_of, keep_of, factor, b_len, caps, whole, opt_r, opt_v, nopt,
                    keep_at)


@jit(nrt=False)
def _copy_rows(J, src_nodes, src_cnt, src_len, dst_nodes, dst_cnt, dst_len):
    for i in range(J):
        dst_len[i] = src_len[i]
        for k in range(src_len[i]):
            dst_nodes[i, k] = src_nodes[i, k]
            dst_cnt[i, k] = src_cnt[i, k]


@jit
def _order(a, submit, attained, ord_j):
    """The jobs ``a`` by (attained GPU-seconds, submit time), stably: ``ord_j``. The stable sorts
    numpy's mergesort gives, with less sorting: none by submit time when ``a`` is in that order
    already (workload order), and of the jobs that never ran (attained 0, first in their order)
    none by attained."""
    J = len(a)
    b = a.copy()
    for i in range(1, J):
        if submit[a[i]] < submit[a[i - 1]]:
            b = a[np.argsort(submit[a], kind="mergesort")]
            break
    z = 0
    for i in range(J):
        if attained[b[i]] == 0.0:
            ord_j[z] = b[i]
            z += 1
        elif not attained[b[i]] > 0.0:  # (no other key arises; sorted in full if one did)
            o = np.argsort(attained[b], kind="mergesort")
            for k in range(J):
                ord_j[k] = b[o[k]]
            return
    if z == J:
        return
    pos = np.empty(J - z, dtype=np.int64)
    k = 0
    for i in range(J):
        if attained[b[i]] != 0.0:
            pos[k] = b[i]
            k += 1
    o = np.argsort(attained[pos], kind="mergesort")
    for k in range(J - z):
        ord_j[z + k] = pos[o[k]]


@jit
def _order_from(a, submit, attained, ord_j, carry, carry_n, rid):
    """:func:`_order`, sorting from the last round's order (``carry[0, :carry_n[0]]``), the jobs
    not in it after (in ``a``'s order), by insertion (:func:`_insert_sorted`; :func:`_order` when
    it gives up); keeps this order there. Stamps this round's jobs ``carry[3] = 2 rid`` and puts
    each job's position at ``carry[2]``."""
    J = len(a)
    for i in range(J):
        carry[3, a[i]] = 2 * rid
    m = 0
    for k in range(carry_n[0]):
        j = carry[0, k]
        if carry[3, j] == 2 * rid:
            ord_j[m] = j
            m += 1
            carry[3, j] = 2 * rid + 1
    for i in range(J):
        if carry[3, a[i]] == 2 * rid:
            ord_j[m] = a[i]
            m += 1
    if not (_all_numbers(attained, a, J) and _insert_sorted(ord_j, J, attained, submit, False, 8 * J + 64)):
        _order(a, submit, attained, ord_j)
    for i in range(J):
        carry[0, i] = ord_j[i]
        carry[2, ord_j[i]] = i
    carry_n[0] = J


@jit(nrt=False, inline=True)
def _kept_row(i, run, gain, g, p_run, p_gain, p_g, alive):
    """Whether job ``i``'s run option leaves the classes sorted by the run options ``p_*``
    holding: unchanged, or lost since (the job then marked not ``alive``; the others keep their
    order); any other change (a new candidate, a gain or gang changed) needs a new sort."""
    if run[i] == p_run[i] and gain[i] == p_gain[i] and g[i] == p_g[i]:
        return True
    if p_run[i] > 0 and run[i] <= 0 and alive[i]:
        alive[i] = False
        p_run[i], p_gain[i], p_g[i] = run[i], gain[i], g[i]
        return True
    return False


@jit(nrt=False)
def _kept(J, ncls, run, gain, g, p_run, p_gain, p_g, alive):
    """Whether the classes sorted (``ncls`` >= 0) still hold for every job (:func:`_kept_row`)."""
    if ncls < 0:
        return False
    for i in range(J):
        if not _kept_row(i, run, gain, g, p_run, p_gain, p_g, alive):
            return False
    return True


@jit
def optimize(act, J, now, gang, submit, attained, restarts, restart_s, N, per_node, b_nodes, b_cnt, b_len, K,
             best_nodes, best_cnt, best_len, ord_j, carry, carry_n, stats):
    """``PolluxPolicy.optimize`` (without its local search) for the active jobs ``act[:J]``
    (workload order) holding rows ``b_*`` (by job): the allocation kept into ``best_*`` by
    position in ``ord_j`` (the jobs by attained GPU-seconds, then submit time). ``carry`` (4 x
    jobs, -1 to start) and ``carry_n``: the orders sorted last, kept from call to call to sort from
    (:func:`_order_from`, :func:`_classes_from`). ``stats``: [0]
    rounds whose first plan over GPU counts alone could not be packed (not proven optimal), [1]
    rounds that needed the programme, [2] rounds."""
    G = N * per_node
    a = act[:J]
    waiting = 0
    for i in range(J):
        if b_len[a[i]] == 0:
            waiting += 1
    if waiting == 0:  # (every job keeps its row: the plan, its packing and so the allocation kept; proven)
        for i in range(J):
            ord_j[i] = a[i]
            best_len[i] = b_len[a[i]]
            for k in range(b_len[a[i]]):
                best_nodes[i, k] = b_nodes[a[i], k]
                best_cnt[i, k] = b_cnt[a[i], k]
        stats[2] += 1
        return
    rid = stats[2]
    _order_from(a, submit, attained, ord_j, carry, carry_n, rid)
    fair = math.ceil(G / J) * 1.0
    factor = np.empty(J)
    odd = False
    for i in range(J):
        j = ord_j[i]
        age = now - submit[j]
        rst = restarts[j] if restarts[j] > 0 else 0
        x = age - rst * restart_s
        factor[i] = (x if x > 0.0 else 0.0) / (age + restart_s)
        if gang[j] > per_node and gang[j] % per_node != 0:
            odd = True
    s_buf = np.empty(J)
    c_r = np.empty(J, dtype=np.int64)
    c_same = np.ones(J, dtype=np.bool_)
    for i in range(J):  # the unchanged allocation
        j = ord_j[i]
        best_len[i] = b_len[j]
        c_r[i] = 0
        for k in range(b_len[j]):
            best_nodes[i, k] = b_nodes[j, k]
            best_cnt[i, k] = b_cnt[j, k]
            c_r[i] += b_cnt[j, k]
    gmax = 0
    for i in range(J):
        if gang[ord_j[i]] > gmax:
            gmax = gang[ord_j[i]]
    x_of = np.empty(gmax + 1)
    keep_of = np.empty(gmax + 1)
    _gang_values(J, ord_j, gang, fair, per_node, x_of, keep_of)
    f_best = objective(J, ord_j, gang, per_node, x_of, keep_of, factor, c_r, c_same, s_buf,
                       np.zeros(J, dtype=np.bool_))
    c_nodes = np.empty((J, K), dtype=np.int64)
    c_cnt = np.empty((J, K), dtype=np.int64)
    c_len = np.empty(J, dtype=np.int64)
    opt_r = np.empty((J, 3), dtype=np.int64)
    opt_v = np.empty((J, 3))
    nopt = np.empty(J, dtype=np.int64)
    keep_at = np.empty(J, dtype=np.int64)
    caps = np.empty(J, dtype=np.int64)
    out_k = np.empty(J, dtype=np.int64)
    r_of = np.empty(J, dtype=np.int64)
    keep_k = np.empty(J, dtype=np.bool_)
    free = np.empty(N, dtype=np.int64)
    dist_on = np.empty(N, dtype=np.bool_)
    dense = np.zeros(N, dtype=np.int64)
    order = np.empty(N, dtype=np.int64)
    place_ord = np.empty(J, dtype=np.int64)
    run = np.empty(J, dtype=np.int64)
    gain = np.empty(J)
    g = np.empty(J, dtype=np.int64)
    p_run = np.empty(J, dtype=np.int64)
    p_gain = np.empty(J)
    p_g = np.empty(J, dtype=np.int64)
    srt = np.empty(J, dtype=np.int64)
    cls_g = np.empty(J, dtype=np.int64)
    cls_lo = np.empty(J + 1, dtype=np.int64)
    alive = np.empty(J, dtype=np.bool_)
    mark = np.empty(J, dtype=np.bool_)
    lost = np.empty(J, dtype=np.int64)
    mem = np.empty(J, dtype=np.int64)  # (the classes' members still alive, :func:`_slot`)
    hi = np.empty(J, dtype=np.int64)
    pref = np.empty(2 * J + 1)
    dirty = np.zeros(J, dtype=np.bool_)
    work = np.empty((3, J), dtype=np.int64)  # (_plan's scratch)
    stack = np.empty((STACK, 4), dtype=np.int64)
    Fs = np.empty((0, G + 1))
    pick = np.empty((0, G + 1), dtype=np.int64)
    memo = np.empty((4, 0), dtype=np.int64)
    memo_st = np.zeros(3, dtype=np.int64)
    kept_state = np.empty((2, N), dtype=np.int64)
    no_skip = np.zeros(J, dtype=np.bool_)
    hists = np.empty((4, per_node + 1), dtype=np.int64)
    packed = False
    none_placed = False  # (whether the last packing placed no row but the kept ones)
    proven = False
    placed = np.zeros(1, dtype=np.int64)
    f = f_best
    for w in range(2):
        whole = w == 0
        if not whole and not odd:
            break  # (the same plans again: whole nodes change no job's options)
        for i in range(J):
            caps[i] = gang[ord_j[i]]
        ncls = -1  # (no classes sorted for these options yet)
        nlost = 0
        tot = 0
        for pss in range(PASSES):
            if pss == 0:
                _options(J, ord_j, gang, per_node, x_of, keep_of, factor, b_len, caps, whole, opt_r, opt_v, nopt,
                         keep_at)
                tot = _runs(J, opt_r, opt_v, nopt, run, gain, g)
                kept = False
            else:  # (only the jobs whose caps fell have other options: theirs again)
                kept = ncls >= 0
                for a in range(nlost):
                    i = lost[a]
                    tot -= g[i]
                    _option_row(i, ord_j[i], gang, per_node, x_of, keep_of, factor, b_len, caps, whole, opt_r, opt_v,
                                nopt, keep_at)
                    _run_row(i, opt_r, opt_v, nopt, run, gain, g)
                    tot += g[i]
                    if kept and not _kept_row(i, run, gain, g, p_run, p_gain, p_g, alive):
                        kept = False
                if kept:  # (the members of the classes that lost jobs, again)
                    _slots_after(lost, nlost, ord_j, gang, srt, cls_g, cls_lo, ncls, alive, gain, mem, hi, pref,
                                 dirty)
            if tot <= G:
                for i in range(J):
                    out_k[i] = run[i] if run[i] > 0 else 0
            else:  # (``sizes``, the classes sorted once a round and kept while plans only lose jobs)
                stats[1] += 1
                if not kept:
                    _, ncls = _classes_from(J, run, gain, g, srt, cls_g, cls_lo, ord_j, carry, carry_n, rid, mark)
                    for i in range(J):
                        alive[i] = True
                        p_run[i], p_gain[i], p_g[i] = run[i], gain[i], g[i]
                    if Fs.shape[0] < ncls + 1:
                        Fs = np.empty((ncls + 1, G + 1))
                        pick = np.empty((ncls, G + 1), dtype=np.int64)
                        memo = np.empty((4, ncls), dtype=np.int64)
                    memo_st[2] = 0  # (no rows kept for other classes)
                    for q in range(ncls):
                        _slot(q, srt, cls_lo, alive, gain, mem, hi, pref, True)
                _plan(mem, cls_lo, hi, pref, ncls, cls_g, gain, run, G, Fs, pick, memo, memo_st, out_k, work, stack)
            reuse = packed  # (whether the rows kept are those of the last packing)
            for i in range(J):
                kk = out_k[i] == keep_at[i]
                if kk != keep_k[i]:
                    reuse = False
                keep_k[i] = kk
                r_of[i] = opt_r[i, out_k[i]]
            short = pack(J, ord_j, keep_k, r_of, b_nodes, b_cnt, b_len, per_node, gang, free, dist_on, dense, order,
                         place_ord, c_nodes, c_cnt, c_len, c_r, c_same, kept_state, hists, reuse, placed)
            if not (reuse and placed[0] == 0 and none_placed):  # (else the last packing's rows again: its f)
                f = objective(J, ord_j, gang, per_node, x_of, keep_of, factor, c_r, c_same, s_buf,
                              keep_k if reuse else no_skip)
            packed = True
            none_placed = placed[0] == 0
            if f > f_best:
                f_best = f
                _copy_rows(J, c_nodes, c_cnt, c_len, best_nodes, best_cnt, best_len)
            if pss == 0 and short == 0 and (not whole or not odd):
                proven = True  # (the plan over the full relaxation packed: an optimum)
            if short == 0:
                break
            nlost = 0
            for i in range(J):
                if not keep_k[i] and r_of[i] > 0 and c_len[i] == 0:
                    caps[i] = 0
                    lost[nlost] = i
                    nlost += 1
    if not proven:
        stats[0] += 1
    stats[2] += 1


@jit(nrt=False, inline=True)
def _advance(j, t0, secs, gang, work, done, rescale, speed, attained, finish, b_len):
    """``fastblox.mixed.RigidJob.advance``: job ``j`` over ``[t0, t0 + secs)`` on its row, its work
    done at ``speed`` work-seconds a second after its restart delay."""
    if b_len[j] == 0 or finish[j] >= 0:
        return
    d = rescale[j] if rescale[j] < secs else secs
    rescale[j] -= d
    left = (work[j] - done[j]) / speed[j]
    run = secs - d if secs - d < left else left
    attained[j] += (d + run) * gang[j]
    if run >= left:
        finish[j] = t0 + d + left
        done[j] = work[j]
    else:
        done[j] += run * speed[j]


@jit
def replay(submit, gang, work, speed_t, node_type, per_node, interval_s, restart_s, theta, max_intervals, K, first,
           finish, preempted, restarts, attained, arrive_s, admit_s, stats):
    """The elastic engine's replay of rigid jobs under Pollux (module docstring); per job:
    ``first`` (-1: never ran), ``finish`` (-1), ``preempted``, ``restarts`` (-1: never ran),
    ``attained`` (GPU-seconds held, restarts included), ``arrive_s``/``admit_s`` (the interval it
    arrived at / was let in at: ``fastblox.mixed.Gate``). ``speed_t[j, t]``: job ``j``'s speed on
    GPU type ``t`` (a gang over several types: the slowest). Returns OK or TOO_LONG."""
    n = len(submit)
    N = len(node_type)
    total = N * per_node
    b_nodes = np.zeros((n, K), dtype=np.int64)
    b_cnt = np.zeros((n, K), dtype=np.int64)
    b_len = np.zeros(n, dtype=np.int64)
    done = np.zeros(n)
    rescale = np.zeros(n)
    speed = np.ones(n)
    arr = np.argsort(submit, kind="mergesort")
    sub_arr = submit[arr]
    g_arr = gang[arr]
    act = np.empty(n, dtype=np.int64)
    nxt_act = np.empty(n, dtype=np.int64)
    ord_j = np.empty(n, dtype=np.int64)
    best_nodes = np.empty((n, K), dtype=np.int64)
    best_cnt = np.empty((n, K), dtype=np.int64)
    best_len = np.empty(n, dtype=np.int64)
    carry = np.full((4, n), -1, dtype=np.int64)  # (optimize's orders from round to round)
    carry_n = np.zeros(2, dtype=np.int64)
    J = 0
    now = 0.0
    left = n
    next_arr = 0
    head = 0
    demand = 0
    for _ in range(max_intervals):
        if left == 0:
            return OK
        for a in range(J):
            _advance(act[a], now, interval_s, gang, work, done, rescale, speed, attained, finish, b_len)
        now += interval_s
        m = 0
        ndone = 0
        for a in range(J):
            j = act[a]
            if finish[j] >= 0:
                ndone += 1
                demand -= gang[j]
                b_len[j] = 0
            else:
                nxt_act[m] = j
                m += 1
        left -= ndone
        f0 = next_arr
        while next_arr < n and sub_arr[next_arr] <= now:
            next_arr += 1
        for q in range(f0, next_arr):
            arrive_s[arr[q]] = now
        last = admit_to(theta, total, demand, head, next_arr, g_arr)
        for q in range(head, last):
            demand += g_arr[q]
            admit_s[arr[q]] = now
            nxt_act[m] = arr[q]
            m += 1
        if ndone > 0 or last > head:
            act[:m] = np.sort(nxt_act[:m])
            J = m
        head = last
        if J == 0:
            continue
        optimize(act, J, now, gang, submit, attained, restarts, restart_s, N, per_node, b_nodes, b_cnt, b_len, K,
                 best_nodes, best_cnt, best_len, ord_j, carry, carry_n, stats)
        for i in range(J):
            j = ord_j[i]
            if same_row(i, best_len[i], best_nodes, best_cnt, j, b_len[j], b_nodes, b_cnt):
                continue
            if best_len[i] == 0:
                if b_len[j] > 0:
                    preempted[j] += 1
                b_len[j] = 0
                continue
            sp = math.inf
            for k in range(best_len[i]):
                b_nodes[j, k] = best_nodes[i, k]
                b_cnt[j, k] = best_cnt[i, k]
                s = speed_t[j, node_type[best_nodes[i, k]]]
                if s < sp:
                    sp = s
            b_len[j] = best_len[i]
            speed[j] = sp
            rescale[j] = restart_s
            if restarts[j] < 0:
                restarts[j] = 0
                first[j] = now
            else:
                restarts[j] += 1
    return OK if left == 0 else TOO_LONG
