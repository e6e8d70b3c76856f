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
import dataclasses
import inspect
from dataclasses import dataclass

import numpy as np

from . import parts
from .cluster import Cluster
from .errors import ConfigError, SimulationError, WorkloadError
from .kernels import compat as kcompat
from .kernels import engine as kengine
from .kernels import enums
from .kernels.state import ClusterEvents as KEvents
from .kernels.state import (Jobs, PolicyParams, Queues, Run, Scratch, copy_nodes, copy_records, fill_records, make_nodes,
                            new_records, record_fields)
from .results import Result, build_result
from .spec import BLOX_DEFAULT_TRACK, RunSpec, api_fields, canonical_keys
from .speed import SpeedModel, build_speed_model, check_runnable, check_sizes
from .workload import Workload


def _tracked_mask(workload: Workload, track) -> np.ndarray:
    if track is None:
        return np.ones(len(workload), dtype=np.bool_)
    lo, hi = track
    mask = (workload.job_id >= lo) & (workload.job_id <= hi)
    first, last = int(workload.job_id.min()), int(workload.job_id.max())
    if not mask.any():
        raise ConfigError(f"--track {lo}:{hi}: no job has an id in that range (ids run from {first} to {last})")
    if lo < first or hi > last:  # never clipped silently: the averages would cover fewer jobs than asked
        raise ConfigError(f"--track {lo}:{hi}: the workload's job ids run from {first} to {last}; "
                          f"give a range within them, e.g. --track {max(lo, first)}:{min(hi, last)}")
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
#: compiled: an empty numba cache, about a minute); the CLI prints it, the library stays quiet
COMPILE_NOTICE = None
NOTICE_AFTER_S = 3.0


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
            msg = (f"compiling the {kind} simulation kernel (first run with this numba cache: about a minute; "
                   "later runs load it in about a second)...")
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


def _warm_now(kind: str) -> float:
    t0 = time.perf_counter()
    tiny = Workload.from_arrays(submit_s=[0.0, 1.0], num_gpus=[1, 2], duration_s=[10.0, 20.0])
    c = Cluster.parse("2x2")
    if kind == "compat":
        _run_compat(tiny, c, enums.POL_LAS, enums.PL_BLOX, 0.0, 300.0, np.ones(2, dtype=np.bool_))
    else:
        st = NativeState(tiny, c, np.ones(2, dtype=np.bool_), parts.POLICIES.get("fifo"), {}, enums.PL_FIRST_FIT,
                         0.0, enums.TM_EVENTS, 300.0, 0.0, True, False)
        st.advance()
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


#: the kernel's counters a Python caller may read (``NativeState.counter``), by name
COUNTERS = {"steps": kengine.I_N_STEPS, "failures": kengine.I_N_FAIL, "migrations": kengine.I_N_MIGRATE,
            "series_rows": kengine.I_N_SERIES, "tracked_left": kengine.I_TRACKED_LEFT,
            "preemptions": kengine.I_N_PREEMPT}


def user_keys(policy: parts.Policy, view: parts.JobView, now: float) -> np.ndarray:
    """A user policy's priorities for the active jobs, checked: one finite real number per job.
    Whatever the policy does wrong (raises, returns the wrong length, NaN, complex or text) stops
    the run with one line naming the policy."""
    n = len(view.job_id)
    try:
        out = policy.fn(view, now)
    except Exception as e:  # noqa: BLE001 - the user's code: any error is reported as theirs
        raise ConfigError(f"policy {policy.name!r} raised {type(e).__name__} at t = {now:g} s: {e}") from e
    raw = np.asarray(out)
    if raw.dtype.kind not in "biuf":
        raise ConfigError(f"policy {policy.name!r} must return real numbers, got {raw.dtype} values")
    keys = raw.astype(np.float64)
    if keys.shape != (n,) or not np.isfinite(keys).all():
        raise ConfigError(
            f"policy {policy.name!r} must return one finite priority per active job "
            f"(expected shape ({n},), got {keys.shape}" + (")" if keys.shape != (n,) else ", with NaN or infinity)")
        )
    return keys


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

    def advance(self) -> int:
        code, self.series = kengine.advance(self.jobs, self.run, self.nodes, self.q, self.s, self.rates, self.events,
                                            self.pp, self.series, self.si, self.sf, self.ci, self.cf)
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

    def counter(self, name: str) -> int:
        """A count kept by the kernel, by name (``COUNTERS``)."""
        return int(self.si[COUNTERS[name]])

    @property
    def lost_gpu_s(self) -> float:
        """GPU-seconds of progress lost to kills and preemptions (since the last checkpoint)."""
        return float(self.sf[kengine.F_LOST_GPU_S])

    def stop_recording(self) -> None:
        """Record no more time series rows (look-ahead copies)."""
        self.ci[kengine.C_SERIES] = 0

    @property
    def restart_s(self) -> float:
        return float(self.cf[kengine.CF_RESTART_S])

    @property
    def round_s(self) -> float:
        return float(self.cf[kengine.CF_ROUND_S])

    def never_stop_on_tracked(self) -> None:
        """Run until every job is done or the stop time (look-ahead copies: tracked jobs don't end it)."""
        self.si[kengine.I_TRACKED_LEFT] = self.run.status.shape[0] + 1

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
        keys = user_keys(self.policy, view, self.now)
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


