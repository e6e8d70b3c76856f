"""Synergy's simulator (``--compat synergy``): its rounds, orderings and allocations as one kernel.

Its plain-Python twin is ``fastblox.reference.synergy`` (the tests compare them); the semantics are
described in ``fastblox.compat_synergy``. Per round: every lease ends, the runnable jobs are
ordered (a stable sort on the policy's key), then given GPUs in that order from the free list
(cluster order), each from servers that still hold its per-GPU demand vector (GPUs, CPUs, memory,
storage, network). A job's resources for the round are kept as entries (server, vector) in a
pool, as the simulator's ``res_map``; Synergy-Tune rewrites a peer's entries in place.

Arrays in: jobs sorted by arrival. Out: ``finish`` (NaN: never finished), ``first`` (first round
given GPUs), ``att`` (seconds held GPUs), ``out_i`` = (status, rounds, job that failed) with status :data:`OK`,
:data:`ROUND_LIMIT` or :data:`TUNE_FAILED`.
"""

from __future__ import annotations

import math

import numpy as np

from ._calls import helper
from ._jit import jit
from .admission import admit_to

OK, ROUND_LIMIT, TUNE_FAILED = 0, 1, 2
NRES = 5
FIFO, SRTF, LAS, FTF = 0, 1, 2, 3
FAIR, GREEDY, TUNE = 0, 1, 2
STARVE_S = 1000.0 * 3600.0


@helper(inline=True)
def _fits(used, hold, cap, s, d) -> bool:
    for k in range(NRES):
        if cap[k] - used[s, k] - hold[s, k] < d[k]:
            return False
    return True


@helper
def _place(free, nfree, n, d, used, hold, cap, G, take, e_srv, e_res, e0):
    """GPUs of ``free[:nfree]`` in order whose server holds ``d``, into ``take``; the per-server
    sums into entries from ``e0``. Returns (GPUs taken, entries used); fewer than ``n``: failure."""
    got, ne = 0, 0
    for i in range(nfree):
        g = free[i]
        s = g // G
        if _fits(used, hold, cap, s, d):
            take[got] = g
            got += 1
            for k in range(NRES):
                hold[s, k] += d[k]
            e = -1
            for q in range(e0, e0 + ne):
                if e_srv[q] == s:
                    e = q
            if e < 0:
                e = e0 + ne
                ne += 1
                e_srv[e] = s
                e_res[e, :] = 0.0
            for k in range(NRES):
                e_res[e, k] += d[k]
        if got == n:
            break
    for q in range(e0, e0 + ne):
        hold[e_srv[q], :] = 0.0
    return got, ne


@helper
def _give(j, fair, round_s, e_lo, e_hi, e_srv, e_res, used, done, last_done, total, att, iter_s, pen, sp):
    """Take a job's entries on their servers and credit its round (Job.allocate)."""
    for q in range(e_lo[j], e_hi[j]):
        for k in range(4):
            used[e_srv[q], k] += e_res[q, k]
    it = iter_s[j]
    if e_hi[j] - e_lo[j] > 1:
        it = it / pen[j]
    if not fair:
        it = it / sp[j]
    att[j] += round_s
    last_done[j] = done[j]
    done[j] = min(done[j] + math.floor(round_s / it), total[j])


@helper
def _take_back(j, round_s, e_lo, e_hi, e_srv, e_res, used, done, last_done, att):
    """A peer's resources back, its round undone (deallocate with revert_iter)."""
    for q in range(e_lo[j], e_hi[j]):
        for k in range(4):
            used[e_srv[q], k] -= e_res[q, k]
    att[j] = max(att[j] - round_s, 0.0)
    done[j] = last_done[j]


@helper
def _fair_share(j, d, fair, greq, sp, out) -> bool:
    """_make_fair_share: ``out`` = the proportional vector if ``d`` asks more than it anywhere."""
    switch = False
    for k in range(NRES):
        if d[k] > fair[k] * greq[j]:
            switch = True
    if switch:
        sp[j] = 1.0
        out[0] = d[0]
        for k in range(1, 4):
            out[k] = fair[k] * greq[j]
        out[4] = d[4]
    return switch


@helper
def _alloc_key(j, g_lo, g_hi, e_lo, e_hi, e_res, k):
    a = 0.0
    for q in range(e_lo[j], e_hi[j]):
        a += e_res[q, k]
    return a / (g_hi[j] - g_lo[j])


