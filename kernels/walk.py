"""The placement walk: turn a priority order into launches and suspensions.

One kernel serves Blox-compat and native modes; three flags select the behaviour:

* ``preempt`` — a waiting job that does not fit suspends running jobs from the tail of the order
  (lowest priority first), one at a time, re-trying after each, and stops at the first success.
  Only jobs after it in the order are victims, so jobs launched earlier in this walk never are.
* ``restore`` — native mode: victims whose GPUs the job did not end up using are put back (they
  keep running, no preemption is counted), and if the job still does not fit every victim is put
  back. Blox leaves them suspended (``restore=False``).
* ``stop_on_block`` — Blox's head-of-line blocking: the walk ends at the first job that does not
  fit. Native mode skips it and goes on (backfilling).

Cost: O(len(order)) plus the placement calls; each victim search moves a tail pointer, so the
victim scans of one walk are O(len(order)) in total when nothing is restored.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit
from .enums import FREE, RUNNING, WAITING
from .placement import assign, fit, release, take


@jit
def walk(
    order,
    n_order,
    status,
    gpus,
    alloc_off,
    alloc,
    owner,
    gpu_node,
    node_base,
    node_gpus,
    node_free,
    node_mask,
    node_up,
    node_bits,
    kind,
    preempt,
    restore,
    stop_on_block,
    launched_out,
    suspended_out,
    victims,
    victims_pos,
    run_suffix,
    tmp,
):
    """Walk ``order[:n_order]`` (job indices, highest priority first); returns
    ``(n_launched, n_suspended)`` with the jobs in ``launched_out`` / ``suspended_out``.

    ``status``, ``alloc`` and the cluster arrays are updated in place; the caller settles time
    (progress, costs, counters). A job can appear in both outputs (suspended, then re-placed
    later in the same walk)."""
    total_free = 0
    for nd in range(node_free.shape[0]):
        if node_up[nd]:
            total_free += node_free[nd]
    run_suffix[n_order] = 0
    for p in range(n_order - 1, -1, -1):
        j = order[p]
        run_suffix[p] = run_suffix[p + 1] + (gpus[j] if status[j] == RUNNING else 0)
    tail = n_order - 1
    nl = 0
    ns = 0
    for idx in range(n_order):
        j = order[idx]
        if status[j] != WAITING:
            continue
        if total_free == 0 and (not preempt or tail <= idx):
            break  # nothing free and nothing left to preempt: no later job can start either
        n = gpus[j]
        got = 0
        if total_free >= n:
            got = fit(kind, n, node_free, node_mask, node_base, node_gpus, node_up, node_bits, tmp)
        nv = 0
        # With restore, a job that cannot fit even if every lower-priority job stopped is not
        # worth a search; Blox (no restore) searches anyway and leaves the victims suspended.
        if got == 0 and preempt and (not restore or n <= total_free + run_suffix[idx + 1]):
            p = tail
            while p > idx:
                v = order[p]
                if status[v] == RUNNING:
                    o = alloc_off[v]
                    release(alloc[o:o + gpus[v]], gpus[v], owner, gpu_node, node_base, node_free, node_mask, node_bits)
                    status[v] = WAITING
                    total_free += gpus[v]
                    victims[nv] = v
                    victims_pos[nv] = p
                    nv += 1
                    if total_free >= n:
                        got = fit(kind, n, node_free, node_mask, node_base, node_gpus, node_up, node_bits, tmp)
                    if got:
                        p -= 1
                        break
                p -= 1
            tail = p
        if got:
            assign(tmp, n, j, alloc, alloc_off, owner, gpu_node, node_base, node_free, node_mask, node_bits)
            status[j] = RUNNING
            total_free -= n
            launched_out[nl] = j
            nl += 1
        for q in range(nv):
            v = victims[q]
            o = alloc_off[v]
            put_back = False
            if restore:
                put_back = True
                for k in range(gpus[v]):
                    if owner[alloc[o + k]] != FREE:
                        put_back = False
                        break
            if put_back:
                take(alloc[o:o + gpus[v]], gpus[v], v, owner, gpu_node, node_base, node_free, node_mask, node_bits)
                status[v] = RUNNING
                total_free -= gpus[v]
                if victims_pos[q] > tail:
                    tail = victims_pos[q]
            else:
                suspended_out[ns] = v
                ns += 1
        if not got and stop_on_block:
            break
    return nl, ns


@jit
def stable_order(keys, prio, active, n_active, order):
    """Write into ``order[:n_active]`` the jobs of ``active[:n_active]`` sorted by
    ``(prio, key)``, ties kept in ``active`` order (a stable sort, like Python's ``sorted``)."""
    idx = np.argsort(keys[:n_active], kind="mergesort")
    # prio takes few values (Blox: 1 or 999): a stable counting pass over the sorted keys
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
