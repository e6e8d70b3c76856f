"""``simulate``: validate a run's parts, hand arrays to the kernels, wrap what comes back.

Two engines sit behind one call:

* native (default): ``kernels.engine.advance`` — events or rounds, exact completion times,
  heterogeneous GPUs and throughputs, placement effects, restart and checkpoint costs, node
  failures, correct placements, victims put back when unused, backfilling;
* ``blox_compat=True``: ``kernels.compat.run_blox`` — Blox's simulator, round for round.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from . import parts
from . import speed as speedmod
from .cluster import Cluster
from .errors import ConfigError, SimulationError, WorkloadError
from .kernels import compat as kcompat
from .kernels import engine as kengine
from .kernels import enums
from .kernels.state import ClusterEvents as KEvents
from .kernels.state import (Jobs, PolicyParams, Queues, Run, Scratch, copy_nodes, copy_records, fill_records, make_nodes,
                            new_records, record_fields)
from .results import Result, build_result
from .speed import SpeedModel, build_speed_model, check_runnable
from .workload import Workload

DEFAULT_ROUND_S = 300.0


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one run besides the workload (frozen; safe to hash and log)."""

    cluster: str
    scheduler: str
    placement: str
    admission: str
    time_model: str
    round_s: float
    restart_s: float
    preempt: bool
    track: tuple | None
    blox_compat: bool
    record_series: bool
    checkpoint_s: float = 0.0
    throughput: str | None = None
    multi_node_factor: float = 1.0
    rack_factor: float = 1.0
    cluster_events: str | None = None
    placement_effects: bool = True
    policy_opts: tuple = ()

    def as_dict(self) -> dict:
        d = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}
        d["policy_opts"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.policy_opts}
        return d


def _tracked_mask(workload: Workload, track) -> np.ndarray:
    if track is None:
        return np.ones(len(workload), dtype=np.bool_)
    lo, hi = track
    if lo > hi:
        raise ConfigError(f"--track: the first id {lo} is after the last id {hi}")
    mask = (workload.job_id >= lo) & (workload.job_id <= hi)
    if not mask.any():
        raise ConfigError(
            f"--track {lo}:{hi}: no job has an id in that range (ids run from {workload.job_id.min()} to {workload.job_id.max()})"
        )
    return mask


def _check_fits(workload: Workload, cluster: Cluster) -> None:
    total = cluster.total_gpus
    too_big = workload.num_gpus > total
    if too_big.any():
        i = int(np.flatnonzero(too_big)[0])
        raise WorkloadError(
            f"job {int(workload.job_id[i])} asks for {int(workload.num_gpus[i])} GPUs but the cluster "
            f"{cluster.spec!r} has {total} ({int(too_big.sum())} job(s) too large; drop them with on_bad_rows='drop' when reading the trace)"
        )


def _alloc_offsets(gpus: np.ndarray) -> np.ndarray:
    off = np.zeros(gpus.shape[0] + 1, dtype=np.int64)
    np.cumsum(gpus, out=off[1:])
    return off


_WARM: set = set()
#: called with a message when loading a kernel takes longer than ``NOTICE_AFTER_S`` (it is being
#: compiled: an empty numba cache, about 30 s of CPU for a path); the CLI prints it, the library stays quiet
COMPILE_NOTICE = None
NOTICE_AFTER_S = 3.0
#: what the notice says a compile takes (bench/bench_compile.py measures it)
COMPILE_EXPECT = "about 30 s of CPU, more on a busy machine"


_WARM_LOCK = threading.Lock()


def _warm(kind: str) -> float:
    """Compile (or load from the on-disk cache) a kernel on a tiny input, once per process, so
    that ``sim_wall_s`` measures simulation only. Returns the seconds it took (waiting included,
    when :func:`prewarm` had started it)."""
    if kind in _WARM:
        return 0.0
    t0 = time.perf_counter()
    with _WARM_LOCK:
        if kind in _WARM:  # a prewarm thread finished it while this one waited
            return time.perf_counter() - t0
        timer = None
        if COMPILE_NOTICE is not None:
            name, _, path = kind.partition(":")
            msg = (f"compiling the {name} simulation kernel{f' ({path} path)' if path else ''} (first run with this "
                   f"numba cache: {COMPILE_EXPECT}; later runs load it in about a second)...")
            timer = threading.Timer(NOTICE_AFTER_S, COMPILE_NOTICE, args=(msg,))
            timer.daemon = True
            timer.start()
        try:
            _warm_now(kind)
        finally:
            if timer is not None:
                timer.cancel()
    return time.perf_counter() - t0


