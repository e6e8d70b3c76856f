"""Plain-Python reference of the native engine (``kernels.engine``), written to be obviously right.

Same semantics as the kernel (``docs/semantics.md``: "Native engine" and "Realism"), none of its
tricks: lists of nodes and a dict of GPU owners, ``heapq`` for completions, a full sort of the
active jobs at every step, a victim search that scans the whole tail of the order, placements
that look at every node, and (in ``rounds`` mode) a walk over every round boundary, deciding at
each one whether anything can have changed. It checks its own invariants as it goes (no GPU owned
twice, gangs whole and on one GPU type, nothing placed on a node out of service, time never goes
back, progress never beyond the work). The hypothesis tests compare it with the kernel job by job.

What it covers: GPU types per node and racks; first-fit / consolidated / blox / topology
placement restricted to one GPU type (a job that may use any type tries the cluster's types in
order); the rate model (throughput table for known models, type speed × Amdahl ratio for unknown
ones; a gang spread over nodes at its measured multi-node throughput, else the node factor; the
rack factor on top); restart cost and checkpoint loss when a job is stopped; node
fail/recover events; load-based admission over the GPUs in service; the built-in orderings
(FIFO, LAS, LAS-GPU, SRTF, SJF), a user key function (full sort), a planner (keys, GPU types
and sizes; it may leave the cluster idle up to ``PLAN_IDLE_LIMIT`` steps in a row before the run
counts as stuck), and the three policies the kernel computes itself (``docs/semantics.md``,
"Tiresias, Gittins and Themis"): Tiresias' discretized 2D-LAS and its Gittins variant (queues
of GPU-service, demotion at the exact crossing instant, starvation promotion; in ``events`` mode
a crossing or a promotion is a step of its own) and Themis' lease auction (the worst-off
fraction bids, the rest gets leftovers). Here a running job's queue is worked out from its
launch (the crossing instants), a waiting job's promotion time from its counters, and the
next step of ``events`` mode is the earliest of all of them, found by looking at every job:
no wake-up heap, no versions, no sorted waiting queue.

Floating point: every quantity compared exactly with the kernel (finish times, keys) is computed
with the same operations in the same order as the kernel (e.g. a finish time is
``(t + restart) + work_left / rate``; a crossing instant ``launch + (threshold - service at
launch) / GPUs``; a promotion time ``wait start + (P × ran - waited before)``; Themis' ``rho``
``((t + lease - submit) + left / ref_rate) / (work / ref_rate)``).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

FUTURE, OVERFLOW, WAITING, RUNNING, DONE = "future", "overflow", "waiting", "running", "done"
PLAN_IDLE_LIMIT = 1000  # as kernels.engine
ANY_TYPE = -1  # a planner's "any GPU type"
NO_RUN = -2  # a planner's "do not run this step"
SERIAL_FRACTION = 0.05  # Amdahl's serial fraction for jobs of unknown model (docs/semantics.md)
DOWN_EVENTS = ("fail", "remove")
UP_EVENTS = ("recover", "add")
TIRESIAS, GITTINS, THEMIS = "tiresias", "tiresias-gittins", "themis"
QUEUED = (TIRESIAS, GITTINS)  # policies with Tiresias' queues (thresholds, crossings, promotions)


def no_progress_limit(n_jobs, n_ev) -> int:
    """Passes at one instant after which time has stopped moving (as ``kernels.engine``)."""
    return 4 * (n_jobs + n_ev) + 64


def amdahl(n) -> float:
    """``S(n) = n / (1 + 0.05 (n - 1))``."""
    n = float(n)
    return n / (1.0 + SERIAL_FRACTION * (n - 1.0))


@dataclass
class Launch:
    """One launch of a job: when, which GPUs (one type), at which rate; filled in when it ends."""

    t: float
    gpus: list
    gtype: int
    rate: float
    multi_node: bool
    multi_rack: bool
    end: float = -1.0
    why: str = ""  # "done", "preempt" (the scheduler or a plan stopped it) or "fail" (a node went down)
    el: float = 0.0  # seconds it held its GPUs
    prod: float = 0.0  # productive seconds (after the restart cost)
    kept: float = 0.0  # productive seconds kept (up to the last checkpoint)
    queue: int = 0  # Tiresias/Gittins: the queue it was launched in
    svc: float = 0.0  # Tiresias/Gittins: service (GPU-seconds since the last promotion) at launch
    crossed: list = field(default_factory=list)  # Tiresias/Gittins: (t, queue) entered while it ran


@dataclass
class Job:
    i: int
    submit: float
    gpus: int  # gang size asked for
    work: float  # work units (iterations for a known model, else seconds at the reference speed)
    tracked: bool
    cls: int = -1  # row of the throughput table, -1: unknown model
    ref_rate: float = 1.0  # work per second on the reference type with the GPUs asked for
    state: str = FUTURE
    work_left: float = 0.0
    attained: float = 0.0
    attained_gpu: float = 0.0
    first_start: float = -1.0
    finish: float = -1.0
    n_preempt: int = 0
    n_fail: int = 0
    lost_s: float = 0.0
    version: int = 0
    gang: list = field(default_factory=list)  # GPUs held right now (the walk moves them)
    gtype: int = -1  # GPU type of ``gang``
    cur: Launch | None = None  # the launch being run (settled at the end of a step)
    want: int = 0  # size of the next launch (a planner may change it)
    want_type: int = ANY_TYPE
    history: list = field(default_factory=list)
    # Tiresias / Gittins (a running job's queue moves on its own: see ``queue_at``)
    queue: int = 0  # the queue it is in (running: the queue it was launched in)
    qentry: float = 0.0  # when it entered ``queue`` (admission, crossing or promotion time)
    svc0: float = 0.0  # attained_gpu at its last promotion: service counts from there
    exec0: float = 0.0  # attained at its last promotion: "seconds it ran" count from there
    pend: float = 0.0  # seconds waited after having run since the last promotion, up to its last launch
    wait_since: float = 0.0  # when it last started waiting
    promote_at: float | None = None  # a waiting job's promotion time (None: none due)
    queue_log: list = field(default_factory=list)  # (t, queue, why): "admit", "cross", "promote"
    # a per-job user policy (``job_policy``): its state record, the key it gave when the job
    # started waiting (or at a wake-up), the wake-up time it last asked for
    ustate: object = None
    ukey: tuple = (0, 0.0)
    uwake: float = math.inf


class Speed:
    """Work per second of a launch (``docs/semantics.md``, "Work and rate").

    ``tab[c][t][n]``: whole-gang throughput of a class-``c`` job on ``n`` GPUs of type ``t``
    (0 or NaN: cannot run there); ``type_speed[t]``: speed of type ``t`` for jobs of unknown
    model. A gang spanning nodes runs at ``spread[c][t][n]`` (a measured multi-node throughput)
    where that is positive, else at ``node_factor[c]`` (None or NaN: ``multi_node_factor``) × its
    rate; ``rack_factor`` on top when it spans racks."""

    def __init__(self, n_types, tab=None, type_speed=None, node_factor=None, multi_node_factor=1.0, rack_factor=1.0,
                 spread=None):
        self.tab = [] if tab is None else [[[float(x) for x in row] for row in per_t] for per_t in tab]
        self.type_speed = [1.0] * n_types if type_speed is None else [float(x) for x in type_speed]
        assert len(self.type_speed) == n_types
        nf = [] if node_factor is None else list(node_factor)
        self.node_factor = [multi_node_factor if (f is None or f != f) else float(f) for f in nf]
        self.multi_node_factor = float(multi_node_factor)
        self.rack_factor = float(rack_factor)
        self.spread = [] if spread is None else [[[float(x) for x in row] for row in per_t] for per_t in spread]

    def base(self, job: Job, t: int, n: int) -> float:
        """Rate on ``n`` GPUs of type ``t`` within one node."""
        if job.cls < 0:
            sp = self.type_speed[t]
            if n == job.gpus:
                return sp
            return sp * amdahl(n) / amdahl(job.gpus)
        row = self.tab[job.cls][t]
        return row[n] if n < len(row) else 0.0

    def can_run(self, job: Job, t: int, n: int) -> bool:
        return self.base(job, t, n) > 0.0  # False for NaN too

    def launch(self, job: Job, t: int, n: int, multi_node: bool, multi_rack: bool) -> float:
        r = self.base(job, t, n)
        if multi_node:
            measured = 0.0
            if job.cls >= 0 and self.spread:
                row = self.spread[job.cls][t]
                measured = row[n] if n < len(row) else 0.0
            if measured > 0.0:
                r = measured
            else:
                r *= self.node_factor[job.cls] if job.cls >= 0 else self.multi_node_factor
            if multi_rack:
                r *= self.rack_factor
        return r


class Cluster:
    """Nodes with a GPU count, a GPU type, a rack and a service state; ``owner`` maps a GPU to the
    job holding it. GPUs are numbered node by node."""

    def __init__(self, node_gpus, node_type=None, node_rack=None, up=None):
        self.node_gpus = [int(g) for g in node_gpus]
        n = len(self.node_gpus)
        self.node_type = [0] * n if node_type is None else [int(x) for x in node_type]
        self.node_rack = [0] * n if node_rack is None else [int(x) for x in node_rack]
        self.up = [True] * n if up is None else [bool(x) for x in up]
        self.n_types = max(self.node_type) + 1 if n else 1
        self.base = [sum(self.node_gpus[:k]) for k in range(n)]
        self.gpu_node = [nd for nd in range(n) for _ in range(self.node_gpus[nd])]
        self.owner: dict[int, int] = {}
        self._free = None  # per node, its free GPUs: recomputed after any change (take, release, set_up)

    def _frees(self):
        """Per node, its free GPUs, lowest first (shared lists: read only)."""
        if self._free is None:
            self._free = [[self.base[x] + k for k in range(self.node_gpus[x]) if self.base[x] + k not in self.owner]
                          for x in range(len(self.node_gpus))]
        return self._free

    def free_on(self, nd):
        """Free GPUs of node ``nd``, lowest first."""
        return list(self._frees()[nd])

    def set_up(self, nd, up):
        self.up[nd] = up
        self._free = None

    def in_service(self):
        return sum(g for g, u in zip(self.node_gpus, self.up) if u)

    def free_in_service(self):
        return sum(len(f) for f, u in zip(self._frees(), self.up) if u)

    def spans(self, gpu_ids):
        nodes = {self.gpu_node[g] for g in gpu_ids}
        racks = {self.node_rack[nd] for nd in nodes}
        return len(nodes) > 1, len(racks) > 1

    def fit(self, kind, n, gtype):
        """``n`` free GPUs of type ``gtype`` on nodes in service chosen by placement ``kind``, or None."""
        cand = [nd for nd in range(len(self.node_gpus)) if self.up[nd] and self.node_type[nd] == gtype]
        frees = self._frees()
        if sum(len(frees[nd]) for nd in cand) < n:
            return None  # every placement takes free GPUs of these nodes only
        free = {nd: frees[nd] for nd in cand}  # read only: the placements below build new lists
        if kind == "first-fit":
            got = []
            for nd in cand:
                got += free[nd][: n - len(got)]
            return got if len(got) == n else None
        if kind == "blox":  # Blox's exact-sum scattered walk
            got = []
            for nd in cand:
                if not free[nd]:
                    continue
                got += free[nd][:n]
                if len(got) == n:
                    return got
                if len(got) > n:
                    return None
            return None
        if kind == "consolidated":
            if not cand:
                return None
            max_g = max(self.node_gpus[nd] for nd in cand)
            if n <= max_g:
                return self._best_node(cand, free, n)
            return self._emptiest(cand, free, n, k_max=-(-n // max_g))
        if kind == "topology":
            got = self._best_node(cand, free, n)
            if got is not None:
                return got
            if sum(len(f) for f in free.values()) < n:
                return None
            rack_free = {}
            for nd in cand:
                rack_free[self.node_rack[nd]] = rack_free.get(self.node_rack[nd], 0) + len(free[nd])
            holding = sorted((f, r) for r, f in rack_free.items() if f >= n)  # fullest rack first, then lowest id
            if holding:
                r = holding[0][1]
                return self._emptiest([nd for nd in cand if self.node_rack[nd] == r], free, n)
            return self._emptiest(cand, free, n)
        if kind == "yarn":
            return self._yarn(cand, free, n)
        raise ValueError(kind)

    def _yarn(self, cand, free, n):
        """Tiresias' ``ms_yarn_placement``: the first node that holds a gang that fits in one;
        else idle nodes whole (in order, while a whole node is still needed), then the first
        other node that holds the rest."""
        if not cand:
            return None
        if n <= max(self.node_gpus[nd] for nd in cand):
            return next((free[nd][:n] for nd in cand if len(free[nd]) >= n), None)
        got, whole = [], set()
        for nd in cand:
            if 0 < self.node_gpus[nd] == len(free[nd]) <= n - len(got):
                got += free[nd]
                whole.add(nd)
        rest = n - len(got)
        if rest == 0:
            return got
        last = next((nd for nd in cand if nd not in whole and len(free[nd]) >= rest), None)
        return None if last is None else got + free[last][:rest]

    @staticmethod
    def _best_node(cand, free, n):
        """The fullest node that still holds ``n`` (lowest id on ties)."""
        fits = [(len(free[nd]), nd) for nd in cand if len(free[nd]) >= n]
        if not fits:
            return None
        return free[min(fits)[1]][:n]

    @staticmethod
    def _emptiest(nodes, free, n, k_max=None):
        """Emptiest nodes first (lowest id on ties); None if that needs more than ``k_max`` nodes."""
        order = sorted((nd for nd in nodes if free[nd]), key=lambda nd: (-len(free[nd]), nd))
        got = []
        for used, nd in enumerate(order, start=1):
            if k_max is not None and used > k_max:
                return None
            got += free[nd][: n - len(got)]
            if len(got) == n:
                return got
        return None

    def take(self, gpu_ids, j):
        self._free = None
        for g in gpu_ids:
            assert g not in self.owner, f"GPU {g} given twice"
            assert self.up[self.gpu_node[g]], f"GPU {g} is on a node out of service"
            self.owner[g] = j

    def release(self, gpu_ids, j):
        self._free = None
        for g in gpu_ids:
            assert self.owner.get(g) == j, f"GPU {g} is not held by job {j}"
            del self.owner[g]


def _builtin_key(policy, job: Job, t, restart):
    run = job.state == RUNNING
    el = t - job.cur.t if run else 0.0
    if policy == "fifo":
        return job.submit
    if policy == "las":
        return job.attained + el
    if policy == "las-gpu":
        return job.attained_gpu + el * (len(job.cur.gpus) if run else 0)
    if policy == "srtf":  # remaining work in seconds at the reference speed
        left = job.work_left - (max(0.0, el - restart) * job.cur.rate if run else 0.0)
        return left / job.ref_rate
    if policy == "sjf":
        return job.work / job.ref_rate
    raise ValueError(policy)


def level(thresholds, service) -> int:
    """Tiresias' queue of ``service`` GPU-seconds: the number of thresholds at or below it."""
    return sum(1 for x in thresholds if x <= service)


