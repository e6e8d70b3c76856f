"""The native replay kernel: next-event (``events``) or fixed rounds (``rounds``).

Semantics (``docs/semantics.md`` has the full statement, ``fastblox.reference.native`` the
plain-Python twin):

* A running job progresses at ``rate`` work units per second (its throughput on the GPU type and
  gang size it holds, times the placement effects) after a restart cost of ``restart_s`` per
  (re)launch; it finishes at its exact completion time. A job stopped by the scheduler or by a
  node failure keeps its progress up to its last checkpoint (``checkpoint_s``; 0: all of it).
* Scheduling steps happen at arrivals, completions, node events and policy wake-ups
  (``events``), or at round boundaries ``k·R`` (``rounds``: arrivals wait for the next boundary,
  GPUs freed mid-round stay idle until it; node events happen at their own time; rounds in which
  provably nothing can change are skipped).
* A step: completions, node events, wake-ups, arrivals, admission, then one of three paths by the
  policy's kind: ``KIND_STATIC`` (a sorted waiting queue; the merged order with the running jobs
  is built only when a job that could preempt is blocked), ``KIND_FULL`` (every active job
  re-ordered by keys computed now, in the kernel or by a Python policy), ``KIND_PLAN`` (a
  planner gives every active job a key, a GPU type and a size; running jobs whose plan changed
  are stopped, then the plan is placed in key order).

All state lives in NamedTuples of arrays owned by the caller (``kernels.state``), so a run can
call back into Python for a Python policy's keys (``kernels.userpol.ask_python``), pause to ask
Python for a plan (``NEED_PLAN``), stop at a given time (``PAUSED``), resume, and be copied to
simulate ahead.

Cost per step: O(W) for the walk over W waiting jobs (a sorted insert per arrival is
O(log W + shift)); O(A log A) for ordering the A active jobs when the preempting path is taken
(``KIND_FULL``/``KIND_PLAN``: every step); O(log H) per completion (a binary heap of end times,
lazy deletion).
"""

from __future__ import annotations

import math

import numpy as np
from numba.extending import overload

from ._calls import helper
from ._jit import jit
from ._prefetch import prefetch
from .admission import admit_to
from .enums import (
    ANY_TYPE,
    DONE,
    EV_FAIL,
    KIND_FULL,
    KIND_PLAN,
    NO_RUN,
    OVERFLOW,
    POL_CUSTOM,
    POL_CUSTOM_FULL,
    POL_GITTINS,
    POL_TIRESIAS,
    RUNNING,
    TM_EVENTS,
    WAITING,
)
from .placement import assign, release, set_node_bit, spans
from .rates import launch_rate
from .state import entry
from . import variants
from .userpol import is_py_row, is_user, py_keys, py_mark, py_view, user_key, user_wake, user_wakes
from .userpol import wakes as _user_wakes_type
from .walk import resort, sort_jobs, stable_order, walk
from .walk import place

INF = np.inf

# codes returned by advance()
FINISHED = 0
PY_FAILED = 1  # the Python policy's call back failed (it raised, or returned bad keys): it holds why
DEADLOCK = 2
PAUSED = 3
NEED_PLAN = 4
SLICE_END = 5  # the call made its budget of ci[C_BUDGET] passes (a slice of the run): call again
NO_PROGRESS = 6  # time stopped moving: a bug of the kernel's (the guard below), never a property of the input

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
I_PENDING = 11  # a step is under way, waiting for keys or a plan from Python
I_NW = 12  # jobs in the waiting queue
I_NEXT_EV = 13  # next node event
I_WAKE_N = 14  # size of the wake-up heap
I_N_FAIL = 15  # jobs killed by node failures
I_N_MIGRATE = 16  # running jobs a plan moved to another type or size
I_IDLE = 17  # scheduling steps in a row that left the cluster empty with jobs waiting
I_WQ_HEAD = 18  # the waiting queue is ``q.wq[head:head + n]`` (n = si[I_NW])
I_N_RO = 19  # entries in ``q.ro`` (running jobs in key order as of the last preempting step)
I_SAME_T = 20  # passes in a row at the current instant (the no-progress guard)
I_SIZE = 24

# slots of the float scalar state ``sf``
F_T = 0
F_BUSY_GPU_S = 1  # GPU-seconds held by jobs (including restart cost)
F_LAST_B = 2  # time of the last scheduling step (rounds: the last boundary)
F_DIRTY = 3  # rounds: earliest node event since the last boundary (INF: none)
F_LOST_GPU_S = 4  # GPU-seconds of progress lost to kills (since the last checkpoint)
F_SIZE = 8

# config ints ``ci``
C_POLICY = 0
C_PLACEMENT = 1
C_PREEMPT = 2
C_TIME_MODEL = 3
C_DYNAMIC = 4  # keys change while jobs run (LAS, SRTF, user policies): rounds cannot be skipped
C_SERIES = 5  # record one row per step
C_KIND = 6  # KIND_STATIC / KIND_FULL / KIND_PLAN
C_PY = 7  # keys or plans come from Python
C_N_TYPES = 8  # GPU types in the cluster
C_BUDGET = 9  # passes (one per scheduling time) per call before SLICE_END; 0: no limit
C_HOL = 10  # head-of-line blocking: a queue's walk ends at the first waiting job that does not fit (no backfilling)
C_SIZE = 12

# config floats ``cf``
CF_ROUND_S = 0
CF_RESTART_S = 1
CF_THETA = 2  # <= 0: accept all
CF_CKPT_S = 3  # checkpoint interval of productive time (0: nothing is lost when a job stops)
CF_RACK_FACTOR = 4  # rate multiplier of a gang spanning racks (on top of the node factor)
CF_STOP_T = 5  # advance returns PAUSED instead of stepping past this time
CF_PROMOTE = 6  # Tiresias: promote a job that waited promote × its last run time (0: never)
CF_THEMIS_F = 7  # Themis: fairness knob f in [0, 1)
CF_SIZE = 12

SERIES_COLS = 7
PLAN_IDLE_LIMIT = 1000


@jit(nrt=False)
def no_progress_limit(n_jobs, n_ev):
    """How many passes of the event loop at one instant (or wake-ups taken at one instant) mean
    time has stopped: ``advance`` then returns ``NO_PROGRESS`` instead of looping forever. A legit
    run passes at one instant at most once per completion, node event and promotion there, plus
    one (at most ``2 n_jobs + n_ev + 1``), and takes at most ``2 n_jobs + 1`` wake-ups there (every
    entry of the wake-up heap, of capacity ``n_jobs + 1``, and one re-arm per running job, always
    for a later instant): the limit is twice that, never reached by a run that is right."""
    return 4 * (n_jobs + n_ev) + 64


@helper(nrt=False, inline=True)
def heap_push(ht, hj, hv, n, t, j, v):
    """Push (t, j, v) onto the binary min-heap ``ht/hj/hv[:n]`` ordered by (t, j); returns new size.
    The entries on its way up move down one level each; (t, j, v) is written once, where it stops."""
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if ht[p] < t or (ht[p] == t and hj[p] <= j):
            break
        ht[i] = ht[p]
        hj[i] = hj[p]
        hv[i] = hv[p]
        i = p
    ht[i] = t
    hj[i] = j
    hv[i] = v
    return n + 1


@helper(nrt=False, inline=True)
def heap_pop(ht, hj, hv, n):
    """Remove the minimum of the heap of size ``n``; returns the new size. Bottom-up (Floyd): the
    hole at the top goes down to a leaf along the smaller children (one comparison per level),
    then the last entry goes up from there (rarely more than a level or two). The order in which
    entries come out is the heap's (t, j) order either way."""
    n -= 1
    t = ht[n]
    j = hj[n]
    v = hv[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hj[c + 1] < hj[c])):
            c += 1
        ht[i] = ht[c]
        hj[i] = hj[c]
        hv[i] = hv[c]
        i = c
    while i > 0:
        p = (i - 1) >> 1
        if ht[p] < t or (ht[p] == t and hj[p] <= j):
            break
        ht[i] = ht[p]
        hj[i] = hj[p]
        hv[i] = hv[p]
        i = p
    ht[i] = t
    hj[i] = j
    hv[i] = v
    return n


@helper(nrt=False)
def heap_compact(ht, hj, hv, n, version):
    """Drop stale entries (their job has moved on to another version) and rebuild; returns the size.
    Live entries are at most one per job, so a heap of capacity N + 1 always has room."""
    w = 0
    for i in range(n):
        if version[hj[i]] == hv[i]:
            ht[w] = ht[i]
            hj[w] = hj[i]
            hv[w] = hv[i]
            w += 1
    m = 0
    for i in range(w):
        m = heap_push(ht, hj, hv, m, ht[i], hj[i], hv[i])
    return m


@helper(nrt=False, inline=True)
def heap_add(ht, hj, hv, n, t, j, v, version):
    """``heap_push`` that first compacts a full heap."""
    if n >= ht.shape[0]:
        n = heap_compact(ht, hj, hv, n, version)
    return heap_push(ht, hj, hv, n, t, j, v)


@helper(nrt=False, inline=True)
def rq_add(rq, rpos, nr, j):
    rq[nr] = j
    rpos[j] = nr
    return nr + 1


@helper(nrt=False, inline=True)
def rq_remove(rq, rpos, nr, j):
    """Remove ``j`` from the unordered running list in O(1) (the last entry takes its place)."""
    p = rpos[j]
    last = rq[nr - 1]
    rq[p] = last
    rpos[last] = p
    return nr - 1


@helper(nrt=False)
def _level(thresholds, service):
    """Tiresias' queue of a job with ``service`` attained GPU-seconds: the number of thresholds
    at or below it (queue 0 is the highest priority)."""
    k = 0
    while k < thresholds.shape[0] and service >= thresholds[k]:
        k += 1
    return k


@helper(nrt=False)
def _gittins(pp, service):
    """The Gittins index at ``service`` attained GPU-seconds (a step function, see PolicyParams)."""
    xs = pp.gittins_x
    lo = 0
    hi = xs.shape[0]
    while lo < hi:
        mid = (lo + hi) >> 1
        if xs[mid] <= service:
            lo = mid + 1
        else:
            hi = mid
    return pp.gittins_v[lo - 1] if lo > 0 else pp.gittins_v[0]


