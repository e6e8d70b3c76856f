"""The native replay kernel: next-event (``events``) or fixed rounds (``rounds``).

Semantics (``docs/semantics.md`` has the full statement, ``fastblox.reference.native`` the
plain-Python twin):

* A running job progresses at ``rate`` work-seconds per second after a restart cost of
  ``restart_s`` per (re)launch; it finishes at its exact completion time.
* Scheduling steps happen at arrivals and completions (``events``), or at round boundaries
  ``k·R`` (``rounds``: arrivals wait for the next boundary, GPUs freed mid-round stay idle until
  it; rounds in which provably nothing can change are skipped).
* A step: completions, arrivals, admission, then the active jobs are ordered by the policy key
  (ties in arrival order) and walked (``kernels.walk``) with the chosen placement, preemption
  with victims put back when unused, and backfilling.

All state lives in arrays owned by the caller, so a run can pause to ask Python for priorities
(user policies written in numpy: ``advance`` returns ``NEED_KEYS``) and resume, and a state can be
copied to simulate ahead.

Cost per step: O(A log A) for ordering A active jobs, O(A) for the walk and the compaction of the
active list, O(log H) per completion (a binary heap of end times, lazy deletion).
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import jit
from .enums import (
    DONE,
    OVERFLOW,
    POL_FIFO,
    POL_LAS,
    POL_LAS_GPU,
    POL_SJF,
    POL_SRTF,
    RUNNING,
    TM_EVENTS,
    WAITING,
)
from .placement import assign, fit, release
from .walk import stable_order, walk

INF = np.inf

# codes returned by advance()
FINISHED = 0
NEED_KEYS = 1
DEADLOCK = 2

# slots of the int scalar state ``si``
I_N_ACTIVE = 0
I_NEXT_ARR = 1
I_OV_HEAD = 2
I_TRACKED_LEFT = 3
I_HEAP_N = 4
I_N_STEPS = 5
I_N_RUNNING = 6
I_DEMAND = 7
I_STARTED = 8
I_N_PREEMPT = 9
I_N_SERIES = 10
I_PENDING = 11  # a step is under way, waiting for keys from Python
I_NW = 12  # jobs in the waiting queue
I_SIZE = 16

# slots of the float scalar state ``sf``
F_T = 0
F_BUSY_GPU_S = 1  # GPU-seconds held by jobs (including restart cost)
F_SIZE = 8

# config ints ``ci``
C_POLICY = 0
C_PLACEMENT = 1
C_PREEMPT = 2
C_TIME_MODEL = 3
C_DYNAMIC = 4  # keys change while jobs run (LAS, SRTF, user policies): rounds cannot be skipped
C_SERIES = 5  # record one row per step
C_CUSTOM = 6  # keys come from Python
C_SIZE = 8

# config floats ``cf``
CF_ROUND_S = 0
CF_RESTART_S = 1
CF_THETA = 2  # <= 0: accept all
CF_SIZE = 4


@jit
def heap_push(ht, hj, hv, n, t, j, v):
    """Push (t, j, v) onto the binary min-heap ``ht/hj/hv[:n]`` ordered by (t, j); returns new size."""
    i = n
    ht[i] = t
    hj[i] = j
    hv[i] = v
    while i > 0:
        p = (i - 1) >> 1
        if ht[p] < ht[i] or (ht[p] == ht[i] and hj[p] <= hj[i]):
            break
        ht[p], ht[i] = ht[i], ht[p]
        hj[p], hj[i] = hj[i], hj[p]
        hv[p], hv[i] = hv[i], hv[p]
        i = p
    return n + 1


@jit
def heap_pop(ht, hj, hv, n):
    """Remove the minimum of the heap of size ``n``; returns the new size."""
    n -= 1
    ht[0] = ht[n]
    hj[0] = hj[n]
    hv[0] = hv[n]
    i = 0
    while True:
        lft = 2 * i + 1
        if lft >= n:
            break
        c = lft
        r = lft + 1
        if r < n and (ht[r] < ht[lft] or (ht[r] == ht[lft] and hj[r] < hj[lft])):
            c = r
        if ht[i] < ht[c] or (ht[i] == ht[c] and hj[i] <= hj[c]):
            break
        ht[c], ht[i] = ht[i], ht[c]
        hj[c], hj[i] = hj[i], hj[c]
        hv[c], hv[i] = hv[i], hv[c]
        i = c
    return n


@jit
def heap_compact(ht, hj, hv, n, status, version):
    """Drop stale entries (jobs no longer running that version) and rebuild; returns the size.
    Live entries are at most one per running job, so a heap of capacity N + 1 always has room."""
    w = 0
    for i in range(n):
        j = hj[i]
        if status[j] == RUNNING and version[j] == hv[i]:
            ht[w] = ht[i]
            hj[w] = hj[i]
            hv[w] = hv[i]
            w += 1
    m = 0
    for i in range(w):
        m = heap_push(ht, hj, hv, m, ht[i], hj[i], hv[i])
    return m


@jit
def _key(policy, j, t, submit, gpus, work, work_left, attained, attained_gpu, launch_t, status, rate, restart_s):
    if policy == POL_FIFO:
        return submit[j]
    run = status[j] == RUNNING
    el = t - launch_t[j] if run else 0.0
    if policy == POL_LAS:
        return attained[j] + el
    if policy == POL_LAS_GPU:
        return attained_gpu[j] + el * gpus[j]
    if policy == POL_SRTF:
        return work_left[j] - (max(0.0, el - restart_s) * rate[j] if run else 0.0)
    if policy == POL_SJF:
        return work[j]
    return 0.0


@jit
def rq_add(rq, rpos, nr, j):
    rq[nr] = j
    rpos[j] = nr
    return nr + 1


@jit
def rq_remove(rq, rpos, nr, j):
    """Remove ``j`` from the unordered running list in O(1) (the last entry takes its place)."""
    p = rpos[j]
    last = rq[nr - 1]
    rq[p] = last
    rpos[last] = p
    return nr - 1


@jit
def _wait_key(policy, j, submit, work, work_left, attained, attained_gpu):
    """Key of a waiting job: it does not move while the job waits (built-in policies)."""
    if policy == POL_FIFO:
        return submit[j]
    if policy == POL_LAS:
        return attained[j]
    if policy == POL_LAS_GPU:
        return attained_gpu[j]
    if policy == POL_SRTF:
        return work_left[j]
    if policy == POL_SJF:
        return work[j]
    return 0.0


@jit
def _before(ka, a, kb, b):
    """(key, job index) order: the policy key, ties in arrival order."""
    return ka < kb or (ka == kb and a < b)


@jit
def wq_insert(wq, nw, wkey, j):
    """Insert job ``j`` into the waiting queue ``wq[:nw]`` sorted by (wkey, index); O(log n + shift)."""
    lo = 0
    hi = nw
    kj = wkey[j]
    while lo < hi:
        mid = (lo + hi) >> 1
        m = wq[mid]
        if _before(wkey[m], m, kj, j):
            lo = mid + 1
        else:
            hi = mid
    for p in range(nw, lo, -1):
        wq[p] = wq[p - 1]
    wq[lo] = j
    return nw + 1


@jit
def _sorted_by_key(idx, n, key):
    """``idx[:n]`` reordered by (key[j], j)."""
    ids = np.sort(idx[:n])
    k = np.empty(n)
    for a in range(n):
        k[a] = key[ids[a]]
    perm = np.argsort(k, kind="mergesort")
    return ids[perm]


@jit
def advance(
    submit, gpus, work, tracked, alloc_off,  # jobs (read-only)
    status, work_left, attained, attained_gpu, launch_t, first_start, finish, n_preempt, rate, version, alloc,
    node_gpus, node_base, gpu_node, node_free, node_mask, node_up, node_bits, owner,  # cluster
    wq, wkey, rq, rpos,  # waiting queue (sorted by key) and running list
    active, order, keys, prio, launched, suspended, victims, victims_pos, run_suffix, tmp,  # scratch
    heap_t, heap_j, heap_v,
    series,
    si, sf, ci, cf,
):
    """Run until every tracked job has finished (``FINISHED``), a user policy must supply keys
    for ``active[:si[I_N_ACTIVE]]`` into ``keys`` (``NEED_KEYS``; call again to resume), or no
    progress is possible (``DEADLOCK``). Returns ``(code, series)``: ``series`` may be a new, larger
    array (rows ``[t, preemptions, free GPUs, queued, running, GPU demand]``).

    Waiting jobs sit in ``wq`` sorted by their key (a waiting job's key does not move), running
    jobs in the unordered ``rq``. A step walks ``wq`` in order and places what fits; only when a
    waiting job that some running job ranks below fails to fit is the merged order of the rest
    built and handed to the preempting walk."""
    n_jobs = submit.shape[0]
    policy = ci[C_POLICY]
    placement = ci[C_PLACEMENT]
    preempt = ci[C_PREEMPT] != 0
    events = ci[C_TIME_MODEL] == TM_EVENTS
    dynamic = ci[C_DYNAMIC] != 0
    custom = ci[C_CUSTOM] != 0
    round_s = cf[CF_ROUND_S]
    restart_s = cf[CF_RESTART_S]
    theta = cf[CF_THETA]
    total_gpus = 0
    free = 0
    for nd in range(node_gpus.shape[0]):
        if node_up[nd]:
            total_gpus += node_gpus[nd]
            free += node_free[nd]

    while True:
        t = sf[F_T]
        if si[I_PENDING] == 0:
            # ---- pick the time of the next step
            if si[I_STARTED] == 0:
                si[I_STARTED] = 1
                if events:
                    t = submit[0] if n_jobs > 0 else 0.0
                else:
                    t = 0.0
            else:
                # jobs held back by admission only get in after a completion: no event of their own
                t_arr = submit[si[I_NEXT_ARR]] if si[I_NEXT_ARR] < n_jobs else INF
                # drop stale heap tops (suspended or finished jobs)
                while si[I_HEAP_N] > 0:
                    j0 = heap_j[0]
                    if status[j0] == RUNNING and version[j0] == heap_v[0]:
                        break
                    si[I_HEAP_N] = heap_pop(heap_t, heap_j, heap_v, si[I_HEAP_N])
                t_end = heap_t[0] if si[I_HEAP_N] > 0 else INF
                if events:
                    t_new = min(t_arr, t_end)
                else:
                    if dynamic and si[I_NW] > 0:
                        t_new = t + round_s
                    else:
                        t_ev = min(t_arr, t_end)
                        if t_ev == INF:
                            t_new = INF
                        else:
                            k = math.ceil(t_ev / round_s)
                            t_new = max(k * round_s, t + round_s)
                if t_new == INF:
                    sf[F_T] = t
                    return DEADLOCK, series
                t = t_new
            sf[F_T] = t
            # ---- completions up to t (exact finish times)
            while si[I_HEAP_N] > 0 and heap_t[0] <= t:
                j = heap_j[0]
                te = heap_t[0]
                valid = status[j] == RUNNING and version[j] == heap_v[0]
                si[I_HEAP_N] = heap_pop(heap_t, heap_j, heap_v, si[I_HEAP_N])
                if not valid:
                    continue
                el = te - launch_t[j]
                attained[j] += el
                attained_gpu[j] += el * gpus[j]
                sf[F_BUSY_GPU_S] += el * gpus[j]
                work_left[j] = 0.0
                finish[j] = te
                status[j] = DONE
                o = alloc_off[j]
                release(alloc[o:o + gpus[j]], gpus[j], owner, gpu_node, node_base, node_free, node_mask, node_bits)
                free += gpus[j]
                si[I_DEMAND] -= gpus[j]
                si[I_N_RUNNING] = rq_remove(rq, rpos, si[I_N_RUNNING], j)
                if tracked[j]:
                    si[I_TRACKED_LEFT] -= 1
            if si[I_TRACKED_LEFT] == 0:
                return FINISHED, series
            # ---- arrivals and admission
            while si[I_NEXT_ARR] < n_jobs and submit[si[I_NEXT_ARR]] <= t:
                status[si[I_NEXT_ARR]] = OVERFLOW
                si[I_NEXT_ARR] += 1
            if theta <= 0.0:
                admit_to = si[I_NEXT_ARR]
            else:
                added = 0
                admit_to = si[I_OV_HEAD]
                while si[I_DEMAND] + added <= theta * total_gpus and admit_to < si[I_NEXT_ARR]:
                    added += gpus[admit_to]
                    admit_to += 1
            for j in range(si[I_OV_HEAD], admit_to):
                status[j] = WAITING
                wkey[j] = _wait_key(policy, j, submit, work, work_left, attained, attained_gpu)
                si[I_NW] = wq_insert(wq, si[I_NW], wkey, j)
                si[I_DEMAND] += gpus[j]
            si[I_OV_HEAD] = admit_to
            if si[I_NW] == 0 or (free == 0 and not preempt):
                continue  # nothing can start: no step
            if custom:
                # the user policy sees every active job, in arrival order
                na = 0
                for a in range(si[I_NW]):
                    active[na] = wq[a]
                    na += 1
                for a in range(si[I_N_RUNNING]):
                    active[na] = rq[a]
                    na += 1
                active[:na] = np.sort(active[:na])
                si[I_N_ACTIVE] = na
                si[I_PENDING] = 1
                return NEED_KEYS, series
        si[I_PENDING] = 0
        nw = si[I_NW]
        nr = si[I_N_RUNNING]
        nl = 0
        ns = 0
        slow_from = -1
        if custom:
            na = si[I_N_ACTIVE]
            stable_order(keys, prio, active, na, order)
            nl, ns = walk(
                order, na, status, gpus, alloc_off, alloc, owner, gpu_node, node_base, node_gpus,
                node_free, node_mask, node_up, node_bits, placement, preempt, True, False,
                launched, suspended, victims, victims_pos, run_suffix, tmp,
            )
        else:
            # ---- the walk over the waiting queue; the last running job in the order bounds the
            # jobs that could preempt
            # (computed only when a job fails to fit or nothing is free: at light load, never)
            have_r = preempt and nr > 0
            kmax = 0.0
            jmax = -1
            i = 0
            while i < nw:
                w = wq[i]
                g = gpus[w]
                got = 0
                if g <= free:
                    got = fit(placement, g, node_free, node_mask, node_base, node_gpus, node_up, node_bits, tmp)
                if got:
                    assign(tmp, g, w, alloc, alloc_off, owner, gpu_node, node_base, node_free, node_mask, node_bits)
                    status[w] = RUNNING
                    free -= g
                    launched[nl] = w
                    nl += 1
                    if free > 0 or have_r:
                        i += 1
                        continue
                    break  # nothing free, nothing to preempt
                if have_r and jmax < 0:
                    # the last running job in the order (jobs launched in this step rank before
                    # every job still waiting, so they never bound it)
                    for a in range(nr):
                        r = rq[a]
                        if policy == POL_LAS:
                            kr = attained[r] + (t - launch_t[r])
                        else:
                            kr = _key(policy, r, t, submit, gpus, work, work_left, attained, attained_gpu,
                                      launch_t, status, rate, restart_s)
                        keys[r] = kr
                        if jmax < 0 or _before(kmax, jmax, kr, r):
                            kmax = kr
                            jmax = r
                if have_r and _before(wkey[w], w, kmax, jmax):
                    slow_from = i
                    break
                if free == 0:
                    break  # nothing free, and no running job ranks below the rest
                i += 1
            if slow_from >= 0:
                # the merged order from the blocked job on: the rest of the queue and the running
                # jobs ranked after it, sorted by their keys now
                w0 = wq[slow_from]
                k0 = wkey[w0]
                nra = 0
                for a in range(nr):
                    r = rq[a]
                    if status[r] == RUNNING and _before(k0, w0, keys[r], r):
                        victims[nra] = r
                        nra += 1
                rs = _sorted_by_key(victims, nra, keys)
                no = 0
                a = slow_from
                b = 0
                while a < nw or b < nra:
                    if b >= nra or (a < nw and _before(wkey[wq[a]], wq[a], keys[rs[b]], rs[b])):
                        order[no] = wq[a]
                        a += 1
                    else:
                        order[no] = rs[b]
                        b += 1
                    no += 1
                nl2, ns = walk(
                    order, no, status, gpus, alloc_off, alloc, owner, gpu_node, node_base, node_gpus,
                    node_free, node_mask, node_up, node_bits, placement, True, True, False,
                    launched[nl:], suspended, victims, victims_pos, run_suffix, tmp,
                )
                nl += nl2
        # ---- settle: suspensions first (a victim may be re-placed in the same step), then launches
        for q in range(ns):
            v = suspended[q]
            el = t - launch_t[v]
            work_left[v] -= max(0.0, el - restart_s) * rate[v]
            attained[v] += el
            attained_gpu[v] += el * gpus[v]
            sf[F_BUSY_GPU_S] += el * gpus[v]
            n_preempt[v] += 1
            version[v] += 1
            nr = rq_remove(rq, rpos, nr, v)
        # the queue loses the jobs that started and gains the victims left waiting
        if nl > 0:
            wn = 0
            for a in range(nw):
                j = wq[a]
                if status[j] == WAITING:
                    wq[wn] = j
                    wn += 1
            nw = wn
        for q in range(ns):
            v = suspended[q]
            if status[v] == WAITING:
                wkey[v] = _wait_key(policy, v, submit, work, work_left, attained, attained_gpu)
                nw = wq_insert(wq, nw, wkey, v)
        for q in range(nl):
            j = launched[q]
            launch_t[j] = t
            if first_start[j] < 0.0:
                first_start[j] = t
            version[j] += 1
            rate[j] = 1.0
            nr = rq_add(rq, rpos, nr, j)
            if si[I_HEAP_N] >= heap_t.shape[0]:
                si[I_HEAP_N] = heap_compact(heap_t, heap_j, heap_v, si[I_HEAP_N], status, version)
            si[I_HEAP_N] = heap_push(heap_t, heap_j, heap_v, si[I_HEAP_N], t + restart_s + work_left[j] / rate[j], j, version[j])
        si[I_NW] = nw
        si[I_N_RUNNING] = nr
        if custom or ns > 0 or slow_from >= 0:
            free = 0
            for nd in range(node_free.shape[0]):
                if node_up[nd]:
                    free += node_free[nd]
        si[I_N_PREEMPT] += ns
        si[I_N_STEPS] += 1
        if nr == 0 and nw > 0 and si[I_NEXT_ARR] == n_jobs and si[I_OV_HEAD] == n_jobs:
            # the cluster is empty and nothing is left to arrive, yet no waiting job fits it: no
            # order and no amount of waiting will change that
            return DEADLOCK, series
        if ci[C_SERIES] != 0:
            r = si[I_N_SERIES]
            if r >= series.shape[0]:
                bigger = np.empty((2 * series.shape[0] + 16, series.shape[1]), dtype=series.dtype)
                bigger[: series.shape[0]] = series
                series = bigger
            series[r, 0] = t
            series[r, 1] = ns
            series[r, 2] = free
            series[r, 3] = nw
            series[r, 4] = nr
            series[r, 5] = si[I_DEMAND]
            si[I_N_SERIES] = r + 1