def crossings(thresholds, c: Launch):
    """The instants at which a job launched as ``c`` enters each queue below the one it was
    launched in: ``[(queue, t), ...]``, queue ``k + 1`` at ``launch + (thresholds[k] - service at
    launch) / GPUs`` (at or before the launch for a threshold its service has already reached)."""
    return [(k + 1, c.t + (thresholds[k] - c.svc) / len(c.gpus)) for k in range(c.queue, len(thresholds))]


def gittins_index(xs, vs, service) -> float:
    """The step function ``vs[i]`` from ``xs[i]`` on (``vs[0]`` below ``xs[0]``)."""
    i = 0
    for k, x in enumerate(xs):
        if x <= service:
            i = k
    return vs[i]


def themis_keys(active, t, lease_s, f, restart_s):
    """Themis' lease auction as each active job's ``(part, key)``, lower first (ties in arrival
    order): the ``ceil((1 - f) n)`` jobs with the worst ``rho`` (and any tied with the
    last of them) bid and come first, the highest bid ``rho_wait / rho_run`` first; the others
    follow, the worst ``rho`` first; ties in arrival order. ``rho`` is taken at the end of the
    lease for a job that gets no GPUs during it: ``(t + lease - submit + remaining alone) /
    alone``; with GPUs the job does ``lease`` more seconds of its work alone."""
    rho = {}
    for j in active:
        run = j.state == RUNNING
        el = t - j.cur.t if run else 0.0
        left = j.work_left - (max(0.0, el - restart_s) * j.cur.rate if run else 0.0)
        alone = j.work / j.ref_rate
        rho[j.i] = ((t + lease_s - j.submit) + left / j.ref_rate) / alone
    n = len(active)
    k = max(1, math.ceil((1.0 - f) * n))
    cut = sorted(rho.values(), reverse=True)[k - 1]  # the k-th worst
    keys = {}
    for j in active:
        alone = j.work / j.ref_rate
        if rho[j.i] >= cut:  # a bidder
            run_rho = rho[j.i] - lease_s / alone
            keys[j.i] = (0, -(rho[j.i] / run_rho) if run_rho > 0.0 else -math.inf)
        else:  # leftovers
            keys[j.i] = (1, -rho[j.i])
    return keys


