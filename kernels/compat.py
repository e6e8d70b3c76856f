"""Blox's simulator as one numba kernel (``--blox-compat``); see ``shared/docs/blox-semantics.md``.

Each round ``t = k·R``: credit the jobs that were running (``R / iteration_time`` iterations,
``R`` s of attained service), finish those that reached their iterations (finish = ``t``), stop
when every tracked job is done, take arrivals, admit (all, or load-based ``θ``), sort all active
jobs stably by ``(job_priority, key)``, walk them with Blox's placement (exact-sum scattered fit,
tail preemption, victims left suspended, head-of-line blocking), then run the starvation guard.

Per round the cost is O(A log A) for the sort of the A active jobs plus the walk.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit
from .enums import (
    DONE,
    NO_TIME,
    NOT_ARRIVED,
    PL_BLOX,
    POL_FIFO,
    POL_LAS,
    POL_LAS_GPU,
    POL_SJF,
    POL_SRTF,
    RUNNING,
    WAITING,
)
from .placement import release
from .walk import walk

STARVATION_LIMIT_S = 3600.0 * 1000.0  # Blox's priority_thresh
PRIO_NORMAL = 999
PRIO_STARVED = 1

# return codes
OK = 0
DEADLOCK = 1  # nothing runs, nothing arrives, and the head job can never be placed
ROUND_LIMIT = 2


@jit
def grow_rows(a, n):
    """A copy of the 2-D array ``a`` with room for at least ``n`` rows (capacity doubles)."""
    b = np.empty((max(2 * a.shape[0], n), a.shape[1]), dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


@jit
def resort(order, n, prio, key):
    """Insertion-sort ``order[:n]`` by ``(prio, key, job index)``.

    The order is carried from round to round and only a few keys move each round (the running
    jobs' attained service, new arrivals, promotions), so this costs O(n + displacement) where a
    full sort would cost O(n log n). Comparing the job index last makes it equal to Blox's stable
    sort of the active jobs in admission (= index) order."""
    for i in range(1, n):
        j = order[i]
        pj = prio[j]
        kj = key[j]
        h = i - 1
        while h >= 0:
            o = order[h]
            po = prio[o]
            if po < pj or (po == pj and (key[o] < kj or (key[o] == kj and o < j))):
                break
            order[h + 1] = o
            h -= 1
        order[h + 1] = j


@jit
def _before(a, b, prio, key):
    """Job ``a`` sorts before job ``b``: by ``(prio, key, job index)``."""
    pa = prio[a]
    pb = prio[b]
    if pa != pb:
        return pa < pb
    ka = key[a]
    kb = key[b]
    if ka != kb:
        return ka < kb
    return a < b


@jit
def reorder(order, n, status, prio, key, wbuf, rbuf):
    """Sort ``order[:n]`` by ``(prio, key, job index)``, given that it was sorted by the keys of
    the last round and that since then only running jobs' keys moved, new jobs were appended and
    some waiting jobs were promoted.

    Waiting jobs keep their keys, so they stay sorted among themselves: split them from the
    running jobs, insertion-sort both parts (only the newcomers and the few running jobs whose
    keys crossed move) and merge. O(n + displacement)."""
    nw = 0
    nr = 0
    for a in range(n):
        j = order[a]
        if status[j] == RUNNING:
            rbuf[nr] = j
            nr += 1
        else:
            wbuf[nw] = j
            nw += 1
    resort(wbuf, nw, prio, key)
    resort(rbuf, nr, prio, key)
    i = 0
    k = 0
    for a in range(n):
        if k >= nr or (i < nw and _before(wbuf[i], rbuf[k], prio, key)):
            order[a] = wbuf[i]
            i += 1
        else:
            order[a] = rbuf[k]
            k += 1


@jit
def run_blox(
    submit,
    gpus,
    iter_time,
    total_iters,
    tracked,
    alloc_off,
    node_gpus,
    node_base,
    gpu_node,
    policy,
    placement,
    theta,
    round_s,
    max_rounds,
):
    """Replay jobs ``0..N-1`` (sorted by submit time) with Blox's semantics.

    ``tracked`` (bool) marks the jobs whose completion ends the run; ``theta <= 0`` means
    accept-all, else load-based admission at ``theta × total GPUs``.

    Returns ``(code, n_rounds, end_t, finish, first_credit, first_launch, num_preempt, attained,
    executed, job_priority, round_series)``: times are seconds (``NO_TIME`` when never reached), ``round_series`` is an
    ``(n_rounds + 1, 6)`` array with, per round, ``[t, preemptions, free GPUs, queued jobs, running
    jobs, GPU demand]`` (the final round, where the run ends, has ``preemptions = -1``).
    """
    n_jobs = submit.shape[0]
    num_nodes = node_gpus.shape[0]
    total_gpus = 0
    for nd in range(num_nodes):
        total_gpus += node_gpus[nd]
    node_free = node_gpus.copy()
    node_mask = np.zeros(num_nodes, dtype=np.uint64)
    for nd in range(num_nodes):
        node_mask[nd] = (np.uint64(1) << np.uint64(node_gpus[nd])) - np.uint64(1) if node_gpus[nd] < 64 else ~np.uint64(0)
    node_up = np.ones(num_nodes, dtype=np.uint8)
    owner = np.full(total_gpus, -1, dtype=np.int64)
    alloc = np.zeros(alloc_off[n_jobs], dtype=np.int64)

    status = np.full(n_jobs, NOT_ARRIVED, dtype=np.int8)
    executed = np.zeros(n_jobs, dtype=np.float64)
    attained = np.zeros(n_jobs, dtype=np.float64)
    prio = np.full(n_jobs, PRIO_NORMAL, dtype=np.int64)
    waited = np.zeros(n_jobs, dtype=np.float64)
    credited = np.zeros(n_jobs, dtype=np.uint8)
    finish = np.full(n_jobs, NO_TIME)
    first_credit = np.full(n_jobs, NO_TIME)
    first_launch = np.full(n_jobs, NO_TIME)
    num_preempt = np.zeros(n_jobs, dtype=np.int64)
    stamp = np.full(n_jobs, -1, dtype=np.int64)  # round in which the job was suspended

    order = np.empty(n_jobs, dtype=np.int64)
    keys = np.empty(n_jobs, dtype=np.float64)
    wbuf = np.empty(n_jobs, dtype=np.int64)
    rbuf = np.empty(n_jobs, dtype=np.int64)
    launched = np.empty(n_jobs, dtype=np.int64)
    suspended = np.empty(n_jobs, dtype=np.int64)
    victims = np.empty(n_jobs, dtype=np.int64)
    victims_pos = np.empty(n_jobs, dtype=np.int64)
    run_suffix = np.empty(n_jobs + 1, dtype=np.int64)
    tmp = np.empty(total_gpus, dtype=np.int64)
    series = np.empty((1024, 6), dtype=np.float64)

    tracked_left = 0
    for j in range(n_jobs):
        if tracked[j]:
            tracked_left += 1

    n_active = 0  # active jobs, kept in last round's priority order in ``order[:n_active]``
    demand = 0  # GPUs asked for by active jobs
    n_running = 0
    next_arr = 0  # first job not yet arrived
    ov_head = 0  # first arrived job not yet admitted (the overflow queue is [ov_head, next_arr))
    t = 0.0
    rnd = 0
    idle_rounds = 0
    code = OK
    while True:
        # 1. progress of jobs running since an earlier round; completions at t
        w = 0
        for a in range(n_active):
            j = order[a]
            if status[j] == RUNNING:
                if credited[j] == 0:
                    credited[j] = 1
                    first_credit[j] = t
                attained[j] += round_s
                executed[j] = round_s / iter_time[j] + executed[j]
                if executed[j] >= total_iters[j]:
                    status[j] = DONE
                    finish[j] = t
                    o = alloc_off[j]
                    release(alloc[o:o + gpus[j]], gpus[j], owner, gpu_node, node_base, node_free, node_mask)
                    demand -= gpus[j]
                    n_running -= 1
                    if tracked[j]:
                        tracked_left -= 1
                    continue
            order[w] = j
            w += 1
        n_active = w
        if rnd + 1 >= series.shape[0]:
            series = grow_rows(series, rnd + 2)
        free_now = 0
        for nd in range(num_nodes):
            free_now += node_free[nd]
        series[rnd, 0] = t
        series[rnd, 1] = 0
        series[rnd, 2] = free_now
        series[rnd, 3] = n_active - n_running
        series[rnd, 4] = n_running
        series[rnd, 5] = demand
        # 2. the run ends once every tracked job has finished
        if tracked_left == 0:
            series[rnd, 1] = -1
            break
        if rnd >= max_rounds:
            series[rnd, 1] = -1
            code = ROUND_LIMIT
            break
        # 3. arrivals
        while next_arr < n_jobs and submit[next_arr] <= t:
            next_arr += 1
        # 4. admission
        if theta <= 0.0:
            admit_to = next_arr
        else:
            added = 0
            admit_to = ov_head
            while demand + added <= theta * total_gpus and admit_to < next_arr:
                added += gpus[admit_to]
                admit_to += 1
        for j in range(ov_head, admit_to):
            status[j] = WAITING
            order[n_active] = j
            n_active += 1
            demand += gpus[j]
        ov_head = admit_to
        nl = 0
        if n_active > n_running:
            # 5. order (with no waiting job the walk, and so the order, change nothing)
            for a in range(n_active):
                j = order[a]
                if policy == POL_FIFO:
                    keys[j] = submit[j]
                elif policy == POL_LAS or policy == POL_LAS_GPU:
                    keys[j] = attained[j]
                elif policy == POL_SRTF:
                    keys[j] = iter_time[j] * total_iters[j] - attained[j]
                elif policy == POL_SJF:
                    keys[j] = iter_time[j] * total_iters[j]
                else:
                    keys[j] = 0.0
            reorder(order, n_active, status, prio, keys, wbuf, rbuf)
            # 6. placement walk
            nl, ns = walk(
                order, n_active, status, gpus, alloc_off, alloc, owner, gpu_node, node_base, node_gpus,
                node_free, node_mask, node_up, placement, True, False, True,
                launched, suspended, victims, victims_pos, run_suffix, tmp,
            )
            for q in range(ns):
                v = suspended[q]
                num_preempt[v] += 1
                stamp[v] = rnd
            n_running += nl - ns
            for q in range(nl):
                j = launched[q]
                if first_launch[j] == NO_TIME:
                    first_launch[j] = t
            series[rnd, 1] = ns
            # 7. starvation guard (running jobs' counters are already 0: they were reset when they
            # last ran, so with no waiting job there is nothing to do)
            for a in range(n_active):
                j = order[a]
                if status[j] == RUNNING or stamp[j] == rnd:
                    waited[j] = 0.0
                else:
                    waited[j] += round_s
                    if waited[j] >= STARVATION_LIMIT_S:
                        prio[j] = PRIO_STARVED
        # Nothing runs, nothing is left to arrive: once every waiting job has been promoted by the
        # guard the order is frozen (keys do not move while nothing runs), so nothing ever will.
        if n_running == 0 and nl == 0 and next_arr == n_jobs and ov_head == n_jobs:
            idle_rounds += 1
            if idle_rounds * round_s > STARVATION_LIMIT_S + 2 * round_s:
                code = DEADLOCK
                break
        else:
            idle_rounds = 0
        t += round_s
        rnd += 1
    return code, rnd, t, finish, first_credit, first_launch, num_preempt, attained, executed, prio, series[: rnd + 1].copy()