def _api_spec(spec: "RunSpec | None", options: dict, where: str) -> RunSpec:
    """The spec of an API call: ``spec`` (default: all defaults) with ``options`` over it."""
    if spec is not None and not isinstance(spec, RunSpec):
        raise ConfigError(f"{where}: spec must be a fastblox.RunSpec, got {type(spec).__name__}")
    options = canonical_keys(options, where)
    source = [k for k in options if not RUNSPEC_FIELDS[k].metadata["api"]]
    if source:
        raise ConfigError(f"{where}: {source[0]!r} describes where the jobs come from, not the run: build the workload "
                          "(a generator, read_trace) and pass it, or run a whole spec with fastblox.run_spec(RunSpec(...))")
    s = (spec or RunSpec()).replace(**options) if options else (spec or RunSpec())
    if s.policy == "dynamic":
        raise ConfigError(f"{where}: policy 'dynamic' is dynamic selection: use fastblox.simulate_dynamic")
    return s


def simulate(workload: Workload, spec: "RunSpec | None" = None, **options) -> Result:
    """Replay ``workload`` with the run described by ``spec`` and/or keyword ``options`` (the
    fields of :class:`fastblox.RunSpec`: ``cluster``, ``policy``, ``placement``, ``admission``,
    ``time_model``, ``round_s``, ``restart_s``, ``preempt``, ``track``, ``blox_compat``, ...; each
    one's meaning and default is in ``fastblox.spec``). ``policy`` may also be a registered user
    policy or a function ``fn(jobs, now_s) -> keys``. ``blox_compat=True`` runs Blox's own
    simulator, round for round. Returns a :class:`fastblox.results.Result`."""
    s = _api_spec(spec, options, "simulate")
    if s.blox_compat:
        return _simulate_compat(workload, s)
    run = prepare_native(workload, s)
    compile_s = _warm("native")
    t0 = time.perf_counter()
    code = run.state.drive()
    sim_s = time.perf_counter() - t0
    run.raise_if_stuck(code)
    return run.result(sim_s, compile_s)


def _simulate_compat(workload: Workload, s: RunSpec) -> Result:
    r = s.resolved(source=False)
    c, adm, tracked = _check_args(workload, r)
    pl = parts.PLACEMENTS.get(r.placement)
    _check_fits(workload, c)
    blox_name, pol_code = parts.BLOX_POLICIES[r.policy]
    compile_s = _warm("compat")
    args = _compat_args(workload, c, pol_code, pl, adm.theta, r.round_s, tracked)
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
    return build_result(workload, c, r, tracked, compat_out=out, sim_s=sim_s, compile_s=compile_s,
                        blox_policy=blox_name, blox_admission=adm.blox_name)


def _check_args(workload, r: RunSpec):
    """The checks every run makes on its workload, whichever engine; returns (cluster, admission, tracked)."""
    if not isinstance(workload, Workload):
        raise ConfigError(f"workload must be a fastblox Workload, got {type(workload).__name__}")
    if len(workload) == 0:
        raise WorkloadError(f"workload {workload.name!r} has no jobs")
    return Cluster.parse(r.cluster), parts.Admission.parse(r.admission), _tracked_mask(workload, r.track)


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
    config: RunSpec

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


