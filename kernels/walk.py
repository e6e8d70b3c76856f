"""The placement walk of the native engine: turn a priority order into launches and suspensions.

Two flags select the behaviour:

* ``preempt`` — a waiting job that does not fit suspends running jobs from the tail of the order
  (lowest priority first), one at a time, re-trying after each, and stops at the first success.
  Only jobs after it in the order are victims, so jobs launched earlier in this walk never are.
  Victims whose GPUs the job did not end up using are put back (they keep running, no
  preemption is counted), and if the job still does not fit every victim is put back.
* ``stop_on_block`` — head-of-line blocking: the walk ends at the first job that does not fit.
  Without it the walk skips that job and goes on (backfilling).

A waiting job ``j`` asks for ``run.want[j]`` GPUs of type ``run.want_type[j]`` (``ANY_TYPE``: any
type it can run on, tried in the cluster's type order; ``NO_RUN``: it is skipped). A gang always
runs on one GPU type, and only on a type where its rate is positive (``rates.can_run``).

Cost: O(len(order)) plus the placement calls; each victim search moves a tail pointer, so the
victim scans of one walk are O(len(order)) in total when nothing is restored.
"""

from __future__ import annotations

import numpy as np

from ._calls import helper
from .enums import FREE, NO_RUN, RUNNING, WAITING
from .placement import assign, fit, release, take
from .rates import can_run


@helper(nrt=False, inline=True)
def place(j, n, want_type, jobs, rates, nodes, kind, n_types, tmp):
    """Find ``n`` GPUs for job ``j`` (ids into ``tmp[:n]``); returns the GPU type used, or -1."""
    if want_type == NO_RUN:
        return -1
    if n_types == 1:
        if want_type > 0 or not can_run(jobs, rates, j, 0, n):
            return -1
        return 0 if fit(kind, n, 0, nodes, tmp) else -1
    if want_type >= 0:
        if can_run(jobs, rates, j, want_type, n) and fit(kind, n, 1 + want_type, nodes, tmp):
            return want_type
        return -1
    for t in range(n_types):
        if can_run(jobs, rates, j, t, n) and fit(kind, n, 1 + t, nodes, tmp):
            return t
    return -1


@helper(nrt=False)
def walk(order, n_order, jobs, run, rates, nodes, kind, n_types, preempt, stop_on_block, launched_out,
         suspended_out, victims, victims_pos, run_suffix, tmp):
    """Walk ``order[:n_order]`` (job indices, highest priority first); returns
    ``(n_launched, n_suspended)`` with the jobs in ``launched_out`` / ``suspended_out``.

    ``run.status``, ``run.held``, ``run.held_type``, ``run.alloc`` and the cluster are updated in
    place; the caller settles time (progress, costs, counters). A launched job holds
    ``run.held[j]`` GPUs of type ``run.held_type[j]``."""
    status = run.status
    held = run.held
    total_free = 0
    for nd in range(nodes.free.shape[0]):
        if nodes.up[nd]:
            total_free += nodes.free[nd]
    run_suffix[n_order] = 0
    for p in range(n_order - 1, -1, -1):
        j = order[p]
        run_suffix[p] = run_suffix[p + 1] + (held[j] if status[j] == RUNNING else 0)
    tail = n_order - 1
    nl = 0
    ns = 0
    for idx in range(n_order):
        j = order[idx]
        if status[j] != WAITING or run.want_type[j] == NO_RUN:
            continue
        if total_free == 0 and (not preempt or tail <= idx):
            break  # nothing free and nothing left to preempt: no later job can start either
        n = run.want[j]
        wt = run.want_type[j]
        got = -1
        if total_free >= n:
            got = place(j, n, wt, jobs, rates, nodes, kind, n_types, tmp)
        nv = 0
        # a job that cannot fit even if every lower-priority job stopped is not worth a search
        if got < 0 and preempt and n <= total_free + run_suffix[idx + 1]:
            p = tail
            while p > idx:
                v = order[p]
                if status[v] == RUNNING:
                    o = jobs.alloc_off[v]
                    release(run.alloc, o, held[v], nodes)
                    status[v] = WAITING
                    total_free += held[v]
                    victims[nv] = v
                    victims_pos[nv] = p
                    nv += 1
                    if total_free >= n:
                        got = place(j, n, wt, jobs, rates, nodes, kind, n_types, tmp)
                    if got >= 0:
                        p -= 1
                        break
                p -= 1
            tail = p
        if got >= 0:
            assign(tmp, n, j, run.alloc, jobs.alloc_off[j], nodes)
            status[j] = RUNNING
            held[j] = n
            run.held_type[j] = got
            total_free -= n
            launched_out[nl] = j
            nl += 1
        for q in range(nv):
            v = victims[q]
            o = jobs.alloc_off[v]
            put_back = True
            for k in range(held[v]):
                if nodes.owner[run.alloc[o + k]] != FREE:
                    put_back = False
                    break
            if put_back:
                take(run.alloc, o, held[v], v, nodes)
                status[v] = RUNNING
                total_free -= held[v]
                if victims_pos[q] > tail:
                    tail = victims_pos[q]
            else:
                suspended_out[ns] = v
                ns += 1
        if got < 0 and stop_on_block:
            break
    return nl, ns


