"""Plain-Python twins of Pollux's allocation search (``kernels.pollux``): :func:`refine`, the same
local search written with lists and sets, and :func:`brute_force`, every allocation of a tiny
cluster under Pollux's constraints. A job's value is ``keep[j]`` on its base row, else
``table[j][n][r]`` for ``r`` GPUs on ``n`` nodes; the search minimises the sum of the values."""

from __future__ import annotations

import itertools
import math

EPS = 1e-12


def value(j, row, base, table, keep) -> float:
    if list(row) == list(base[j]):
        return keep[j]
    return table[j][sum(1 for x in row if x)][sum(row)]


def _free_and_multi(j, rows, per_node):
    N = len(rows[0])
    free = [per_node - sum(rows[i][k] for i in range(len(rows)) if i != j) for k in range(N)]
    multi = {k for i, r in enumerate(rows) if i != j and sum(1 for x in r if x) > 1 for k in range(N) if r[k]}
    return free, multi


def _options(j, rows, base, table, keep, maxr, per_node, max_nodes):
    """Job ``j``'s options given the others, in the kernel's order: (value, row), inf when it does not
    fit: its base row, no GPUs, then for r = 1, 2, ..: r on one node (the fullest that takes it), r on
    the fewest nodes without another multi-node job (the freest first)."""
    N = len(rows[0])
    free, multi = _free_and_multi(j, rows, per_node)
    b = list(base[j])
    on_b = [k for k in range(N) if b[k]]
    fits = bool(on_b) and sum(b) <= maxr[j] and all(b[k] <= free[k] for k in range(N)) and (
        len(on_b) == 1 or not multi & set(on_b))
    yield (keep[j] if fits else math.inf), b
    yield table[j][0][0], [0] * N
    allowed = sorted((k for k in range(N) if free[k] > 0 and k not in multi), key=lambda k: (-free[k], k))
    for r in range(1, min(maxr[j], len(table[j][0]) - 1) + 1):
        if r <= max(free):
            k = min((k for k in range(N) if free[k] >= r), key=lambda k: (free[k], k))
            yield table[j][1][r], [r if i == k else 0 for i in range(N)]
        else:
            yield math.inf, None
        cum, nodes = 0, []
        for k in allowed:
            if cum >= r:
                break
            nodes.append(k)
            cum += free[k]
        if cum >= r and 1 < len(nodes) <= max_nodes:
            out, left = [0] * N, r
            for k in nodes:
                out[k] = min(free[k], left)
                left -= out[k]
            yield table[j][len(nodes)][r], out
        else:
            yield math.inf, None


def best_response(j, rows, base, table, keep, maxr, per_node, max_nodes):
    """(value, row) of job ``j``'s best option given the others (the first of the least value)."""
    best = None
    for v, row in _options(j, rows, base, table, keep, maxr, per_node, max_nodes):
        if best is None or v < best[0]:
            best = (v, row)
    return best


def pair_move(i, j, rows, base, table, keep, maxr, per_node, max_nodes, cur):
    """(least sum below ``cur``, i's row, j's row): ``i``'s row emptied, each option of ``j`` with
    ``i``'s best response to it (``cur``, None, None: none is lower)."""
    rows = [list(r) for r in rows]
    rows[i] = [0] * len(rows[i])
    best = (cur, None, None)
    for vj, rj in _options(j, rows, base, table, keep, maxr, per_node, max_nodes):
        if vj == math.inf:
            continue
        rows[j] = rj
        vi, ri = best_response(i, rows, base, table, keep, maxr, per_node, max_nodes)
        if vj + vi < best[0]:
            best = (vj + vi, ri, rj)
    return best


def _better(new, old) -> bool:
    if old == math.inf:
        return new < old
    return new < old - EPS * abs(old) - 1e-15


def partners(vals, lows, pair_cap) -> list:
    """The jobs a pair move may give GPUs to, in index order: all when there are at most ``pair_cap``
    (0: no cap), else the ``pair_cap`` whose value is furthest above the least they could have."""
    J = len(vals)
    if pair_cap <= 0 or J <= pair_cap:
        return list(range(J))
    return sorted(sorted(range(J), key=lambda j: (-(vals[j] - lows[j]), j))[:pair_cap])


