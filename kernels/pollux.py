"""Pollux's allocation search, the local part (``fastblox.compat_pollux.PolluxPolicy._refine``): from
a start allocation, each job's best allocation given the others' (a best response), and each pair
of jobs (one gives up its GPUs, the other answers, then the first answers), while a move lowers the
sum of the jobs' values. Its plain-Python twin is ``fastblox.reference.pollux.refine``; the tests
compare them, and both against ``fastblox.reference.pollux.brute_force`` on tiny clusters.

A job's value is ``keep[j]`` when its row (GPUs per node) is its base row, else ``table[j, n, r]``
for a row of ``r`` GPUs on ``n`` nodes (inf: not an allocation it may take). The constraints are
Pollux's: a node's GPUs at most, at most one multi-node job per node, a job's ``maxr`` GPUs and
``max_nodes`` nodes at most.
"""

from __future__ import annotations

import math

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
def _others(j, state, used, multi):
    """GPUs and multi-node jobs on each node, job ``j`` left out."""
    J, N = state.shape
    for k in range(N):
        used[k] = 0
        multi[k] = 0
    for i in range(J):
        if i == j:
            continue
        c = 0
        for k in range(N):
            used[k] += state[i, k]
            if state[i, k] > 0:
                c += 1
        if c > 1:
            for k in range(N):
                if state[i, k] > 0:
                    multi[k] += 1


@jit(nrt=False)
def _context(j, state, per_node, used, multi, order):
    """The others' ``used`` GPUs and ``multi``-node jobs per node; ``order``: the nodes a multi-node row
    may use (free, no other multi-node job), freest first (lowest index among equals). Returns
    (their number, the most free GPUs of a node)."""
    N = state.shape[1]
    _others(j, state, used, multi)
    m = 0
    maxfree = 0
    for k in range(N):
        f = per_node - used[k]
        if f > maxfree:
            maxfree = f
        if f > 0 and multi[k] == 0:
            p = m
            while p > 0 and per_node - used[order[p - 1]] < f:
                order[p] = order[p - 1]
                p -= 1
            order[p] = k
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
def _spread(r, per_node, used, order, m):
    """Nodes a multi-node row of ``r`` GPUs takes (the freest first); 0: it does not fit."""
    cum = 0
    for p in range(m):
        cum += per_node - used[order[p]]
        if cum >= r:
            return p + 1
    return 0


@jit(nrt=False)
def _option_value(j, kind, r, table, keep, fits, maxfree, per_node, max_nodes, used, order, m):
    """Value of job ``j``'s option (kind 0: no GPUs, 1: its base row, 2: ``r`` on one node, 3: ``r``
    on the fewest nodes without another multi-node job); inf when it does not fit."""
    inf = math.inf
    if kind == 0:
        return table[j, 0, 0]
    if kind == 1:
        return keep[j] if fits else inf
    if kind == 2:
        return table[j, 1, r] if r <= maxfree else inf
    nn = _spread(r, per_node, used, order, m)
    return table[j, nn, r] if 1 < nn <= max_nodes else inf


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
def _top(j, maxr, table):
    top = maxr[j]
    if top > table.shape[2] - 1:
        top = table.shape[2] - 1
    return top


@jit(nrt=False)
def best_response(j, state, base, table, keep, maxr, per_node, max_nodes, used, multi, order, row):
    """Job ``j``'s best row given the other rows of ``state`` (into ``row``) and its value. Options in
    this order, a later one taken only when strictly better: its base row (when it fits), no GPUs,
    then for r = 1, 2, ..: r on one node (the fullest that takes it), r on several nodes.
    ``used``, ``multi``, ``order``: scratch (nodes)."""
    m, maxfree = _context(j, state, per_node, used, multi, order)
    fits = _keep_fits(j, base, maxr, per_node, used, multi)
    best = _option_value(j, 1, 0, table, keep, fits, maxfree, per_node, max_nodes, used, order, m)
    kind, best_r = 1, 0
    v = table[j, 0, 0]
    if v < best:
        best, kind = v, 0
    for r in range(1, _top(j, maxr, table) + 1):
        for k in (2, 3):
            v = _option_value(j, k, r, table, keep, fits, maxfree, per_node, max_nodes, used, order, m)
            if v < best:
                best, kind, best_r = v, k, r
    _write_row(j, kind, best_r, base, per_node, used, order, m, row)
    return best