@helper
def stable_order(keys, prio, active, n_active, order):
    """Write into ``order[:n_active]`` the jobs of ``active[:n_active]`` sorted by
    ``(prio[job], keys[position])``, ties kept in ``active`` order (a stable sort)."""
    idx = np.argsort(keys[:n_active], kind="mergesort")
    # prio takes few values: a stable counting pass over the sorted keys
    lo = 1 << 62
    hi = -(1 << 62)
    for a in range(n_active):
        p = prio[active[a]]
        if p < lo:
            lo = p
        if p > hi:
            hi = p
    if n_active == 0 or lo == hi:
        for r in range(n_active):
            order[r] = active[idx[r]]
        return
    w = 0
    level = lo
    while True:
        nxt = hi + 1
        for r in range(n_active):
            j = active[idx[r]]
            p = prio[j]
            if p == level:
                order[w] = j
                w += 1
            elif p > level and p < nxt:
                nxt = p
        if nxt > hi:
            break
        level = nxt


@helper(nrt=False, inline=True)
def _first(pa, ka, a, pb, kb, b):
    """(prio, key, job index) order."""
    if pa != pb:
        return pa < pb
    return ka < kb or (ka == kb and a < b)


@helper
def resort(keys, prio, active, n_active, order, prev, n_prev, pos, fresh):
    """:func:`stable_order` for ``active`` in job-index order (ties by job), starting from ``prev[:n_prev]``,
    the order of the last step: the jobs still active keep their relative order, the others are
    sorted and merged in, and one insertion pass makes the order exact (the same order as
    :func:`stable_order`'s). When keys move little between steps that is O(A) instead of
    O(A log A); after more than 8 moves per job, or more than 32 new jobs, it sorts.
    ``pos`` (by job) and ``fresh`` are scratch. Writes ``prev[:n_active]`` = the new order too;
    returns ``n_active``."""
    for a in range(n_active):
        pos[active[a]] = a
    nk = 0
    for b in range(n_prev):  # the jobs of the last order still active, marked (-1 - position)
        j = prev[b]
        a = pos[j]
        if 0 <= a < n_active and active[a] == j:
            order[nk] = j
            pos[j] = -1 - a
            nk += 1
    nf = 0
    if nk > 0:
        for a in range(n_active):
            j = active[a]
            if pos[j] >= 0:
                fresh[nf] = j
                nf += 1
    if nk == 0 or nf > 32:
        stable_order(keys, prio, active, n_active, order)
    else:
        for x in range(1, nf):  # insertion sort of the few new jobs
            v = fresh[x]
            kv = keys[pos[v]]
            y = x - 1
            while y >= 0 and _first(prio[v], kv, v, prio[fresh[y]], keys[pos[fresh[y]]], fresh[y]):
                fresh[y + 1] = fresh[y]
                y -= 1
            fresh[y + 1] = v
        # merge the new jobs in from the back (order[:nk] holds the kept ones)
        a = nk - 1
        b = nf - 1
        for w in range(n_active - 1, -1, -1):
            if b < 0:
                break
            vb = fresh[b]
            if a >= 0:
                va = order[a]
                if _first(prio[vb], keys[pos[vb]], vb, prio[va], keys[-1 - pos[va]], va):
                    order[w] = va
                    a -= 1
                    continue
            order[w] = vb
            b -= 1
        for a in range(n_active):  # keys by job position from here on
            j = active[a]
            pos[j] = a
        moves = 0
        budget = 8 * n_active + 64
        for x in range(1, n_active):
            v = order[x]
            kv = keys[pos[v]]
            pv = prio[v]
            y = x - 1
            while y >= 0 and _first(pv, kv, v, prio[order[y]], keys[pos[order[y]]], order[y]):
                order[y + 1] = order[y]
                y -= 1
                moves += 1
            order[y + 1] = v
            if moves > budget:
                stable_order(keys, prio, active, n_active, order)
                break
    for a in range(n_active):
        prev[a] = order[a]
    return n_active


@helper
def sort_jobs(ids, n, rank, key, out):
    """``ids[:n]`` sorted by ``(rank[j], key[j], j)`` (both arrays indexed by job) into ``out[:n]``."""
    s = np.sort(ids[:n])
    k = np.empty(n)
    for a in range(n):
        k[a] = key[s[a]]
    stable_order(k, rank, s, n, out)
