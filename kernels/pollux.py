"""Pollux's allocation search, the local part (``fastblox.compat_pollux.PolluxPolicy._refine``): from
a start allocation, each job's best allocation given the others' (a best response), and each pair
of jobs (one gives up its GPUs, the other answers, then the first answers; the other one of at most
``pair_cap`` jobs: :func:`_partners`), while a move lowers the sum of the jobs' values. Its
plain-Python twin is ``fastblox.reference.pollux.refine``; the tests compare them, and check on tiny
clusters against ``fastblox.reference.pollux.brute_force`` that no job alone can do better where it
ends (a local optimum: the global one may need several jobs to move at once).

A job's value is ``keep[j]`` when its row (GPUs per node) is its base row, else ``table[j, n, r]``
for a row of ``r`` GPUs on ``n`` nodes (inf: not an allocation it may take). The constraints are
Pollux's: a node's GPUs at most, at most one multi-node job per node, a job's ``maxr`` GPUs and
``max_nodes`` nodes at most.

What makes it fast without changing what it finds (the twin has none of it, and the tests compare
the two): a pair is skipped, and an option of a pair move is skipped, when a lower bound of the sum
it could reach (each job's least value on the GPUs left to it: :func:`_pair_bound`, ``pmin``) cannot
beat the best so far; and within a pair move the answering job's value is found from histograms of
the nodes' free GPUs (:func:`_answer_value`), its row written only when the pair's sum improves.
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import jit

EPS = 1e-12  # a move is taken when it lowers the sum by more than EPS times it (and 1e-15)


@jit(nrt=False)
def row_value(j, state, base, table, keep):
    """Job ``j``'s value on its row of ``state``."""
    n = 0
    r = 0
    same = True
    for k in range(state.shape[1]):
        x = state[j, k]
        r += x
        if x > 0:
            n += 1
        if x != base[j, k]:
            same = False
    return keep[j] if same else table[j, n, r]


@jit(nrt=False)
def _add_row(j, state, tot, sign):
    """Add (``sign`` 1) or take away (-1) job ``j``'s row of ``state`` to the totals ``tot``: GPUs
    (``tot[0]``) and multi-node jobs (``tot[1]``) per node."""
    N = state.shape[1]
    c = 0
    for k in range(N):
        tot[0, k] += sign * state[j, k]
        if state[j, k] > 0:
            c += 1
    if c > 1:
        for k in range(N):
            if state[j, k] > 0:
                tot[1, k] += sign


@jit(nrt=False)
def _set_row(j, row, state, tot):
    """Job ``j``'s row of ``state`` set to ``row``, the totals kept."""
    _add_row(j, state, tot, -1)
    for k in range(state.shape[1]):
        state[j, k] = row[k]
    _add_row(j, state, tot, 1)


@jit(nrt=False)
def _totals(state, tot):
    for k in range(state.shape[1]):
        tot[0, k] = 0
        tot[1, k] = 0
    for j in range(state.shape[0]):
        _add_row(j, state, tot, 1)


@jit(nrt=False)
def _others(j, state, tot, used, multi):
    """GPUs and multi-node jobs on each node, job ``j`` left out (the totals less its row)."""
    N = state.shape[1]
    c = 0
    for k in range(N):
        used[k] = tot[0, k] - state[j, k]
        multi[k] = tot[1, k]
        if state[j, k] > 0:
            c += 1
    if c > 1:
        for k in range(N):
            if state[j, k] > 0:
                multi[k] -= 1


@jit(nrt=False)
def _context(j, state, tot, per_node, used, multi, order):
    """The others' ``used`` GPUs and ``multi``-node jobs per node; ``order``: the nodes a multi-node row
    may use (free, no other multi-node job), freest first (lowest index among equals). Returns
    (their number, the most free GPUs of a node)."""
    N = state.shape[1]
    _others(j, state, tot, used, multi)
    maxfree = 0
    for k in range(N):
        if per_node - used[k] > maxfree:
            maxfree = per_node - used[k]
    m = 0
    for f in range(maxfree, 0, -1):  # (a counting sort: free GPUs are 1..per_node)
        for k in range(N):
            if per_node - used[k] == f and multi[k] == 0:
                order[m] = k
                m += 1
    return m, maxfree