@jit(nrt=False)
def pair_move(i, j, state, base, table, keep, maxr, per_node, max_nodes, low, cur, used, multi, order, row, row2,
              best_j, opt_v):
    """Jobs ``i`` and ``j`` together, ``i``'s row emptied: every option of ``j`` (the order of
    :func:`best_response`), each followed by ``i``'s best response; ``j``'s and ``i``'s rows of the
    least sum below ``cur`` (their sum now) are left in ``best_j`` and ``row2``. ``low``: a lower
    bound of ``i``'s value (options of ``j`` that cannot beat the best sum with it are skipped).
    Returns that least sum (``cur``: none is lower)."""
    N = state.shape[1]
    for k in range(N):
        state[i, k] = 0
    m, maxfree = _context(j, state, per_node, used, multi, order)
    fits = _keep_fits(j, base, maxr, per_node, used, multi)
    best = cur
    count = 2 + 2 * _top(j, maxr, table)
    for o in range(count):  # (the values first: i's best responses below overwrite the context)
        kind = 1 if o == 0 else (0 if o == 1 else 2 + (o % 2))
        opt_v[o] = _option_value(j, kind, o // 2, table, keep, fits, maxfree, per_node, max_nodes, used, order, m)
    for o in range(count):
        vj = opt_v[o]
        if not vj + low < best:
            continue
        kind = 1 if o == 0 else (0 if o == 1 else 2 + (o % 2))
        m, maxfree = _context(j, state, per_node, used, multi, order)
        _write_row(j, kind, o // 2, base, per_node, used, order, m, row)
        for k in range(N):
            state[j, k] = row[k]
        vi = best_response(i, state, base, table, keep, maxr, per_node, max_nodes, used, multi, order, row)
        if vj + vi < best:
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
def refine(state, base, table, keep, maxr, per_node, max_nodes, max_sweeps, vals, used, multi, order, row, row2,
           best_j, save, opt_v):
    """Improve ``state`` [job, node] in place; returns the sweeps made. Each sweep: every job's best
    response (taken when better), then every pair (i, j), i holding GPUs: i gives them up, then each
    option of j with i's best response to it (:func:`pair_move`); of all pairs, the one lowering the
    sum most is taken (the first among equals). Stops after a sweep without a move. Scratch:
    ``vals`` (jobs); ``used``, ``multi``, ``order``, ``row``, ``row2``, ``best_j`` (nodes); ``save``
    (4 x nodes); ``opt_v`` (2 + 2 x the table's last axis)."""
    J, N = state.shape
    for j in range(J):
        vals[j] = row_value(j, state, base, table, keep)
    sweeps = 0
    moved = True
    while moved and sweeps < max_sweeps:
        moved = False
        sweeps += 1
        for j in range(J):
            v = best_response(j, state, base, table, keep, maxr, per_node, max_nodes, used, multi, order, row)
            if _better(v, vals[j]):
                for k in range(N):
                    state[j, k] = row[k]
                vals[j] = v
                moved = True
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
            low = keep[i]
            for r in range(table.shape[2]):
                for n in range(table.shape[1]):
                    if table[i, n, r] < low:
                        low = table[i, n, r]
            for k in range(N):
                save[0, k] = state[i, k]
            for j in range(J):
                if i == j:
                    continue
                for k in range(N):
                    save[1, k] = state[j, k]
                cur = vals[i] + vals[j]
                v = pair_move(i, j, state, base, table, keep, maxr, per_node, max_nodes, low, cur, used, multi, order,
                              row, row2, best_j, opt_v)
                if _better(v, cur) and cur - v > gain:
                    gain = cur - v
                    pick_i = i
                    pick_j = j
                    for k in range(N):
                        save[2, k] = row2[k]
                        save[3, k] = best_j[k]
                for k in range(N):
                    state[i, k] = save[0, k]
                    state[j, k] = save[1, k]
        if pick_i >= 0:
            for k in range(N):
                state[pick_i, k] = save[2, k]
                state[pick_j, k] = save[3, k]
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
def search(state, base, table, keep, maxr, per_node, max_nodes, max_sweeps, kicks, vals, used, multi, order, row,
           row2, best_j, save, opt_v, trial, tvals, done):
    """:func:`refine`, then kicks, each refined and taken when the sum is lower: up to ``kicks``
    times, the job not tried yet whose base row would lower its value most (its row not its base
    row, the base row within its GPUs) put back on it, the jobs in its way emptied (:func:`_kick`);
    then up to ``kicks`` times, the job not tried yet whose best count of GPUs on one node would
    lower its value most given that count there (:func:`_kick_to_node`). ``state`` improved in
    place; returns the kicks taken. ``trial`` (jobs x nodes), ``tvals``, ``done`` (jobs): scratch,
    with :func:`refine`'s."""
    J, N = state.shape
    refine(state, base, table, keep, maxr, per_node, max_nodes, max_sweeps, vals, used, multi, order, row, row2,
           best_j, save, opt_v)
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
            refine(trial, base, table, keep, maxr, per_node, max_nodes, max_sweeps, tvals, used, multi, order, row,
                   row2, best_j, save, opt_v)
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
