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
from .placement import assign, fit_by, release, take
from .rates import can_run


@helper(nrt=False, inline=True)
def place(j, n, want_type, jobs, rates, nodes, kind, n_types, tmp):
    """Find ``n`` GPUs for job ``j`` (ids into ``tmp[:n]``); returns the GPU type used, or -1."""
    if want_type == NO_RUN:
        return -1
    if n_types == 1:
        if want_type > 0 or not can_run(jobs, rates, j, 0, n):
            return -1
        return 0 if fit_by(kind, n, 0, nodes, tmp) else -1
    if want_type >= 0:
        if can_run(jobs, rates, j, want_type, n) and fit_by(kind, n, 1 + want_type, nodes, tmp):
            return want_type
        return -1
    for t in range(n_types):
        if can_run(jobs, rates, j, t, n) and fit_by(kind, n, 1 + t, nodes, tmp):
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
def resort(keys, prio, active, n_active, order, prev, n_prev, pos, fresh, last_key, last_prio):
    """:func:`stable_order` for ``active`` in job-index order (ties by job), starting from ``prev[:n_prev]``,
    the order of the last step, with ``last_key``/``last_prio`` its jobs' keys and priorities
    then (by position in it). The jobs still active whose key and priority did not change keep
    their relative order (they are still sorted among themselves); the others (new, or re-keyed:
    with LAS, the running jobs) are sorted and merged in: O(A + m log m) for m of them instead
    of O(A log A). The kept jobs are checked to be in order as they are read (if not, a ``prev``
    from elsewhere, it sorts from scratch), so the order is always :func:`stable_order`'s.
    ``pos`` (by job) and ``fresh`` are scratch. Writes ``prev[:n_active]`` = the new order,
    ``last_key``/``last_prio`` its keys; returns ``n_active``."""
    for a in range(n_active):
        pos[active[a]] = a
    nk = 0
    kept_sorted = True
    kp, kk, kj = 0, 0.0, 0  # (the last kept job's priority, key, index)
    for b in range(n_prev):  # still active, same key and priority: kept, marked (-1 - position)
        j = prev[b]
        a = pos[j]
        if 0 <= a < n_active and active[a] == j and keys[a] == last_key[b] and prio[j] == last_prio[b]:
            if nk > 0 and not _first(kp, kk, kj, prio[j], keys[a], j):
                kept_sorted = False
            kp, kk, kj = prio[j], keys[a], j
            order[nk] = j
            pos[j] = -1 - a
            nk += 1
    nf = 0
    for a in range(n_active):
        j = active[a]
        if pos[j] >= 0:
            fresh[nf] = j
            nf += 1
        else:
            pos[j] = a
    srt = fresh
    if nf > 32:  # (last_key and prev are free from here on: scratch for the sort)
        for x in range(nf):
            last_key[x] = keys[pos[fresh[x]]]
        stable_order(last_key, prio, fresh, nf, prev)
        srt = prev
    else:
        for x in range(1, nf):  # insertion sort of the few
            v = fresh[x]
            kv = keys[pos[v]]
            y = x - 1
            while y >= 0 and _first(prio[v], kv, v, prio[fresh[y]], keys[pos[fresh[y]]], fresh[y]):
                fresh[y + 1] = fresh[y]
                y -= 1
            fresh[y + 1] = v
    a = nk - 1  # merge them in from the back (order[:nk] holds the kept ones)
    b = nf - 1
    for w in range(n_active - 1, -1, -1):
        if b < 0:
            break
        vb = srt[b]
        if a >= 0:
            va = order[a]
            if _first(prio[vb], keys[pos[vb]], vb, prio[va], keys[pos[va]], va):
                order[w] = va
                a -= 1
                continue
        order[w] = vb
        b -= 1
    if not kept_sorted:  # (a merge of two sorted sequences is sorted)
        stable_order(keys, prio, active, n_active, order)
    for x in range(n_active):
        j = order[x]
        prev[x] = j
        last_key[x] = keys[pos[j]]
        last_prio[x] = prio[j]
    return n_active


@helper
def sort_jobs(ids, n, rank, key, out):
    """``ids[:n]`` sorted by ``(rank[j], key[j], j)`` (both arrays indexed by job) into ``out[:n]``."""
    s = np.sort(ids[:n])
    k = np.empty(n)
    for a in range(n):
        k[a] = key[s[a]]
    stable_order(k, rank, s, n, out)