def _open_launch(c: Launch, t, restart_s) -> Launch:
    """A copy of a launch still running at the end ``t`` of the run (``why`` "running")."""
    el = t - c.t
    prod = max(0.0, el - restart_s)
    return Launch(c.t, list(c.gpus), c.gtype, c.rate, c.multi_node, c.multi_rack, t, "running", el, prod, prod,
                  c.queue, c.svc, list(c.crossed))


def _node_events(events, num_nodes):
    """Events sorted by time (ties in the given order) as ``(t, down?, node)``, and the nodes that
    start out of service (those whose first event is ``add``)."""
    evs = sorted(((float(t), str(e).lower(), int(nd)) for t, e, nd in events or ()), key=lambda x: x[0])
    start_down = [False] * num_nodes
    seen = set()
    for _, e, nd in evs:
        assert e in DOWN_EVENTS + UP_EVENTS, e
        if nd not in seen:
            seen.add(nd)
            start_down[nd] = e == "add"
    return [(t, e in DOWN_EVENTS, nd) for t, e, nd in evs], start_down


def simulate_native_reference(
    submit, gpus, work, node_gpus, tracked=None, policy="fifo", placement="first-fit", theta=0.0,
    time_model="events", round_s=300.0, restart_s=0.0, preempt=True, key_fn=None, *,
    node_type=None, node_rack=None, cls=None, ref_rate=None, tab=None, type_speed=None, node_factor=None,
    multi_node_factor=1.0, rack_factor=1.0, checkpoint_s=0.0, events=None, planner=None, dynamic=None, spread=None,
    max_steps=None, thresholds=(3250.0, 7200.0), promote=0.0, gittins=None, themis_f=0.8,
    backfill=True, job_policy=None, job_ids=None, duration=None,
):
    """Replay jobs (sorted by submit time) on nodes of ``node_gpus`` GPUs.

    ``node_type``/``node_rack``: per node GPU type index (types in the cluster's order) and rack.
    ``cls``/``ref_rate``/``tab``/``type_speed``/``node_factor``/``multi_node_factor``/``rack_factor``:
    the speed model (see :class:`Speed`; ``work`` is in work units). ``checkpoint_s``: checkpoint
    interval of productive time (0: a stopped job keeps all its progress). ``events``:
    ``(time_s, event, node)`` records (``fail``/``remove``/``recover``/``add``).

    The order: ``key_fn(job, t) -> key`` overrides ``policy``; ``planner(idx, t) -> (keys, types,
    sizes)`` (``idx`` the active job indices in arrival order; types ``ANY_TYPE``, ``NO_RUN`` or a
    type index) overrides both. ``dynamic`` (rounds mode: the keys move while jobs run, so no round
    with a waiting job is skipped) defaults to what the policy is. ``max_steps``: raise
    RuntimeError after that many steps (jobs stopped before they keep any progress can take turns
    forever, e.g. rounds shorter than the checkpoint interval). In ``events`` mode, more than
    ``no_progress_limit`` passes in a row at one instant raise RuntimeError too (time stopped:
    a bug, never a property of the input).

    ``policy`` ``tiresias`` / ``tiresias-gittins``: ``thresholds`` the queue limits in
    GPU-seconds (ascending), ``promote`` the starvation knob P (0: off), ``gittins`` the Gittins
    index table ``(xs, vs)`` (``vs[i]`` from ``xs[i]`` GPU-seconds on; what
    ``fastblox.policies.tiresias._prepare_gittins`` gives as ``_gittins_x``/``_gittins_v``).
    ``themis``: ``themis_f`` the fairness knob f; the lease is ``round_s``. ``backfill=False``
    (``fifo``, ``sjf``): head-of-line blocking, the walk ends at the first waiting job that does
    not fit.

    ``job_policy``: a per-job user policy that does not re-key every step (a ``fastblox.Policy``
    with ``job_fn``, e.g. one with ``state``), its function called in plain Python with a
    ``JobView`` of one job (``job_ids``/``duration``: its ``job_id``/``duration_s``, default the
    index/``work``): a waiting job keyed when it starts waiting and at its wake-ups, a running job
    told of its launch and its wake-ups and keyed at every step. The result's ``state`` is the
    state records (a numpy record array).

    Returns a dict of per-job lists (``finish``, ``first_start`` (-1 for never), ``n_preempt``,
    ``n_fail``, ``attained``, ``attained_gpu``, ``lost_s``, ``gpu_type`` of the last launch,
    ``history`` of :class:`Launch`, the last one ``why="running"`` if still running at the end)
    and ``end_t``, ``steps``, ``deadlock``, ``stuck`` (what was left when deadlocked),
    ``lost_gpu_s``, ``n_migrate``, ``queue_log`` (per job its ``(t, queue, why)`` changes: ``admit``,
    ``cross`` (recorded when its launch ends), ``promote``), ``step_log`` (per step ``(t, jobs
    stopped)``, as the kernel's series), ``preemptions`` (``(t, job, victim, key of job, key of
    victim)``: the victim's GPUs went to the job; keys as ordered at that step)."""
    return _Replay(submit, gpus, work, node_gpus, tracked, policy, placement, theta, time_model, round_s, restart_s,
                   preempt, key_fn, node_type=node_type, node_rack=node_rack, cls=cls, ref_rate=ref_rate, tab=tab,
                   type_speed=type_speed, node_factor=node_factor, multi_node_factor=multi_node_factor,
                   rack_factor=rack_factor, checkpoint_s=checkpoint_s, events=events, planner=planner,
                   dynamic=dynamic, spread=spread, max_steps=max_steps, thresholds=thresholds, promote=promote,
                   gittins=gittins, themis_f=themis_f, backfill=backfill, job_policy=job_policy, job_ids=job_ids,
                   duration=duration).run()