@helper(nrt=False)
def run_level(pp, j, t, run):
    """Tiresias' queue of running job ``j`` at ``t``: its service (GPU-seconds since its last
    promotion) moves it down at the instant ``launch_t + (threshold - service at launch) / GPUs``
    (the time its wake-up is set for, so the two agree to the bit)."""
    thr = pp.thresholds
    ag = run.attained_gpu[j] - run.svc0[j]
    g = run.held[j]
    # never above the queue it was launched in: its summed service can fall a rounding error
    # short of the threshold it crossed (the crossing instant decides, not the sum)
    k = max(_level(thr, ag), run.rank[j])
    while k < thr.shape[0] and run.launch_t[j] + (thr[k] - ag) / g <= t:
        k += 1
    return k


@helper(nrt=False)
def _crossing(pp, j, run, lvl):
    """When running job ``j`` entered queue ``lvl`` (> the queue it was launched in)."""
    return run.launch_t[j] + (pp.thresholds[lvl - 1] - (run.attained_gpu[j] - run.svc0[j])) / run.held[j]


@helper(nrt=False, inline=True)
def rank_key(policy, j, t, jobs, run, pp, restart_s):
    """``(rank, key)`` of active job ``j`` at time ``t``: lower runs first, ties in arrival order.
    The policy's own key function (``fastblox/policies/NAME.py``) gives it; for a waiting job of a
    ``KIND_STATIC`` policy it does not change while it waits (except at a Tiresias promotion,
    which is a wake-up)."""
    running = run.status[j] == RUNNING
    el = t - run.launch_t[j] if running else 0.0
    return policy_key(policy, j, t, running, el, jobs, run, pp, restart_s)


# ------------------------------------------------------------------ the built-in policies' keys
# A built-in policy is one file under ``fastblox/policies/`` (its key function, its registration
# and its rule). The kernels reach its key function through the two functions below: compiled,
# each is a chain ``if policy == CODE: return KEY(...)`` over the registered built-in policies,
# generated when a kernel that calls it is compiled (the kernel cache's digest covers
# ``fastblox/policies/*.py`` as well as this package, so a changed policy file recompiles).
def policy_key(policy, j, t, running, el, jobs, run, pp, restart_s):
    """``(rank, key)`` from the key function of built-in policy ``policy`` (``running``: job ``j``
    holds GPUs; ``el``: seconds since its launch, 0 if not running)."""
    return _key_fns("key")[policy](j, t, running, el, jobs, run, pp, restart_s)


def policy_keys(policy, t, jobs, run, s, na, restart_s, lease_s, f, pp):
    """A ``KIND_FULL`` built-in policy's keys of the ``na`` active jobs, into ``s.keys`` by
    position (and ``s.prio`` by job: 0 for jobs that go first, 1 for the others); a compiled
    user policy's (``pp`` a ``UserParams``) from its key of each job."""
    _key_fns("keys")[policy](t, jobs, run, s, na, restart_s, lease_s, f)


def _key_fns(field: str) -> dict:
    """``{code: key function}`` of the built-in policies (``Policy.key`` or ``Policy.keys``):
    only policies defined under ``fastblox/policies/``, the files the kernel cache keys on."""
    from fastblox import parts, policies

    out = {}
    for p in parts.POLICIES.values():
        fn = getattr(p, field)
        if fn is not None and policies.is_builtin(fn):
            out[p.code] = fn
    return out


def _chain(field: str, args: str, default: str, extra: str = "", user=None, user_args: str = "",
           user_code: int = POL_CUSTOM):
    """A function ``chain(policy, ARGS EXTRA)``: ``if policy == CODE: return FN(ARGS)`` over the
    built-in key functions; with ``user``, first ``if policy == USER_CODE: return
    user(USER_ARGS)`` (a compiled user policy)."""
    fns = sorted(_key_fns(field).items())
    lines = [f"def chain(policy, {args}{extra}):"]
    if user is not None:
        lines.append(f"    if policy == {int(user_code)}:\n        return user({user_args})")
    for code, _ in fns:
        lines.append(f"    if policy == {int(code)}:\n        return k{int(code)}({args})")
    lines.append(f"    return {default}")
    ns = {f"k{int(code)}": fn for code, fn in fns}
    ns["user"] = user
    exec("\n".join(lines), ns)  # (generated from integer codes and fixed names only)
    return ns["chain"]


@helper(nrt=False, inline=True)
def _before(ra, ka, a, rb, kb, b):
    """(rank, key, job index) order."""
    if ra != rb:
        return ra < rb
    return ka < kb or (ka == kb and a < b)


@helper(nrt=False, inline=True)
def _wq_pos(q, h, nw, rj, kj, j):
    """Where ``(rj, kj, j)`` goes in the waiting queue ``q.wq[h:h + nw]`` (binary search)."""
    lo = 0
    hi = nw
    while lo < hi:
        mid = (lo + hi) >> 1
        m = q.wq[h + mid]
        if _before(q.wrank[m], q.wkey[m], m, rj, kj, j):
            lo = mid + 1
        else:
            hi = mid
    return lo


@helper(nrt=False)
def wq_slide(wq, h, nw):
    """Move the queue ``wq[h:h + nw]`` to the start of the array; returns the new head (0)."""
    for a in range(nw):
        wq[a] = wq[h + a]
    return 0


@helper(nrt=False, inline=True)
def wq_insert(q, h, nw, j):
    """Insert job ``j`` into the waiting queue ``q.wq[h:h + nw]``, sorted by (wrank, wkey, index);
    returns ``(head, length)``. O(log n) to find the place, then the shorter side moves one slot:
    the front into the room launches leave before the head, the back towards the end of the
    array (2n + 2 slots: the window slides back to the start when it reaches the end)."""
    wq = q.wq
    lo = _wq_pos(q, h, nw, q.wrank[j], q.wkey[j], j)
    if h > 0 and lo < nw - lo:
        for p in range(h - 1, h + lo - 1):
            wq[p] = wq[p + 1]
        h -= 1
    else:
        if h + nw >= wq.shape[0]:
            h = wq_slide(wq, h, nw)
        for p in range(h + nw, h + lo, -1):
            wq[p] = wq[p - 1]
    wq[h + lo] = j
    return h, nw + 1


@helper(nrt=False)
def wq_remove(q, h, nw, j):
    """Remove job ``j`` (keyed as it was inserted) from the waiting queue; returns ``(head,
    length)``. The shorter side closes the gap."""
    wq = q.wq
    p = _wq_pos(q, h, nw, q.wrank[j], q.wkey[j], j)
    if p < nw - 1 - p:
        for x in range(h + p, h, -1):
            wq[x] = wq[x - 1]
        h += 1
    else:
        for x in range(h + p, h + nw - 1):
            wq[x] = wq[x + 1]
    return h, nw - 1


@helper(nrt=False)
def wq_merge(q, h, nw, new, m):
    """Merge the jobs ``new[:m]`` (sorted by (wrank, wkey, index), none in the queue) into the
    waiting queue ``q.wq[h:h + nw]``; returns ``(head, length)``. One pass from whichever end
    moves fewer jobs (the front moves into the room before the head): O(m + min(jobs after the
    first new one, jobs before the last new one)), instead of one shift of the queue per job."""
    wq = q.wq
    wrank = q.wrank
    wkey = q.wkey
    first = _wq_pos(q, h, nw, wrank[new[0]], wkey[new[0]], new[0])
    last = _wq_pos(q, h, nw, wrank[new[m - 1]], wkey[new[m - 1]], new[m - 1])
    if h >= m and last < nw - first:
        # forward from the front: the queue's head moves m slots left
        i = 0
        k = 0
        out = h - m
        while k < m:
            v = new[k]
            if i < nw and _before(wrank[wq[h + i]], wkey[wq[h + i]], wq[h + i], wrank[v], wkey[v], v):
                wq[out] = wq[h + i]
                i += 1
            else:
                wq[out] = v
                k += 1
            out += 1
        return h - m, nw + m
    if h + nw + m > wq.shape[0]:
        h = wq_slide(wq, h, nw)
    i = nw - 1
    k = m - 1
    out = nw + m - 1
    while k >= 0:
        v = new[k]
        if i >= 0 and _before(wrank[v], wkey[v], v, wrank[wq[h + i]], wkey[wq[h + i]], wq[h + i]):
            wq[h + out] = wq[h + i]
            i -= 1
        else:
            wq[h + out] = v
            k -= 1
        out -= 1
    return h, nw + m


@helper(nrt=False)
def sort_small(a, m, rank, key):
    """Sort ``a[:m]`` in place by ``(rank[j], key[j], j)``: insertion sort (for a few jobs)."""
    for x in range(1, m):
        v = a[x]
        y = x - 1
        while y >= 0 and _before(rank[v], key[v], v, rank[a[y]], key[a[y]], a[y]):
            a[y + 1] = a[y]
            y -= 1
        a[y + 1] = v


@helper(nrt=False, inline=True)
def set_key(policy, j, t, jobs, run, q, pp, restart_s):
    """Key a job that starts waiting (``q.wrank``/``q.wkey``; a row-wise Python policy's: a
    provisional key until the step's call back, ``py_row_step``)."""
    py_mark(pp, j)
    r, k = rank_key(policy, j, t, jobs, run, pp, restart_s)
    q.wrank[j] = r
    q.wkey[j] = k


@helper(nrt=False, inline=True)
def enqueue(policy, j, t, jobs, run, q, pp, h, nw, restart_s):
    """Key a job that starts waiting and insert it into the waiting queue; returns ``(head,
    length)``."""
    set_key(policy, j, t, jobs, run, q, pp, restart_s)
    return wq_insert(q, h, nw, j)