def prewarm(kind: str = "native") -> threading.Thread:
    """Start loading the ``kind`` kernel (``"native"`` or ``"compat"``) in a background thread and
    return the thread. The first kernel call of a process costs ~0.5 s that is mostly Python
    (numba's registries, and the scipy import numba does to find a BLAS); reading a trace is
    mostly pyarrow and polars, which release the GIL, so the CLI starts this before it reads the
    trace and the two overlap. A run waits for the thread (``_warm``). A failure here is left for
    that run to raise with its own message."""

    def load():
        try:
            _warm(kind)
        except Exception:  # noqa: BLE001 - the run's own _warm raises it again, where it is reported
            pass

    th = threading.Thread(target=load, name=f"fastblox-prewarm-{kind}", daemon=True)
    th.start()
    return th


def native_kind(ci) -> str:
    """The ``_warm`` kind of a native run configured by ``ci``: ``native:`` and its scheduling path
    (``kernels.engine.path_of``; each path is a kernel of its own, compiled on first use)."""
    return "native:" + kengine.PATH_NAMES[type(kengine.path_of(ci))]


def state_kind(st: "NativeState") -> str:
    """The ``_warm`` kind of a native run's state (with ``+events`` when it has node events)."""
    return native_kind(st.ci) + ("+events" if st.events.t.shape[0] else "")


def kind_of(scheduler, preempt: bool | None = None) -> str:
    """The ``_warm`` kind a native run of ``scheduler`` will need (for :func:`prewarm`)."""
    pol = parts.resolve_policy(scheduler)
    ci = np.zeros(kengine.C_SIZE, dtype=np.int64)
    ci[kengine.C_KIND] = pol.kind
    ci[kengine.C_PY] = int(pol.fn is not None or pol.planner is not None)
    ci[kengine.C_PREEMPT] = int(pol.preemptive if preempt is None else preempt)
    return native_kind(ci)