@jit(nrt=False)
def _keep_fits(j, base, maxr, per_node, used, multi):
    """Whether job ``j``'s base row fits beside the others (and is not empty)."""
    N = base.shape[1]
    nb = 0
    rb = 0
    for k in range(N):
        rb += base[j, k]
        if base[j, k] > 0:
            nb += 1
            if base[j, k] > per_node - used[k]:
                return False
    if nb == 0 or rb > maxr[j]:
        return False
    if nb > 1:
        for k in range(N):
            if base[j, k] > 0 and multi[k] > 0:
                return False
    return True


@jit(nrt=False)
def _options(j, table, keep, fits, maxfree, per_node, max_nodes, used, order, m, top, opt_v):
    """Values of job ``j``'s options into ``opt_v`` (returns their count), in this order: its base
    row (inf when it does not fit), no GPUs, then for r = 1 .. ``top``: r on one node (the fullest
    that takes it), r on the fewest nodes without another multi-node job, the freest first (inf
    when it needs one node only, or more than ``max_nodes``, or does not fit); the options of more
    GPUs than any row can take (all inf) are left out."""
    inf = math.inf
    opt_v[0] = keep[j] if fits else inf
    opt_v[1] = table[j, 0, 0]
    p = 0  # (the nodes of order a row of r GPUs spreads over: the fewest whose free GPUs hold r)
    cum = 0
    for r in range(1, top + 1):
        while p < m and cum < r:
            cum += per_node - used[order[p]]
            p += 1
        if r > maxfree and cum < r:
            return 2 * r  # (neither fits r GPUs, nor any more)
        opt_v[2 * r] = table[j, 1, r] if r <= maxfree else inf
        nn = p if cum >= r else 0
        opt_v[2 * r + 1] = table[j, nn, r] if 1 < nn <= max_nodes else inf
    return 2 + 2 * top


@jit(nrt=False)
def _write_row(j, kind, r, base, per_node, used, order, m, row):
    N = base.shape[1]
    for k in range(N):
        row[k] = 0
    if kind == 1:
        for k in range(N):
            row[k] = base[j, k]
    elif kind == 2:
        pick = -1
        for k in range(N):
            f = per_node - used[k]
            if f >= r and (pick < 0 or f < per_node - used[pick]):
                pick = k
        row[pick] = r
    elif kind == 3:
        left = r
        for p in range(m):
            k = order[p]
            take = per_node - used[k]
            if take > left:
                take = left
            row[k] = take
            left -= take
            if left == 0:
                break


@jit(nrt=False)
def _kind(o):
    """The kind of option ``o`` of :func:`_options` (0: no GPUs, 1: the base row, 2: one node, 3:
    several nodes); its GPUs: ``o // 2``."""
    return 1 if o == 0 else (0 if o == 1 else 2 + (o % 2))


@jit(nrt=False)
def _top(j, maxr, table):
    top = maxr[j]
    if top > table.shape[2] - 1:
        top = table.shape[2] - 1
    return top