@helper(nrt=False)
def wake_time(policy, j, t, jobs, run, pp, promote):
    """When the key of job ``j`` next moves on its own (``INF``: never). Tiresias and Gittins: a
    running job crossing its next queue threshold; a waiting job of a lower queue reaching its
    starvation limit (it has waited ``promote`` × the seconds it ran since its last promotion)."""
    if policy != POL_TIRESIAS and policy != POL_GITTINS:
        return INF
    if run.status[j] == RUNNING:
        k = run_level(pp, j, t, run)
        if k >= pp.thresholds.shape[0]:
            return INF
        return run.launch_t[j] + (pp.thresholds[k] - (run.attained_gpu[j] - run.svc0[j])) / run.held[j]
    ran = run.attained[j] - run.exec0[j]
    if promote > 0.0 and run.rank[j] > 0 and ran > 0.0:
        return max(t, run.wait_t[j] + (promote * ran - run.pend0[j]))
    return INF


@helper(nrt=False, inline=True)
def _wakes_any(policy, pp):
    return user_wakes(pp) or policy == POL_TIRESIAS or policy == POL_GITTINS


@helper(nrt=False, inline=True)
def _next_wake_any(policy, j, t, jobs, run, pp, cf):
    if user_wakes(pp):
        return user_wake(j, t, jobs, run, pp, cf[CF_RESTART_S])
    return wake_time(policy, j, t, jobs, run, pp, cf[CF_PROMOTE])


# ------------------------------------------------- what a kernel variant compiles (kernels/variants.py)
# ``policy`` below is the run's policy code (an int: chosen at run time) or, in a kernel specialized
# on the policy, a marker whose type names it: each function then compiles that policy's code only.
QUEUED_CODES = (POL_TIRESIAS, POL_GITTINS)  # Tiresias' queues: levels, starvation promotion, wake-ups


def _wakes(policy, pp):
    """Whether the policy sets wake-ups: Tiresias and Gittins, or a user policy that asks for them."""
    return user_wakes(pp) or policy in QUEUED_CODES


def next_wake(policy, j, t, jobs, run, pp, cf):
    """:func:`wake_time`, or the wake-up a user policy asked for (``kernels.userpol.user_wake``)."""
    return _next_wake_any(policy, j, t, jobs, run, pp, cf)


def queued(policy):
    """Whether the policy keeps Tiresias' queues (a job's level, its starvation counter)."""
    return policy in QUEUED_CODES


def settle_level(policy, j, t, run, pp):
    """A Tiresias or Gittins job stopped at ``t`` keeps the queue level its service reached."""
    if policy in QUEUED_CODES:
        lvl = run_level(pp, j, t, run)
        if lvl != run.rank[j]:
            run.qentry[j] = _crossing(pp, j, run, lvl)
            run.rank[j] = lvl


def wakeups(path, t, jobs, run, q, pp, ci, cf, wq_head, n_wait, wake_n, spin_max):
    """:func:`_wakeups`, compiled only where the policy can set wake-ups."""
    return _wakeups(path, t, jobs, run, q, pp, ci, cf, wq_head, n_wait, wake_n, spin_max)


def policy_of(path, ci):
    """The run's policy: ``ci[C_POLICY]``, or the marker of the policy the kernel is specialized on."""
    return ci[C_POLICY]


def placement_of(path, ci):
    """The run's placement: ``ci[C_PLACEMENT]``, or the marker of the one the kernel is specialized on."""
    return ci[C_PLACEMENT]


def _fixed_policy(policy):
    """The code of a policy marker's type, else None (an int: chosen at run time)."""
    return variants.fixed_code(policy, "policy_code")


@helper(nrt=False)
def promote_job(j, t, run):
    """Tiresias' starvation promotion: back to queue 0's tail, service counted afresh."""
    run.rank[j] = 0
    run.qentry[j] = t
    run.svc0[j] = run.attained_gpu[j]
    run.exec0[j] = run.attained[j]
    run.pend0[j] = 0.0


@helper(nrt=False)
def stop_job(j, t, run, restart_s, ckpt_s, policy, pp):
    """Account for a running job stopped at ``t`` (suspended or killed): progress up to its last
    checkpoint is kept, service counts every second it held GPUs, Tiresias' queue is kept in
    ``rank`` (and when it entered it in ``qentry``). The caller frees its GPUs. Returns
    ``(gpu_s, lost_gpu_s)``: the GPU-seconds it held since its launch and the GPU-seconds of
    progress it lost, for the run's totals."""
    settle_level(policy, j, t, run, pp)
    el = t - run.launch_t[j]
    prod = max(0.0, el - restart_s)
    kept = prod
    if ckpt_s > 0.0:
        kept = math.floor(prod / ckpt_s) * ckpt_s
    run.work_left[j] -= kept * run.rate[j]
    lost = 0.0
    if prod > kept:
        run.lost_s[j] += prod - kept
        lost = (prod - kept) * run.held[j]
    run.attained[j] += el
    run.attained_gpu[j] += el * run.held[j]
    run.version[j] += 1
    return el * run.held[j], lost


@helper(nrt=False)
def _stuck(q, run, wake_n, next_arr, next_ev, n_jobs, n_ev):
    """Nothing is left to arrive, no node event or policy wake-up is pending (stale wake-ups
    dropped first): with nothing running, the waiting jobs will never be placed. Returns
    ``(stuck, size of the wake-up heap)``."""
    while wake_n > 0 and run.version[q.wake_j[0]] != q.wake_v[0]:
        wake_n = heap_pop(q.wake_t, q.wake_j, q.wake_v, wake_n)
    return next_arr == n_jobs and next_ev == n_ev and wake_n == 0, wake_n


@helper(nrt=False)
def _insertion_fix(a, m, rank, key, budget):
    """Insertion-sort ``a[:m]`` by ``(rank[j], key[j], j)`` in place, for a list already nearly in
    order. Gives up (returns False, ``a`` a permutation of what it was) after ``budget`` moves."""
    moves = 0
    for x in range(1, m):
        v = a[x]
        y = x - 1
        while y >= 0 and _before(rank[v], key[v], v, rank[a[y]], key[a[y]], a[y]):
            a[y + 1] = a[y]
            y -= 1
            moves += 1
        a[y + 1] = v
        if moves > budget:
            return False
    return True


@helper
def _running_order(ro, ro_ver, n_ro, rq, nr, status, version, rank, key, new, out):
    """Bring ``ro[:n_ro]``, the running jobs in ``(rank, key, job)`` order as of the last
    preempting step, up to date with the keys just computed for the ``nr`` running jobs ``rq``;
    returns its new length. Jobs that stopped since (their version moved on) drop out, jobs
    launched since are sorted and merged in, and one insertion pass restores the exact order:
    under LAS and SRTF the keys of running jobs move together, so the kept order holds up to
    rounding; a policy whose running keys cross (LAS-GPU, Gittins) costs a full sort when the
    pass finds more than 8 moves per job. ``new`` and ``out`` are scratch. O(R) when little moved,
    instead of O(R log R)."""
    nk = 0
    for a in range(n_ro):
        r = ro[a]
        if status[r] == RUNNING and ro_ver[r] == version[r]:
            ro[nk] = r
            nk += 1
    nn = 0
    for a in range(nr):
        r = rq[a]
        if ro_ver[r] != version[r]:
            ro_ver[r] = version[r]
            new[nn] = r
            nn += 1
    if nn <= 32:
        sort_small(new, nn, rank, key)
    else:
        sort_jobs(new[:nn].copy(), nn, rank, key, new)
    a = 0
    b = 0
    no = 0
    while a < nk or b < nn:
        if b >= nn or (a < nk and _before(rank[ro[a]], key[ro[a]], ro[a], rank[new[b]], key[new[b]], new[b])):
            out[no] = ro[a]
            a += 1
        else:
            out[no] = new[b]
            b += 1
        no += 1
    if not _insertion_fix(out, no, rank, key, 8 * no + 64):
        sort_jobs(out[:no].copy(), no, rank, key, out)
    for a in range(no):  # (a loop: a slice assignment compiles numba's shape-mismatch error message)
        ro[a] = out[a]
    return no


@helper(nrt=False, inline=True)
def _touch(j, version, alloc_off, status):
    """Prefetch what a completion of job ``j`` reads first: both lines of its record it uses
    (``version`` in the first, ``alloc_off`` in the second) and its status."""
    prefetch(version, j)
    prefetch(alloc_off, j)
    prefetch(status, j)


@helper(nrt=False)
def _free_up(nodes):
    total = 0
    free = 0
    for nd in range(nodes.gpus.shape[0]):
        if nodes.up[nd]:
            total += nodes.gpus[nd]
            free += nodes.free[nd]
    return total, free


# ------------------------------------------------------------------------------- event phases
@helper(nrt=False, inline=True)
def _next_boundary(t, last_b, round_s, dynamic, kind, n_wait, n_running, t_arr, t_end, t_wake, dirty):
    """Rounds: the next round boundary at which something can change (``INF``: none)."""
    if (dynamic and n_wait > 0) or (kind == KIND_PLAN and n_wait + n_running > 0):
        t_new = last_b + round_s
        if t_new < t:  # a node event since then (handled at its own time) came first
            t_new = math.ceil(t / round_s) * round_s
        return t_new
    t_ev = min(min(t_arr, t_end), dirty)
    if n_wait > 0:
        t_ev = min(t_ev, t_wake)
    if t_ev == INF:
        return INF
    return max(math.ceil(t_ev / round_s) * round_s, last_b + round_s)


@helper(nrt=False, inline=True)
def _next_time(t, started, ci, cf, last_b, dirty, n_wait, n_running, next_arr, jobs, run, q, heap_n, wake_n, t_clu):
    """The time of the next step; returns ``(t_new, boundary, heap_n, wake_n)``. ``boundary`` is
    False for a rounds-mode node event between boundaries (handled at its own time, without a
    scheduling pass). Stale tops of the completion and wake-up heaps are dropped on the way."""
    events = ci[C_TIME_MODEL] == TM_EVENTS
    n_jobs = jobs.submit.shape[0]
    if started == 0:
        if not events:
            return 0.0, True, heap_n, wake_n
        t_new = jobs.submit[0] if n_jobs > 0 else 0.0
        return (t_clu if t_clu < t_new else t_new), True, heap_n, wake_n
    status, version = run.status, run.version
    # jobs held back by admission only get in after a completion: no event of their own
    t_arr = jobs.submit[next_arr] if next_arr < n_jobs else INF
    while heap_n > 0:  # drop stale tops (suspended or finished jobs)
        j0 = q.heap_j[0]
        if status[j0] == RUNNING and version[j0] == q.heap_v[0]:
            break
        heap_n = heap_pop(q.heap_t, q.heap_j, q.heap_v, heap_n)
        if heap_n > 0:
            _touch(q.heap_j[0], version, jobs.alloc_off, status)
    t_end = q.heap_t[0] if heap_n > 0 else INF
    while wake_n > 0 and version[q.wake_j[0]] != q.wake_v[0]:
        wake_n = heap_pop(q.wake_t, q.wake_j, q.wake_v, wake_n)
    t_wake = q.wake_t[0] if wake_n > 0 else INF
    if events:
        return min(min(t_arr, t_end), min(t_clu, t_wake)), True, heap_n, wake_n
    t_new = _next_boundary(t, last_b, cf[CF_ROUND_S], ci[C_DYNAMIC] != 0, ci[C_KIND], n_wait, n_running, t_arr,
                           t_end, t_wake, dirty)
    if t_clu < t_new:
        return t_clu, False, heap_n, wake_n
    return t_new, True, heap_n, wake_n