@helper
def _sort_server_jobs(s, srv_jobs, srv_cnt, g_lo, g_hi, e_lo, e_hi, e_res):
    """The server's jobs by (servers spanned, -CPUs per GPU, -memory per GPU), stably."""
    m = srv_cnt[s]
    k0 = np.empty(m)
    k1 = np.empty(m)
    k2 = np.empty(m)
    for i in range(m):
        x = srv_jobs[s, i]
        k0[i] = e_hi[x] - e_lo[x]
        k1[i] = -_alloc_key(x, g_lo, g_hi, e_lo, e_hi, e_res, 1)
        k2[i] = -_alloc_key(x, g_lo, g_hi, e_lo, e_hi, e_res, 2)
    perm = _lexsort3(k0, k1, k2)
    jobs = srv_jobs[s, :m].copy()
    for i in range(m):
        srv_jobs[s, i] = jobs[perm[i]]


@helper
def _lexsort3(k0, k1, k2):
    """Positions in order of (k0, k1, k2), stable (as Python's sort of key tuples)."""
    p = np.argsort(k2, kind="mergesort")
    p = p[np.argsort(k1[p], kind="mergesort")]
    return p[np.argsort(k0[p], kind="mergesort")]


@helper
def _peers(s, need, srv_jobs, srv_cnt, pg, g_lo, g_hi, e_lo, e_hi, e_res, fair, G, out):
    """_reallocate_peer: the jobs on server ``s`` to bring back to their share; returns how many."""
    allzero = True
    for k in range(NRES):
        if need[k] != 0:
            allzero = False
    if allzero:
        return 0
    _sort_server_jobs(s, srv_jobs, srv_cnt, g_lo, g_hi, e_lo, e_hi, e_res)
    n_out = 0
    a = np.zeros(NRES)
    diff = np.zeros(NRES)
    for i in range(srv_cnt[s]):
        j = srv_jobs[s, i]
        here = 0
        for q in range(g_lo[j], g_hi[j]):
            if pg[q] // G == s:
                here += 1
        a[:] = 0.0
        a[0] = g_hi[j] - g_lo[j]
        for q in range(e_lo[j], e_hi[j]):
            for k in range(1, 4):
                a[k] += e_res[q, k]
        share = here / a[0]
        all0, allpos = True, True
        for k in range(NRES):
            ex = max(0.0, a[k] * share - fair[k] * here)
            diff[k] = max(0.0, need[k] - ex)
            if diff[k] != 0:
                all0 = False
            if not diff[k] > 0:
                allpos = False
        if all0:
            out[n_out] = j
            return n_out + 1
        if allpos:
            continue
        out[n_out] = j
        n_out += 1
        need[:] = diff
    return n_out