def refine(state, base, table, keep, maxr, per_node, max_nodes, max_sweeps, pair_cap=0):
    """The kernel's local search on lists: returns (rows, sweeps)."""
    rows = [list(r) for r in state]
    J = len(rows)
    vals = [value(j, rows[j], base, table, keep) for j in range(J)]
    lows = [min(keep[j], min(min(x) for x in table[j])) for j in range(J)]
    sweeps, moved = 0, True
    while moved and sweeps < max_sweeps:
        moved, sweeps = False, sweeps + 1
        for j in range(J):
            v, row = best_response(j, rows, base, table, keep, maxr, per_node, max_nodes)
            if _better(v, vals[j]):
                rows[j], vals[j], moved = row, v, True
        best = None  # (gain, i, j, i's row, j's row): the pair lowering the sum most, the first among equals
        for i, j in itertools.product(range(J), partners(vals, lows, pair_cap)):
            if i == j or not any(rows[i]):
                continue
            cur = vals[i] + vals[j]
            v, ri, rj = pair_move(i, j, rows, base, table, keep, maxr, per_node, max_nodes, cur)
            if ri is not None and _better(v, cur) and (best is None or cur - v > best[0]):
                best = (cur - v, i, j, ri, rj)
        if best is not None:
            _, i, j, rows[i], rows[j] = best
            vals[i], vals[j], moved = value(i, rows[i], base, table, keep), value(j, rows[j], base, table, keep), True
    return rows, sweeps


def feasible(rows, maxr, per_node, max_nodes) -> bool:
    """Pollux's constraints: a node's GPUs, one multi-node job a node, a job's GPUs and nodes."""
    N = len(rows[0])
    multi = [0] * N
    for j, r in enumerate(rows):
        on = [k for k in range(N) if r[k]]
        if sum(r) > maxr[j] or len(on) > max_nodes or min(r) < 0:
            return False
        if len(on) > 1:
            for k in on:
                multi[k] += 1
    return all(sum(r[k] for r in rows) <= per_node for k in range(N)) and max(multi) <= 1


def brute_force(base, table, keep, maxr, per_node, max_nodes):
    """(least sum of values, its rows) over every feasible allocation (tiny clusters only)."""
    J, N = len(base), len(base[0])
    per_job = [[list(c) for c in itertools.product(range(per_node + 1), repeat=N) if sum(c) <= maxr[j]]
               for j in range(J)]
    best, arg = math.inf, None
    for rows in itertools.product(*per_job):
        if not feasible(rows, maxr, per_node, max_nodes):
            continue
        v = sum(value(j, rows[j], base, table, keep) for j in range(J))
        if v < best:
            best, arg = v, [list(r) for r in rows]
    return best, arg


def kick(p, rows, base, per_node):
    """``rows`` with job ``p`` on its base row, the jobs in its way emptied (the kernel's rule)."""
    rows = [list(r) for r in rows]
    rows[p] = list(base[p])
    multi_p = sum(1 for x in base[p] if x) > 1
    for k in (k for k in range(len(base[p])) if base[p][k]):
        for i in range(len(rows)):
            if i != p and rows[i][k] and (sum(r[k] for r in rows) > per_node or
                                          (multi_p and sum(1 for x in rows[i] if x) > 1)):
                rows[i] = [0] * len(rows[i])
    return rows


def kick_to_node(p, r, rows, per_node):
    """``rows`` with job ``p`` on ``r`` GPUs of the node with the fewest GPUs of others to empty
    (lowest index among equals), its other jobs emptied, lowest index first, until it fits."""
    rows = [list(x) for x in rows]
    rows[p] = [0] * len(rows[p])
    short = [max(0, r - (per_node - sum(x[k] for x in rows))) for k in range(len(rows[p]))]
    k = short.index(min(short))
    rows[p][k] = r
    for i in range(len(rows)):
        if sum(x[k] for x in rows) <= per_node:
            break
        if i != p and rows[i][k]:
            rows[i] = [0] * len(rows[i])
    return rows


def grow_target(i, table, maxr, per_node):
    """(GPUs, value) of job ``i``'s best count on one node (the fewest among equals)."""
    best = (0, table[i][0][0])
    for r in range(1, min(maxr[i], len(table[i][0]) - 1, per_node) + 1):
        if table[i][1][r] < best[1]:
            best = (r, table[i][1][r])
    return best