@helper(nrt=False, inline=True)
def _completions(t, jobs, run, nodes, q, heap_n, free, demand, n_running, tracked_left, busy):
    """Jobs finishing up to ``t`` (exact finish times) leave; returns the updated ``(heap_n, free,
    demand, n_running, tracked_left, busy GPU-seconds)``."""
    status, version, held = run.status, run.version, run.held
    heap_t, heap_j, heap_v = q.heap_t, q.heap_j, q.heap_v
    while heap_n > 0 and heap_t[0] <= t:
        j = heap_j[0]
        te = heap_t[0]
        valid = status[j] == RUNNING and version[j] == heap_v[0]
        heap_n = heap_pop(heap_t, heap_j, heap_v, heap_n)
        if heap_n > 0:
            _touch(heap_j[0], version, jobs.alloc_off, status)
        if not valid:
            continue
        el = te - run.launch_t[j]
        g = held[j]
        run.attained[j] += el
        run.attained_gpu[j] += el * g
        busy += el * g
        run.work_left[j] = 0.0
        run.finish[j] = te
        status[j] = DONE
        version[j] += 1
        release(run.alloc, jobs.alloc_off[j], g, nodes)
        free += g  # a node going down kills its jobs first: these nodes are up
        held[j] = 0
        demand -= jobs.gpus[j]
        n_running = rq_remove(q.rq, q.rpos, n_running, j)
        if jobs.tracked[j]:
            tracked_left -= 1
    return heap_n, free, demand, n_running, tracked_left, busy


@helper(nrt=False)
def _kill_node(path, nd, te, jobs, run, nodes, q, pp, ci, cf, busy, lost, free, n_fail, n_running, wq_head, n_wait, wake_n):
    """Node ``nd`` goes down at ``te``: its jobs are killed (all their GPUs freed) and wait again.
    Returns the updated ``(busy, lost, free, n_fail, n_running, wq_head, n_wait, wake_n)``."""
    policy = policy_of(path, ci)
    restart_s = cf[CF_RESTART_S]
    wakes = _wakes(policy, pp)
    alloc, held = run.alloc, run.held
    for k in range(nodes.gpus[nd]):
        j = nodes.owner[nodes.base[nd] + k]
        if j < 0:
            continue
        b, lo = stop_job(j, te, run, restart_s, cf[CF_CKPT_S], policy, pp)
        busy += b
        lost += lo
        o = jobs.alloc_off[j]
        g = held[j]
        for x in range(g):
            if nodes.up[nodes.gpu_node[alloc[o + x]]]:
                free += 1
        release(alloc, o, g, nodes)
        held[j] = 0
        run.n_fail[j] += 1
        n_fail += 1
        run.status[j] = WAITING
        run.wait_t[j] = te
        n_running = rq_remove(q.rq, q.rpos, n_running, j)
        wq_head, n_wait = enqueue(policy, j, te, jobs, run, q, pp, wq_head, n_wait, restart_s)
        if wakes:
            tw = next_wake(policy, j, te, jobs, run, pp, cf)
            if tw < INF:
                wake_n = heap_add(q.wake_t, q.wake_j, q.wake_v, wake_n, tw, j, run.version[j], run.version)
    return busy, lost, free, n_fail, n_running, wq_head, n_wait, wake_n


@helper(nrt=False)
def _node_events(path, t, jobs, run, nodes, q, ev, pp, ci, cf, next_ev, busy, lost, free, total_gpus, n_fail, n_running,
                 wq_head, n_wait, wake_n, dirty):
    """Node events up to ``t``, at their own times. Returns the updated ``(next_ev, busy, lost,
    free, total_gpus, n_fail, n_running, wq_head, n_wait, wake_n, dirty)``."""
    while next_ev < ev.t.shape[0] and ev.t[next_ev] <= t:
        e = next_ev
        next_ev += 1
        nd = ev.node[e]
        te = ev.t[e]
        if ev.kind[e] == EV_FAIL:
            if not nodes.up[nd]:
                continue
            busy, lost, free, n_fail, n_running, wq_head, n_wait, wake_n = _kill_node(
                path, nd, te, jobs, run, nodes, q, pp, ci, cf, busy, lost, free, n_fail, n_running, wq_head, n_wait, wake_n)
            free -= nodes.free[nd]
            total_gpus -= nodes.gpus[nd]
            nodes.up[nd] = 0
        else:
            if nodes.up[nd]:
                continue
            nodes.up[nd] = 1
            free += nodes.free[nd]
            total_gpus += nodes.gpus[nd]
        set_node_bit(nodes, nd)
        if te < dirty:
            dirty = te
    return next_ev, busy, lost, free, total_gpus, n_fail, n_running, wq_head, n_wait, wake_n, dirty


@helper(nrt=False, inline=True)
def _wakeups(path, t, jobs, run, q, pp, ci, cf, wq_head, n_wait, wake_n, spin_max):
    """Policy wake-ups up to ``t``: a waiting job promoted for starving moves to queue 0; a running
    job that crossed a queue threshold gets its next crossing. Returns ``(wq_head, n_wait, wake_n,
    spun)``; ``spun``: more than ``spin_max`` wake-ups at ``t`` (one re-armed for an instant
    already passed: the no-progress guard)."""
    policy = policy_of(path, ci)
    restart_s = cf[CF_RESTART_S]
    wake_t, wake_j, wake_v, version = q.wake_t, q.wake_j, q.wake_v, run.version
    n_woken = 0
    while wake_n > 0 and wake_t[0] <= t:
        n_woken += 1
        if n_woken > spin_max:
            return wq_head, n_wait, wake_n, True
        j = wake_j[0]
        valid = version[j] == wake_v[0]
        wake_n = heap_pop(wake_t, wake_j, wake_v, wake_n)
        if not valid:
            continue
        if run.status[j] == WAITING:
            wq_head, n_wait = wq_remove(q, wq_head, n_wait, j)
            if not user_wakes(pp):
                promote_job(j, t, run)
            wq_head, n_wait = enqueue(policy, j, t, jobs, run, q, pp, wq_head, n_wait, restart_s)
            if user_wakes(pp):  # (re-keyed by the user's function: it may ask again)
                tw = next_wake(policy, j, t, jobs, run, pp, cf)
                if tw < INF:
                    wake_n = heap_add(wake_t, wake_j, wake_v, wake_n, tw, j, version[j], version)
        elif run.status[j] == RUNNING:
            # crossed a queue threshold (running keys are computed when needed): set the next crossing
            tw = next_wake(policy, j, t, jobs, run, pp, cf)
            if tw < INF:
                wake_n = heap_add(wake_t, wake_j, wake_v, wake_n, tw, j, version[j], version)
    return wq_head, n_wait, wake_n, False


@helper(nrt=False, inline=True)
def _arrivals(path, t, jobs, run, q, pp, ci, cf, total_gpus, next_arr, ov_head, wq_head, n_wait, demand, wake_n):
    """Jobs submitted up to ``t`` arrive; admission lets them into the waiting queue. Returns
    ``(next_arr, ov_head, wq_head, n_wait, demand, wake_n)``."""
    n_jobs = jobs.submit.shape[0]
    policy = policy_of(path, ci)
    theta = cf[CF_THETA]
    status = run.status
    while next_arr < n_jobs and jobs.submit[next_arr] <= t:
        status[next_arr] = OVERFLOW
        next_arr += 1
    last = admit_to(theta, total_gpus, demand, ov_head, next_arr, jobs.gpus)
    wakes = queued(policy)
    for j in range(ov_head, last):
        status[j] = WAITING
        run.wait_t[j] = t
        if wakes:
            run.qentry[j] = t  # (Tiresias' and Gittins' fields: other policies never touch them)
        wq_head, n_wait = enqueue(policy, j, t, jobs, run, q, pp, wq_head, n_wait, cf[CF_RESTART_S])
        demand += jobs.gpus[j]
        if user_wakes(pp):
            tw = next_wake(policy, j, t, jobs, run, pp, cf)
            if tw < INF:
                wake_n = heap_add(q.wake_t, q.wake_j, q.wake_v, wake_n, tw, j, run.version[j], run.version)
    return next_arr, last, wq_head, n_wait, demand, wake_n


@helper(nrt=False, inline=True)
def _gate(ci, free, n_wait, n_running, q, run, wake_n, next_arr, next_ev, n_ev):
    """Whether a scheduling pass can change anything; returns ``(step, deadlock, wake_n)``."""
    if ci[C_KIND] == KIND_PLAN:
        return n_wait + n_running > 0, False, wake_n
    if n_wait == 0 or (free == 0 and ci[C_PREEMPT] == 0):
        if n_running == 0 and n_wait > 0:
            stuck, wake_n = _stuck(q, run, wake_n, next_arr, next_ev, run.status.shape[0], n_ev)
            return False, stuck, wake_n  # stuck: nothing in service, and nothing will come back
        return False, False, wake_n  # nothing can start: no step
    return True, False, wake_n