def _warm_now(kind: str) -> float:
    """Load ``kind``: ``compat``, ``native`` (numba and the FIFO kernel, by a tiny run) or
    ``native:PATH`` (that path's kernel, compiled for the argument types every run has)."""
    t0 = time.perf_counter()
    tiny = Workload.from_arrays(submit_s=[0.0, 1.0], num_gpus=[1, 2], duration_s=[10.0, 20.0])
    c = Cluster.parse("2x2")
    if kind == "compat":
        _run_compat(tiny, c, enums.POL_LAS, enums.PL_BLOX, 0.0, 300.0, np.ones(2, dtype=np.bool_))
    else:
        # (the speed model from its module: a run may replace this module's name, as the tests do)
        st = NativeState(tiny, c, np.ones(2, dtype=np.bool_), parts.POLICIES.get("fifo"), {}, enums.PL_FIRST_FIT,
                         0.0, enums.TM_EVENTS, 300.0, 0.0, True, False, speed=speedmod.build_speed_model(tiny, c, None))
        if kind == "native":
            st.advance()
        else:
            path, _, events = kind.split(":", 1)[1].partition("+")
            if events:
                st.events = KEvents(np.zeros(1), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
            kengine.load(kengine.PATHS[path], *st.kernel_args())
    _WARM.add(kind)
    return time.perf_counter() - t0


def _compat_args(w: Workload, c: Cluster, pol: int, pl: int, theta: float, round_s: float, tracked, max_rounds=50_000_000):
    """The compat kernel's arguments (prepared outside the timed simulation)."""
    return (w.submit_s, w.num_gpus, w.blox_iter_time, w.total_iters, tracked, _alloc_offsets(w.num_gpus),
            c.node_gpus, c.node_base, c.gpu_node, pol, pl, float(theta), float(round_s), int(max_rounds))


def _run_compat(*args, **kw):
    return kcompat.run_blox(*_compat_args(*args, **kw))


def _policy_params(policy: parts.Policy, opts: dict) -> PolicyParams:
    thr = np.asarray(opts.get("thresholds", ()), dtype=np.float64).reshape(-1)
    gx = np.asarray(opts.get("_gittins_x", [0.0]), dtype=np.float64)
    gv = np.asarray(opts.get("_gittins_v", [0.0]), dtype=np.float64)
    return _writable(PolicyParams(thr, gx, gv))


def _writable(nt):
    """``nt`` (a NamedTuple of arrays) with every array writable and C-contiguous, copied where
    not: numba compiles a separate copy of every kernel (tens of seconds) for read-only or
    strided arrays, which a user's own ``Workload`` arrays, a memory map or Ray can hand over."""
    if all(a.flags.writeable and a.flags.c_contiguous for a in nt):
        return nt
    return type(nt)(*(a if a.flags.writeable and a.flags.c_contiguous else np.array(a, order="C") for a in nt))


def not_switchable(policy: parts.Policy) -> str | None:
    """Why a paused run cannot switch to ``policy`` (None: it can). A switch re-keys the waiting
    queue; it cannot give a planner its plan, derive options from the workload, or set the
    queue-crossing and promotion times that Tiresias and Gittins set when jobs start or stop."""
    from .policies import PREPARE

    if policy.kind == enums.KIND_PLAN:
        return "is a planner (it sizes jobs and picks GPU types); only orderings can be switched on a paused run"
    if policy.name in PREPARE:
        return "derives options from the workload before a run; it cannot be switched to on a paused run"
    if policy.code in (enums.POL_TIRESIAS, enums.POL_GITTINS):
        return ("moves jobs between queues at times set when they start or stop, which a switch on a paused run "
                "does not set for the jobs already there")
    return None


class NativeState:
    """All arrays of a native run. Owning them here lets a run pause (user policies, planners,
    a stop time), resume, and be copied to simulate ahead (:meth:`copy`)."""

    def __init__(self, w: Workload, c: Cluster, tracked: np.ndarray, policy: parts.Policy, opts: dict, pl: int,
                 theta: float, tm: int, round_s: float, restart_s: float, preempt: bool, series: bool,
                 speed: SpeedModel | None = None, checkpoint_s: float = 0.0, rack_factor: float = 1.0,
                 events=None, max_gpus: np.ndarray | None = None):
        n = len(w)
        self.w, self.c, self.policy, self.opts = w, c, policy, opts
        sm = speed if speed is not None else build_speed_model(w, c, None)
        self.speed = sm
        slots = w.num_gpus if max_gpus is None else np.maximum(max_gpus, w.num_gpus)
        # every per-job field in one record per job (kernels/state.py: RECORD_LAYOUT)
        self.rec = new_records(n)
        f = record_fields(self.rec)
        jf, rf, qf = f["jobs"], f["run"], f["q"]
        fill_records(self.rec, {
            ("jobs", "submit"): w.submit_s, ("jobs", "gpus"): w.num_gpus, ("jobs", "work"): sm.work,
            ("jobs", "tracked"): tracked, ("jobs", "alloc_off"): _alloc_offsets(slots), ("jobs", "cls"): sm.cls,
            ("jobs", "ref_rate"): sm.ref_rate, ("run", "work_left"): sm.work, ("run", "first_start"): enums.NO_TIME,
            ("run", "finish"): enums.NO_TIME, ("run", "rate"): 1.0, ("run", "held_type"): -1, ("q", "ro_ver"): -1,
        })
        self.jobs = Jobs(**jf)
        self.rates = _writable(sm.rates)
        self.run = Run(alloc=np.zeros(int(slots.sum()), dtype=np.int64), status=np.zeros(n, dtype=np.int8),
                       want=w.num_gpus.astype(np.int64), want_type=np.full(n, enums.ANY_TYPE, dtype=np.int64),
                       qentry=np.zeros(n), exec0=np.zeros(n), pend0=np.zeros(n), rank=np.zeros(n, dtype=np.int64),
                       svc0=np.zeros(n), n_fail=np.zeros(n, dtype=np.int64), lost_s=np.zeros(n), **rf)
        start_down = events.start_down if events is not None else None
        self.nodes = make_nodes(c.node_gpus, c.node_type, c.racks,
                                None if start_down is None else (~start_down).astype(np.uint8))
        self.events = (_writable(KEvents(events.t_s, events.node, events.kind)) if events is not None else
                       KEvents(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)))
        self.q = Queues(
            wq=np.empty(2 * n + 2, dtype=np.int64), rq=np.empty(n, dtype=np.int64), ro=np.empty(n, dtype=np.int64),
            heap_t=np.empty(n + 1), heap_j=np.empty(n + 1, dtype=np.int64), heap_v=np.empty(n + 1, dtype=np.int64),
            wake_t=np.empty(n + 1), wake_j=np.empty(n + 1, dtype=np.int64), wake_v=np.empty(n + 1, dtype=np.int64),
            **qf,
        )
        self.s = Scratch(
            active=np.empty(n, dtype=np.int64), order=np.empty(n, dtype=np.int64), keys=np.empty(n),
            prio=np.zeros(n, dtype=np.int64), launched=np.empty(n, dtype=np.int64),
            suspended=np.empty(n, dtype=np.int64), victims=np.empty(n, dtype=np.int64),
            victims_pos=np.empty(n, dtype=np.int64), run_suffix=np.empty(n + 1, dtype=np.int64),
            tmp=np.empty(max(c.total_gpus, 1), dtype=np.int64),
        )
        self.pp = _policy_params(policy, opts)
        self.series = np.empty((1024 if series else 1, kengine.SERIES_COLS))
        self.si = np.zeros(kengine.I_SIZE, dtype=np.int64)
        self.si[kengine.I_TRACKED_LEFT] = int(tracked.sum())
        self.sf = np.zeros(kengine.F_SIZE)
        self.sf[kengine.F_DIRTY] = np.inf
        ci = np.zeros(kengine.C_SIZE, dtype=np.int64)
        ci[kengine.C_PLACEMENT] = pl
        ci[kengine.C_PREEMPT] = int(preempt)
        ci[kengine.C_TIME_MODEL] = tm
        ci[kengine.C_SERIES] = int(series)
        ci[kengine.C_N_TYPES] = len(c.gpu_types)
        cf = np.zeros(kengine.CF_SIZE)
        cf[kengine.CF_ROUND_S] = round_s
        cf[kengine.CF_RESTART_S] = restart_s
        cf[kengine.CF_THETA] = theta
        cf[kengine.CF_CKPT_S] = checkpoint_s
        cf[kengine.CF_RACK_FACTOR] = rack_factor
        cf[kengine.CF_STOP_T] = np.inf
        self.ci, self.cf = ci, cf
        self.planner = None
        self._set_policy(policy, opts)

    def _set_policy(self, policy: parts.Policy, opts: dict) -> None:
        self.policy, self.opts = policy, opts
        ci, cf = self.ci, self.cf
        ci[kengine.C_POLICY] = policy.code
        ci[kengine.C_DYNAMIC] = int(policy.dynamic)
        ci[kengine.C_KIND] = policy.kind
        ci[kengine.C_PY] = int(policy.fn is not None or policy.planner is not None)
        cf[kengine.CF_PROMOTE] = float(opts.get("promote", 0.0))
        cf[kengine.CF_THEMIS_F] = float(opts.get("f", 0.0))
        self.pp = _policy_params(policy, opts)
        self.planner = policy.planner(self, opts) if policy.planner is not None else None

    def set_policy(self, policy: parts.Policy, opts: dict | None = None, preempt: bool | None = None) -> None:
        """Switch a paused run to another policy (the waiting queue is re-keyed). Orderings only:
        see :func:`not_switchable`."""
        why = not_switchable(policy)
        if why:
            raise ConfigError(f"set_policy: {policy.name!r} {why}")
        opts = policy.resolve_options(opts)
        self._set_policy(policy, opts)
        if preempt is not None:
            self.ci[kengine.C_PREEMPT] = int(preempt)
        kengine.rekey_waiting(policy.code, float(self.sf[kengine.F_T]), self.jobs, self.run, self.q, self.pp, self.si,
                              float(self.cf[kengine.CF_RESTART_S]))

    def copy(self) -> "NativeState":
        """An independent copy of the whole run state (for look-ahead simulation)."""
        new = object.__new__(NativeState)
        new.__dict__.update(self.__dict__)
        new.rec = copy_records(self.rec)
        f = record_fields(new.rec)
        new.jobs = Jobs(**f["jobs"])
        new.run = Run(**{k: getattr(self.run, k).copy() for k in Run._fields if k not in f["run"]}, **f["run"])
        new.nodes = copy_nodes(self.nodes)
        new.q = Queues(**{k: getattr(self.q, k).copy() for k in Queues._fields if k not in f["q"]}, **f["q"])
        new.s = Scratch(*(a.copy() for a in self.s))
        new.series = self.series.copy()
        new.si, new.sf, new.ci, new.cf = self.si.copy(), self.sf.copy(), self.ci.copy(), self.cf.copy()
        new.planner = self.planner.copy(new) if self.planner is not None and hasattr(self.planner, "copy") else (
            self.policy.planner(new, self.opts) if self.policy.planner is not None else None)
        return new

    def kernel_args(self) -> tuple:
        """The arguments of ``kernels.engine.advance``. A run without node events passes None for
        them: the kernel is then compiled without their handling."""
        ev = self.events if self.events.t.shape[0] else None
        return (self.jobs, self.run, self.nodes, self.q, self.s, self.rates, ev, self.pp, self.series, self.si, self.sf,
                self.ci, self.cf)

    def advance(self) -> int:
        code, self.series = kengine.advance(*self.kernel_args())
        return int(code)

    def drive(self, stop_t: float = np.inf) -> int:
        """Advance to the end (or to ``stop_t``: ``PAUSED``), answering the policy's requests."""
        self.cf[kengine.CF_STOP_T] = stop_t
        while True:
            code = self.advance()
            if code == kengine.NEED_KEYS:
                self._answer_keys()
            elif code == kengine.NEED_PLAN:
                self._answer_plan()
            else:
                return code

    @property
    def now(self) -> float:
        return float(self.sf[kengine.F_T])

    def active_idx(self) -> np.ndarray:
        return self.s.active[: self.si[kengine.I_N_ACTIVE]]

    def job_view(self, idx: np.ndarray | None = None) -> parts.JobView:
        """The active jobs' columns at the current time (for user policies)."""
        idx = self.active_idx() if idx is None else idx
        t = self.now
        r = self.run
        running = r.status[idx] == enums.RUNNING
        el = np.where(running, t - r.launch_t[idx], 0.0)
        restart = self.cf[kengine.CF_RESTART_S]
        w = self.w
        left = r.work_left[idx] - np.maximum(0.0, el - restart) * r.rate[idx] * running
        return parts.JobView(
            job_id=w.job_id[idx], submit_s=w.submit_s[idx], num_gpus=w.num_gpus[idx], duration_s=w.duration_s[idx],
            attained_s=r.attained[idx] + el, attained_gpu_s=r.attained_gpu[idx] + el * r.held[idx],
            remaining_s=left / self.jobs.ref_rate[idx], running=running.astype(np.int8), num_preemptions=r.n_preempt[idx],
        )

    def _answer_keys(self) -> None:
        view = self.job_view()
        policy = self.policy
        keys = np.asarray(policy.fn(view, self.now), dtype=np.float64)
        if keys.shape != (len(view.job_id),) or not np.isfinite(keys).all():
            raise ConfigError(
                f"policy {policy.name!r} must return one finite priority per active job "
                f"(expected shape ({len(view.job_id)},), got {keys.shape})"
            )
        self.s.keys[: len(keys)] = keys

    def _answer_plan(self) -> None:
        idx = self.active_idx()
        keys, types, sizes = self.planner.plan(idx, self.now)
        a = len(idx)
        keys = np.asarray(keys, dtype=np.float64)
        types = np.asarray(types, dtype=np.int64)
        sizes = np.asarray(sizes, dtype=np.int64)
        name = self.policy.name
        if keys.shape != (a,) or types.shape != (a,) or sizes.shape != (a,):
            raise ConfigError(f"planner {name!r} must return keys, GPU types and sizes for each of the {a} active jobs")
        if not np.isfinite(keys).all():
            raise ConfigError(f"planner {name!r} returned a non-finite key")
        run_it = types != enums.NO_RUN
        cap = np.diff(self.jobs.alloc_off)[idx]
        if (run_it & ((sizes < 1) | (sizes > cap))).any():
            raise ConfigError(f"planner {name!r} asked for a size outside 1..max GPUs of a job")
        if ((types < enums.NO_RUN) | (types >= len(self.c.gpu_types))).any():
            raise ConfigError(f"planner {name!r} returned an unknown GPU type")
        self.s.keys[:a] = keys
        self.run.want_type[idx] = types
        self.run.want[idx] = np.where(run_it, sizes, self.run.want[idx])


