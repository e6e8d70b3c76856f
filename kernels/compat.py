"""Blox's simulator as one numba kernel (``--blox-compat``); see ``shared/docs/blox-semantics.md``.

Each round ``t = k·R``: credit the jobs that were running (``R / iteration_time`` iterations,
``R`` s of attained service), finish those that reached their iterations (finish = ``t``), stop
when every tracked job is done, take arrivals, admit (all, or load-based ``θ``), order all active
jobs stably by ``(job_priority, key)``, walk them with Blox's placement (exact-sum scattered fit,
tail preemption, victims left suspended, head-of-line blocking), then run the starvation guard.

How it stays fast without changing a single decision (``fastblox.reference.blox`` is the literal
version the tests compare against):

* Waiting jobs' keys do not move while they wait, so they live in a queue ``W`` kept sorted by
  ``(priority, key, id)``. Every running job gains the same ``R`` of service per round, so the
  running jobs ``Rn`` keep their relative order too: both stay sorted without sorting.
* Blox's order is the merge of the two. The walk visits it lazily and stops at the first job that
  does not fit, so a round costs the running jobs' progress plus the jobs the walk touches.
* The starvation guard is a queue of due rounds: a job that starts waiting at round ``r`` is
  promoted at round ``r + K - 1`` if it is still waiting then (``K`` = the number of ``R`` steps
  Blox's counter needs to reach 3,600,000 s), so no round scans the waiting jobs.
"""

from __future__ import annotations

import numpy as np

from ._calls import helper
from ._jit import jit
from .admission import admit_to
from .enums import DONE, NO_TIME, NOT_ARRIVED, POL_FIFO, POL_LAS, POL_LAS_GPU, POL_SJF, POL_SRTF, RUNNING, WAITING
from .placement import assign, fit, fresh_nodes, release

STARVATION_LIMIT_S = 3600.0 * 1000.0  # Blox's priority_thresh
PRIO_NORMAL = 999
PRIO_STARVED = 1

# return codes
OK = 0
DEADLOCK = 1  # nothing runs, nothing arrives, and the head job can never be placed
ROUND_LIMIT = 2

# slots of ``ctl``, the int64 array shared with the caller while the kernel runs in its own thread:
# the caller may lower CTL_MAX_ROUNDS at any time (the run stops within CTL_POLL rounds, ROUND_LIMIT);
# the kernel writes its progress into the others as often
CTL_MAX_ROUNDS = 0
CTL_ROUND = 1
CTL_ADMITTED = 2  # jobs admitted so far
CTL_ARRIVED = 3
CTL_WAITING = 4
CTL_RUNNING = 5
CTL_SIZE = 6
CTL_POLL = 64  # rounds between two looks at ``ctl`` (stores to it every round cost ~10 % of a run)

HEADROOM = 256  # free slots kept before the waiting queue's head


