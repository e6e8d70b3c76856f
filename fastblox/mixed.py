"""Elastic and rigid jobs in one run, outside the peer compat modes: the elastic engine, run by
``--policy pollux``, ``elastic-optimus`` and ``elastic-tiresias`` without ``--compat``
(:data:`fastblox.spec.ELASTIC_RUNS`: Pollux, and the Pollux simulator's Optimus and Tiresias,
each as below; docs/elastic.md).

A workload's rows are of two kinds, told apart by its boolean ``elastic`` column (a workload
without it is all rigid, as every trace fastblox reads):

* **elastic** rows are Pollux jobs (:mod:`fastblox.elastic`): an application trained for its
  epochs, with the GPUs and batch size it asks for (``num_gpus``, ``batch_size``); under Pollux
  it adapts its GPUs and batch size to the goodput model it fits and pays
  :data:`~fastblox.elastic.RESTART_S` at every (re-)allocation, exactly as under
  ``--compat pollux``;
* **rigid** rows run ``duration_s`` seconds on exactly ``num_gpus`` GPUs (a gang): under Pollux
  a rigid job gets its gang or nothing. Its speedup, for Pollux's objective, is ``gang / fair
  share`` (the linear prior Pollux gives an elastic job before it has a model); it pays the same
  restart delay at every (re-)launch and keeps its progress when suspended.

The run is the Pollux simulator's (:func:`fastblox.compat_pollux._run_pollux`: intervals of
``--round-s``, 60 by default, and :class:`~fastblox.compat_pollux.PolluxPolicy`'s search) on any
``--cluster`` of alike nodes; a workload of elastic rows only runs exactly as ``--compat
pollux`` does. A workload of rigid rows only runs compiled under Pollux (:func:`simulate_rigid`,
docs/elastic.md "Rigid jobs, compiled"), on one GPU type or several (blind to types, each gang at
its type's speed: :func:`type_speeds`). Under ``elastic-optimus`` and ``elastic-tiresias`` the elastic rows run at their
workload batch size as in the simulator (:func:`fastblox.compat_pollux.run_fixed`, its
:class:`~fastblox.compat_pollux.Optimus` and :class:`~fastblox.compat_pollux.Tiresias`) and the
rigid rows at their gang or not at all (rows of :class:`~fastblox.compat_pollux.Jobs` without an
application). Every policy takes the native admission (:class:`Gate`) and ``--restart-s``
(default :data:`~fastblox.elastic.RESTART_S`); the two fixed-batch ones a native placement
(:func:`native_placer`). The native policies (``fifo``, ``las``, ...) run the same workload with elastic
rows held at their requested GPUs for ``duration_s``, their run time alone at that size (the
baseline).

A mixed workload is a CSV ``name,time,application,num_replicas,batch_size,duration``
(:func:`read_mixed`, trace format ``elastic-mix``): a row with an application is elastic (its
``duration`` empty), a row without is rigid (``duration`` seconds, ``batch_size`` empty). A
Pollux workload CSV (no ``duration`` column) is all elastic; :func:`mix` joins a Pollux
workload and any trace.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from . import compat_pollux as cp
from . import elastic
from .errors import ConfigError, TraceError, WorkloadError

FORMAT = "elastic-mix"
COLUMNS = ("name", "time", "application", "num_replicas", "batch_size", "duration")
MAX_GPUS_PER_NODE = 4  # the Pollux profiles measure placements of up to 4 GPUs a node
#: why ``--policy pollux`` takes no ``--placement``
POLLUX_PLACES = "pollux chooses its jobs' nodes itself (its search packs them onto nodes); drop --placement"


# ------------------------------------------------------------------------------------------ workloads
@functools.lru_cache(maxsize=None)
def isolated_s(app: str, batch_size: int, num_replicas: int) -> float:
    """:func:`fastblox.elastic.isolated_run_s`, remembered (scaled workloads repeat their jobs)."""
    return elastic.isolated_run_s(app, batch_size, num_replicas)


def read_mixed(path, name: str | None = None):
    """A mixed workload CSV (module docstring) as a :class:`~fastblox.Workload` with columns
    ``elastic`` (bool), ``model`` (the application; "" for rigid rows), ``batch_size`` (0 for
    rigid rows) and ``source_id`` (the name). A bad row raises TraceError naming the file, row
    (the header is row 1) and column."""
    path = Path(path)
    rows, head = cp.read_csv_rows(path)
    for c in COLUMNS[:4]:
        if c not in head:
            raise TraceError(f"missing column (a mixed workload has {', '.join(COLUMNS)})", path=path, column=c)
    col = {c: head.index(c) for c in COLUMNS if c in head}
    jobs = [_row(row, col, path, i, len(head)) for i, row in enumerate(rows[1:], start=2) if any(x.strip() for x in row)]
    if not jobs:
        raise TraceError("no jobs", path=path)
    names, submit, apps, reps, bsz, dur = zip(*jobs)
    return _workload(submit, reps, dur, apps, bsz, names, name or path.stem)


def _workload(submit, reps, dur, apps, bsz, names, name):
    from .workload import Workload

    apps = np.array(apps, dtype=object)
    return Workload.from_arrays(submit, reps, duration_s=dur, name=name, elastic=apps != "", model=apps,
                                batch_size=np.array(bsz, dtype=np.int64), source_id=np.array(names, dtype=object))


def _row(row, col, path, i, width) -> tuple:
    """(name, submit s, application or "", GPUs, batch size or 0, duration s) of CSV row ``i``."""
    if len(row) != width:
        raise TraceError(f"{len(row)} fields, the header has {width}", path=path, row=i)
    cell = lambda c: row[col[c]].strip() if c in col else ""  # noqa: E731
    app = cell("application")
    submit = cp.parse_number(cell("time"), path, i, "time", whole=False)
    reps = cp.parse_number(cell("num_replicas"), path, i, "num_replicas")
    if not app:  # rigid
        if not cell("duration"):
            raise TraceError("a rigid row (no application) needs its run time in seconds", path=path, row=i,
                             column="duration")
        if cell("batch_size"):
            raise TraceError("a rigid row (no application) has no batch size; leave it empty", path=path, row=i,
                             column="batch_size")
        dur = cp.parse_number(cell("duration"), path, i, "duration", whole=False)
        if dur <= 0:
            raise TraceError(f"{cell('duration')!r} is not a number of seconds > 0", path=path, row=i,
                             column="duration")
        return cell("name"), submit, "", reps, 0, dur
    if app not in elastic.APPLICATIONS:
        raise TraceError(f"unknown application {app!r} (the Pollux profiles': {', '.join(sorted(elastic.APPLICATIONS))}"
                         "; leave it empty for a rigid job)", path=path, row=i, column="application")
    if cell("duration"):
        raise TraceError(f"an elastic row ({app}) trains to its target: leave duration empty", path=path, row=i,
                         column="duration")
    bsz = cp.parse_number(cell("batch_size"), path, i, "batch_size")
    cp.check_batch_size(app, bsz, path, i)
    try:
        dur = isolated_s(app, bsz, reps)
    except ValueError as e:
        raise TraceError(f"{app} on {reps} GPUs: {e}", path=path, row=i, column="num_replicas") from None
    return cell("name"), submit, app, reps, bsz, dur


def read_any(path):
    """A CSV with an ``application`` column: :func:`read_mixed`; any other trace: read as every
    trace is (:func:`fastblox.traces.read_trace`), all rigid."""
    from .traces import _core, read_trace

    p = Path(path)
    if not p.name.lower().endswith((".parquet", ".pq")):
        head = _core.first_line(_core.read_bytes(p))
        if "application" in [h.strip().lower() for h in head.split(",")]:
            return read_mixed(p)
    return read_trace(p)


def mix(elastic_workload, rigid_workload, name: str = "mixed"):
    """One workload of the elastic rows of ``elastic_workload`` (a Pollux workload:
    :func:`fastblox.compat_pollux.read_workload` or :func:`read_mixed`) and every row of
    ``rigid_workload`` (any trace) as rigid jobs; rows in submit order (elastic first among equals)."""
    ex = elastic_workload.extra
    if "model" not in ex or "batch_size" not in ex:
        raise WorkloadError(f"workload {elastic_workload.name!r} is not a Pollux workload (no model/batch_size)")
    e = elastic_rows(elastic_workload) if "elastic" in ex else np.ones(len(elastic_workload), dtype=bool)
    ew, rw = elastic_workload.take(np.flatnonzero(e)), rigid_workload
    m = len(rw)
    names = [str(x) for x in ew.extra.get("source_id", ew.job_id)] + [f"rigid-{j}" for j in rw.job_id.tolist()]
    return _workload(np.concatenate([ew.submit_s, rw.submit_s]), np.concatenate([ew.num_gpus, rw.num_gpus]),
                     np.concatenate([ew.duration_s, rw.duration_s]),
                     [str(a) for a in ew.extra["model"]] + [""] * m,
                     np.concatenate([np.asarray(ew.extra["batch_size"], dtype=np.int64), np.zeros(m, np.int64)]),
                     names, name)


def elastic_rows(workload) -> np.ndarray:
    """Which rows are elastic (the ``elastic`` column; none without it)."""
    e = workload.extra.get("elastic")
    return np.zeros(len(workload), dtype=bool) if e is None else np.asarray(e, dtype=bool)


# ------------------------------------------------------------------------------------------ rigid jobs
class RigidJob:
    """A rigid job under Pollux: ``work_s`` seconds on exactly ``gang`` GPUs (the interface of
    :class:`fastblox.compat_pollux.ElasticJob` that the replay and the policy use). On a cluster
    of several GPU types (``node_type``: each node's type) it does its work at ``speeds[t]``
    work-seconds a second on type ``t``, at the slowest type's when its gang spans several."""

    restart_s = elastic.RESTART_S  # (make_jobs sets --restart-s on the job)

    def __init__(self, gang: int, work_s: float, submit: float, speeds=None, node_type=None):
        self.gang, self.work_s, self.submit = int(gang), float(work_s), float(submit)
        self.speeds, self.node_type = speeds, node_type
        self.done_s, self.rescale, self.speed = 0.0, 0.0, 1.0
        self.placement = ()
        self.finish = self.restarts = self.first = None
        self.attained_gpu, self.preempted = 0.0, 0

    def speedups(self, fair: float, ahead: list = ()) -> "RigidSpeedups":
        return RigidSpeedups(self.gang, fair)

    def max_replicas(self, gpus: int) -> int:
        return self.gang

    def reallocate(self, placement: tuple, now: float, nodes=()) -> None:
        """The job runs on ``placement`` (GPUs per node; empty: suspended) from ``now``; ``nodes``
        (a node per GPU) set its speed on a cluster of several GPU types."""
        if not placement:
            if self.placement:
                self.preempted += 1
            self.placement = ()
            return
        if sum(placement) != self.gang:
            raise RuntimeError(f"a rigid job of {self.gang} GPUs was given {sum(placement)}")
        self.placement = tuple(placement)
        if self.speeds is not None:
            self.speed = min(float(self.speeds[self.node_type[n]]) for n in nodes)
        cp.relaunched(self, now)

    def advance(self, t0: float, secs: float) -> None:
        if not self.placement or self.finish is not None:
            return
        d = min(self.rescale, secs)
        self.rescale -= d
        left = (self.work_s - self.done_s) / self.speed  # (wall seconds to its end)
        run = min(secs - d, left)
        self.attained_gpu += (d + run) * self.gang
        if run >= left:
            self.finish = t0 + d + left
            self.done_s = self.work_s
        else:
            self.done_s += run * self.speed


class RigidSpeedups:
    """A rigid job's speedup over its fair share: ``gang / fair`` on its gang, 0 on any other size."""

    def __init__(self, gang: int, fair: float):
        self.gang, self.fair = gang, fair

    def __call__(self, nodes, reps) -> np.ndarray:
        reps = np.asarray(reps, dtype=np.int64)
        return np.where(reps == self.gang, self.gang / self.fair, 0.0)

    def one(self, nodes: int, reps: int) -> float:
        """The speedup at one (nodes, GPUs) pair (``compat_pollux.Speedups``' interface)."""
        return self.gang / self.fair if reps == self.gang else 0.0

    def at_layouts(self, n_r: np.ndarray, count: int) -> np.ndarray:
        """Speedups at the first ``count`` (nodes, GPUs) pairs of ``n_r`` (``compat_pollux.Speedups``'
        interface; the local search's table also rules out every size but the gang)."""
        return self(n_r[:count, 0], n_r[:count, 1])


# ------------------------------------------------------------------------------------------ the run
def make_jobs(apps, gangs, duration_s, is_elastic, submit_s, restart_s: float = elastic.RESTART_S, speeds=None,
              node_type=None) -> list:
    """The replay's jobs: elastic rows as ``--compat pollux`` makes them, rigid rows as
    :class:`RigidJob` (``speeds[j]``, ``node_type``: on several GPU types); each stopped
    ``restart_s`` at every (re-)allocation."""
    fits = {}
    out = []
    for i, (a, g, d, e, t) in enumerate(zip(apps, gangs, duration_s, is_elastic, submit_s)):
        if e:
            out.append(cp.ElasticJob(a, float(t), cp.POLLUX_NCF_BATCH if a == "ncf" else None, fits))
        else:
            out.append(RigidJob(int(g), float(d), float(t), None if speeds is None else speeds[i], node_type))
        out[-1].restart_s = float(restart_s)
    return out


def simulate_mixed(apps, gangs, duration_s, is_elastic, submit_s, interval_s: float = cp.INTERVAL_S,
                   nodes: int = cp.NODES, per_node: int = cp.GPUS_PER_NODE, max_intervals: int = 1_000_000,
                   policy: str = "pollux", batch_size=None, theta: float = 0.0, placement: str | None = None,
                   gate: "Gate | None" = None, restart_s: float = elastic.RESTART_S, speeds=None, node_type=None,
                   search: bool = True) -> dict:
    """Replay elastic and rigid jobs (workload order) under ``policy``, the Pollux simulator's
    ``pollux``, ``tiresias`` or ``optimus`` (:data:`fastblox.spec.ELASTIC_RUNS` maps the
    elastic engine's names to these). ``batch_size``: the elastic rows' (tiresias and optimus run
    them at it); ``theta``: the native load-based admission's threshold (0: accept all), or a
    ``gate`` to read afterwards; ``placement``: a native placement of the gangs tiresias and
    optimus start (None: the simulator's, the nodes with the most free GPUs first); ``restart_s``:
    the delay of every (re-)allocation (Pollux's objective discounts restarts by it too);
    ``speeds`` [job, GPU type] and ``node_type`` [node]: rigid jobs' speeds on a cluster of several
    GPU types (:class:`RigidJob`); ``search``: Pollux's local search after its plans (False: the
    rule :func:`simulate_rigid` compiles). Returns what :func:`fastblox.compat_pollux.simulate_pollux` does."""
    gate = gate or Gate(submit_s, gangs, theta, nodes * per_node)
    submit = np.asarray(submit_s, dtype=np.float64)
    if policy == "pollux":
        if placement is not None:
            raise ConfigError(f"--placement: {POLLUX_PLACES}")
        jobs = make_jobs(apps, gangs, duration_s, is_elastic, submit_s, restart_s, speeds, node_type)
        pol = cp.PolluxPolicy(jobs, nodes, per_node, restart_s, search=search,
                              rigid_sizes=None if search else _rigid_twin())
        with elastic.one_blas_thread():
            return cp._run_pollux(jobs, pol, submit, interval_s, max_intervals, gate=gate)
    if policy not in cp.BASELINES:
        raise ConfigError(f"the elastic engine runs the Pollux simulator's pollux, {', '.join(cp.BASELINES)}; "
                          f"not {policy!r}")
    bs = np.zeros(len(apps), dtype=np.int64) if batch_size is None else np.asarray(batch_size, dtype=np.int64)
    jobs = cp.Jobs([a if e else "" for a, e in zip(apps, is_elastic)], bs, submit,
                   work_s=np.asarray(duration_s, dtype=np.float64), restart_s=restart_s)
    cls = cp.Tiresias if policy == "tiresias" else cp.Optimus
    pol = cls(jobs, np.asarray(gangs, dtype=np.int64), nodes, per_node,
              None if placement is None else native_placer(placement, nodes, per_node))
    return cp.run_fixed(jobs, pol, interval_s, max_intervals, gate)


def simulate_rigid(gangs, duration_s, submit_s, interval_s: float = cp.INTERVAL_S, node_type=None,
                   per_node: int = cp.GPUS_PER_NODE, speeds=None, theta: float = 0.0,
                   restart_s: float = elastic.RESTART_S, max_intervals: int = 10_000_000) -> dict:
    """Rigid jobs (workload order) under Pollux, compiled (``kernels.pollux_rigid.replay``): the
    replay of :func:`simulate_mixed` with ``search=False`` (its plain twin), on nodes of types
    ``node_type`` (default: 16 of one type), each job at ``speeds[job, type]`` (default 1),
    admitted by ``--admission load:THETA`` (``theta``; 0: all). Returns per-job ``start_s``,
    ``finish_s``, ``preemptions``, ``restarts``, ``attained_gpu_s``, ``end_s``, ``held`` (jobs
    admission held back) and ``unproven_rounds``/``programme_rounds``/``rounds``
    (``kernels.pollux_rigid.optimize``'s stats)."""
    from .errors import SimulationError
    from .kernels.pollux_rigid import MAX_NODES_PER_JOB, OK, replay

    gangs = np.ascontiguousarray(gangs, dtype=np.int64)
    n = len(gangs)
    node_type = np.zeros(cp.NODES, np.int64) if node_type is None else np.ascontiguousarray(node_type, dtype=np.int64)
    speeds = np.ones((n, int(node_type.max()) + 1)) if speeds is None else np.ascontiguousarray(speeds, np.float64)
    K = max(MAX_NODES_PER_JOB, -(-int(gangs.max(initial=1)) // per_node) + 1)  # (a row's nodes at most)
    first, finish = np.full(n, -1.0), np.full(n, -1.0)
    restarts, preempted = np.full(n, -1, np.int64), np.zeros(n, np.int64)
    attained, arrive, admit = np.zeros(n), np.full(n, -1.0), np.full(n, -1.0)
    stats = np.zeros(3, np.int64)
    with elastic.one_blas_thread():
        code = replay(np.ascontiguousarray(submit_s, dtype=np.float64), gangs,
                      np.ascontiguousarray(duration_s, dtype=np.float64), speeds, node_type, int(per_node),
                      float(interval_s), float(restart_s), float(theta), int(max_intervals), K, first, finish,
                      preempted, restarts, attained, arrive, admit, stats)
    if code != OK:
        raise SimulationError(f"the Pollux replay of rigid jobs did not finish in {max_intervals} intervals")
    return {"start_s": first, "finish_s": finish, "preemptions": preempted, "restarts": np.maximum(restarts, 0),
            "attained_gpu_s": attained, "end_s": float(finish.max()), "held": admit > arrive,
            "unproven_rounds": int(stats[0]), "programme_rounds": int(stats[1]), "rounds": int(stats[2])}


def type_speeds(workload, cluster, throughput) -> np.ndarray:
    """[job, GPU type]: each rigid job's work-seconds per second on each of the cluster's types
    with its gang on one node: ones without a throughput table; with one, the native engine's
    speed model (``fastblox.speed``: a job of unknown model at its type's relative speed, a known
    one at the table's rate over its rate on the reference type). Raises WorkloadError for a job
    with no speed on some type (Pollux's type-blind packing may put it there)."""
    from .speed import build_speed_model, resolve_table

    T = len(cluster.gpu_types)
    if resolve_table(throughput) is None:
        return np.ones((len(workload), T))
    sm = build_speed_model(workload, cluster, throughput)
    rt = sm.rates
    sp = np.broadcast_to(np.asarray(rt.type_speed, dtype=np.float64), (len(workload), T)).copy()
    known = np.flatnonzero(sm.cls >= 0)
    if len(known):
        g = np.minimum(workload.num_gpus[known], rt.tab.shape[2] - 1)
        sp[known] = rt.tab[sm.cls[known], :, g] / sm.ref_rate[known, None]
    bad = ~(np.isfinite(sp) & (sp > 0))
    if bad.any():
        j, t = (int(x[0]) for x in np.nonzero(bad))
        raise WorkloadError(f"workload {workload.name!r}: job {int(workload.job_id[j])} has no throughput on "
                            f"{cluster.gpu_types[t]} (--policy pollux places gangs blind to GPU types); use a "
                            "table with every type, or a cluster without it")
    return sp


def _rigid_twin():
    from .reference.pollux import rigid_sizes

    return rigid_sizes


def admission_gate(admission: str, submit_s, gpus, total_gpus: int) -> "Gate | None":
    """The :class:`Gate` of ``--admission`` for a peer replay, None for accept-all (every job let in
    as it arrives: the replay's own loop, unchanged)."""
    from .parts import Admission

    theta = Admission.parse(admission).theta
    return Gate(submit_s, gpus, theta, total_gpus) if theta > 0 else None


class Gate:
    """The native engine's admission of arrivals into the scheduler, at each interval: every
    arrived job (``theta`` <= 0, accept-all), else, in arrival order, while the GPUs asked for by
    the jobs let in and not finished plus those let in so far are within ``theta`` × the cluster's
    GPUs, the job that crosses the bound included (``--admission load:THETA``). The rule is the
    native kernel's own code, ``kernels.admission.admit_to``, run as Python. ``admit_s`` holds
    each job's admission time (-1: not yet)."""

    def __init__(self, submit_s, gpus, theta: float, total_gpus: int):
        submit = np.asarray(submit_s, dtype=np.float64)
        self.order = np.argsort(submit, kind="stable")  # (arrival order; ties in workload order)
        self.submit = submit[self.order]
        self.row_gpus = np.asarray(gpus, dtype=np.int64)
        self.gpus = self.row_gpus[self.order]
        self.theta, self.total = float(theta), int(total_gpus)
        self.next_arr = self.head = 0
        self.demand = 0
        self.arrive_s = np.full(len(submit), -1.0)  # (the interval at which each job arrived)
        self.admit_s = np.full(len(submit), -1.0)

    def step(self, now: float, done: list) -> list:
        """The jobs (workload rows) let in at ``now``, after the jobs ``done`` finished."""
        from .kernels.admission import admit_to

        self.demand -= int(self.row_gpus[np.asarray(done, dtype=np.int64)].sum())
        first = self.next_arr
        while self.next_arr < len(self.submit) and self.submit[self.next_arr] <= now:
            self.next_arr += 1
        self.arrive_s[self.order[first:self.next_arr]] = now
        last = admit_to.py_func(self.theta, self.total, self.demand, self.head, self.next_arr, self.gpus)
        new = self.order[self.head:last]
        self.demand += int(self.gpus[self.head:last].sum())
        self.head = last
        self.admit_s[new] = now
        return sorted(new.tolist())

    def held(self) -> np.ndarray:
        """Which jobs admission held back (let in at a later interval than the one they arrived at)."""
        return self.admit_s > self.arrive_s


def native_placer(kind: str, nodes: int, per_node: int):
    """A ``place(need, order, free)`` for the Pollux simulator's Tiresias and Optimus that places
    each job of ``order`` by native placement ``kind`` (its plain-Python twin,
    ``fastblox.reference.native.Cluster.fit``); a job the placement cannot place now is left out
    (it waits, as natively)."""
    from .reference.native import Cluster

    def place(need: dict, order, free) -> dict:
        cl = Cluster([per_node] * nodes)
        for nd in range(nodes):  # (the GPUs already held: the lowest of each node, held by "nobody")
            for k in range(per_node - free.get(nd, 0)):
                cl.owner[cl.base[nd] + k] = -1
        out = {}
        for j in order:
            got = cl.fit(kind, int(need[j]), 0)
            if got is None:
                continue
            cl.take(got, j)
            out[j] = sorted(cl.gpu_node[g] for g in got)
        return out

    place.kind = kind
    return place


def check_cluster(cluster, any_elastic: bool, policy: str = "pollux") -> tuple:
    """(nodes, GPUs per node) of a cluster the elastic engine runs: alike nodes without racks, of
    one GPU type (several under ``pollux`` on rigid jobs only: :func:`simulate_rigid`); with
    elastic jobs, at most :data:`MAX_GPUS_PER_NODE` GPUs a node. Raises ConfigError."""
    g = np.asarray(cluster.node_gpus)
    several = len(cluster.gpu_types) > 1
    if cluster.node_rack is not None or (g != g[0]).any() or (several and policy != "pollux"):
        why = (f" (--policy {policy} runs on one GPU type; --policy pollux runs rigid jobs on several)" if several
               else "")
        raise ConfigError(f"--cluster: --policy {policy} runs on alike nodes without racks (e.g. 32x4); "
                          f"not {cluster.spec!r}{why}")
    if several and any_elastic:
        raise ConfigError(f"--cluster: --policy pollux runs elastic jobs on one GPU type (Pollux's model of an elastic "
                          f"job has no GPU types; rigid jobs only run on several: docs/policies.md); not {cluster.spec!r}")
    if any_elastic and g[0] > MAX_GPUS_PER_NODE:
        raise ConfigError(f"--cluster: elastic jobs need nodes of at most {MAX_GPUS_PER_NODE} GPUs (the Pollux "
                          f"profiles measure placements up to {MAX_GPUS_PER_NODE} GPUs a node); {cluster.spec!r} has "
                          f"{int(g[0])}")
    return len(g), int(g[0])


def job_arrays(workload, gpus_total: int) -> tuple:
    """(applications, gangs, durations, elastic mask) of a workload, checked: elastic rows name
    Pollux applications, rigid gangs fit the cluster. Raises WorkloadError naming the row."""
    e = elastic_rows(workload)
    gangs = np.asarray(workload.num_gpus, dtype=np.int64)
    apps = [""] * len(workload)
    if e.any():
        ex = workload.extra
        if "model" not in ex or "batch_size" not in ex:
            raise WorkloadError(f"workload {workload.name!r} has elastic rows but no 'model' (application) or "
                                "'batch_size' column")
        model = np.asarray(ex["model"], dtype=object)
        for j in np.flatnonzero(e):
            if str(model[j]) not in elastic.APPLICATIONS:
                raise WorkloadError(f"workload {workload.name!r}: elastic job {int(workload.job_id[j])} has unknown "
                                    f"application {str(model[j])!r}; the Pollux profiles': "
                                    f"{', '.join(sorted(elastic.APPLICATIONS))}")
            apps[j] = str(model[j])
    big = ~e & (gangs > gpus_total)
    if big.any():
        j = int(np.flatnonzero(big)[0])
        raise WorkloadError(f"workload {workload.name!r}: rigid job {int(workload.job_id[j])} asks for {int(gangs[j])} "
                            f"GPUs; the cluster has {gpus_total}")
    return apps, gangs, np.asarray(workload.duration_s, dtype=np.float64), e


def run(workload, r, cluster, tracked, sim_timer):
    """``--policy pollux`` without ``--compat``: replay ``workload`` with resolved spec ``r`` and
    build the run's :class:`~fastblox.results.Result`."""
    from .parts import Admission
    from .results import Result, _jobs_table, _summary
    from .slices import mark
    from .spec import ELASTIC_RUNS

    e = elastic_rows(workload)
    nodes, per_node = check_cluster(cluster, bool(e.any()), r.policy)
    apps, gangs, dur, e = job_arrays(workload, nodes * per_node)
    policy = ELASTIC_RUNS[r.policy]
    if policy == "pollux" and not e.any():
        return _run_rigid(workload, r, cluster, tracked, sim_timer, gangs, dur, per_node)
    if policy == "tiresias" and (gangs > nodes * per_node).any():
        j = int(np.flatnonzero(gangs > nodes * per_node)[0])
        raise WorkloadError(f"workload {workload.name!r}: job {int(workload.job_id[j])} asks for {int(gangs[j])} GPUs "
                            f"(tiresias runs every job at its GPUs); the cluster has {nodes * per_node}")
    bs = np.asarray(workload.extra["batch_size"], dtype=np.int64) if e.any() else None
    gate = Gate(workload.submit_s, gangs, Admission.parse(r.admission).theta, nodes * per_node)
    with sim_timer() as t:
        out = simulate_mixed(apps, gangs, dur, e, workload.submit_s, r.round_s, nodes, per_node, policy=policy,
                             batch_size=bs, placement=r.placement, gate=gate, restart_s=r.restart_s)
    finish, first, att_gpu = out["finish_s"], out["start_s"], out["attained_gpu_s"]
    att = att_gpu / np.maximum(workload.num_gpus, 1)
    jobs = lambda: _jobs_table(workload, first, finish, out["preemptions"], att, att_gpu, tracked)  # noqa: E731
    summ = _summary(workload, cluster, tracked, finish, first, out["preemptions"], att_gpu,
                    float(workload.submit_s.min()), out["end_s"], t.seconds, 0.0)
    summ["engine"] = f"{r.policy} on elastic and rigid jobs (fastblox.mixed" + (
        f": the Pollux simulator's {policy})" if policy != r.policy else ")")
    summ["restarts"] = int(out["restarts"].sum())
    summ["held_jobs"] = int(gate.held().sum())  # (by --admission)
    summ["elastic_jobs"] = int(e.sum())
    for kind, m in (("elastic", e), ("rigid", ~e)):
        m = m & tracked & (finish >= 0)
        summ[f"avg_jct_{kind}_s"] = float((finish[m] - workload.submit_s[m]).mean()) if m.any() else float("nan")
    mark(summ, None)
    return Result(jobs, summ, r.as_dict())


def _run_rigid(workload, r, cluster, tracked, sim_timer, gangs, dur, per_node):
    """``--policy pollux`` on a workload of rigid jobs only: :func:`simulate_rigid`."""
    from .parts import Admission
    from .results import Result, _jobs_table, _summary
    from .slices import mark
    from .spec import default_throughput

    speeds = type_speeds(workload, cluster, default_throughput(None, cluster))
    with sim_timer() as t:
        out = simulate_rigid(gangs, dur, workload.submit_s, r.round_s, cluster.node_type, per_node, speeds,
                             Admission.parse(r.admission).theta, r.restart_s)
    finish, first, att_gpu = out["finish_s"], out["start_s"], out["attained_gpu_s"]
    att = att_gpu / np.maximum(workload.num_gpus, 1)
    jobs = lambda: _jobs_table(workload, first, finish, out["preemptions"], att, att_gpu, tracked)  # noqa: E731
    summ = _summary(workload, cluster, tracked, finish, first, out["preemptions"], att_gpu,
                    float(workload.submit_s.min()), out["end_s"], t.seconds, 0.0)
    summ["engine"] = ("pollux on rigid jobs (fastblox.mixed.simulate_rigid: compiled"
                      + (", blind to GPU types)" if len(cluster.gpu_types) > 1 else ")"))
    summ["restarts"] = int(out["restarts"].sum())
    summ["held_jobs"] = int(out["held"].sum())  # (by --admission)
    summ["elastic_jobs"] = 0
    summ["avg_jct_elastic_s"] = float("nan")
    m = tracked & (finish >= 0)
    summ["avg_jct_rigid_s"] = float((finish[m] - workload.submit_s[m]).mean()) if m.any() else float("nan")
    summ["num_steps"] = out["rounds"]  # (scheduling rounds with jobs to allocate)
    summ["planner"] = {"allocations": out["rounds"], "programme_rounds": out["programme_rounds"],
                       "not_proven_optimal": out["unproven_rounds"]}
    mark(summ, None)
    return Result(jobs, summ, r.as_dict())


# ------------------------------------------------------------------------------------------ scaled workloads
def scaled(workload, num_jobs: int, total_gpus: int, load: float = 0.8, seed: int = 0, name: str | None = None):
    """``num_jobs`` rows drawn with replacement from ``workload`` (a Pollux or mixed workload),
    arriving as a Poisson process whose offered load on ``total_gpus`` GPUs is ``load`` (the
    drawn jobs' GPU-seconds alone at their requested size per GPU-second of arrivals);
    deterministic given ``seed``. Rows keep their kind, application, GPUs and batch size."""
    if num_jobs < 1 or total_gpus < 1 or not load > 0:
        raise ConfigError(f"scaled: num_jobs ({num_jobs}) and total_gpus ({total_gpus}) must be >= 1 and load "
                          f"({load}) > 0")
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.integers(0, len(workload), num_jobs))
    w = workload.take(pick)
    gpu_s = float((w.duration_s * w.num_gpus).sum())
    span = gpu_s / (load * total_gpus)
    gaps = rng.exponential(1.0, num_jobs)
    submit = np.round(np.cumsum(gaps) / gaps.sum() * span, 3)
    order = rng.permutation(num_jobs)  # (the drawn jobs in random arrival order)
    w = w.take(order)
    ex = w.extra
    apps = [str(a) if e else "" for a, e in zip(ex["model"], elastic_rows(w))]
    names = [f"{s}-{i}" for i, s in enumerate(np.asarray(ex.get("source_id", w.job_id)).tolist())]
    return _workload(submit, w.num_gpus, w.duration_s, apps, np.asarray(ex["batch_size"], dtype=np.int64), names,
                     name or f"{workload.name}-x{num_jobs}")