class _Replay:
    """One run of :func:`simulate_native_reference`: the setup in ``__init__``, the steps and the
    bookkeeping as methods (they share the run's state through ``self``), then :meth:`run`."""

    def __init__(
        self, submit, gpus, work, node_gpus, tracked=None, policy="fifo", placement="first-fit", theta=0.0,
        time_model="events", round_s=300.0, restart_s=0.0, preempt=True, key_fn=None, *,
        node_type=None, node_rack=None, cls=None, ref_rate=None, tab=None, type_speed=None, node_factor=None,
        multi_node_factor=1.0, rack_factor=1.0, checkpoint_s=0.0, events=None, planner=None, dynamic=None, spread=None,
        max_steps=None, thresholds=(3250.0, 7200.0), promote=0.0, gittins=None, themis_f=0.8, backfill=True,
        job_policy=None, job_ids=None, duration=None,
    ):
        n = len(submit)
        n_nodes = len(node_gpus)
        tracked = [True] * n if tracked is None else [bool(x) for x in tracked]
        cls = [-1] * n if cls is None else [int(x) for x in cls]
        ref_rate = [1.0] * n if ref_rate is None else [float(x) for x in ref_rate]
        jobs = [Job(i, float(submit[i]), int(gpus[i]), float(work[i]), tracked[i], cls[i], ref_rate[i]) for i in range(n)]
        assert all(jobs[i].submit <= jobs[i + 1].submit for i in range(n - 1)), "jobs must be sorted by submit time"
        for j in jobs:
            j.work_left = j.work
            j.want = j.gpus
        evs, start_down = _node_events(events, n_nodes)
        cl = Cluster(node_gpus, node_type, node_rack, [not d for d in start_down])
        sp = Speed(cl.n_types, tab, type_speed, node_factor, multi_node_factor, rack_factor, spread)
        if dynamic is None:
            dynamic = key_fn is not None or job_policy is not None or policy in ("las", "las-gpu", "srtf", TIRESIAS,
                                                                                 GITTINS, THEMIS)
        self.jp = job_policy
        if job_policy is not None:
            from ..userpol import new_state

            assert key_fn is None and planner is None and job_policy.kind == 0, "a per-job policy on the sorted queue"
            states = new_state(job_policy.state, n).view(np.recarray)
            self.states = states
            self.job_ids = list(range(n)) if job_ids is None else [int(x) for x in job_ids]
            self.duration = [float(x) for x in (work if duration is None else duration)]
            for j in jobs:
                j.ustate = states[j.i] if job_policy.state else None
        thresholds = [float(x) for x in thresholds]
        assert all(x > 0 for x in thresholds) and all(a < b for a, b in zip(thresholds, thresholds[1:]))
        queued = planner is None and key_fn is None and policy in QUEUED
        gx = gv = None
        if queued and policy == GITTINS:
            gx, gv = [float(x) for x in gittins[0]], [float(v) for v in gittins[1]]
            assert len(gx) == len(gv) > 0 and all(a < b for a, b in zip(gx, gx[1:]))
        events_mode = time_model == "events"
        assert events_mode or time_model == "rounds"

        heap: list = []  # (finish time, job, version)
        overflow: list[Job] = []  # arrived, held back by admission (arrival order)
        active: list[Job] = []  # admitted, not finished (arrival order)
        st = {"next_arr": 0, "next_ev": 0, "left": sum(tracked), "steps": 0, "lost_gpu_s": 0.0, "n_migrate": 0,
              "t": -math.inf, "changed": False, "step_log": [], "preemptions": []}
        self.active = active
        self.checkpoint_s = checkpoint_s
        self.cl = cl
        self.dynamic = dynamic
        self.events_mode = events_mode
        self.evs = evs
        self.gv = gv
        self.gx = gx
        self.heap = heap
        self.jobs = jobs
        self.key_fn = key_fn
        self.max_steps = max_steps
        self.n = n
        self.overflow = overflow
        self.placement = placement
        self.planner = planner
        self.policy = policy
        self.preempt = preempt
        self.promote = promote
        self.queued = queued
        self.restart_s = restart_s
        self.round_s = round_s
        self.sp = sp
        self.st = st
        self.themis_f = themis_f
        self.backfill = backfill
        self.theta = theta
        self.thresholds = thresholds

    def set_time(self, t):
        st = self.st
        assert t >= st["t"], f"time went back from {st['t']} to {t}"
        st["t"] = t

    def live_top(self):
        heap, jobs = self.heap, self.jobs
        while heap and not (jobs[heap[0][1]].state == RUNNING and jobs[heap[0][1]].version == heap[0][2]):
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    def waiting(self):
        active = self.active
        return [j for j in active if j.state == WAITING]

    def running(self):
        active = self.active
        return [j for j in active if j.state == RUNNING]

    def queue_at(self, job: Job, t):
        """``(queue, when it entered it)`` at ``t``: a waiting job stays where it is; a running
        job (or one the walk is stopping: ``cur`` is its launch until it is settled) moves down
        one queue at each crossing instant of its launch."""
        thresholds = self.thresholds
        q, e = job.queue, job.qentry
        if job.cur is not None:
            for k1, tc in crossings(thresholds, job.cur):
                if tc <= t:
                    q, e = k1, tc
        return q, e

    def service(self, job: Job, t):
        """GPU-seconds since its arrival or last promotion, up to ``t``."""
        if job.cur is not None:
            return job.attained_gpu - job.svc0 + (t - job.cur.t) * len(job.cur.gpus)
        return job.attained_gpu - job.svc0

    def starts_waiting(self, job: Job, t):
        """A job stopped at ``t`` waits: its promotion is due once it has waited ``promote`` × the
        seconds it ran since its last promotion, counting only waits after it ran since then (the
        waits up to its last launch are ``pend``, this one from ``t``)."""
        promote, queued = self.promote, self.queued
        job.wait_since = t
        job.promote_at = None
        if self.jp is not None:
            self.user_waits(job, t)
        ran = job.attained - job.exec0
        if queued and promote > 0.0 and job.queue > 0 and ran > 0.0:
            job.promote_at = max(t, t + (promote * ran - job.pend))

    def user_call(self, job: Job, t):
        """``(rank, key, wake-up time)`` of a per-job user policy's function for ``job`` at ``t``
        (its state written as the function writes it); as the kernel builds the job's view and
        reads the answer."""
        from ..parts import JobView

        running = job.state == RUNNING
        el = t - job.cur.t if running else 0.0
        left = job.work_left - (max(0.0, el - self.restart_s) * job.cur.rate if running else 0.0)
        view = JobView(self.job_ids[job.i], job.submit, job.gpus, self.duration[job.i], job.attained + el,
                       job.attained_gpu + el * (len(job.cur.gpus) if running else 0), left / job.ref_rate,
                       np.int8(1 if running else 0), job.n_preempt, job.cur.t if running else job.wait_since)
        fn = getattr(self.jp.job_fn, "py_func", self.jp.job_fn)
        out = fn(view, t, job.ustate) if self.jp.state else fn(view, t)
        out = tuple(out) if isinstance(out, tuple) else (0, out)
        rank, key = int(out[0]), float(out[1])
        wake = max(float(out[2]), t) if len(out) > 2 else math.inf
        assert math.isfinite(key) and not math.isnan(wake)
        return rank, key, wake

    def user_waits(self, job: Job, t):
        """A job starts waiting (or is woken while waiting): keyed now, with its wake-up."""
        r, k, job.uwake = self.user_call(job, t)
        job.ukey = (r, k)

    def user_wakes_to(self, t):
        """The wake-ups a per-job user policy asked for, due by ``t``, in (time, job) order."""
        while True:
            due = [j for j in self.active if j.state in (WAITING, RUNNING) and j.uwake <= t]
            if not due:
                return
            job = min(due, key=lambda j: (j.uwake, j.i))
            job.uwake = math.inf
            if job.state == WAITING:
                self.user_waits(job, t)
            else:
                job.uwake = self.user_call(job, t)[2]

    def promotions_to(self, t):
        """Waiting jobs whose promotion is due by ``t`` go to queue 0 at ``t``, service afresh."""
        active = self.active
        for job in active:
            if job.state == WAITING and job.promote_at is not None and job.promote_at <= t:
                assert job.queue > 0
                job.queue, job.qentry = 0, t
                job.svc0, job.exec0, job.pend = job.attained_gpu, job.attained, 0.0
                job.promote_at = None
                job.queue_log.append((t, 0, "promote"))

    def next_wake(self, t):
        """The earliest instant after ``t`` at which a running job crosses into its next queue, or
        from ``t`` on at which a waiting job is promoted (``events`` mode steps there)."""
        active, queued, thresholds = self.active, self.queued, self.thresholds
        w = math.inf
        for job in active:
            w = min(w, job.uwake)
            if job.state == RUNNING and queued:
                w = min([w] + [tc for _, tc in crossings(thresholds, job.cur) if tc > t])
            elif job.state == WAITING and job.promote_at is not None:
                w = min(w, job.promote_at)
        return w

    def log_crossings(self, job: Job, t):
        """Record the queues a running job has entered by ``t`` (when its launch ends)."""
        thresholds = self.thresholds
        for k1, tc in crossings(thresholds, job.cur):
            if tc <= t:
                job.queue_log.append((tc, k1, "cross"))
                job.cur.crossed.append((tc, k1))

    def stop(self, job: Job, t, why):
        """Settle a running job's launch stopped at ``t``; its GPUs are freed by the caller (or were
        freed by the walk). Tiresias: it keeps the queue it has reached at ``t``."""
        checkpoint_s, queued, restart_s, st = self.checkpoint_s, self.queued, self.restart_s, self.st
        c = job.cur
        if queued:
            self.log_crossings(job, t)
            q, e = self.queue_at(job, t)
            if q != job.queue:
                job.queue, job.qentry = q, e
        el = t - c.t
        prod = max(0.0, el - restart_s)
        kept = prod
        if checkpoint_s > 0.0:
            kept = math.floor(prod / checkpoint_s) * checkpoint_s
        assert 0.0 <= kept <= prod
        job.work_left -= kept * c.rate
        assert job.work_left > -1e-9 * job.work, "a stopped job has done more than its work"
        if prod > kept:
            job.lost_s += prod - kept
            st["lost_gpu_s"] += (prod - kept) * len(c.gpus)
        job.attained += el
        job.attained_gpu += el * len(c.gpus)
        c.end, c.why, c.el, c.prod, c.kept = t, why, el, prod, kept
        job.history.append(c)
        job.cur = None
        job.version += 1
        job.uwake = math.inf  # (its wake-up was for this launch)

    def complete(self, job: Job, te):
        active, cl, queued, restart_s, st = self.active, self.cl, self.queued, self.restart_s, self.st
        c = job.cur
        if queued:
            self.log_crossings(job, te)
        el = te - c.t
        job.attained += el
        job.attained_gpu += el * len(c.gpus)
        c.end, c.why, c.el = te, "done", el
        c.prod = c.kept = max(0.0, el - restart_s)
        job.history.append(c)
        job.cur = None
        job.work_left = 0.0
        job.finish = te
        job.state = DONE
        job.version += 1
        cl.release(job.gang, job.i)
        job.gang = []
        active.remove(job)
        if job.tracked:
            st["left"] -= 1

    def completions_to(self, t):
        heap, jobs, st = self.heap, self.jobs, self.st
        while self.live_top() <= t:
            te, i, _ = heapq.heappop(heap)
            assert jobs[i].cur.t <= te <= t  # settled at its own time, at or before the step's
            self.complete(jobs[i], te)
            st["changed"] = True

    def node_events_to(self, t):
        cl, evs, jobs, st = self.cl, self.evs, self.jobs, self.st
        while st["next_ev"] < len(evs) and evs[st["next_ev"]][0] <= t:
            te, down, nd = evs[st["next_ev"]]
            st["next_ev"] += 1
            assert te == t, "a node event is handled at its own time"
            if down:
                assert cl.up[nd], f"node {nd} fails while out of service"
                on_node = sorted({cl.owner[g] for g in range(cl.base[nd], cl.base[nd] + cl.node_gpus[nd])
                                  if g in cl.owner})
                for i in on_node:
                    job = jobs[i]
                    assert job.state == RUNNING and any(cl.gpu_node[g] == nd for g in job.gang)
                    self.stop(job, te, "fail")
                    cl.release(job.gang, i)
                    job.gang = []
                    job.n_fail += 1
                    job.state = WAITING
                    self.starts_waiting(job, te)
                assert len(cl.free_on(nd)) == cl.node_gpus[nd], "a failed node keeps no job"
                cl.set_up(nd, False)
            else:
                assert not cl.up[nd], f"node {nd} comes back while in service"
                assert len(cl.free_on(nd)) == cl.node_gpus[nd], "a node comes back with every GPU free"
                cl.set_up(nd, True)
            st["changed"] = True

    def place(self, job: Job, n_gpus, want_type):
        """GPUs and type for a gang of ``n_gpus`` (types in the cluster's order), or (None, -1)."""
        cl, placement, sp = self.cl, self.placement, self.sp
        if want_type == NO_RUN:
            return None, -1
        types = range(cl.n_types) if want_type == ANY_TYPE else [want_type]
        for t in types:
            if sp.can_run(job, t, n_gpus):
                got = cl.fit(placement, n_gpus, t)
                if got is not None:
                    return got, t
        return None, -1

    def walk(self, order, may_preempt):
        """Place the waiting jobs of ``order`` (highest priority first), suspending jobs from the
        tail if allowed; returns (launched, suspended, pairs): ``(job, victim)`` for each victim
        whose GPUs a job took."""
        cl = self.cl
        launched, suspended, pairs = [], [], []
        # a job running after position idx was running when the walk began (a job the walk
        # launches is at or before the position it has reached)
        ran = [p for p, v in enumerate(order) if v.state == RUNNING]
        for idx, job in enumerate(order):
            if job.state != WAITING or job.want_type == NO_RUN:
                continue
            got, gt = self.place(job, job.want, job.want_type)
            victims = []
            below = [order[p] for p in ran if p > idx and order[p].state == RUNNING] if got is None and may_preempt else []
            # a search that cannot free enough GPUs ends with every victim put back: skip it
            if below and cl.free_in_service() + sum(len(v.gang) for v in below) >= job.want:
                for v in reversed(below):
                    if v.state != RUNNING:
                        continue
                    cl.release(v.gang, v.i)
                    v.state = WAITING
                    victims.append(v)
                    got, gt = self.place(job, job.want, job.want_type)
                    if got is not None:
                        break
            if got is not None:
                cl.take(got, job.i)
                job.gang, job.gtype, job.state = got, gt, RUNNING
                launched.append(job)
            for v in victims:
                if all(g not in cl.owner for g in v.gang):
                    cl.take(v.gang, v.i)  # not needed after all: put back, not a preemption
                    v.state = RUNNING
                else:
                    suspended.append(v)
                    pairs.append((job, v))
            if got is None and not self.backfill:
                break  # head-of-line blocking: no job after a blocked one starts
        return launched, suspended, pairs

    def schedule(self, t):
        """A scheduling step at ``t``: arrivals, admission, the order, the walk, settling."""
        (active, cl, gv, gx, heap, jobs, key_fn, max_steps, n, overflow, planner, policy, preempt, restart_s,
            round_s, sp, st, themis_f, theta) = (
            self.active, self.cl, self.gv, self.gx, self.heap, self.jobs, self.key_fn, self.max_steps, self.n,
            self.overflow, self.planner, self.policy, self.preempt, self.restart_s, self.round_s, self.sp,
            self.st, self.themis_f, self.theta)
        while st["next_arr"] < n and jobs[st["next_arr"]].submit <= t:
            jobs[st["next_arr"]].state = OVERFLOW
            overflow.append(jobs[st["next_arr"]])
            st["next_arr"] += 1
        demand = sum(j.gpus for j in active)
        added = 0
        while overflow and (theta <= 0 or demand + added <= theta * cl.in_service()):
            job = overflow.pop(0)
            added += job.gpus
            job.state = WAITING
            job.queue, job.qentry, job.wait_since = 0, t, t  # Tiresias: enters queue 0 now
            job.queue_log.append((t, 0, "admit"))
            active.append(job)
            if self.jp is not None:
                self.user_waits(job, t)
        assert [j.i for j in active] == sorted(j.i for j in active)
        if planner is not None:
            if not active:
                return
        elif not self.waiting() or (cl.free_in_service() == 0 and not preempt):
            return
        n_stopped = 0  # running jobs a plan stopped before the walk
        if planner is not None:
            idx = [j.i for j in active]
            keys, types, sizes = planner(idx, t)
            keys, types, sizes = [float(k) for k in keys], [int(x) for x in types], [int(x) for x in sizes]
            assert len(keys) == len(types) == len(sizes) == len(idx)
            kmap = {}
            for j, k, ty, sz in zip(active, keys, types, sizes):
                assert NO_RUN <= ty < cl.n_types
                kmap[j.i] = k
                j.want_type = ty
                if ty != NO_RUN:
                    assert sz >= 1
                    j.want = sz
            # a running job whose plan differs from what it holds is stopped first
            for j in active:
                if j.state != RUNNING:
                    continue
                wt = j.want_type
                if wt == NO_RUN or j.want != len(j.gang) or (wt != ANY_TYPE and wt != j.gtype):
                    if wt != NO_RUN:
                        st["n_migrate"] += 1
                    self.stop(j, t, "preempt")
                    cl.release(j.gang, j.i)
                    j.gang = []
                    j.n_preempt += 1
                    j.state = WAITING
                    j.wait_since = t
                    n_stopped += 1
            order = sorted(active, key=lambda j: kmap[j.i])  # stable: ties in arrival order
            launched, suspended, pairs = self.walk(order, False)
        else:
            if key_fn is not None:
                kmap = {j.i: key_fn(j, t) for j in active}
            elif self.jp is not None:  # (rank, key); ties in arrival order
                kmap = {j.i: self.user_call(j, t)[:2] if j.state == RUNNING else j.ukey for j in active}
            elif policy == TIRESIAS:
                # by queue; within a queue the running jobs, then the waiting ones, each by the
                # time they entered the queue
                kmap = {}
                for j in active:
                    q, e = self.queue_at(j, t)
                    kmap[j.i] = (q, 0 if j.state == RUNNING else 1, e)
            elif policy == GITTINS:
                # by queue; within a queue the highest Gittins index of the service first
                kmap = {j.i: (self.queue_at(j, t)[0], -gittins_index(gx, gv, self.service(j, t))) for j in active}
            elif policy == THEMIS:
                kmap = themis_keys(active, t, round_s, themis_f, restart_s)
            else:
                kmap = {j.i: _builtin_key(policy, j, t, restart_s) for j in active}
            order = sorted(active, key=lambda j: kmap[j.i])  # stable: ties in arrival order
            launched, suspended, pairs = self.walk(order, preempt)
        for job, v in pairs:
            st["preemptions"].append((t, job.i, v.i, kmap[job.i], kmap[v.i]))
        # settle: suspensions first (a victim may have been placed again in this walk), then launches
        for v in suspended:
            self.stop(v, t, "preempt")
            v.n_preempt += 1
            v.wait_since = t  # (a victim placed again in this walk waited no time)
            if v.state == WAITING:
                v.gang = []
                self.starts_waiting(v, t)
        for job in launched:
            g = job.gang
            assert len(g) == job.want == len(set(g)), "gang not whole"
            assert all(cl.owner[x] == job.i for x in g)
            assert len({cl.node_type[cl.gpu_node[x]] for x in g}) == 1 and cl.node_type[cl.gpu_node[g[0]]] == job.gtype, \
                "a gang on more than one GPU type"
            multi_node, multi_rack = cl.spans(g)
            rate = sp.launch(job, job.gtype, len(g), multi_node, multi_rack)
            assert rate > 0.0
            job.cur = Launch(t, list(g), job.gtype, rate, multi_node, multi_rack, queue=job.queue,
                             svc=job.attained_gpu - job.svc0)
            if job.attained > job.exec0:  # Tiresias' starvation counter: waits after having run
                job.pend += t - job.wait_since
            job.promote_at = None
            if job.first_start < 0:
                job.first_start = t
            job.version += 1
            heapq.heappush(heap, (t + restart_s + job.work_left / rate, job.i, job.version))
            if self.jp is not None:
                job.uwake = self.user_call(job, t)[2]
        for j in jobs:
            assert (j.state == RUNNING) == bool(j.gang) == (j.cur is not None)
        assert len(cl.owner) == sum(len(j.gang) for j in jobs) <= cl.in_service()
        st["steps"] += 1
        st["step_log"].append((t, len(suspended) + n_stopped))
        if max_steps is not None and st["steps"] > max_steps:
            raise RuntimeError(f"more than {max_steps} scheduling steps: the jobs never finish")

    def pending(self):
        """Something can still change: an arrival, a completion (a job runs), a node event or a
        promotion. When nothing can, the run is stuck for good: the jobs left wait for a cluster
        none of them fits, or for admission, which only moves after a completion or a node event."""
        active, evs, n, st = self.active, self.evs, self.n, self.st
        return (st["next_arr"] < n or self.live_top() < math.inf or st["next_ev"] < len(evs)
                or any(j.state == WAITING and j.promote_at is not None for j in active)
                or any(j.uwake < math.inf for j in active))

    def run(self) -> dict:
        """Replay the run to its end; returns what :func:`simulate_native_reference` returns."""
        t, deadlock = self.run_events() if self.events_mode else self.run_rounds()
        return self.result(t, deadlock)

    def run_events(self):
        """``events`` mode: a step at every arrival, completion, node event, queue crossing and
        promotion. Returns ``(end time, deadlock)``."""
        evs, jobs, n, st = self.evs, self.jobs, self.n, self.st
        deadlock = False
        t = jobs[0].submit if n else 0.0
        if evs:
            t = min(t, evs[0][0])
        same_t = 0
        while True:
            same_t = same_t + 1 if t == st["t"] else 0
            if same_t > no_progress_limit(n, len(evs)):
                raise RuntimeError(f"no progress: more than {no_progress_limit(n, len(evs))} passes at t={t!r}")
            self.set_time(t)
            self.completions_to(t)
            if st["left"] == 0:
                break
            self.node_events_to(t)
            self.promotions_to(t)
            self.user_wakes_to(t)
            self.schedule(t)
            if not self.pending():
                deadlock = True
                break
            t_arr = jobs[st["next_arr"]].submit if st["next_arr"] < n else math.inf
            t_ev = evs[st["next_ev"]][0] if st["next_ev"] < len(evs) else math.inf
            t = min(t_arr, self.live_top(), t_ev, self.next_wake(t))
        return t, deadlock

    def run_rounds(self):
        """``rounds`` mode; returns ``(end time, deadlock)``."""
        (active, dynamic, evs, jobs, n, planner, round_s, st) = (
            self.active, self.dynamic, self.evs, self.jobs, self.n, self.planner, self.round_s, self.st)
        deadlock = False
        # every boundary k·R in turn; node events (with the completions before them) at their own
        # times in between; a boundary is a step unless provably nothing changed since the last
        # boundary that was looked at: no arrival, completion or node event since, and either no
        # waiting job or keys that do not move while jobs run (a planner runs while any job is active)
        k = 0
        t = 0.0
        idle = 0
        while True:
            b = k * round_s
            while st["next_ev"] < len(evs) and evs[st["next_ev"]][0] < b:
                te = evs[st["next_ev"]][0]
                self.set_time(te)
                self.completions_to(te)
                if st["left"] == 0:
                    break
                self.node_events_to(te)
            if st["left"] == 0:
                t = st["t"]  # the run ends at the node event's time (as the kernel does)
                break
            t = b
            self.set_time(b)
            self.completions_to(b)
            if st["left"] == 0:
                break
            self.node_events_to(b)
            self.promotions_to(b)  # (a crossing needs no step of its own: the queue is worked out when needed)
            self.user_wakes_to(b)
            arrival = st["next_arr"] < n and jobs[st["next_arr"]].submit <= b
            look = (k == 0 or st["changed"] or arrival or (dynamic and self.waiting())
                    or (planner is not None and active))
            if look:
                st["changed"] = False
                self.schedule(b)
                # a planner may leave the cluster empty on purpose for a while (Gavel waits for
                # its next allocation): it is stuck only after PLAN_IDLE_LIMIT such steps in a row
                idle = idle + 1 if (self.waiting() and not any(j.state == RUNNING for j in jobs)) else 0
            if not self.pending() and (planner is None or idle > PLAN_IDLE_LIMIT):
                deadlock = True
                break
            k += 1
        return t, deadlock

    def result(self, t, deadlock) -> dict:
        """The per-job lists and totals of a run that ended at ``t``."""
        (cl, jobs, overflow, queued, restart_s, st) = (
            self.cl, self.jobs, self.overflow, self.queued, self.restart_s, self.st)
        for j in jobs:
            if queued and j.state == RUNNING:  # still running at the end: its crossings so far
                self.log_crossings(j, t)
            if j.state == DONE:  # work is conserved: the progress kept over all launches is the work
                kept = sum(c.kept * c.rate for c in j.history)
                assert math.isclose(kept, j.work, rel_tol=1e-9, abs_tol=1e-6), f"job {j.i}: kept progress {kept} != work {j.work}"
        return {
            "finish": [j.finish for j in jobs],
            "first_start": [j.first_start for j in jobs],
            "n_preempt": [j.n_preempt for j in jobs],
            "n_fail": [j.n_fail for j in jobs],
            "attained": [j.attained + ((t - j.cur.t) if j.state == RUNNING else 0.0) for j in jobs],
            "attained_gpu": [j.attained_gpu + ((t - j.cur.t) * len(j.cur.gpus) if j.state == RUNNING else 0.0) for j in jobs],
            "lost_s": [j.lost_s for j in jobs],
            "gpu_type": [j.cur.gtype if j.cur else (j.history[-1].gtype if j.history else -1) for j in jobs],
            "history": [j.history + ([_open_launch(j.cur, t, restart_s)] if j.cur else []) for j in jobs],
            "end_t": t,
            "steps": st["steps"],
            "deadlock": deadlock,
            # what was left when stuck: jobs waiting, jobs held back by admission, GPUs in service
            "stuck": {"waiting": len(self.waiting()), "overflow": len(overflow), "in_service": cl.in_service()},
            "lost_gpu_s": st["lost_gpu_s"],
            "n_migrate": st["n_migrate"],
            "queue_log": [j.queue_log for j in jobs],
            "step_log": st["step_log"],
            "preemptions": st["preemptions"],
            "state": getattr(self, "states", None),
        }