@helper
def grow_rows(a, n):
    """A copy of the 2-D array ``a`` with room for at least ``n`` rows (capacity doubles)."""
    b = np.empty((max(2 * a.shape[0], n), a.shape[1]), dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


@helper
def _grow(a, n):
    b = np.empty(max(2 * a.shape[0], n), dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


@helper
def _before(a, b, prio, key):
    """Job ``a`` sorts before job ``b``: by ``(prio, key, job id)`` — Blox's stable sort of jobs
    held in admission (= id) order."""
    pa = prio[a]
    pb = prio[b]
    if pa != pb:
        return pa < pb
    ka = key[a]
    kb = key[b]
    if ka != kb:
        return ka < kb
    return a < b


@helper
def _insert(q, h, n, j, prio, key):
    """Insert ``j`` into the sorted ``q[h:h+n]``, shifting the shorter side; returns the new
    head ``h`` (the caller keeps a free slot on both sides: ``h > 0`` or room at ``q[h+n]``)."""
    lo = h
    hi = h + n
    while lo < hi:
        mid = (lo + hi) >> 1
        if _before(q[mid], j, prio, key):
            lo = mid + 1
        else:
            hi = mid
    if h > 0 and lo - h < h + n - lo:
        for p in range(h, lo):
            q[p - 1] = q[p]
        q[lo - 1] = j
        return h - 1
    for p in range(h + n, lo, -1):
        q[p] = q[p - 1]
    q[lo] = j
    return h


@helper
def _merge_into(q, h, n, add, m, prio, key, out, off):
    """Merge the sorted ``add[:m]`` into the sorted ``q[h:h+n]``, written to ``out[off:off+n+m]``."""
    a = h
    b = 0
    w = off
    while a < h + n or b < m:
        if b >= m or (a < h + n and _before(q[a], add[b], prio, key)):
            out[w] = q[a]
            a += 1
        else:
            out[w] = add[b]
            b += 1
        w += 1


@helper
def _key(policy, j, submit, iter_time, total_iters, attained):
    if policy == POL_FIFO:
        return submit[j]
    if policy == POL_LAS or policy == POL_LAS_GPU:
        return attained[j]
    if policy == POL_SRTF:
        return iter_time[j] * total_iters[j] - attained[j]
    if policy == POL_SJF:
        return iter_time[j] * total_iters[j]
    return 0.0


@helper
def starvation_steps(round_s):
    """How many rounds of waiting Blox's counter (``+= R`` from 0) needs to reach the limit."""
    c = 0.0
    k = 0
    while c < STARVATION_LIMIT_S:
        c += round_s
        k += 1
    return k


@helper(inline=True)
def _credit(t, round_s, rq, nr, status, credited, first_credit, attained, executed, iter_time, total_iters, srtf, key,
            finish, alloc, alloc_off, gpus, nodes, tracked):
    """1. The progress of the jobs running since an earlier round, and the completions at ``t``.
    Returns ``(running jobs left in rq[:n], GPUs freed, tracked jobs finished)``."""
    w = 0
    freed = 0
    done_tracked = 0
    for a in range(nr):
        j = rq[a]
        if credited[j] == 0:
            credited[j] = 1
            first_credit[j] = t
        attained[j] += round_s
        executed[j] = round_s / iter_time[j] + executed[j]
        if srtf:
            key[j] = iter_time[j] * total_iters[j] - attained[j]
        if executed[j] >= total_iters[j]:
            status[j] = DONE
            finish[j] = t
            release(alloc, alloc_off[j], gpus[j], nodes)
            freed += gpus[j]
            if tracked[j]:
                done_tracked += 1
            continue
        rq[w] = j
        w += 1
    return w, freed, done_tracked


@helper(inline=True)
def _record(series, rnd, t, free, nw, nr, demand):
    """The round's row of the time series (grown as needed); returns the series."""
    if rnd + 1 >= series.shape[0]:
        series = grow_rows(series, rnd + 2)
    series[rnd, 0] = t
    series[rnd, 1] = 0
    series[rnd, 2] = free
    series[rnd, 3] = nw
    series[rnd, 4] = nr
    series[rnd, 5] = demand
    return series


@helper(inline=True)
def _due(due_j, due_r, dn, j, rnd):
    """Queue job ``j`` for the starvation guard from round ``rnd``; returns ``(due_j, due_r, dn)``."""
    if dn >= due_j.shape[0]:
        due_j = _grow(due_j, dn + 1)
        due_r = _grow(due_r, dn + 1)
    due_j[dn] = j
    due_r[dn] = rnd
    return due_j, due_r, dn + 1


@helper(inline=True)
def _admit(theta, total_gpus, demand, ov_head, next_arr, gpus, status, wq, wh, nw, prio, key, wait_from, rnd, due_j,
           due_r, dn):
    """4. Admission of the arrived jobs into the sorted waiting queue (all of them, or while the
    GPU demand is within ``theta`` × the cluster). Returns ``(wh, nw, demand, first job not
    admitted, due_j, due_r, dn)``."""
    last = admit_to(theta, total_gpus, demand, ov_head, next_arr, gpus)
    for j in range(ov_head, last):
        status[j] = WAITING
        if wh + nw + 1 >= wq.shape[0]:
            wq[1:nw + 1] = wq[wh:wh + nw].copy()
            wh = 1
        wh = _insert(wq, wh, nw, j, prio, key)
        nw += 1
        demand += gpus[j]
        wait_from[j] = rnd
        due_j, due_r, dn = _due(due_j, due_r, dn, j, rnd)
    return wh, nw, demand, last, due_j, due_r, dn


@helper(inline=True)
def _walk(t, rq, nr, wq, wh, nw, status, prio, key, gpus, free, placement, nodes, tmp, alloc, alloc_off, victims,
          num_preempt, first_launch, launched):
    """5.+6. The merged order of the waiting queue and the running jobs, walked lazily: place
    each job that is not running, taking GPUs from the running jobs ranked after it (the
    lowest first); stop at the first job that does not fit. Returns ``(launched, suspended,
    free GPUs)``; the launched jobs in ``launched``, the suspended ones in ``victims``."""
    nl = 0
    ns = 0
    i = 0  # next of W
    k = 0  # next of Rn
    tail = nr - 1  # victims come from Rn's tail
    while True:
        # the next job of the merged order that is not running
        while k < nr and status[rq[k]] == RUNNING and (i >= nw or _before(rq[k], wq[wh + i], prio, key)):
            k += 1
        from_r = False
        if k < nr and (i >= nw or _before(rq[k], wq[wh + i], prio, key)):
            c = rq[k]  # a victim of this round, now waiting at its place in the order
            from_r = True
        elif i < nw:
            c = wq[wh + i]
        else:
            break
        n = gpus[c]
        got = 0
        if free >= n:
            got = fit(placement, n, 0, nodes, tmp)
        if got == 0:
            # tail preemption: running jobs ranked after c, lowest first, one at a time
            while tail >= 0 and _before(c, rq[tail], prio, key):
                v = rq[tail]
                tail -= 1
                if status[v] != RUNNING:
                    continue
                release(alloc, alloc_off[v], gpus[v], nodes)
                status[v] = WAITING
                free += gpus[v]
                victims[ns] = v
                ns += 1
                num_preempt[v] += 1
                if free >= n:
                    got = fit(placement, n, 0, nodes, tmp)
                if got:
                    break
        if got == 0:
            break  # head-of-line blocking; the victims stay suspended
        assign(tmp, n, c, alloc, alloc_off[c], nodes)
        status[c] = RUNNING
        free -= n
        if first_launch[c] == NO_TIME:
            first_launch[c] = t
        if from_r:
            k += 1  # re-placed victim: it stays in Rn, at its place
        else:
            launched[nl] = c
            nl += 1
            i += 1
    return nl, ns, free


@helper(inline=True)
def _requeue(victims, ns, status, launched, nl, wait_from, rnd, due_j, due_r, dn, wq, wq2, wh, nw, prio, key):
    """The victims left waiting join the waiting queue (whose launched prefix is gone). Returns
    ``(wq, wq2, wh, nw, due_j, due_r, dn)``."""
    # victims were taken lowest priority first: reversed, the ones left waiting are sorted
    nv = 0
    for q in range(ns - 1, -1, -1):
        v = victims[q]
        if status[v] == WAITING:
            launched[nl + nv] = v
            nv += 1
            wait_from[v] = rnd + 1
            due_j, due_r, dn = _due(due_j, due_r, dn, v, rnd + 1)
    if nv > 0:
        # leave room in front: newcomers (LAS: no service yet) are inserted at the head
        off = min(HEADROOM, wq.shape[0] - (nw + nv) - 1)
        _merge_into(wq, wh, nw, launched[nl:], nv, prio, key, wq2, off)
        wq, wq2 = wq2, wq
        wh = off
        nw += nv
    return wq, wq2, wh, nw, due_j, due_r, dn


@helper(inline=True)
def _merge_running(rq, rq2, nr, launched, nl, status, prio, key, wait_from, victims, ns):
    """The running jobs: the previous ones without the victims, merged with the launched (both
    sorted). Returns ``(rq, rq2, nr)``."""
    a = 0
    b = 0
    m = 0
    while a < nr or b < nl:
        if a < nr and status[rq[a]] != RUNNING:
            a += 1
            continue
        if b >= nl or (a < nr and _before(rq[a], launched[b], prio, key)):
            rq2[m] = rq[a]
            a += 1
        else:
            rq2[m] = launched[b]
            b += 1
            wait_from[rq2[m]] = -1
        m += 1
    for q in range(ns):
        if status[victims[q]] == RUNNING:
            wait_from[victims[q]] = -1  # re-placed: its counter is reset
    return rq2, rq, m


@helper(inline=True)
def _starvation_guard(rnd, k_starve, dh, dn, due_j, due_r, status, wait_from, prio, wq, wh, nw, key):
    """7. Promote the jobs that have waited ``k_starve`` rounds in a row to the front part of
    the queue (priority 1 sorts first). Returns ``(dh, wh)``."""
    while dh < dn and due_r[dh] + k_starve - 1 <= rnd:
        j = due_j[dh]
        r0 = due_r[dh]
        dh += 1
        if status[j] == WAITING and wait_from[j] == r0 and prio[j] != PRIO_STARVED:
            p = wh
            while wq[p] != j:
                p += 1
            for x in range(p, wh + nw - 1):
                wq[x] = wq[x + 1]
            prio[j] = PRIO_STARVED
            wh = _insert(wq, wh, nw - 1, j, prio, key)
    return dh, wh


@helper(inline=True)
def _rounds_to_skip(t, round_s, rnd, max_rounds, next_arr, n_jobs, submit, rq, nr, iter_time, executed, total_iters):
    """With nobody waiting or held back, the rounds before the next arrival or completion only
    credit progress: how many can be skipped (0: none). Exact when the sums stay integers
    (whole-second rounds and iterations per round), as Blox's own float additions then are."""
    m = 1 << 62
    if next_arr < n_jobs:
        m = int(np.ceil((submit[next_arr] - t) / round_s))
        while m > 1 and t + (m - 1) * round_s >= submit[next_arr]:
            m -= 1
        while t + m * round_s < submit[next_arr]:
            m += 1
    for a in range(nr):
        j = rq[a]
        step = round_s / iter_time[j]
        if step != np.floor(step) or step > 2.0**40 or executed[j] > 2.0**50:
            return 0
        mj = int(np.ceil((total_iters[j] - executed[j]) / step))
        if mj < 1:
            mj = 1
        while mj > 1 and executed[j] + (mj - 1) * step >= total_iters[j]:
            mj -= 1
        while executed[j] + mj * step < total_iters[j]:
            mj += 1
        if mj < m:
            m = mj
    skip = m - 1
    if skip > max_rounds - rnd - 1:
        skip = max_rounds - rnd - 1
    return skip if skip > 0 and (nr > 0 or next_arr < n_jobs) else 0


@helper(inline=True)
def _skip(t, round_s, rnd, skip, rq, nr, credited, first_credit, attained, executed, iter_time, total_iters, srtf,
          key, series, free, demand):
    """Credit ``skip`` rounds of progress at once, with their rows of the series; returns it."""
    if rnd + skip + 2 >= series.shape[0]:
        series = grow_rows(series, rnd + skip + 2)
    for a in range(nr):
        j = rq[a]
        if credited[j] == 0:
            credited[j] = 1
            first_credit[j] = t + round_s
        attained[j] += skip * round_s
        executed[j] += skip * (round_s / iter_time[j])
        if srtf:
            key[j] = iter_time[j] * total_iters[j] - attained[j]
    for q in range(1, skip + 1):
        series[rnd + q, 0] = t + q * round_s
        series[rnd + q, 1] = 0
        series[rnd + q, 2] = free
        series[rnd + q, 3] = 0
        series[rnd + q, 4] = nr
        series[rnd + q, 5] = demand
    return series


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
    ctl,
):
    """Replay jobs ``0..N-1`` (sorted by submit time) with Blox's semantics.

    ``tracked`` (bool) marks the jobs whose completion ends the run; ``theta <= 0`` means
    accept-all, else load-based admission at ``theta × total GPUs``. ``ctl`` (``CTL_*`` slots):
    the round limit, read every ``CTL_POLL`` rounds, and the progress the kernel writes as often.

    Returns ``(code, n_rounds, end_t, finish, first_credit, first_launch, num_preempt, attained,
    executed, job_priority, round_series)``: times are seconds (``NO_TIME`` when never reached),
    ``round_series`` is an ``(n_rounds + 1, 6)`` array with, per round, ``[t, preemptions, free
    GPUs, queued jobs, running jobs, GPU demand]`` (the final round, where the run ends, has
    ``preemptions = -1``).
    """
    n_jobs = submit.shape[0]
    num_nodes = node_gpus.shape[0]
    total_gpus = 0
    for nd in range(num_nodes):
        total_gpus += node_gpus[nd]
    nodes = fresh_nodes(node_gpus, node_base, gpu_node)
    alloc = np.zeros(alloc_off[n_jobs], dtype=np.int64)

    status = np.full(n_jobs, NOT_ARRIVED, dtype=np.int8)
    executed = np.zeros(n_jobs, dtype=np.float64)
    attained = np.zeros(n_jobs, dtype=np.float64)
    prio = np.full(n_jobs, PRIO_NORMAL, dtype=np.int64)
    wait_from = np.full(n_jobs, -1, dtype=np.int64)  # first round counted by the guard, -1 = reset
    credited = np.zeros(n_jobs, dtype=np.uint8)
    finish = np.full(n_jobs, NO_TIME)
    first_credit = np.full(n_jobs, NO_TIME)
    first_launch = np.full(n_jobs, NO_TIME)
    num_preempt = np.zeros(n_jobs, dtype=np.int64)

    # W: waiting jobs sorted, in wq[wh:wh+nw]; Rn: running jobs sorted, in rq[:nr]
    wq = np.empty(2 * n_jobs + 2, dtype=np.int64)
    wq2 = np.empty(2 * n_jobs + 2, dtype=np.int64)
    wh = 0
    nw = 0
    rq = np.empty(n_jobs, dtype=np.int64)
    rq2 = np.empty(n_jobs, dtype=np.int64)
    nr = 0
    launched = np.empty(n_jobs, dtype=np.int64)
    victims = np.empty(n_jobs, dtype=np.int64)  # suspended this round, in the order taken
    tmp = np.empty(total_gpus, dtype=np.int64)
    series = np.empty((1024, 6), dtype=np.float64)
    due_j = np.empty(1024, dtype=np.int64)  # the guard's queue: (job, first waiting round)
    due_r = np.empty(1024, dtype=np.int64)
    dh = 0
    dn = 0
    k_starve = starvation_steps(round_s)
    # the ordering key, read in place where it is a state column (LAS: attained service, FIFO:
    # submit time); SRTF's remaining time is refreshed as jobs run
    srtf = policy == POL_SRTF
    int_rounds = round_s == np.floor(round_s) and round_s < 2.0**30
    if policy == POL_LAS or policy == POL_LAS_GPU:
        key = attained
    elif policy == POL_FIFO:
        key = submit.copy()
    else:
        key = np.zeros(n_jobs, dtype=np.float64)
        for j in range(n_jobs):
            key[j] = _key(policy, j, submit, iter_time, total_iters, attained)

    tracked_left = 0
    for j in range(n_jobs):
        if tracked[j]:
            tracked_left += 1

    demand = 0  # GPUs asked for by active jobs
    free = total_gpus
    next_arr = 0  # first job not yet arrived
    ov_head = 0  # first arrived job not yet admitted (the overflow queue is [ov_head, next_arr))
    t = 0.0
    rnd = 0
    idle_rounds = 0
    max_rounds = ctl[CTL_MAX_ROUNDS]
    poll = 1
    code = OK
    while True:
        nr, freed, done_tracked = _credit(t, round_s, rq, nr, status, credited, first_credit, attained, executed,
                                          iter_time, total_iters, srtf, key, finish, alloc, alloc_off, gpus, nodes,
                                          tracked)
        free += freed
        demand -= freed
        tracked_left -= done_tracked
        series = _record(series, rnd, t, free, nw, nr, demand)
        # 2. the run ends once every tracked job has finished
        if tracked_left == 0:
            series[rnd, 1] = -1
            break
        poll -= 1
        if poll == 0:  # the caller's round limit in, the progress out, once every CTL_POLL rounds
            poll = CTL_POLL
            max_rounds = ctl[CTL_MAX_ROUNDS]
            ctl[CTL_ROUND] = rnd
            ctl[CTL_ADMITTED] = ov_head
            ctl[CTL_ARRIVED] = next_arr
            ctl[CTL_WAITING] = nw
            ctl[CTL_RUNNING] = nr
        if rnd >= max_rounds:
            series[rnd, 1] = -1
            code = ROUND_LIMIT
            break
        # 3. arrivals
        while next_arr < n_jobs and submit[next_arr] <= t:
            next_arr += 1
        wh, nw, demand, ov_head, due_j, due_r, dn = _admit(theta, total_gpus, demand, ov_head, next_arr, gpus, status,
                                                           wq, wh, nw, prio, key, wait_from, rnd, due_j, due_r, dn)
        nl = 0
        if nw > 0:
            nl, ns, free = _walk(t, rq, nr, wq, wh, nw, status, prio, key, gpus, free, placement, nodes, tmp, alloc,
                                 alloc_off, victims, num_preempt, first_launch, launched)
            series[rnd, 1] = ns
            wh += nl  # the walk launched a prefix of the queue
            nw -= nl
            wq, wq2, wh, nw, due_j, due_r, dn = _requeue(victims, ns, status, launched, nl, wait_from, rnd, due_j,
                                                         due_r, dn, wq, wq2, wh, nw, prio, key)
            rq, rq2, nr = _merge_running(rq, rq2, nr, launched, nl, status, prio, key, wait_from, victims, ns)
        dh, wh = _starvation_guard(rnd, k_starve, dh, dn, due_j, due_r, status, wait_from, prio, wq, wh, nw, key)
        # Nothing runs, nothing is left to arrive: once every waiting job has been promoted by the
        # guard the order is frozen (keys do not move while nothing runs), so nothing ever will.
        if nr == 0 and nl == 0 and next_arr == n_jobs and ov_head == n_jobs:
            idle_rounds += 1
            if idle_rounds > k_starve + 2:
                code = DEADLOCK
                break
        else:
            idle_rounds = 0
        # fast-forward over rounds that only credit progress
        if nw == 0 and ov_head == next_arr and int_rounds:
            skip = _rounds_to_skip(t, round_s, rnd, max_rounds, next_arr, n_jobs, submit, rq, nr, iter_time, executed,
                                   total_iters)
            if skip > 0:
                series = _skip(t, round_s, rnd, skip, rq, nr, credited, first_credit, attained, executed, iter_time,
                               total_iters, srtf, key, series, free, demand)
                t += skip * round_s
                rnd += skip
        t += round_s
        rnd += 1
    return code, rnd, t, finish, first_credit, first_launch, num_preempt, attained, executed, prio, series[: rnd + 1].copy()