# ------------------------------------------------------------------------------- scheduling paths
def _collect_active(path, s, q, wq_head, n_wait, n_running):
    """Every active job, in arrival order, into ``s.active``; returns how many. The waiting queue
    of a policy that re-keys every job each step is in arrival order already (its jobs' queue
    keys are all equal): then the running jobs, sorted, are merged into it (O(A + R log R));
    otherwise everything is sorted."""
    wq, rq, run_sorted = q.wq, q.rq, s.order
    in_order = True
    for a in range(wq_head + 1, wq_head + n_wait):
        if wq[a - 1] > wq[a]:
            in_order = False
            break
    if not in_order:
        return _sort_active(s, q, wq_head, n_wait, n_running)
    for a in range(n_running):
        run_sorted[a] = rq[a]
    if n_running <= 32:
        _sort_ints_small(run_sorted, n_running)
    else:
        srt = np.sort(rq[:n_running])
        for a in range(n_running):
            run_sorted[a] = srt[a]
    a = wq_head
    end = wq_head + n_wait
    b = 0
    na = 0
    while a < end or b < n_running:
        if b >= n_running or (a < end and wq[a] < run_sorted[b]):
            s.active[na] = wq[a]
            a += 1
        else:
            s.active[na] = run_sorted[b]
            b += 1
        na += 1
    return na


@helper
def _sort_active(s, q, wq_head, n_wait, n_running):
    """:func:`_collect_active` by a sort of all of them."""
    na = 0
    for a in range(wq_head, wq_head + n_wait):
        s.active[na] = q.wq[a]
        na += 1
    for a in range(n_running):
        s.active[na] = q.rq[a]
        na += 1
    srt = np.sort(s.active[:na])
    for a in range(na):  # (a loop: a slice assignment compiles numba's shape-mismatch error message)
        s.active[a] = srt[a]
    return na


@helper(nrt=False, inline=True)
def _sort_ints_small(a, m):
    """Insertion sort of ``a[:m]`` (a few integers)."""
    for x in range(1, m):
        v = a[x]
        y = x - 1
        while y >= 0 and a[y] > v:
            a[y + 1] = a[y]
            y -= 1
        a[y + 1] = v


@helper(nrt=False, inline=True)
def _last_running(policy, t, jobs, run, q, s, pp, restart_s, nr):
    """Key every running job now (``s.prio``/``s.keys`` by job); returns the last of them in the
    order, ``(rank, key, job)``."""
    rmax = 0
    kmax = 0.0
    jmax = -1
    for a in range(nr):
        r = q.rq[a]
        rr, kr = rank_key(policy, r, t, jobs, run, pp, restart_s)
        s.prio[r] = rr
        s.keys[r] = kr
        if jmax < 0 or _before(rmax, kmax, jmax, rr, kr, r):
            rmax = rr
            kmax = kr
            jmax = r
    return rmax, kmax, jmax


@helper(nrt=False, inline=True)
def _walk_queue(path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, h, nw, nr, free):
    """The walk over the waiting queue of a ``KIND_STATIC`` policy: launch what fits, in queue
    order (with ``C_HOL``, only up to the first job that does not fit). The last running job in
    the order bounds the jobs that could preempt (computed only when a job fails to fit or nothing
    is free). Returns ``(launched, last queue position
    launched, free, first blocked position that could preempt or -1)``."""
    policy = policy_of(path, ci)
    placement = placement_of(path, ci)
    n_types = ci[C_N_TYPES]
    have_r = ci[C_PREEMPT] != 0 and nr > 0
    hol = ci[C_HOL] != 0
    wq, want, want_type, status, held, held_type = q.wq, run.want, run.want_type, run.status, run.held, run.held_type
    rmax = 0
    kmax = 0.0
    jmax = -1
    nl = 0
    last_l = -1
    i = 0
    while i < nw:
        w = wq[h + i]
        g = want[w]
        got = -1
        if g <= free:
            got = place(w, g, want_type[w], jobs, rates, nodes, placement, n_types, s.tmp)
        if got >= 0:
            assign(s.tmp, g, w, run.alloc, jobs.alloc_off[w], nodes)
            status[w] = RUNNING
            held[w] = g
            held_type[w] = got
            free -= g
            s.launched[nl] = w
            nl += 1
            last_l = i
            if free > 0 or have_r:
                i += 1
                continue
            break  # nothing free, nothing to preempt
        if have_r and jmax < 0:
            # (jobs launched in this step rank before every job still waiting: never the bound)
            rmax, kmax, jmax = _last_running(policy, t, jobs, run, q, s, pp, cf[CF_RESTART_S], nr)
        if have_r and _before(q.wrank[w], q.wkey[w], w, rmax, kmax, jmax):
            return nl, last_l, free, i
        if free == 0 or (hol and want_type[w] != NO_RUN):
            break  # nothing free, and no running job ranks below the rest; or no backfilling
        i += 1
    return nl, last_l, free, -1


@helper(nrt=False, inline=True)
def _preempting_walk(path, t, jobs, run, nodes, q, s, rates, ci, h, nw, nr, slow_from, n_ro, nl):
    """From the blocked job at queue position ``slow_from`` on: the rest of the queue and the
    running jobs ranked after it, merged in key order, walked with preemption (launches after
    the ``nl`` already made). Returns ``(launched, suspended, n_ro)``."""
    wq, wrank, wkey, prio, keys, ro, order = q.wq, q.wrank, q.wkey, s.prio, s.keys, q.ro, s.order
    w0 = wq[h + slow_from]
    r0 = wrank[w0]
    k0 = wkey[w0]
    # the running jobs in key order (keys[] were just computed for all of them)
    n_ro = _running_order(ro, q.ro_ver, n_ro, q.rq, nr, run.status, run.version, prio, keys, s.victims, order)
    # those ranked after the blocked job: a suffix of that list
    lo = 0
    hi = n_ro
    while lo < hi:
        mid = (lo + hi) >> 1
        rm = ro[mid]
        if _before(r0, k0, w0, prio[rm], keys[rm], rm):
            hi = mid
        else:
            lo = mid + 1
    no = 0
    a = slow_from
    b = lo
    while a < nw or b < n_ro:
        if b >= n_ro:
            take_w = True
        elif a >= nw:
            take_w = False
        else:
            wa = wq[h + a]
            rb = ro[b]
            take_w = _before(wrank[wa], wkey[wa], wa, prio[rb], keys[rb], rb)
        if take_w:
            order[no] = wq[h + a]
            a += 1
        else:
            order[no] = ro[b]
            b += 1
        no += 1
    nl2, ns = walk(order, no, jobs, run, rates, nodes, placement_of(path, ci), ci[C_N_TYPES], True, ci[C_HOL] != 0,
                   s.launched[nl:], s.suspended, s.victims, s.victims_pos, s.run_suffix, s.tmp)
    return nl2, ns, n_ro


def _step_static(path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, n_active, h, nw, nr, free, n_ro, busy, lost,
                 n_migrate):
    """A step of a ``KIND_STATIC`` policy (the queue is kept sorted); the merged order with the
    running jobs is built only when a job that could preempt is blocked. Returns what every path
    returns: ``(launched, suspended, stopped before the walk, slow, last queue position launched
    by the fast walk, h, nw, nr, free, n_ro, busy, lost, n_migrate)``."""
    nl, last_l, free, slow_from = _walk_queue(path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, h, nw, nr, free)
    if slow_from < 0:
        return nl, 0, 0, False, last_l, h, nw, nr, free, n_ro, busy, lost, n_migrate
    nl2, ns, n_ro = _preempting_walk(path, t, jobs, run, nodes, q, s, rates, ci, h, nw, nr, slow_from, n_ro, nl)
    return nl + nl2, ns, 0, True, last_l, h, nw, nr, free, n_ro, busy, lost, n_migrate


def _step_full(path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, n_active, h, nw, nr, free, n_ro, busy, lost,
               n_migrate):
    """A step of a ``KIND_FULL`` policy (or a Python one): every active job re-ordered by keys
    computed now (Themis' auction in the kernel, or the keys Python gave). Returns as
    :func:`_step_static`."""
    py = ci[C_PY] != 0
    na = n_active
    if not py:
        policy_keys(ci[C_POLICY], t, jobs, run, s, na, cf[CF_RESTART_S], cf[CF_ROUND_S], cf[CF_THEMIS_F], pp)
    if py or ci[C_POLICY] == POL_CUSTOM_FULL:  # (user keys: from the last step's order, q.ro, unused on this path)
        n_ro = resort(s.keys, s.prio, s.active, na, s.order, q.ro, n_ro, s.victims_pos, s.suspended, s.last_key,
                      s.last_prio)
    else:
        stable_order(s.keys, s.prio, s.active, na, s.order)
    if not py:
        for a in range(na):
            s.prio[s.active[a]] = 0
    nl, ns = walk(s.order, na, jobs, run, rates, nodes, placement_of(path, ci), ci[C_N_TYPES], ci[C_PREEMPT] != 0, False,
                  s.launched, s.suspended, s.victims, s.victims_pos, s.run_suffix, s.tmp)
    return nl, ns, 0, True, -1, h, nw, nr, free, n_ro, busy, lost, n_migrate


def _step_plan(path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, n_active, h, nw, nr, free, n_ro, busy, lost,
               n_migrate):
    """A step of a ``KIND_PLAN`` policy: running jobs whose plan differs from what they hold are
    stopped, then the plan is placed in key order. Returns as :func:`_step_static`."""
    policy = policy_of(path, ci)
    restart_s = cf[CF_RESTART_S]
    status, held, want, want_type = run.status, run.held, run.want, run.want_type
    na = n_active
    n_pre = 0
    for a in range(na):
        j = s.active[a]
        if status[j] != RUNNING:
            continue
        wt = want_type[j]
        if wt == NO_RUN or want[j] != held[j] or (wt != ANY_TYPE and wt != run.held_type[j]):
            if wt != NO_RUN:
                n_migrate += 1
            b, lo = stop_job(j, t, run, restart_s, cf[CF_CKPT_S], policy, pp)
            busy += b
            lost += lo
            release(run.alloc, jobs.alloc_off[j], held[j], nodes)
            free += held[j]
            held[j] = 0
            run.n_preempt[j] += 1
            status[j] = WAITING
            run.wait_t[j] = t
            nr = rq_remove(q.rq, q.rpos, nr, j)
            h, nw = enqueue(policy, j, t, jobs, run, q, pp, h, nw, restart_s)
            n_pre += 1
    stable_order(s.keys, s.prio, s.active, na, s.order)
    nl, ns = walk(s.order, na, jobs, run, rates, nodes, placement_of(path, ci), ci[C_N_TYPES], False, False, s.launched,
                  s.suspended, s.victims, s.victims_pos, s.run_suffix, s.tmp)
    return nl, ns, n_pre, True, -1, h, nw, nr, free, n_ro, busy, lost, n_migrate