@jit(nrt=False)
def best_response(j, state, tot, base, table, keep, maxr, per_node, max_nodes, used, multi, order, row, opt_w):
    """Job ``j``'s best row given the other rows of ``state`` (into ``row``) and its value: the
    first option of :func:`_options` of the least value. ``tot``: the totals of ``state``
    (:func:`_add_row`); ``used``, ``multi``, ``order``: scratch (nodes); ``opt_w``: (options)."""
    m, maxfree = _context(j, state, tot, per_node, used, multi, order)
    fits = _keep_fits(j, base, maxr, per_node, used, multi)
    count = _options(j, table, keep, fits, maxfree, per_node, max_nodes, used, order, m, _top(j, maxr, table), opt_w)
    best = opt_w[0]
    o_best = 0
    for o in range(1, count):
        if opt_w[o] < best:
            best, o_best = opt_w[o], o
    _write_row(j, _kind(o_best), o_best // 2, base, per_node, used, order, m, row)
    return best


@jit(nrt=False)
def _histograms(used, multi, per_node, H, A, first, mark):
    """Of the context ``used``/``multi`` (nodes): ``H[f]`` the nodes with f free GPUs and no multi-node
    job, ``A[f]`` all nodes with f free GPUs (f = 0..per_node; a node over full counts as 0), ``first[f]``
    the lowest node with f free GPUs (-1: none); ``mark`` (nodes) zeroed."""
    for f in range(per_node + 1):
        H[f] = 0
        A[f] = 0
        first[f] = -1
    for k in range(used.shape[0]):
        f = per_node - used[k]
        if f < 0:
            f = 0
        A[f] += 1
        if multi[k] == 0:
            H[f] += 1
        if first[f] < 0:
            first[f] = k
        mark[k] = 0


@jit(nrt=False)
def _row_nodes(j, kind, r, base, per_node, used, order, m, A, first, rk, rx):
    """The nodes (``rk``) and GPUs (``rx``) of the row :func:`_write_row` writes; returns their number."""
    n = 0
    if kind == 1:
        for k in range(base.shape[1]):
            if base[j, k] > 0:
                rk[n] = k
                rx[n] = base[j, k]
                n += 1
    elif kind == 2:
        for f in range(r, per_node + 1):  # (the fullest node that takes r: the least free >= r, lowest index)
            if A[f] > 0 and first[f] >= 0:
                rk[0] = first[f]
                rx[0] = r
                return 1
    elif kind == 3:
        left = r
        for p in range(m):
            k = order[p]
            take = per_node - used[k]
            if take > left:
                take = left
            rk[n] = k
            rx[n] = take
            n += 1
            left -= take
            if left == 0:
                break
    return n


@jit(nrt=False)
def _shift(nr, rk, rx, used, multi, per_node, H, A, mark, sign):
    """Move (``sign`` 1) or move back (-1) a row of ``nr`` nodes ``rk`` with ``rx`` GPUs in the
    :func:`_histograms` ``H``, ``A`` of the context ``used``/``multi``: its nodes lose those free
    GPUs (and, the row being multi-node, leave ``H``); ``mark``: the row's GPUs per node (0 back)."""
    spread = nr > 1
    for q in range(nr):
        k = rk[q]
        f = per_node - used[k]
        if f < 0:
            f = 0
        g = f - rx[q]
        A[f] -= sign
        A[g] += sign
        if multi[k] == 0:
            H[f] -= sign
            if not spread:
                H[g] += sign
        mark[k] = rx[q] if sign > 0 else 0


@jit(nrt=False)
def _answer_value(i, nr, rk, rx, used, multi, base, table, keep, maxr, per_node, max_nodes, top, nb_i, rb_i, H, A,
                  mark, bnodes, pmin):
    """:func:`best_response`'s value of job ``i`` (its row empty) when the other job's row is ``nr`` nodes
    ``rk`` with ``rx`` GPUs in the context ``used``/``multi`` whose :func:`_histograms` are ``H``, ``A``
    (``bnodes``: the ``nb_i`` nodes of i's base row, of ``rb_i`` GPUs): the least of the same options,
    found from the histograms (the row's nodes moved in them and back) without the nodes' order. The
    least of a set does not depend on the order it is scanned in (a NaN is never taken, as there), so
    the sizes are scanned from the most GPUs down, stopping where i's least value of a row of at most
    that many (``pmin[0]``) cannot beat the best found."""
    spread = nr > 1
    _shift(nr, rk, rx, used, multi, per_node, H, A, mark, 1)
    maxfree = 0
    for f in range(per_node, 0, -1):
        if A[f] > 0:
            maxfree = f
            break
    elig = 0  # (the free GPUs of the nodes without a multi-node job)
    for f in range(1, per_node + 1):
        elig += H[f] * f
    fits = nb_i > 0 and rb_i <= maxr[i]
    if fits:
        for q in range(nb_i):
            k = bnodes[q]
            if base[i, k] > per_node - used[k] - mark[k] or (nb_i > 1 and (multi[k] > 0 or (spread and mark[k] > 0))):
                fits = False
                break
    best = keep[i] if fits else math.inf
    v = table[i, 0, 0]
    if v < best:
        best = v
    hi = maxfree if maxfree > elig else elig  # (the options stop at the first size that fits neither way)
    if hi > top:
        hi = top
    for r in range(hi, 0, -1):
        if not pmin[0, i, r] < best:
            break
        if r <= maxfree:
            v = table[i, 1, r]
            if v < best:
                best = v
        if r <= elig:
            nn = 0  # (the fewest of those nodes, freest first, that hold r)
            cum = 0
            for f in range(per_node, 0, -1):
                if cum + H[f] * f >= r:
                    nn += (r - cum + f - 1) // f
                    break
                cum += H[f] * f
                nn += H[f]
            if 1 < nn <= max_nodes:
                v = table[i, nn, r]
                if v < best:
                    best = v
    _shift(nr, rk, rx, used, multi, per_node, H, A, mark, -1)
    return best


@jit(nrt=False)
def _pair_bound(i, j, state, tot, base, keep, maxr, table, per_node, pmin):
    """A lower bound of the sum :func:`pair_move` can reach for ``i`` and ``j``: the least of j's
    least value on r GPUs plus i's least on at most the GPUs left (or its base row), over r up
    to the free GPUs of both rows emptied (and j's base row)."""
    F = 0
    for k in range(state.shape[1]):
        f = per_node - (tot[0, k] - state[i, k] - state[j, k])
        if f > 0:
            F += f
    top_i = _top(i, maxr, table)
    top_j = _top(j, maxr, table)
    lb = math.inf
    hi = F if F < top_j else top_j
    for r in range(hi + 1):
        f = F - r
        if f > top_i:
            f = top_i
        b = pmin[0, i, f]
        if keep[i] < b:
            b = keep[i]
        v = pmin[1, j, r] + b
        if v < lb:
            lb = v
    rb = 0
    for k in range(state.shape[1]):
        rb += base[j, k]
    if 0 < rb <= F:
        f = F - rb
        if f > top_i:
            f = top_i
        b = pmin[0, i, f]
        if keep[i] < b:
            b = keep[i]
        v = keep[j] + b
        if v < lb:
            lb = v
    return lb


@jit(nrt=False)
def pair_move(i, j, state, tot, base, table, keep, maxr, per_node, max_nodes, low, cur, used, multi, order, row,
              row2, best_j, opt_v, opt_w, ctx, pmin, hist):
    """Jobs ``i`` and ``j`` together, ``i``'s row emptied: every option of ``j`` (the order of
    :func:`_options`), each followed by ``i``'s best response; ``j``'s and ``i``'s rows of the
    least sum below ``cur`` (their sum now) are left in ``best_j`` and ``row2``. ``low``: a lower
    bound of ``i``'s value (options of ``j`` that cannot beat the best sum with it are skipped).
    Returns that least sum (``cur``: none is lower). ``state`` and ``tot``: ``i``'s and ``j``'s
    rows changed (the caller puts them back). ``ctx``: scratch (3 x nodes: j's context). ``pmin``:
    :func:`lowest`'s least values (an option is also skipped when i's least value on the GPUs it
    leaves cannot beat the best sum); ``hist``: scratch (7 x max(nodes, per_node + 1)) for
    :func:`_answer_value`, which gives i's value first (its row is written only when the sum improves)."""
    N = state.shape[1]
    for k in range(N):
        row[k] = 0
    _set_row(i, row, state, tot)
    used_j, multi_j, order_j = ctx[0], ctx[1], ctx[2]
    m, maxfree = _context(j, state, tot, per_node, used_j, multi_j, order_j)
    fits = _keep_fits(j, base, maxr, per_node, used_j, multi_j)
    count = _options(j, table, keep, fits, maxfree, per_node, max_nodes, used_j, order_j, m, _top(j, maxr, table),
                     opt_v)
    best = cur
    free0 = 0
    for k in range(N):
        if per_node - used_j[k] > 0:
            free0 += per_node - used_j[k]
    rb = 0
    for k in range(N):
        rb += base[j, k]
    top_i = _top(i, maxr, table)
    H, A, first, mark = hist[0], hist[1], hist[2], hist[3]
    rk, rx, bnodes = hist[4], hist[5], hist[6]
    _histograms(used_j, multi_j, per_node, H, A, first, mark)
    nb_i = 0
    rb_i = 0
    for k in range(N):
        rb_i += base[i, k]
        if base[i, k] > 0:
            bnodes[nb_i] = k
            nb_i += 1
    for o in range(count):
        vj = opt_v[o]
        if not vj + low < best:
            continue
        f = free0 - (rb if o == 0 else o // 2)
        if f > top_i:
            f = top_i
        lb = pmin[0, i, f] if f >= 0 else math.inf
        if keep[i] < lb:
            lb = keep[i]
        if not vj + lb < best:
            continue
        nr = _row_nodes(j, _kind(o), o // 2, base, per_node, used_j, order_j, m, A, first, rk, rx)
        vi = _answer_value(i, nr, rk, rx, used_j, multi_j, base, table, keep, maxr, per_node, max_nodes, top_i, nb_i,
                           rb_i, H, A, mark, bnodes, pmin)
        if vj + vi < best:
            _write_row(j, _kind(o), o // 2, base, per_node, used_j, order_j, m, row)
            _set_row(j, row, state, tot)
            vi = best_response(i, state, tot, base, table, keep, maxr, per_node, max_nodes, used, multi, order, row,
                               opt_w)
            best = vj + vi
            for k in range(N):
                best_j[k] = state[j, k]
                row2[k] = row[k]
    return best


@jit(nrt=False)
def _better(new, old):
    if old == math.inf:  # (a start row of a layout the table does not value)
        return new < old
    return new < old - EPS * abs(old) - 1e-15


@jit(nrt=False)
def _partners(J, pair_cap, vals, lows, cand):
    """The jobs a pair move may give GPUs to (into ``cand``; returns their number): all (in index
    order) when there are at most ``pair_cap`` (0: no cap), else the ``pair_cap`` whose value is
    furthest above the least they could have (``vals - lows``; the lowest index among equals), in
    index order."""
    if pair_cap <= 0 or J <= pair_cap:
        for j in range(J):
            cand[j] = j
        return J
    n = 0
    for j in range(J):  # (insertion into the best pair_cap so far, by room then index)
        room = vals[j] - lows[j]
        p = n
        while p > 0 and vals[cand[p - 1]] - lows[cand[p - 1]] < room:
            if p < pair_cap:
                cand[p] = cand[p - 1]
            p -= 1
        if p < pair_cap:
            cand[p] = j
            if n < pair_cap:
                n += 1
    for a in range(1, n):  # (index order)
        x = cand[a]
        p = a
        while p > 0 and cand[p - 1] > x:
            cand[p] = cand[p - 1]
            p -= 1
        cand[p] = x
    return n


@jit(nrt=False)
def lowest(table, keep, lows, pmin):
    """Each job's least value (of its base row and every row of the table) into ``lows``; its least
    value of a row of r GPUs into ``pmin[1, j, r]``, of at most r GPUs into ``pmin[0, j, r]``."""
    for j in range(table.shape[0]):
        low = keep[j]
        m = math.inf
        for r in range(table.shape[2]):
            c = math.inf
            for n in range(table.shape[1]):
                if table[j, n, r] < c:
                    c = table[j, n, r]
            pmin[1, j, r] = c
            if c < m:
                m = c
            pmin[0, j, r] = m
        if m < low:
            low = m
        lows[j] = low


@jit(nrt=False)
def refine(state, base, table, keep, maxr, per_node, max_nodes, max_sweeps, pair_cap, lows, vals, cand, tot, used,
           multi, order, row, row2, best_j, save, opt_v, opt_w, ctx, pmin, hist):
    """Improve ``state`` [job, node] in place; returns the sweeps made. Each sweep: every job's best
    response (taken when better), then every pair (i, j), i holding GPUs and j one of the
    partners (:func:`_partners`: every job when there are at most ``pair_cap``): i gives them up,
    then each option of j with i's best response to it (:func:`pair_move`); of all pairs, the one
    lowering the sum most is taken (the first among equals). Stops after a sweep without a move.
    ``lows``: each job's least value (:func:`lowest`). Scratch: ``vals``, ``cand`` (jobs); ``tot``
    (2 x nodes); ``used``, ``multi``, ``order``, ``row``, ``row2``, ``best_j`` (nodes); ``save`` (4 x
    nodes); ``opt_v``, ``opt_w`` (2 x the table's last axis); ``ctx`` (3 x nodes)."""
    J, N = state.shape
    _totals(state, tot)
    for j in range(J):
        vals[j] = row_value(j, state, base, table, keep)
    sweeps = 0
    moved = True
    while moved and sweeps < max_sweeps:
        moved = False
        sweeps += 1
        for j in range(J):
            if not _better(lows[j], vals[j]):  # (no row of j is better: its best response is not taken)
                continue
            v = best_response(j, state, tot, base, table, keep, maxr, per_node, max_nodes, used, multi, order, row,
                              opt_w)
            if _better(v, vals[j]):
                _set_row(j, row, state, tot)
                vals[j] = v
                moved = True
        n_cand = _partners(J, pair_cap, vals, lows, cand)
        pick_i = -1
        pick_j = -1
        gain = 0.0
        for i in range(J):
            has = False
            for k in range(N):
                if state[i, k] > 0:
                    has = True
            if not has:
                continue
            for k in range(N):
                save[0, k] = state[i, k]
            for c in range(n_cand):
                j = cand[c]
                if i == j:
                    continue
                for k in range(N):
                    save[1, k] = state[j, k]
                cur = vals[i] + vals[j]
                if not (_better(lows[i] + lows[j], cur) and cur - (lows[i] + lows[j]) > gain):
                    continue  # (no move of the pair can be taken: it lowers their sum to lows[i] + lows[j] at most)
                lb = _pair_bound(i, j, state, tot, base, keep, maxr, table, per_node, pmin)
                if not (_better(lb, cur) and cur - lb > gain):
                    continue
                v = pair_move(i, j, state, tot, base, table, keep, maxr, per_node, max_nodes, lows[i], cur, used,
                              multi, order, row, row2, best_j, opt_v, opt_w, ctx, pmin, hist)
                if _better(v, cur) and cur - v > gain:
                    gain = cur - v
                    pick_i = i
                    pick_j = j
                    for k in range(N):
                        save[2, k] = row2[k]
                        save[3, k] = best_j[k]
                _set_row(i, save[0], state, tot)
                _set_row(j, save[1], state, tot)
        if pick_i >= 0:
            _set_row(pick_i, save[2], state, tot)
            _set_row(pick_j, save[3], state, tot)
            vals[pick_i] = row_value(pick_i, state, base, table, keep)
            vals[pick_j] = row_value(pick_j, state, base, table, keep)
            moved = True
    return sweeps


@jit(nrt=False)
def _kick(p, trial, base, per_node):
    """``trial`` with job ``p`` back on its base row; on each of its nodes, other jobs (lowest index
    first) give up their rows until the node's GPUs suffice, and, ``p`` being multi-node, the other
    multi-node jobs there give up theirs."""
    J, N = trial.shape
    nb = 0
    for k in range(N):
        trial[p, k] = base[p, k]
        if base[p, k] > 0:
            nb += 1
    for k in range(N):
        if base[p, k] == 0:
            continue
        for i in range(J):
            if i == p or trial[i, k] == 0:
                continue
            tot = 0
            c = 0
            for q in range(J):
                tot += trial[q, k]
            for q in range(N):
                if trial[i, q] > 0:
                    c += 1
            if tot > per_node or (nb > 1 and c > 1):
                for q in range(N):
                    trial[i, q] = 0


@jit(nrt=False)
def _kick_to_node(p, r, trial, per_node):
    """``trial`` with job ``p`` on ``r`` GPUs of one node: the node with the fewest GPUs of others to
    empty (the lowest index among equals), whose other jobs (lowest index first) give up their rows
    until it fits."""
    J, N = trial.shape
    for k in range(N):
        trial[p, k] = 0
    pick = -1
    short = 0
    for k in range(N):
        tot = 0
        for q in range(J):
            tot += trial[q, k]
        s = r - (per_node - tot)
        if s < 0:
            s = 0
        if pick < 0 or s < short:
            pick = k
            short = s
    trial[p, pick] = r
    for i in range(J):
        tot = 0
        for q in range(J):
            tot += trial[q, pick]
        if tot <= per_node:
            break
        if i != p and trial[i, pick] > 0:
            for q in range(N):
                trial[i, q] = 0


@jit(nrt=False)
def _grow_target(i, table, maxr, per_node):
    """Job ``i``'s best count of GPUs on one node (the fewest among equals) and its value."""
    best = table[i, 0, 0]
    r_best = 0
    top = _top(i, maxr, table)
    if top > per_node:
        top = per_node
    for r in range(1, top + 1):
        if table[i, 1, r] < best:
            best = table[i, 1, r]
            r_best = r
    return r_best, best


@jit(nrt=False)
def search(state, base, table, keep, maxr, per_node, max_nodes, max_sweeps, kicks, pair_cap, lows, vals, cand, tot,
           used, multi, order, row, row2, best_j, save, opt_v, opt_w, ctx, trial, tvals, done, pmin, hist):
    """:func:`refine`, then kicks, each refined and taken when the sum is lower: up to ``kicks``
    times, the job not tried yet whose base row would lower its value most (its row not its base
    row, the base row within its GPUs) put back on it, the jobs in its way emptied (:func:`_kick`);
    then up to ``kicks`` times, the job not tried yet whose best count of GPUs on one node would
    lower its value most given that count there (:func:`_kick_to_node`). ``state`` improved in
    place; returns the kicks taken. ``trial`` (jobs x nodes), ``tvals``, ``done`` (jobs): scratch,
    with :func:`refine`'s, ``lows`` (jobs) and ``pmin`` (2 x jobs x the table's last axis) for
    :func:`lowest`, and ``hist`` for :func:`pair_move` (all of it: :func:`scratch`)."""
    J, N = state.shape
    lowest(table, keep, lows, pmin)
    refine(state, base, table, keep, maxr, per_node, max_nodes, max_sweeps, pair_cap, lows, vals, cand, tot, used,
           multi, order, row, row2, best_j, save, opt_v, opt_w, ctx, pmin, hist)
    total = 0.0
    for j in range(J):
        total += vals[j]
    taken = 0
    for phase in range(2):
        for j in range(J):
            done[j] = 0
        for _ in range(kicks):
            pick = -1
            gain = 0.0
            r_pick = 0
            for i in range(J):
                if done[i]:
                    continue
                if phase == 0:
                    same = True
                    rb = 0
                    for k in range(N):
                        rb += base[i, k]
                        if state[i, k] != base[i, k]:
                            same = False
                    if same or rb == 0 or rb > maxr[i]:
                        continue
                    g = vals[i] - keep[i]
                    r = 0
                else:
                    r, v = _grow_target(i, table, maxr, per_node)
                    g = vals[i] - v
                if g > gain:
                    gain = g
                    pick = i
                    r_pick = r
            if pick < 0:
                break
            done[pick] = 1
            for i in range(J):
                for k in range(N):
                    trial[i, k] = state[i, k]
            if phase == 0:
                _kick(pick, trial, base, per_node)
            else:
                _kick_to_node(pick, r_pick, trial, per_node)
            refine(trial, base, table, keep, maxr, per_node, max_nodes, max_sweeps, pair_cap, lows, tvals, cand, tot,
                   used, multi, order, row, row2, best_j, save, opt_v, opt_w, ctx, pmin, hist)
            t = 0.0
            for j in range(J):
                t += tvals[j]
            if _better(t, total):
                for i in range(J):
                    vals[i] = tvals[i]
                    for k in range(N):
                        state[i, k] = trial[i, k]
                total = t
                taken += 1
    return taken


def scratch(jobs: int, nodes: int, sizes: int, per_node: int) -> tuple:
    """:func:`search`'s scratch arrays after ``pair_cap`` (``sizes``: the table's last axis;
    ``per_node``: GPUs per node)."""
    i64 = np.int64
    return (np.empty(jobs), np.empty(jobs), np.empty(jobs, dtype=i64), np.empty((2, nodes), dtype=i64),
            *(np.empty(nodes, dtype=i64) for _ in range(6)), np.empty((4, nodes), dtype=i64), np.empty(2 * sizes),
            np.empty(2 * sizes), np.empty((3, nodes), dtype=i64), np.empty((jobs, nodes), dtype=i64), np.empty(jobs),
            np.empty(jobs, dtype=i64), np.empty((2, jobs, sizes)),
            np.zeros((7, max(nodes, per_node + 1)), dtype=i64))