def _start_down_ok(c: Cluster, events) -> None:
    if events is not None and events.start_down.all():
        raise ConfigError("--cluster-events: every node starts out of service (each one's first event is 'add')")


def _parse_events(cluster_events, c: Cluster):
    from .cluster_events import ClusterEvents

    if cluster_events is None:
        return None
    if isinstance(cluster_events, ClusterEvents):
        return cluster_events
    if isinstance(cluster_events, (list, tuple)):
        return ClusterEvents.from_records(cluster_events, c)
    return ClusterEvents.read(cluster_events, c)


def simulate(
    workload: Workload,
    cluster: "str | Cluster" = "32x4",
    scheduler="fifo",
    placement: str | None = None,
    admission="accept-all",
    time_model: str | None = None,
    round_s: float | None = None,
    restart_s: float = 0.0,
    preempt: bool | None = None,
    track: tuple | None = None,
    blox_compat: bool = False,
    record_series: bool = False,
    checkpoint_s: float = 0.0,
    throughput=None,
    multi_node_factor: float = 1.0,
    rack_factor: float = 1.0,
    cluster_events=None,
    policy_opts: dict | None = None,
    reference_gpu: str | None = None,
    placement_effects: bool = True,
) -> Result:
    """Replay ``workload`` on ``cluster`` with a scheduler composed of named parts.

    ``scheduler`` is a policy name (``fastblox.parts.POLICIES``), a registered user policy, or a
    function ``fn(jobs, now_s) -> keys``; ``policy_opts`` its parameters. ``placement`` defaults
    to ``first-fit`` (``blox`` in compat mode); ``admission`` is ``accept-all`` or ``load:θ``;
    ``time_model`` is ``events`` (default) or ``rounds`` of ``round_s`` seconds (compat mode:
    always rounds). ``restart_s`` is paid at every (re)launch; with ``checkpoint_s`` > 0 a job
    that is stopped loses its progress since its last checkpoint. ``throughput`` is a throughput
    table (``"gavel"``, a file, a ``ThroughputTable``; default: one when the cluster has several
    GPU types, else none). ``multi_node_factor``/``rack_factor`` slow gangs that span nodes/racks
    where the table has no measured multi-node throughput; ``placement_effects=False`` turns
    every such slowdown off.
    ``cluster_events`` is a file or ``(time_s, event, node)`` records of node failures and
    additions. ``track=(first_id, last_id)`` (inclusive) limits the averages and ends the run when
    those jobs are done. Returns a :class:`fastblox.results.Result`.
    """
    if not blox_compat:
        run = prepare_native(
            workload, cluster=cluster, scheduler=scheduler, placement=placement, admission=admission,
            time_model=time_model, round_s=round_s, restart_s=restart_s, preempt=preempt, track=track,
            record_series=record_series, checkpoint_s=checkpoint_s, throughput=throughput,
            multi_node_factor=multi_node_factor, rack_factor=rack_factor, cluster_events=cluster_events,
            policy_opts=policy_opts, reference_gpu=reference_gpu, placement_effects=placement_effects)
        compile_s = _warm(state_kind(run.state))
        t0 = time.perf_counter()
        code = run.state.drive()
        sim_s = time.perf_counter() - t0
        run.raise_if_stuck(code)
        return run.result(sim_s, compile_s)

    c, adm, round_s, tracked = _check_args(workload, cluster, admission, DEFAULT_ROUND_S if round_s is None else round_s,
                                           restart_s, checkpoint_s, rack_factor, track)
    # Blox's own simulator
    if callable(scheduler) or isinstance(scheduler, parts.Policy):
        raise ConfigError("--blox-compat runs Blox's own policies only: " + ", ".join(parts.BLOX_POLICIES))
    key = str(scheduler).lower()
    if key not in parts.BLOX_POLICIES:
        raise ConfigError(f"--blox-compat: unknown policy {scheduler!r}; Blox has: {', '.join(parts.BLOX_POLICIES)}")
    if time_model not in (None, "rounds"):
        raise ConfigError("--blox-compat simulates Blox's fixed rounds; --time-model events is not available with it")
    if preempt is False:
        raise ConfigError("--blox-compat always preempts, as Blox does; drop --no-preempt")
    for flag, val, off in (("--restart-s", restart_s, 0.0), ("--checkpoint-s", checkpoint_s, 0.0),
                           ("--multi-node-factor", multi_node_factor, 1.0), ("--rack-factor", rack_factor, 1.0)):
        if val != off:
            raise ConfigError(f"--blox-compat models none of Blox's missing costs; drop {flag}")
    for flag, val in (("--throughput", throughput), ("--cluster-events", cluster_events),
                      ("--policy-opt", policy_opts), ("--reference-gpu", reference_gpu)):
        if val:
            raise ConfigError(f"--blox-compat replays Blox as it is; {flag} is not available with it")
    if len(c.gpu_types) > 1 or c.node_rack is not None:
        raise ConfigError("--blox-compat: Blox's clusters have one GPU type and no racks")
    pl_name = placement or "blox"
    pl = parts.PLACEMENTS.get(pl_name)
    if pl == enums.PL_TOPOLOGY:
        raise ConfigError("--blox-compat: use placement blox, first-fit or consolidated (Blox has no racks)")
    _check_fits(workload, c)
    blox_name, pol_code = parts.BLOX_POLICIES[key]
    cfg = RunConfig(c.spec, key, pl_name, adm.name, "rounds", float(round_s), 0.0, True, track, True, record_series)
    compile_s = _warm("compat")
    args = _compat_args(workload, c, pol_code, pl, adm.theta, round_s, tracked)
    t0 = time.perf_counter()
    out = kcompat.run_blox(*args)
    sim_s = time.perf_counter() - t0
    code = int(out[0])
    if code == kcompat.DEADLOCK:
        raise SimulationError(
            "Blox's placement can never place the waiting jobs on this cluster (its exact-sum scattered fit); "
            "use --placement first-fit or a cluster whose node size divides the job sizes"
        )
    if code == kcompat.ROUND_LIMIT:
        raise SimulationError("the replay hit the round limit without finishing the tracked jobs")
    return build_result(workload, c, cfg, tracked, compat_out=out, sim_s=sim_s, compile_s=compile_s,
                        blox_policy=blox_name, blox_admission=adm.blox_name)