def search(state, base, table, keep, maxr, per_node, max_nodes, max_sweeps, kicks, pair_cap=0):
    """The kernel's :func:`refine` and kicks: returns (rows, kicks taken)."""
    rows, _ = refine(state, base, table, keep, maxr, per_node, max_nodes, max_sweeps, pair_cap)
    vals = [value(j, rows[j], base, table, keep) for j in range(len(rows))]
    taken = 0
    for phase in (0, 1):
        done = set()
        for _ in range(kicks):
            if phase == 0:
                gains = {i: (vals[i] - keep[i], 0) for i in range(len(rows)) if i not in done
                         and rows[i] != list(base[i]) and 0 < sum(base[i]) <= maxr[i]}
            else:
                targets = {i: grow_target(i, table, maxr, per_node) for i in range(len(rows)) if i not in done}
                gains = {i: (vals[i] - v, r) for i, (r, v) in targets.items()}
            gains = {i: g for i, g in gains.items() if g[0] > 0}
            if not gains:
                break
            p = max(gains, key=lambda i: (gains[i][0], -i))
            done.add(p)
            start = kick(p, rows, base, per_node) if phase == 0 else kick_to_node(p, gains[p][1], rows, per_node)
            trial, _ = refine(start, base, table, keep, maxr, per_node, max_nodes, max_sweeps, pair_cap)
            tv = [value(j, trial[j], base, table, keep) for j in range(len(rows))]
            if _better(sum(tv), sum(vals)):
                rows, vals, taken = trial, tv, taken + 1
    return rows, taken


def rigid_sizes(opts: list, total: int) -> list:
    """``kernels.pollux_rigid.sizes`` in plain Python: ``opts[i]`` is job ``i``'s options as
    ``(GPUs, value)`` pairs (no GPUs first, then its gang changed and/or kept); returns each job's
    option index. Gains, classes, sums and ties exactly as the kernel (its docstring)."""
    J = len(opts)
    run, gain, gang = [0] * J, [0.0] * J, [0] * J
    for i, o in enumerate(opts):
        bk = -1
        for k in range(1, len(o)):
            if bk < 0 or o[k][1] < o[bk][1]:
                bk = k
        if bk > 0 and o[bk][1] < o[0][1]:
            run[i], gain[i], gang[i] = bk, o[0][1] - o[bk][1], o[bk][0]
    cand = [i for i in range(J) if run[i]]
    if sum(gang[i] for i in cand) <= total:
        return run
    cand.sort(key=lambda i: (gang[i], -gain[i], i))
    classes = {}
    for i in cand:
        classes.setdefault(gang[i], []).append(i)
    sizes = sorted(classes)
    pref = {}
    for g in sizes:
        w = [0.0]
        for i in classes[g]:
            w.append(w[-1] + gain[i])
        pref[g] = w
    ones = classes.get(1, [])
    F = [0.0] * (total + 1)
    picks = []
    cap = 0  # (the GPUs of every gang so far: more capacity adds nothing, its totals and counts are cap's)
    for g in (x for x in sizes if x != 1):
        cap = min(total, cap + g * len(classes[g]))
        new, pk = [0.0] * (total + 1), [0] * (total + 1)
        for rho in range(min(g, cap + 1)):
            _class_step(F, new, pk, pref[g], len(classes[g]), g, rho, (cap - rho) // g + 1)
        new[cap + 1:] = [new[cap]] * (total - cap)
        pk[cap + 1:] = [pk[cap]] * (total - cap)
        F = new
        picks.append((g, pk))
    c_best, v_best = 0, -1.0
    for c in range(total + 1):
        v = F[c] + pref[1][min(len(ones), total - c)] if ones else F[c]
        if v > v_best:
            v_best, c_best = v, c
    out = [0] * J
    for i in ones[:min(len(ones), total - c_best)]:
        out[i] = run[i]
    c = c_best
    for g, pk in reversed(picks):
        nn = pk[c]
        for i in classes[g][:nn]:
            out[i] = run[i]
        c -= g * nn
    return out


def _class_step(F, new, pk, W, cnt, g, rho, L):
    """``kernels.pollux_rigid._class_step``, recursive: capacity ``rho + g*s`` takes the best
    ``F[rho + g*k] + W[s - k]`` over sources ``k`` between its neighbours' (the largest among equals)."""

    def solve(sl, sr, kl, kr):
        if sl > sr:
            return
        mid = (sl + sr) // 2
        best, kb = -math.inf, min(kr, mid)
        for k in range(min(kr, mid), max(kl, mid - cnt) - 1, -1):
            v = F[rho + g * k] + W[mid - k]
            if v > best:
                best, kb = v, k
        new[rho + g * mid], pk[rho + g * mid] = best, mid - kb
        solve(mid + 1, sr, kb, kr)
        solve(sl, mid - 1, kl, kb)

    solve(0, L - 1, 0, L - 1)