@helper
def _underused(n, free, nfree, used, cap, S, G, srv_out, cnt_out):
    """_get_underutilized_servers: servers and GPUs to free resources on; returns how many."""
    if n > 1:
        for s in range(S):
            if cap[0] - used[s, 0] >= n:
                srv_out[0], cnt_out[0] = s, n
                return 1
    count = np.zeros(S, np.int64)
    for i in range(nfree):
        count[free[i] // G] += 1
    order = np.argsort(count, kind="mergesort")
    m = 0
    for s in order:
        if count[s] == 0:
            continue
        srv_out[m] = s
        if count[s] >= n:
            cnt_out[m] = n
            return m + 1
        cnt_out[m] = count[s]
        n -= count[s]
        m += 1
        if n <= 0:
            break
    return m


@helper
def _allocate(j, d_total, fair, free, nfree, st):
    """Place job ``j`` with total demand ``d_total`` (allocate_synergy_random); returns the free
    GPUs left (``nfree`` unchanged: not placed)."""
    (greq, demand, used, hold, cap, G, pg, g_lo, g_hi, e_srv, e_res, e_lo, e_hi, cur, srv_jobs, srv_cnt,
     round_s, done, last_done, total, att, iter_s, pen, sp, taken) = st
    n = greq[j]
    d = d_total / d_total[0]
    got, ne = _place(free, nfree, n, d, used, hold, cap, G, pg[cur[0]:], e_srv, e_res, cur[1])
    if got < n:
        return nfree
    g_lo[j], g_hi[j] = cur[0], cur[0] + n
    e_lo[j], e_hi[j] = cur[1], cur[1] + ne
    cur[0] += n
    cur[1] += ne
    _give(j, fair, round_s, e_lo, e_hi, e_srv, e_res, used, done, last_done, total, att, iter_s, pen, sp)
    for q in range(e_lo[j], e_hi[j]):
        s = e_srv[q]
        srv_jobs[s, srv_cnt[s]] = j
        srv_cnt[s] += 1
    for q in range(g_lo[j], g_hi[j]):
        taken[pg[q]] = True
    m = 0
    for i in range(nfree):
        if not taken[free[i]]:
            free[m] = free[i]
            m += 1
    for q in range(g_lo[j], g_hi[j]):
        taken[pg[q]] = False
    return m


@helper
def _adjust_peers(j, d, free, nfree, fairv, S, st):
    """Bring jobs on the least-used servers back to their share to make room for ``j``."""
    (greq, demand, used, hold, cap, G, pg, g_lo, g_hi, e_srv, e_res, e_lo, e_hi, cur, srv_jobs, srv_cnt,
     round_s, done, last_done, total, att, iter_s, pen, sp, taken) = st
    n = greq[j]
    srv = np.empty(S, np.int64)
    cnt = np.empty(S, np.int64)
    m = _underused(n, free, nfree, used, cap, S, G, srv, cnt)
    peers = np.empty(G, np.int64)
    need = np.empty(NRES)
    pd = np.empty(NRES)
    fs = np.empty(NRES)
    for i in range(m):
        s = srv[i]
        ratio = cnt[i] / n
        for k in range(NRES):
            need[k] = max(0.0, d[k] * ratio - (cap[k] - used[s, k]))
        npeer = _peers(s, need, srv_jobs, srv_cnt, pg, g_lo, g_hi, e_lo, e_hi, e_res, fairv, G, peers)
        for a in range(npeer):
            p = peers[a]
            _take_back(p, round_s, e_lo, e_hi, e_srv, e_res, used, done, last_done, att)
            pd[0] = greq[p]
            for k in range(1, 4):
                pd[k] = demand[p, k]
            pd[4] = 0.0
            if _fair_share(p, pd, fairv, greq, sp, fs):
                pd[:] = fs
            ng = g_hi[p] - g_lo[p]
            for q in range(e_lo[p], e_hi[p]):
                share = e_res[q, 0] / ng
                for k in range(NRES):
                    e_res[q, k] = pd[k] * share
            _give(p, True, round_s, e_lo, e_hi, e_srv, e_res, used, done, last_done, total, att, iter_s, pen, sp)


@helper
def _tune(j, free, nfree, fairv, S, st):
    """Synergy-Tune (cluster._tune): the ideal demand, else the proportional share, else make room
    on the least-used servers. Returns the free GPUs left, -1 if the job still does not fit."""
    greq, demand = st[0], st[1]
    d = demand[j].copy()
    m = _allocate(j, d, False, free, nfree, st)
    if m < nfree:
        return m
    fs = np.empty(NRES)
    if _fair_share(j, d, fairv, greq, st[23], fs):
        d[:] = fs
    m = _allocate(j, d, False, free, nfree, st)
    if m < nfree:
        return m
    _adjust_peers(j, d, free, nfree, fairv, S, st)
    m = _allocate(j, d, False, free, nfree, st)
    return m if m < nfree else -1


@helper
def _order(run, nrun, policy, fair, now, prio, arrival, total, done, iter_s, sp, att, greq):
    """Sort ``run[:nrun]`` stably by the policy's key (the simulator sorts its list in place)."""
    k0 = np.zeros(nrun)
    k1 = np.zeros(nrun)
    k2 = np.empty(nrun)
    for i in range(nrun):
        j = run[i]
        k2[i] = arrival[j]
        if policy == FIFO:
            continue
        k0[i] = -prio[j]
        if policy == LAS:
            k1[i] = att[j] * greq[j]
            continue
        rem = total[j] - done[j]
        r = iter_s[j] * rem if fair else iter_s[j] * rem / sp[j]
        k1[i] = r if policy == SRTF else (now - arrival[j] + r) / (iter_s[j] * total[j])
    p = _lexsort3(k0, k1, k2)
    run[:nrun] = run[:nrun][p]


@jit
def run_synergy(arrival, total, greq, demand, sp0, iter_s, pen, S, G, cap, round_s, t0, policy, mode, max_rounds,
                wait_gaps, theta, finish, first, att, out_i):
    """Replay the jobs (sorted by arrival) as Synergy's simulator does; see the module docstring.
    ``wait_gaps``: a round with no runnable job skips to the next arrival's round instead of
    ending the replay. ``theta``: the admission's load threshold (0: every arrived job is runnable;
    else arrived jobs join, in arrival order, while the runnable jobs' GPUs are within ``theta`` ×
    the cluster's: ``kernels.admission.admit_to``, the native engine's rule)."""
    n = arrival.shape[0]
    ngpu = S * G
    fairv = cap / cap[0]
    fair = mode == FAIR
    used = np.zeros((S, NRES))
    hold = np.zeros((S, NRES))
    pg = np.empty(ngpu, np.int64)
    g_lo = np.zeros(n, np.int64)
    g_hi = np.zeros(n, np.int64)
    e_srv = np.empty(ngpu, np.int64)
    e_res = np.zeros((ngpu, NRES))
    e_lo = np.zeros(n, np.int64)
    e_hi = np.zeros(n, np.int64)
    cur = np.zeros(2, np.int64)
    srv_jobs = np.empty((S, G), np.int64)
    srv_cnt = np.zeros(S, np.int64)
    done = np.zeros(n, np.int64)
    last_done = np.zeros(n, np.int64)
    att[:] = 0.0
    sp = sp0.copy()
    prio = np.zeros(n, np.int64)
    last_run = np.full(n, -1.0)
    taken = np.zeros(ngpu, np.bool_)
    st = (greq, demand, used, hold, cap, G, pg, g_lo, g_hi, e_srv, e_res, e_lo, e_hi, cur, srv_jobs, srv_cnt,
          round_s, done, last_done, total, att, iter_s, pen, sp, taken)
    run = np.empty(n, np.int64)
    leased = np.empty(n, np.int64)
    free = np.empty(ngpu, np.int64)
    chosen = np.empty(n, np.int64)
    d = np.empty(NRES)
    nrun, nlease, nxt, now = 0, 0, 0, t0
    finish[:] = np.nan
    first[:] = np.nan
    out_i[0], out_i[1], out_i[2] = ROUND_LIMIT, 0, -1
    for rnd in range(max_rounds):
        out_i[1] = rnd + 1
        for a in range(nlease):  # every lease ends
            j = leased[a]
            last_run[j] = now
            if done[j] >= total[j]:
                finish[j] = now
        m, active = 0, 0
        for i in range(nrun):
            if not finish[run[i]] >= 0:
                run[m] = run[i]
                active += greq[run[i]]
                m += 1
        nrun = m
        arrived = nxt
        while arrived < n and arrival[arrived] <= now:
            arrived += 1
        last = admit_to(theta, ngpu, active, nxt, arrived, greq)
        while nxt < last:
            run[nrun] = nxt
            nrun += 1
            nxt += 1
        used[:, :] = 0.0
        srv_cnt[:] = 0
        cur[:] = 0
        _order(run, nrun, policy, fair, now, prio, arrival, total, done, iter_s, sp, att, greq)
        for i in range(nrun):
            sp[run[i]] = sp0[run[i]]
        nchosen, left = 0, ngpu
        for i in range(nrun):
            j = run[i]
            if left >= greq[j]:
                chosen[nchosen] = j
                nchosen += 1
                left -= greq[j]
            since = now - (arrival[j] if last_run[j] < 0 else last_run[j])
            if since > STARVE_S:
                prio[j] = 1
        if policy == LAS and mode == TUNE:
            neg = np.empty(nchosen)
            for i in range(nchosen):
                neg[i] = -greq[chosen[i]]
            chosen[:nchosen] = chosen[:nchosen][np.argsort(neg, kind="mergesort")]
        for g in range(ngpu):
            free[g] = g
        nfree = ngpu
        nlease = 0
        cand = chosen if policy == LAS else run
        ncand = nchosen if policy == LAS else nrun
        for i in range(ncand):
            j = cand[i]
            if nfree < greq[j]:
                continue
            if mode == TUNE:
                m = _tune(j, free, nfree, fairv, S, st)
                if m < 0:
                    out_i[0], out_i[2] = TUNE_FAILED, j
                    return
            else:
                if fair:
                    for k in range(NRES):
                        d[k] = fairv[k] * greq[j]
                else:
                    d[:] = demand[j]
                m = _allocate(j, d, fair, free, nfree, st)
                if m == nfree:
                    continue
            nfree = m
            if not first[j] >= 0:
                first[j] = now
            leased[nlease] = j
            nlease += 1
        if nrun == 0:
            if not wait_gaps or nxt == n:
                out_i[0] = OK
                return
            now += math.ceil((arrival[nxt] - now) / round_s) * round_s  # (the first round at or after it)
            continue
        now += round_s