# ------------------------------------------------------------------------------- settling a step
@helper(nrt=False, inline=True)
def _settle_suspended(path, t, run, q, s, pp, ci, cf, ns, nr, busy, lost):
    """The walk's victims stop (a victim re-placed in this walk holds its new GPUs already; its old
    launch is settled with the size it had: only plans change sizes, before the walk). Returns
    ``(nr, busy, lost)``."""
    for x in range(ns):
        v = s.suspended[x]
        b, lo = stop_job(v, t, run, cf[CF_RESTART_S], cf[CF_CKPT_S], policy_of(path, ci), pp)
        busy += b
        lost += lo
        run.n_preempt[v] += 1
        nr = rq_remove(q.rq, q.rpos, nr, v)
        run.wait_t[v] = t  # (a victim re-placed in this walk waited no time)
        if run.status[v] == WAITING:
            run.held[v] = 0
    return nr, busy, lost


@helper(nrt=False, inline=True)
def _compact_queue(status, wq, h, nw, slow, last_l):
    """The waiting queue loses the jobs that started; returns ``(h, nw)``. After a walk that
    launched anywhere in it, one pass over it; after the fast walk, which launched only from
    ``wq[h:h + last_l + 1]``, that prefix closes up towards its end and the head moves (O(last_l))."""
    if slow:
        wn = 0
        for a in range(h, h + nw):
            j = wq[a]
            if status[j] == WAITING:
                wq[h + wn] = j
                wn += 1
        return h, wn
    wp = last_l
    for a in range(last_l, -1, -1):
        j = wq[h + a]
        if status[j] == WAITING:
            wq[h + wp] = j
            wp -= 1
    return h + wp + 1, nw - (wp + 1)


@helper(inline=True)
def _sort_merge(q, h, nw, new, m):
    """Sort the keyed jobs ``new[:m]`` (none in the queue) by ``(wrank, wkey, index)`` in place and
    merge them into the waiting queue; returns ``(head, length)``."""
    if m <= 32:
        sort_small(new, m, q.wrank, q.wkey)
    else:
        sort_jobs(new[:m].copy(), m, q.wrank, q.wkey, new)
    return wq_merge(q, h, nw, new, m)


@helper(inline=True)
def _requeue_victims(path, t, jobs, run, q, s, pp, ci, cf, ns, h, nw, wake_n):
    """The step's victims left waiting are keyed and join the queue in one merge (and get their
    wake-ups); returns ``(h, nw, wake_n)``."""
    policy = policy_of(path, ci)
    restart_s = cf[CF_RESTART_S]
    victims = s.victims
    m = 0
    for x in range(ns):
        v = s.suspended[x]
        if run.status[v] == WAITING:
            set_key(policy, v, t, jobs, run, q, pp, restart_s)
            victims[m] = v
            m += 1
    if m > 0:
        h, nw = _sort_merge(q, h, nw, victims, m)
    if _wakes(policy, pp):
        for x in range(ns):
            v = s.suspended[x]
            if run.status[v] == WAITING:
                tw = next_wake(policy, v, t, jobs, run, pp, cf)
                if tw < INF:
                    wake_n = heap_add(q.wake_t, q.wake_j, q.wake_v, wake_n, tw, v, run.version[v], run.version)
    return h, nw, wake_n


@helper(nrt=False, inline=True)
def _launch(path, t, jobs, run, nodes, rates, q, s, pp, ci, cf, nl, nr, heap_n, wake_n):
    """The step's launches start: rate, completion time, wake-up. Returns ``(nr, heap_n, wake_n)``."""
    policy = policy_of(path, ci)
    restart_s = cf[CF_RESTART_S]
    is_queued = queued(policy)
    wakes = _wakes(policy, pp)
    version = run.version
    for x in range(nl):
        j = s.launched[x]
        if is_queued and run.attained[j] > run.exec0[j]:
            run.pend0[j] += t - run.wait_t[j]  # Tiresias' starvation counter: waiting after having run
        run.launch_t[j] = t
        if run.first_start[j] < 0.0:
            run.first_start[j] = t
        version[j] += 1
        g = run.held[j]
        o = jobs.alloc_off[j]
        multi_node, multi_rack = spans(run.alloc, o, g, nodes)
        run.rate[j] = launch_rate(jobs, rates, j, run.held_type[j], g, multi_node, multi_rack, cf[CF_RACK_FACTOR])
        nr = rq_add(q.rq, q.rpos, nr, j)
        heap_n = heap_add(q.heap_t, q.heap_j, q.heap_v, heap_n, t + restart_s + run.work_left[j] / run.rate[j], j,
                          version[j], version)
        if wakes:
            tw = next_wake(policy, j, t, jobs, run, pp, cf)
            if tw < INF:
                wake_n = heap_add(q.wake_t, q.wake_j, q.wake_v, wake_n, tw, j, version[j], version)
    return nr, heap_n, wake_n


@helper
def _record(series, r, t, n_pre, free, nw, nr, demand, total_gpus):
    """Row ``r`` of the time series (grown when full); returns ``(series, rows)``."""
    if r >= series.shape[0]:
        bigger = np.empty((2 * series.shape[0] + 16, series.shape[1]), dtype=series.dtype)
        for a in range(series.shape[0]):  # (loops: no slice assignment, see _collect_active)
            for c in range(series.shape[1]):
                bigger[a, c] = series[a, c]
        series = bigger
    series[r, 0] = t
    series[r, 1] = n_pre
    series[r, 2] = free
    series[r, 3] = nw
    series[r, 4] = nr
    series[r, 5] = demand
    series[r, 6] = total_gpus
    return series, r + 1


def _victims(path, t, jobs, run, q, s, pp, ci, cf, ns, h, nw, nr, wake_n, busy, lost):
    """Settle the ``ns`` jobs the walk suspended; returns ``(h, nw, nr, wake_n, busy, lost)``."""
    nr, busy, lost = _settle_suspended(path, t, run, q, s, pp, ci, cf, ns, nr, busy, lost)
    h, nw, wake_n = _requeue_victims(path, t, jobs, run, q, s, pp, ci, cf, ns, h, nw, wake_n)
    return h, nw, nr, wake_n, busy, lost


# ------------------------------------------------------------------------------- the paths
# A run compiles only the scheduling path it takes: the driver ``_advance`` is specialized on
# the type of its first argument, a marker (numba compiles and caches one copy of a kernel per
# argument type), and ``_path_step``/``_path_collect``/``_path_victims`` pick that path's code
# when the driver is compiled (numba overloads, resolved from the marker's type), so no other
# path is typed, lowered or optimized. The marker types: a numpy integer of each width.
def path_of(ci):
    """The variant marker of a run configured by ``ci`` (``kernels.variants``; read at every call:
    a paused run may have switched policy, placement or preemption): its path, and, unless
    ``FASTBLOX_KERNELS=generic``, its built-in policy (queue and static paths) and placement."""
    if ci[C_KIND] == KIND_PLAN:
        path = "plan"
    elif ci[C_PY] != 0 or ci[C_KIND] == KIND_FULL:
        path = "full"
    else:
        path = "static" if ci[C_PREEMPT] != 0 else "queue"
    if variants.kernels_choice() == "generic":
        return variants.marker(path)
    pol = int(ci[C_POLICY]) if path in variants.POLICY_PATHS and int(ci[C_POLICY]) in _key_fns("key") else ANY
    return variants.marker(path, pol, int(ci[C_PLACEMENT]))


ANY = variants.ANY


def _step_queue(path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, n_active, h, nw, nr, free, n_ro, busy, lost,
                n_migrate):
    """A step of a ``KIND_STATIC`` policy without preemption: the walk over the queue. Returns as
    :func:`_step_static`."""
    nl, last_l, free, _ = _walk_queue(path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, h, nw, nr, free)
    return nl, 0, 0, False, last_l, h, nw, nr, free, n_ro, busy, lost, n_migrate


def _no_victims(path, t, jobs, run, q, s, pp, ci, cf, ns, h, nw, nr, wake_n, busy, lost):
    """A path that never suspends (``ns`` is always 0)."""
    return h, nw, nr, wake_n, busy, lost


def _no_collect(path, s, q, wq_head, n_wait, n_running):
    """A path that keeps its own order (``KIND_STATIC``): no list of active jobs (-1)."""
    return -1


#: per path: (step, collect the active jobs, settle victims)
_PATHS = {
    "queue": (_step_queue, _no_collect, _no_victims),
    "static": (_step_static, _no_collect, _victims),
    "full": (_step_full, _collect_active, _victims),
    "plan": (_step_plan, _collect_active, _victims),
}


def _path_step(path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, n_active, h, nw, nr, free, n_ro, busy, lost,
               n_migrate):
    """The scheduling step of ``path`` (this body runs in plain Python; compiled, the overload below)."""
    return _PATHS[type(path).path][0](path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, n_active, h, nw, nr, free,
                                 n_ro, busy, lost, n_migrate)


def _path_collect(path, s, q, wq_head, n_wait, n_running):
    """The active jobs into ``s.active`` for a path that re-orders them all, else -1."""
    return _PATHS[type(path).path][1](path, s, q, wq_head, n_wait, n_running)


def _path_victims(path, t, jobs, run, q, s, pp, ci, cf, ns, h, nw, nr, wake_n, busy, lost):
    """Settle the step's victims on a path that can suspend jobs."""
    return _PATHS[type(path).path][2](path, t, jobs, run, q, s, pp, ci, cf, ns, h, nw, nr, wake_n, busy, lost)