def _check_args(workload, cluster, admission, round_s, restart_s, checkpoint_s, rack_factor, track):
    """The checks every run makes, whichever engine; returns (cluster, admission, round_s, tracked)."""
    if not isinstance(workload, Workload):
        raise ConfigError(f"workload must be a fastblox Workload, got {type(workload).__name__}")
    c = Cluster.parse(cluster)
    adm = parts.Admission.parse(admission)
    if not (np.isfinite(round_s) and round_s > 0):
        raise ConfigError(f"--round-s must be a positive number of seconds, got {round_s!r}")
    if not (np.isfinite(restart_s) and restart_s >= 0):
        raise ConfigError(f"--restart-s must be zero or a positive number of seconds, got {restart_s!r}")
    if not (np.isfinite(checkpoint_s) and checkpoint_s >= 0):
        raise ConfigError(f"--checkpoint-s must be zero or a positive number of seconds, got {checkpoint_s!r}")
    if not (0 < rack_factor <= 1):
        raise ConfigError(f"--rack-factor must be in (0, 1], got {rack_factor!r}")
    if len(workload) == 0:
        raise WorkloadError(f"workload {workload.name!r} has no jobs")
    return c, adm, float(round_s), _tracked_mask(workload, track)


@dataclass
class NativeRun:
    """A native run built and not yet driven (:func:`prepare_native`): ``state`` is the
    :class:`NativeState` to drive (``state.drive(stop_t)`` pauses before ``stop_t``; ``state.copy()``
    forks it to simulate ahead; ``state.set_policy`` switches a paused run), the rest is what its
    result needs."""

    workload: Workload
    state: NativeState
    cluster: Cluster
    tracked: np.ndarray
    speed: SpeedModel
    events: object
    config: RunConfig

    def raise_if_stuck(self, code: int) -> None:
        """Raise :class:`SimulationError` naming the jobs that can never be placed if ``code`` says
        the run is deadlocked."""
        if code != kengine.DEADLOCK:
            return
        st, w, c = self.state, self.workload, self.cluster
        stuck = np.flatnonzero((st.run.status != enums.DONE) & self.tracked)
        ids = ", ".join(str(int(w.job_id[i])) for i in stuck[:5])
        raise SimulationError(
            f"{len(stuck)} tracked job(s) can never be placed with placement {self.config.placement!r} on {c.spec!r} "
            f"(e.g. job ids {ids}); try --placement first-fit"
            + (" or check the cluster events (nodes left out of service)" if self.events is not None else "")
        )

    def result(self, sim_s: float, compile_s: float = 0.0) -> Result:
        """The :class:`Result` of the run as it stands (normally after ``state.drive()`` finished)."""
        st = self.state
        res = build_result(self.workload, self.cluster, self.config, self.tracked, native_state=st, sim_s=sim_s,
                           compile_s=compile_s)
        res.summary.update(self.speed.describe())
        if st.planner is not None and hasattr(st.planner, "stats"):
            res.summary["planner"] = st.planner.stats()
        if self.events is not None:
            res.summary["cluster_events"] = self.events.counts()
        return res