def prepare_native(workload: Workload, spec: "RunSpec | None" = None, defaults: "parts.Policy | None" = None,
                   **options) -> NativeRun:
    """Build a native run exactly as :func:`simulate` does (same options, checks, defaults and
    errors) without running it: for code that drives a run itself (pauses, look-ahead copies,
    policy switches; see ``fastblox.dynamic``). ``defaults`` is a policy whose
    ``default_time_model`` / ``default_round_s`` apply instead of the policy's own (e.g. the
    shared defaults of several candidates)."""
    s = _api_spec(spec, options, "prepare_native")
    if s.blox_compat:
        raise ConfigError("prepare_native builds a native run; --blox-compat runs only through simulate")
    r = s.resolved(defaults=defaults, source=False)
    c, adm, tracked = _check_args(workload, r)
    pol = parts.resolve_policy(r.policy)
    opts = pol.resolve_options(dict(r.policy_opts))
    check_sizes(workload, c)
    max_gpus = None
    if pol.kind == enums.KIND_PLAN and opts.get("max_gpus_per_job"):
        max_gpus = np.minimum(np.maximum(workload.num_gpus, int(opts["max_gpus_per_job"])), c.largest_gang())
    sm = build_speed_model(workload, c, r.throughput, max_gpus=None if max_gpus is None else int(max_gpus.max()),
                           multi_node_factor=r.multi_node_factor, reference=r.reference_gpu,
                           measured_spread=r.placement_effects)
    check_runnable(workload, c, sm)
    events = _events(r, workload, c)
    _start_down_ok(c, events)
    opts = _prepare_opts(pol, opts, workload, sm)
    cfg = r.replace(throughput=sm.table_name or None, cluster_events=None if events is None else events.source,
                    policy_opts=tuple(sorted((k, v) for k, v in opts.items() if not k.startswith("_"))))
    st = NativeState(workload, c, tracked, pol, opts, parts.PLACEMENTS.get(r.placement), adm.theta,
                     parts.TIME_MODELS.get(r.time_model), r.round_s, r.restart_s, r.preempt, r.record_series,
                     speed=sm, checkpoint_s=r.checkpoint_s, rack_factor=r.rack_factor, events=events,
                     max_gpus=max_gpus)
    return NativeRun(workload, st, c, tracked, sm, events, cfg)


def _events(r: RunSpec, workload: Workload, c: Cluster):
    """The run's node events: a file or records (``cluster_events``) or random failures."""
    if r.failures is None:
        return _parse_events(r.cluster_events, c)
    from .cluster_events import ClusterEvents

    span = float(workload.submit_s.max() + workload.duration_s.sum() / max(c.total_gpus, 1) * 4 + 86400)
    return ClusterEvents.random_failures(c, r.failures[0], r.failures[1], span, seed=r.seed or 0)


def _prepare_opts(pol: parts.Policy, opts: dict, workload: Workload, sm: SpeedModel) -> dict:
    """Options a policy derives from the workload (e.g. the Gittins index table)."""
    from .policies import PREPARE

    prep = PREPARE.get(pol.name)
    return prep(opts, workload, sm) if prep is not None else opts


def simulate_blox_workload(load: float, seed: int = 1, track: tuple | None = BLOX_DEFAULT_TRACK,
                           num_jobs: int | None = None, **options) -> Result:
    """Blox's paper workload at ``load`` jobs/hour (``fastblox.run_spec`` with ``workload="blox"``).

    With ``num_jobs`` the workload is exactly that many jobs. Without it, Blox's endless stream is
    emulated: jobs are generated up front and the stream doubled until the last generated
    arrival falls after the end of the run, so the result equals an endless stream's (this needs
    a ``track`` range to end the run)."""
    from .runner import run_spec

    if num_jobs is None and track is None:
        raise ConfigError("Blox's workload is an endless stream: give --track A:B (Blox: 3000:4000) or --num-jobs N")
    return run_spec(RunSpec(workload="blox", load=load, seed=seed, num_jobs=num_jobs, track=track).replace(**options))


RUNSPEC_FIELDS = {f.name: f for f in dataclasses.fields(RunSpec)}


def _spec_signature(fn, *lead: inspect.Parameter) -> None:
    """``fn``'s signature as help() and editors show it: its leading parameters, then every
    run option of :class:`RunSpec` as a keyword with its default (generated: one declaration)."""
    kw = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default) for f in api_fields()]
    fn.__signature__ = inspect.Signature([*lead, *kw])


_P = inspect.Parameter
_spec_signature(simulate, _P("workload", _P.POSITIONAL_OR_KEYWORD), _P("spec", _P.POSITIONAL_OR_KEYWORD, default=None))
_spec_signature(prepare_native, _P("workload", _P.POSITIONAL_OR_KEYWORD),
                _P("spec", _P.POSITIONAL_OR_KEYWORD, default=None), _P("defaults", _P.POSITIONAL_OR_KEYWORD, default=None))