#: the overloads' implementations: no wrappers for calls from Python, always inlined into the
#: driver (a call that is not inlined passes every array of every NamedTuple field by field and,
#: with reference counting, increments and decrements each of their counts: per step, that took
#: the 1M-job FIFO run from 0.4-0.6 to 1.4 CPU-s), and no reference counting where nothing is
#: allocated (collecting the active jobs sorts them: it has it)
_OV = dict(nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True, forceinline=True, _nrt=False)
_OV_NRT = dict(_OV, _nrt=True)


def _chosen(path, i):
    """The implementation ``i`` (step, collect, victims) of the path whose marker has numba type ``path``."""
    return _PATHS[variants.info(path)[0]][i]


def _marker_of(index: int, slot: int, marker_class):
    """The overload of :func:`policy_of` (``index`` 1) or :func:`placement_of` (2): the variant's
    fixed code as a marker of ``marker_class``, or, left open, the code in ``ci[slot]``."""
    def impl(path, ci):
        code = variants.info(path)[index]
        if code == ANY:
            return lambda path, ci: ci[slot]
        cls = marker_class(code)
        return lambda path, ci: cls(np.int8(0))
    return impl


overload(policy_of, jit_options=_OV)(_marker_of(1, C_POLICY, variants.policy_class))
overload(placement_of, jit_options=_OV)(_marker_of(2, C_PLACEMENT, variants.placement_class))


@overload(queued, jit_options=_OV)
def _ov_queued(policy):
    code = _fixed_policy(policy)
    if code is None:
        return lambda policy: policy == POL_TIRESIAS or policy == POL_GITTINS
    yes = code in QUEUED_CODES
    return lambda policy: yes


@overload(_wakes, jit_options=_OV)
def _ov_wakes(policy, pp):
    code = _fixed_policy(policy)
    if code is None:
        return lambda policy, pp: _wakes_any(policy, pp)
    yes = code in QUEUED_CODES or _user_wakes_type(pp)
    return lambda policy, pp: yes


@overload(next_wake, jit_options=_OV)
def _ov_next_wake(policy, j, t, jobs, run, pp, cf):
    code = _fixed_policy(policy)
    if code is None:
        return lambda policy, j, t, jobs, run, pp, cf: _next_wake_any(policy, j, t, jobs, run, pp, cf)
    if code not in QUEUED_CODES and not _user_wakes_type(pp):
        return lambda policy, j, t, jobs, run, pp, cf: INF
    c = np.int64(code)
    return lambda policy, j, t, jobs, run, pp, cf: _next_wake_any(c, j, t, jobs, run, pp, cf)


@overload(settle_level, jit_options=_OV)
def _ov_settle_level(policy, j, t, run, pp):
    code = _fixed_policy(policy)
    if code is not None and code not in QUEUED_CODES:
        return lambda policy, j, t, run, pp: None

    def impl(policy, j, t, run, pp):
        if code is not None or policy == POL_TIRESIAS or policy == POL_GITTINS:
            lvl = run_level(pp, j, t, run)
            if lvl != run.rank[j]:
                run.qentry[j] = _crossing(pp, j, run, lvl)
                run.rank[j] = lvl

    return impl


@overload(wakeups, jit_options=_OV)
def _ov_wakeups(path, t, jobs, run, q, pp, ci, cf, wq_head, n_wait, wake_n, spin_max):
    code = variants.info(path)[1]
    if code != ANY and code not in QUEUED_CODES and not _user_wakes_type(pp):
        return lambda path, t, jobs, run, q, pp, ci, cf, wq_head, n_wait, wake_n, spin_max: (wq_head, n_wait, wake_n,
                                                                                              False)
    return lambda path, t, jobs, run, q, pp, ci, cf, wq_head, n_wait, wake_n, spin_max: _wakeups(
        path, t, jobs, run, q, pp, ci, cf, wq_head, n_wait, wake_n, spin_max)


@overload(_path_step, jit_options=_OV)
def _ov_path_step(path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, n_active, h, nw, nr, free, n_ro, busy, lost,
                  n_migrate):
    return _chosen(path, 0)


@overload(_path_collect, jit_options=_OV_NRT)
def _ov_path_collect(path, s, q, wq_head, n_wait, n_running):
    return _chosen(path, 1)


@overload(_path_victims, jit_options=_OV)
def _ov_path_victims(path, t, jobs, run, q, s, pp, ci, cf, ns, h, nw, nr, wake_n, busy, lost):
    return _chosen(path, 2)


@overload(policy_key, jit_options=_OV)
def _ov_policy_key(policy, j, t, running, el, jobs, run, pp, restart_s):
    args = "j, t, running, el, jobs, run, pp, restart_s"
    code = _fixed_policy(policy)
    if code is not None:  # (a kernel specialized on a built-in policy: its key function only)
        key = _key_fns("key")[code]
        return lambda policy, j, t, running, el, jobs, run, pp, restart_s: key(j, t, running, el, jobs, run, pp,
                                                                                 restart_s)
    if is_py_row(pp):  # (the key Python gave the job at the last step, or a provisional one: py_mark)
        return lambda policy, j, t, running, el, jobs, run, pp, restart_s: (pp.rank_of[j], pp.key_of[j])
    if is_user(pp):
        return _chain("key", args, "0, 0.0", "", user_key, "policy, " + args)
    return _chain("key", args, "0, 0.0")


@overload(policy_keys, jit_options=_OV_NRT)  # (Themis' keys sort: they allocate)
def _ov_policy_keys(policy, t, jobs, run, s, na, restart_s, lease_s, f, pp):
    args = "t, jobs, run, s, na, restart_s, lease_s, f"
    if is_user(pp):
        return _chain("keys", args, "None", ", pp", _user_keys, "policy, t, jobs, run, s, na, restart_s, pp",
                      POL_CUSTOM_FULL)
    return _chain("keys", args, "None", ", pp")


@helper(inline=True)
def _user_keys(policy, t, jobs, run, s, na, restart_s, pp):
    """A compiled user policy's keys of the ``na`` active jobs, re-computed now (a policy that
    reads the time, ``POL_CUSTOM_FULL``: its waiting queue is not keyed, so it stays in arrival
    order): ``s.keys`` by position, its ranks in ``s.prio`` by job (reset to 0 after the order is
    made)."""
    status, launch_t = run.status, run.launch_t
    for a in range(na):
        j = s.active[a]
        running = status[j] == RUNNING
        el = t - launch_t[j] if running else 0.0
        r, k = user_key(policy, j, t, running, el, jobs, run, pp, restart_s)
        s.prio[j] = r
        s.keys[a] = k


def py_row_step(pp, q, s, t, jobs, run, restart_s, h, nw, nr, preempt):
    """Before a scheduling step of a row-wise Python policy (``kernels.userpol.PyRowParams``):
    one call back keys the jobs marked since the last step (``py_mark``: the tail of the
    waiting queue, at a provisional rank) and, when the step may preempt, the ``nr`` running
    jobs; the marked jobs are then merged into the queue at their keys. Returns ``(the keys
    are there, h, nw)``; for any other policy ``(True, h, nw)``. Compiled: the overload below."""
    raise NotImplementedError("compiled only")


@overload(py_row_step, jit_options=_OV_NRT)
def _ov_py_row_step(pp, q, s, t, jobs, run, restart_s, h, nw, nr, preempt):
    if not is_py_row(pp):
        return lambda pp, q, s, t, jobs, run, restart_s, h, nw, nr, preempt: (True, h, nw)

    def impl(pp, q, s, t, jobs, run, restart_s, h, nw, nr, preempt):
        nd = pp.n_marks[0]
        marks = pp.marks
        m = 0
        for x in range(nd):
            s.active[m] = marks[x]
            m += 1
        if preempt:
            for a in range(nr):
                s.active[m] = q.rq[a]
                m += 1
        pp.check[0] += 1
        m_keyed = m
        if pp.check[0] == pp.check[1]:  # (the promise's check: every waiting job keyed again, with the others)
            pp.check[1] *= 2
            for a in range(h, h + nw - nd):
                s.active[m] = q.wq[a]
                m += 1
        if m == 0:
            return True, h, nw
        py_view(pp, s, m, t, jobs, run, restart_s)
        if not py_keys(pp, m, t):
            return False, h, nw
        for a in range(m_keyed, m):
            j = s.active[a]
            k0, k1 = pp.key_of[j], s.keys[a]
            if abs(k1 - k0) > 1e-9 * max(1.0, abs(k0), abs(k1)):
                pp.check[2] = j + 1
                pp.check_key[0] = k0
                pp.check_key[1] = k1
                return False, h, nw
        for a in range(m_keyed):
            j = s.active[a]
            pp.rank_of[j] = 0
            pp.key_of[j] = s.keys[a]
        if nd > 0:
            nw -= nd  # (the marked jobs: the tail of the queue, at rank UNKEYED)
            for x in range(nd):
                j = marks[x]
                q.wrank[j] = 0
                q.wkey[j] = pp.key_of[j]
            h, nw = _sort_merge(q, h, nw, marks, nd)
            pp.n_marks[0] = 0
        return True, h, nw

    return impl


# ------------------------------------------------------------------------------- the driver
def advance(jobs, run, nodes, q, s, rates, ev, pp, series, si, sf, ci, cf):
    """Run until every tracked job has finished (``FINISHED``), Python must supply a plan
    (``NEED_PLAN``: keys into ``s.keys[:n]`` for ``s.active[:n]``, ``n = si[I_N_ACTIVE]``, and
    ``run.want``/``run.want_type`` of those jobs), a Python policy's call back for keys failed
    (``PY_FAILED``: the run cannot go on), the next
    step would pass ``cf[CF_STOP_T]`` (``PAUSED``), it made ``ci[C_BUDGET]`` passes (scheduling
    times) in this call (``SLICE_END``), no progress is possible (``DEADLOCK``), or time stopped
    moving (``NO_PROGRESS``: ``no_progress_limit`` passes or wake-ups at one instant).
    Call again to resume. Returns ``(code, series)``: ``series`` may be a new, larger array
    (rows ``[t, preemptions, free GPUs, queued, running, GPU demand, GPUs up]``). Runs the
    compiled driver of the run's path (:func:`path_of`), compiling it on its first use."""
    path = path_of(ci)
    args = (path, jobs, run, nodes, q, s, rates, ev, pp, series, si, sf, ci, cf)
    return entry(_advance, args)(*args)