def prepare_native(
    workload: Workload,
    cluster: "str | Cluster" = "32x4",
    scheduler="fifo",
    placement: str | None = None,
    admission="accept-all",
    time_model: str | None = None,
    round_s: float | None = None,
    restart_s: float = 0.0,
    preempt: bool | None = None,
    track: tuple | None = None,
    record_series: bool = False,
    checkpoint_s: float = 0.0,
    throughput=None,
    multi_node_factor: float = 1.0,
    rack_factor: float = 1.0,
    cluster_events=None,
    policy_opts: dict | None = None,
    reference_gpu: str | None = None,
    placement_effects: bool = True,
    defaults: "parts.Policy | None" = None,
) -> NativeRun:
    """Build a native run exactly as :func:`simulate` does (same checks, defaults and errors)
    without running it: for code that drives a run itself (pauses, look-ahead copies, policy
    switches; see ``fastblox.dynamic``). ``defaults`` is a policy whose ``default_time_model`` /
    ``default_round_s`` apply instead of the scheduler's own (e.g. the shared defaults of several
    candidates)."""
    pol = parts.resolve_policy(scheduler)
    dflt = defaults or pol
    if round_s is None:
        round_s = dflt.default_round_s or DEFAULT_ROUND_S
    c, adm, round_s, tracked = _check_args(workload, cluster, admission, round_s, restart_s, checkpoint_s,
                                           rack_factor, track)
    opts = pol.resolve_options(policy_opts)
    pl_name = placement or "first-fit"
    pl = parts.PLACEMENTS.get(pl_name)
    tm_name = time_model or dflt.default_time_model or "events"
    tm = parts.TIME_MODELS.get(tm_name)
    do_preempt = pol.preemptive if preempt is None else bool(preempt)
    if throughput is None and len(c.gpu_types) > 1:
        throughput = "gavel"
    if (tm == enums.TM_ROUNDS and do_preempt and pol.dynamic and pol.kind != enums.KIND_PLAN and checkpoint_s > 0
            and checkpoint_s + restart_s >= round_s):
        raise ConfigError(
            f"--checkpoint-s {checkpoint_s:g} with rounds of {round_s:g} s: a job that {pol.name} preempts every "
            f"round never reaches a checkpoint (restart {restart_s:g} s + checkpoint > round), so a contended run "
            "may never finish; use a checkpoint interval shorter than the round minus the restart cost, or --no-preempt"
        )
    max_gpus = None
    if pol.kind == enums.KIND_PLAN and opts.get("max_gpus_per_job"):
        max_gpus = np.minimum(np.maximum(workload.num_gpus, int(opts["max_gpus_per_job"])), c.largest_gang())
    if not placement_effects and (multi_node_factor != 1.0 or rack_factor != 1.0):
        raise ConfigError("--no-placement-effects turns off the multi-node and rack factors; drop them")
    sm = build_speed_model(workload, c, throughput, max_gpus=None if max_gpus is None else int(max_gpus.max()),
                           multi_node_factor=multi_node_factor, reference=reference_gpu,
                           measured_spread=placement_effects)
    check_runnable(workload, c, sm)
    events = _parse_events(cluster_events, c)
    _start_down_ok(c, events)
    opts = _prepare_opts(pol, opts, workload, sm)
    table = sm.table_name if sm.table_name else None
    cfg = RunConfig(c.spec, pol.name, pl_name, adm.name, tm_name, float(round_s), float(restart_s), do_preempt,
                    track, False, record_series, float(checkpoint_s), table, float(multi_node_factor),
                    float(rack_factor), None if events is None else events.source, bool(placement_effects),
                    tuple(sorted((k, v) for k, v in opts.items() if not k.startswith("_"))))
    st = NativeState(workload, c, tracked, pol, opts, pl, adm.theta, tm, float(round_s), float(restart_s), do_preempt,
                     record_series, speed=sm, checkpoint_s=float(checkpoint_s), rack_factor=float(rack_factor),
                     events=events, max_gpus=max_gpus)
    return NativeRun(workload, st, c, tracked, sm, events, cfg)