def entry_point(path, jobs, run, nodes, q, s, rates, ev, pp, series, si, sf, ci, cf):
    """The compiled driver of ``path`` for these arguments' types (``kernels.state.entry``; call
    it as ``_advance``: the path marker first), compiled or loaded on first use."""
    return entry(_advance, (path, jobs, run, nodes, q, s, rates, ev, pp, series, si, sf, ci, cf))


def load(path, jobs, run, nodes, q, s, rates, ev, pp, series, si, sf, ci, cf) -> None:
    """Compile (or load from numba's cache) the driver of ``path`` for these arguments' types,
    without running it."""
    entry_point(path, jobs, run, nodes, q, s, rates, ev, pp, series, si, sf, ci, cf)


@jit
def _advance(path, jobs, run, nodes, q, s, rates, ev, pp, series, si, sf, ci, cf):
    """:func:`advance` on the path ``path``. The scalar state lives in locals while the kernel runs
    (as array slots, every store to an int64 array made LLVM reload them) and goes back into
    ``si``/``sf`` at the one exit."""
    n_jobs = jobs.submit.shape[0]
    wake_t = q.wake_t  # (bound once: a NamedTuple field read in the loop is a new reference each time)
    n_ev = 0
    if ev is not None:  # (None: no node events; numba then compiles none of their handling)
        n_ev = ev.t.shape[0]
    kind = ci[C_KIND]
    py = ci[C_PY] != 0
    record = ci[C_SERIES] != 0
    stop_t = cf[CF_STOP_T]
    budget = ci[C_BUDGET] if ci[C_BUDGET] > 0 else -1  # slices (SLICE_END); -1: no limit
    passes = 0
    same_t = si[I_SAME_T]
    spin_max = no_progress_limit(n_jobs, n_ev)
    total_gpus, free = _free_up(nodes)
    (n_active, next_arr, ov_head, tracked_left, heap_n, n_steps, n_running, demand, started, n_preempt, n_series,
     pending, n_wait, wq_head, n_ro, next_ev, wake_n, n_fail, n_migrate, idle) = _load_ints(si)
    t, busy, last_b, dirty, lost = sf[F_T], sf[F_BUSY_GPU_S], sf[F_LAST_B], sf[F_DIRTY], sf[F_LOST_GPU_S]
    code = FINISHED
    while True:
        if pending == 0:
            t_clu = INF
            if ev is not None:
                t_clu = ev.t[next_ev] if next_ev < n_ev else INF
            t_new, boundary, heap_n, wake_n = _next_time(t, started, ci, cf, last_b, dirty, n_wait, n_running,
                                                         next_arr, jobs, run, q, heap_n, wake_n, t_clu)
            # the stop conditions, checked before any state moves to t_new
            if started != 0 and t_new == INF:
                code = DEADLOCK
                break
            if t_new > stop_t or passes == budget:
                code = PAUSED if t_new > stop_t else SLICE_END
                break
            passes += 1
            if t_new == t:
                same_t += 1
                if same_t > spin_max:
                    code = NO_PROGRESS  # passing at one instant over and over: time stopped moving
                    break
            else:
                same_t = 0
            started = 1
            t = t_new
            heap_n, free, demand, n_running, tracked_left, busy = _completions(
                t, jobs, run, nodes, q, heap_n, free, demand, n_running, tracked_left, busy)
            if tracked_left == 0:
                code = FINISHED
                break
            if ev is not None:
                if next_ev < n_ev and ev.t[next_ev] <= t:
                    next_ev, busy, lost, free, total_gpus, n_fail, n_running, wq_head, n_wait, wake_n, dirty = \
                        _node_events(path, t, jobs, run, nodes, q, ev, pp, ci, cf, next_ev, busy, lost, free, total_gpus,
                                     n_fail, n_running, wq_head, n_wait, wake_n, dirty)
            if not boundary:
                continue
            last_b = t
            dirty = INF
            if wake_n > 0 and wake_t[0] <= t:
                wq_head, n_wait, wake_n, spun = wakeups(path, t, jobs, run, q, pp, ci, cf, wq_head, n_wait, wake_n, spin_max)
                if spun:
                    code = NO_PROGRESS
                    break
            next_arr, ov_head, wq_head, n_wait, demand, wake_n = _arrivals(
                path, t, jobs, run, q, pp, ci, cf, total_gpus, next_arr, ov_head, wq_head, n_wait, demand, wake_n)
            go, dead, wake_n = _gate(ci, free, n_wait, n_running, q, run, wake_n, next_arr, next_ev, n_ev)
            if dead:
                code = DEADLOCK
                break
            if not go:
                continue
            na = _path_collect(path, s, q, wq_head, n_wait, n_running)
            if na < 0:
                ok, wq_head, n_wait = py_row_step(pp, q, s, t, jobs, run, cf[CF_RESTART_S], wq_head, n_wait,
                                                  n_running, ci[C_PREEMPT] != 0)
                if not ok:
                    code = PY_FAILED
                    break
            if na >= 0:
                n_active = na
                if py:
                    py_view(pp, s, na, t, jobs, run, cf[CF_RESTART_S])  # (a Python policy's JobView)
                    if kind == KIND_PLAN or not py_keys(pp, na, t):  # (a planner: Python answers on return)
                        pending = 1
                        code = NEED_PLAN if kind == KIND_PLAN else PY_FAILED
                        break
        pending = 0
        nl, ns, n_pre, slow, last_l, h, nw, nr, free, n_ro, busy, lost, n_migrate = _path_step(
            path, t, jobs, run, nodes, q, s, rates, pp, ci, cf, n_active, wq_head, n_wait, n_running, free, n_ro, busy,
            lost, n_migrate)
        if nl > 0:
            h, nw = _compact_queue(run.status, q.wq, h, nw, slow, last_l)
        if ns > 0:
            h, nw, nr, wake_n, busy, lost = _path_victims(path, t, jobs, run, q, s, pp, ci, cf, ns, h, nw, nr, wake_n,
                                                          busy, lost)
        nr, heap_n, wake_n = _launch(path, t, jobs, run, nodes, rates, q, s, pp, ci, cf, nl, nr, heap_n, wake_n)
        n_wait = nw
        wq_head = h
        n_running = nr
        if slow or ns > 0:
            total_gpus, free = _free_up(nodes)
        n_preempt += ns + n_pre
        n_steps += 1
        if nr == 0 and nw > 0:
            # the cluster is empty and nothing is left to arrive or change, yet no waiting job fits
            # it: no order and no amount of waiting will change that (jobs held back by admission
            # only get in after a completion). A planner may idle on purpose (Gavel waits for its
            # next allocation): it gets PLAN_IDLE_LIMIT such steps in a row.
            idle += 1
            stuck, wake_n = _stuck(q, run, wake_n, next_arr, next_ev, n_jobs, n_ev)
            if stuck and (kind != KIND_PLAN or idle > PLAN_IDLE_LIMIT):
                code = DEADLOCK
                break
        else:
            idle = 0
        if record:
            series, n_series = _record(series, n_series, t, ns + n_pre, free, nw, nr, demand, total_gpus)
    _store(si, sf, n_active, next_arr, ov_head, tracked_left, heap_n, n_steps, n_running, demand, started, n_preempt,
           n_series, pending, n_wait, wq_head, n_ro, next_ev, wake_n, n_fail, n_migrate, idle, t, busy, last_b, dirty,
           lost)
    si[I_SAME_T] = same_t
    return code, series


@helper(nrt=False, inline=True)
def _load_ints(si):
    """The int scalar state, in the order :func:`_store` takes it."""
    return (si[I_N_ACTIVE], si[I_NEXT_ARR], si[I_OV_HEAD], si[I_TRACKED_LEFT], si[I_HEAP_N], si[I_N_STEPS],
            si[I_N_RUNNING], si[I_DEMAND], si[I_STARTED], si[I_N_PREEMPT], si[I_N_SERIES], si[I_PENDING], si[I_NW],
            si[I_WQ_HEAD], si[I_N_RO], si[I_NEXT_EV], si[I_WAKE_N], si[I_N_FAIL], si[I_N_MIGRATE], si[I_IDLE])


@helper(nrt=False, inline=True)
def _store(si, sf, n_active, next_arr, ov_head, tracked_left, heap_n, n_steps, n_running, demand, started, n_preempt,
           n_series, pending, n_wait, wq_head, n_ro, next_ev, wake_n, n_fail, n_migrate, idle, t, busy, last_b, dirty,
           lost):
    si[I_N_ACTIVE] = n_active
    si[I_NEXT_ARR] = next_arr
    si[I_OV_HEAD] = ov_head
    si[I_TRACKED_LEFT] = tracked_left
    si[I_HEAP_N] = heap_n
    si[I_N_STEPS] = n_steps
    si[I_N_RUNNING] = n_running
    si[I_DEMAND] = demand
    si[I_STARTED] = started
    si[I_N_PREEMPT] = n_preempt
    si[I_N_SERIES] = n_series
    si[I_PENDING] = pending
    si[I_NW] = n_wait
    si[I_WQ_HEAD] = wq_head
    si[I_N_RO] = n_ro
    si[I_NEXT_EV] = next_ev
    si[I_WAKE_N] = wake_n
    si[I_N_FAIL] = n_fail
    si[I_N_MIGRATE] = n_migrate
    si[I_IDLE] = idle
    sf[F_T] = t
    sf[F_BUSY_GPU_S] = busy
    sf[F_LAST_B] = last_b
    sf[F_DIRTY] = dirty
    sf[F_LOST_GPU_S] = lost



@jit
def rekey_waiting(policy, t, jobs, run, q, pp, si, restart_s):
    """Re-key and re-sort the waiting queue (after the policy changed on a paused run); the queue
    moves to the start of its array."""
    h = si[I_WQ_HEAD]
    nw = si[I_NW]
    for a in range(h, h + nw):
        set_key(policy, q.wq[a], t, jobs, run, q, pp, restart_s)
    tmp = q.wq[h:h + nw].copy()
    sort_jobs(tmp, nw, q.wrank, q.wkey, q.wq)
    si[I_WQ_HEAD] = 0