def _prepare_opts(pol: parts.Policy, opts: dict, workload: Workload, sm: SpeedModel) -> dict:
    """Options a policy derives from the workload (e.g. the Gittins index table)."""
    from .policies import PREPARE

    prep = PREPARE.get(pol.name)
    return prep(opts, workload, sm) if prep is not None else opts


def simulate_blox_workload(load: float, seed: int = 1, track: tuple | None = (3000, 4000),
                           num_jobs: int | None = None, **kw) -> Result:
    """Blox's paper workload at ``load`` jobs/hour.

    With ``num_jobs`` the workload is exactly that many jobs. Without it, Blox's endless stream is
    emulated: jobs are generated up front and the stream doubled until the last generated
    arrival falls after the end of the run, so the result equals an endless stream's (this needs
    a ``track`` range to end the run)."""
    from .generators import blox_paper_workload

    if num_jobs is not None:
        return simulate(blox_paper_workload(load, num_jobs, seed), track=track, **kw)
    if track is None:
        raise ConfigError("Blox's workload is an endless stream: give --track A:B (Blox: 3000:4000) or --num-jobs N")
    n = max(2 * (track[1] + 1), 2000)
    while True:
        w = blox_paper_workload(load, n, seed)
        res = simulate(w, track=track, **kw)
        if w.submit_s[-1] > res.summary["end_s"]:
            res.summary["num_generated_jobs"] = n
            return res
        n *= 2
