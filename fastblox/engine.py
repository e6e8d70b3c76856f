"""``simulate``: validate a run's parts, hand arrays to the kernels, wrap what comes back.

Two engines sit behind one call:

* native (default): ``kernels.engine.advance`` — events or rounds, exact completion times,
  heterogeneous GPUs and throughputs, placement effects, restart and checkpoint costs, node
  failures, correct placements, victims put back when unused, backfilling;
* ``compat="blox"``: ``kernels.compat.run_blox`` — Blox's simulator, round for round;
  ``compat="tiresias"``: ``fastblox.compat_tiresias`` — Tiresias' simulator, to the second;
  ``compat="gavel"``: ``fastblox.compat_gavel`` — Gavel's simulator, round by round.
  ``compat="pollux"``: ``fastblox.compat_pollux`` — the Pollux simulator's elastic jobs and baselines.
  ``compat="synergy"``: ``fastblox.compat_synergy`` — Synergy's simulator (CPU/memory-aware), one kernel.
  ``compat="sia"``: ``fastblox.compat_sia`` — the Sia simulator's heterogeneous elastic jobs and MILP.
* ``policy="pollux"`` without compat: ``fastblox.mixed`` — elastic and rigid jobs in one run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import inspect
import itertools
import os
import threading
import time
import weakref
from dataclasses import dataclass

import numpy as np

from . import parts
from . import speed as speedmod
from .cluster import Cluster
from .errors import ConfigError, FastbloxError, NoProgressError, SimulationError, WorkloadError
from .kernels import engine as kengine
from .kernels import enums
from .kernels import variants as kvariants
from .kernels import state as kstate
from .kernels.state import ClusterEvents as KEvents
from .kernels.state import (Jobs, PolicyParams, Queues, Run, Scratch, copy_nodes, copy_records, fill_records, make_nodes,
                            new_records, record_fields)
from .results import Result, build_result
from .slices import (NO_LIMITS, RunLimits, Slicer, mark, sigint_deferred, stop_message, stop_time,
                     stream_bound)
from .spec import BLOX_DEFAULT_TRACK, DEFAULT_PLACEMENT, ELASTIC_POLICIES, RunSpec, api_fields, canonical_keys
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


def _alloc_offsets(gpus: np.ndarray) -> np.ndarray:
    off = np.zeros(gpus.shape[0] + 1, dtype=np.int64)
    np.cumsum(gpus, out=off[1:])
    return off


class DriveCode(enum.IntEnum):
    """How :meth:`NativeState.drive` stopped (an ``int``: compares equal to the kernel's codes)."""

    FINISHED = kengine.FINISHED  # every tracked job has finished
    DEADLOCK = kengine.DEADLOCK  # nothing runs and the waiting jobs can never be placed (``raise_if_stuck``)
    PAUSED = kengine.PAUSED  # at ``stop_t``, or a limit between slices: ``drive`` again to go on


#: called with a message when a run's offered load is above 1 (the CLI prints it), after the
#: run's checks and before it starts
LOAD_NOTICE = None


def _note_load(workload: Workload, cluster: Cluster) -> None:
    from .results import offered_load

    load = offered_load(workload, cluster.total_gpus)
    if LOAD_NOTICE is not None and load > 1.0:
        LOAD_NOTICE(f"warning: the offered load is {load:.2f} on {cluster.total_gpus:,} GPUs: the jobs ask for "
                    f"{load:.2f}x the GPU-seconds the cluster has between the first and the last arrival, so the "
                    f"queue grows for the whole run and the JCTs measure that backlog more than the scheduler "
                    f"(a larger --cluster, a lower --load for a generated workload or --target-load below 1 for a trace "
                    f"gives a steady state)")


_WARM: set = set()
#: called with a message when loading a kernel takes longer than ``NOTICE_AFTER_S`` (it is being
#: compiled: an empty numba cache); the CLI prints it, the library stays quiet
COMPILE_NOTICE = None
NOTICE_AFTER_S = 3.0
#: CPU seconds each kernel took to compile on an empty cache, which the notice quotes (written by
#: ``python bench/bench_compile.py``: its median, on the machine it names)
# <!-- bench:compile-cpu:start -->
COMPILE_CPU_S = {"compat": 12, "native:full": 20, "native:full/any/first-fit": 17, "native:plan": 19,
                 "native:plan/any/first-fit": 17, "native:queue": 13, "native:queue/fifo/first-fit": 8,
                 "native:queue/fifo/first-fit+events": 10, "native:static": 19, "native:static/las/first-fit": 13,
                 "native:static/tiresias/first-fit": 16}
# <!-- bench:compile-cpu:end -->


def compile_expect(kind: str) -> str:
    """What the compile notice says loading ``kind`` takes on an empty cache (a kind not measured:
    the largest measured of its path's variants, else its path's generic kernel's, else the largest)."""
    path = kind.partition("/")[0]
    same_path = [v for k, v in COMPILE_CPU_S.items() if k.startswith(path + "/")]
    cpu = COMPILE_CPU_S.get(kind) or max(same_path, default=0) or COMPILE_CPU_S.get(path) or max(COMPILE_CPU_S.values())
    return f"about {cpu:.0f} s of CPU, more on a busy machine"


def describe_kind(kind: str) -> str:
    """``native:queue/fifo/first-fit`` as "native simulation kernel (queue path, fifo, first-fit)"."""
    name, _, variant = kind.partition(":")
    variant = variant.partition("+")[0]
    what = ", ".join([f"{variant.split('/')[0]} path"] + [p for p in variant.split("/")[1:] if p != "any"])
    return f"{name} simulation kernel" + (f" ({what})" if variant else "")


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
            msg = (f"compiling the {describe_kind(kind)} (first run with this "
                   f"numba cache: {compile_expect(kind)}; later runs load it in about a second)...")
            timer = threading.Timer(NOTICE_AFTER_S, COMPILE_NOTICE, args=(msg,))
            timer.daemon = True
            timer.start()
        try:
            with _compile_lock(kind):
                _warm_now(kind)
        finally:
            if timer is not None:
                timer.cancel()
    return time.perf_counter() - t0


@contextlib.contextmanager
def _compile_lock(kind: str):
    """Hold an exclusive ``flock`` on ``<kernel cache>/.compile-KIND.lock`` while loading ``kind``:
    processes started together on an empty cache (test workers, several ``fastblox run``) then
    compile each kernel once, the others waiting and loading it from the cache, instead of all
    compiling it at once on the same cores. No lock where the cache folder is not writable."""
    import fcntl

    from .kernels._jit import cache_dir

    try:
        fd = os.open(cache_dir() / f".compile-{kind.replace(':', '-')}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # (releases the lock)


def prewarm(kind: str = "native") -> threading.Thread:
    """Start loading the ``kind`` kernel (``"native"`` or ``"compat"``) in a background thread and
    return the thread. The first kernel call of a process costs ~0.4 s that is mostly Python
    (numba's registries; its BLAS probe no longer imports scipy: ``kernels._jit``); reading a trace is
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
    """The ``_warm`` kind of a native run configured by ``ci``: ``native:`` and its kernel variant
    (``kernels.engine.path_of``, ``kernels/variants.py``; each a kernel of its own, compiled on
    first use): its scheduling path, then, in a kernel specialized on them, ``/POLICY/PLACEMENT``
    (``any``: chosen at run time), e.g. ``native:queue/fifo/first-fit``; a generic kernel is the
    path alone (``native:queue``)."""
    m = kengine.path_of(ci)
    path, pol, pl = type(m).path, type(m).policy, type(m).placement
    if pol == kvariants.ANY and pl == kvariants.ANY:
        return "native:" + path
    return f"native:{path}/{_code_name(parts.POLICIES, pol)}/{_code_name(parts.PLACEMENTS, pl)}"


def _code_name(registry, code: int) -> str:
    if code == kvariants.ANY:
        return "any"
    for name in registry.names():
        item = registry.get(name)
        if getattr(item, "code", item) == code:
            return name
    raise ValueError(f"no {registry.kind} with code {code}")


def _variant_marker(variant: str):
    """The marker of a kind's variant part (``queue`` or ``queue/fifo/first-fit``)."""
    path, _, rest = variant.partition("/")
    if not rest:
        return kvariants.marker(path)
    pol, pl = rest.split("/")
    return kvariants.marker(path, kvariants.ANY if pol == "any" else parts.POLICIES.get(pol).code,
                            kvariants.ANY if pl == "any" else parts.PLACEMENTS.get(pl))


def state_kind(st: "NativeState") -> str:
    """The ``_warm`` kind of a native run's state (with ``+events`` when it has node events, and
    ``+user:DIGEST`` for a user policy compiled into the kernel: a kernel of its own)."""
    user = getattr(st.pp, "fn", None)
    py = "+pyrow" if hasattr(st.pp, "marks") else "+py" if hasattr(st.pp, "columns") else ""
    kind = native_kind(st.ci)
    return (kind + py + _events_flag(kind, st.events.t.shape[0] > 0)
            + (f"+user:{user.digest}" if user is not None else ""))


def _events_flag(kind: str, has_events: bool) -> str:
    """``+events`` for a specialized kernel of a run with node events (a generic kernel, a kind
    without ``/``, always has their handling: ``kernels/variants.py``)."""
    return "+events" if has_events and "/" in kind else ""


def kind_of(scheduler, preempt: bool | None = None, placement: str | None = None) -> str:
    """The ``_warm`` kind a native run of ``scheduler`` on ``placement`` (None: the default) will
    need (for :func:`prewarm`)."""
    pol = parts.resolve_policy(scheduler)
    ci = np.zeros(kengine.C_SIZE, dtype=np.int64)
    ci[kengine.C_POLICY] = pol.code
    ci[kengine.C_PLACEMENT] = parts.PLACEMENTS.get(placement or DEFAULT_PLACEMENT)
    ci[kengine.C_KIND] = pol.kind
    ci[kengine.C_PY] = int(_called_per_step(pol))
    ci[kengine.C_PREEMPT] = int(pol.preemptive if preempt is None else preempt)
    if pol.job_fn is not None:  # (a per-job user policy: a kernel of its own, as state_kind names it)
        from . import userpol

        _, d = userpol.compile_for_job(pol.name, pol.job_fn, pol.state)
        userpol.POLICIES[d] = pol
        return native_kind(ci) + f"+user:{d}"
    return native_kind(ci) + ("" if pol.fn is None else "+pyrow" if pol.rowwise else "+py")


def _called_per_step(pol: parts.Policy) -> bool:
    """Whether the kernel asks Python for every active job's keys (or a plan) at each step (a
    row-wise Python policy takes the sorted-queue path and is asked for a few jobs' only)."""
    return (pol.fn is not None and not pol.rowwise) or pol.planner is not None


def spec_kind(r: RunSpec) -> str | None:
    """The ``_warm`` kind of the kernel a resolved run spec will load (None: not known before
    the run, e.g. a user policy not registered, or dynamic selection's several candidates)."""
    if r.compat == "blox":
        return "compat"
    if r.compat in ("tiresias", "gavel", "pollux", "synergy", "sia"):
        return None  # (plain Python, or a kernel of its own: synergy)
    if r.policy == "dynamic" or r.policy in ELASTIC_POLICIES:
        return None  # (several candidates; the elastic engine: plain Python)
    try:
        kind = kind_of(r.policy, r.preempt, r.placement)
    except FastbloxError:
        return None
    return kind + _events_flag(kind.partition("+")[0], r.failures is not None or r.cluster_events is not None)


def warm_for(specs) -> float:
    """Compile (or load) once, here, every kernel the resolved ``specs`` need: worker processes
    started afterwards load them from the cache instead of each compiling the same kernels at
    once on an empty cache. Returns the seconds it took."""
    t0 = time.perf_counter()
    for kind in sorted({k for k in map(spec_kind, specs) if k is not None}):
        _warm(kind)
    return time.perf_counter() - t0


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
            variant, *flags = kind.split(":", 1)[1].split("+")
            user = [f.partition(":")[2] for f in flags if f.startswith("user:")]
            if user:  # (the user policy the kind names, as the run has it: fastblox.userpol)
                from .userpol import POLICIES as USER

                st._set_policy(USER[user[0]], {})
            if "py" in flags or "pyrow" in flags:  # (a Python policy's parameters carry its JobView's buffers)
                st._set_policy(parts.Policy("warm", enums.POL_CUSTOM, True, True, "", fn=lambda jobs, now: jobs.submit_s,
                                            rowwise="pyrow" in flags), {})
            if "events" in flags:
                st.events = KEvents(np.zeros(1), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
            kengine.load(_variant_marker(variant), *st.kernel_args())
    _WARM.add(kind)
    return time.perf_counter() - t0


COMPAT_MAX_ROUNDS = 50_000_000


def _compat_args(w: Workload, c: Cluster, pol: int, pl: int, theta: float, round_s: float, tracked,
                 max_rounds=COMPAT_MAX_ROUNDS):
    """The compat kernel's arguments (prepared outside the timed simulation); the last is its
    ``ctl`` array (``kernels.compat.CTL_*``)."""
    from .kernels import compat as kcompat
    ctl = np.zeros(kcompat.CTL_SIZE, dtype=np.int64)
    ctl[kcompat.CTL_MAX_ROUNDS] = max_rounds
    return (w.submit_s, w.num_gpus, w.blox_iter_time, w.total_iters, tracked, _alloc_offsets(w.num_gpus),
            c.node_gpus, c.node_base, c.gpu_node, pol, pl, float(theta), float(round_s), ctl)


def _drive_compat(args: tuple, limits: RunLimits, n_jobs: int) -> tuple:
    """Run the compat kernel (``args`` from :func:`_compat_args`) in a thread of its own while
    this one watches it once a slice: Ctrl-C (:class:`~fastblox.slices.RunInterrupted`) and
    ``max_wall`` lower its round limit, so it stops at its next round. Returns the kernel's output
    and whether the wall limit stopped it. (The kernel keeps its state in locals, so it cannot
    pause and resume as the native one does; its round limit, read every round, is the hook.)"""
    from .kernels import compat as kcompat
    ctl = args[-1]
    box = {}

    def work():
        try:
            box["out"] = kcompat.run_blox(*args)
        except BaseException as e:  # noqa: BLE001 - raised again in the calling thread
            box["err"] = e

    def progress():
        r, adm, arr, nw, nr = (int(ctl[k]) for k in (kcompat.CTL_ROUND, kcompat.CTL_ADMITTED, kcompat.CTL_ARRIVED,
                                                     kcompat.CTL_WAITING, kcompat.CTL_RUNNING))
        return r * float(args[12]), adm - nw - nr, nr, nw + arr - adm, n_jobs

    slicer = Slicer(limits.max_wall)
    th = threading.Thread(target=work, name="fastblox-compat", daemon=True)
    with sigint_deferred():
        th.start()
        try:
            while th.is_alive():
                th.join(slicer.slice_s)
                if th.is_alive() and slicer.stopped_by is None and slicer.between(progress):
                    ctl[kcompat.CTL_MAX_ROUNDS] = 0
        except BaseException:
            ctl[kcompat.CTL_MAX_ROUNDS] = 0
            th.join()
            raise
    if "err" in box:
        raise box["err"]
    return box["out"], slicer.stopped_by is not None


def _run_compat(*args, **kw):
    from .kernels import compat as kcompat
    return kcompat.run_blox(*_compat_args(*args, **kw))


def _policy_params(policy: parts.Policy, opts: dict, w: Workload) -> PolicyParams:
    """The kernel's policy parameters (a compiled user policy's: ``kernels.userpol.UserParams``)."""
    thr = np.asarray(opts.get("thresholds", ()), dtype=np.float64).reshape(-1)
    gx = np.asarray(opts.get("_gittins_x", [0.0]), dtype=np.float64)
    gv = np.asarray(opts.get("_gittins_v", [0.0]), dtype=np.float64)
    pp = _writable(PolicyParams(thr, gx, gv))
    if policy.job_fn is not None:
        from . import userpol

        return userpol.params(policy, pp, w)
    if policy.fn is not None:  # (a Python policy: the kernel fills its JobView's buffers)
        from .kernels.userpol import PyParams, PyRowParams

        n = len(w)
        view = parts.JobView(*(np.empty(n, dtype=d) for d in VIEW_DTYPES))
        py = PyParams(thr, gx, gv, np.ascontiguousarray(w.job_id, dtype=np.int64),
                      np.ascontiguousarray(w.duration_s, dtype=np.float64), view,  # (its ``columns``)
                      np.zeros(1, dtype=np.int64),  # (its ``need``: no column read yet)
                      np.zeros(1, dtype=np.int64))  # (its ``token``: set by the NativeState that runs it)
        if not policy.rowwise:
            return py
        return PyRowParams(*py, np.zeros(n, dtype=np.int64), np.zeros(n),  # (rank_of, key_of)
                           np.empty(n, dtype=np.int64), np.zeros(1, dtype=np.int64),  # (marks, n_marks)
                           np.array([0, 1, 0], dtype=np.int64), np.zeros(2))  # (check: first at call 1; check_key)
    return pp


#: the dtypes of a ``JobView``'s columns, in its field order
VIEW_DTYPES = (np.int64, np.float64, np.int64, np.float64, np.float64, np.float64, np.float64, np.int8, np.int64,
               np.float64)


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
    if policy.state:
        return "keeps per-job state from when jobs start or stop, which a switch on a paused run cannot give it"
    if policy.rowwise:
        return "is row-wise (it keys jobs as they start waiting); switch to it without rowwise=True"
    return None


_TOKENS = itertools.count(1)  # (NativeState._register_callback)

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
    raw = out if type(out) is np.ndarray else np.asarray(out)
    if raw.dtype.kind not in "biuf":
        raise ConfigError(f"policy {policy.name!r} must return real numbers, got {raw.dtype} values")
    keys = raw if raw.dtype == np.float64 else raw.astype(np.float64)
    if keys.shape != (n,) or (not np.isfinite(keys.sum()) and not np.isfinite(keys).all()):
        raise ConfigError(
            f"policy {policy.name!r} must return one finite priority per active job "
            f"(expected shape ({n},), got {keys.shape}" + (")" if keys.shape != (n,) else ", with NaN or infinity)")
        )
    return keys


def lazy_view_class(st: "NativeState") -> type:
    """A :class:`~fastblox.parts.JobView` subclass for the Python policy of ``st``: the kernel
    fills only the columns the policy has read before (``pp.need``); reading another one (by
    name, index or iteration) fills it first, and the kernel fills it from then on. A policy
    that reads one column pays for one, not ten."""
    need = st.pp.need

    def column(k: int):
        def get(view):
            if not need[0] >> k & 1:
                st._fill_column(k)
            return tuple.__getitem__(view, k)

        return property(get, doc=f"the {parts.JobView._fields[k]} column")

    def fill_all():
        for k in range(len(VIEW_DTYPES)):
            if not need[0] >> k & 1:
                st._fill_column(k)

    def getitem(view, i):
        fill_all()
        return tuple.__getitem__(view, i)

    def iterate(view):
        fill_all()
        return tuple.__iter__(view)

    def represent(view):
        fill_all()
        return parts.JobView.__repr__(view)

    ns = {f: column(k) for k, f in enumerate(parts.JobView._fields)}
    ns.update(__slots__=(), __getitem__=getitem, __iter__=iterate, __repr__=represent, __doc__=parts.JobView.__doc__)
    return type("JobView", (parts.JobView,), ns)


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
            tmp=np.empty(max(c.total_gpus, 1), dtype=np.int64), last_key=np.empty(n),
            last_prio=np.empty(n, dtype=np.int64),
        )
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
        ci[kengine.C_PY] = int(_called_per_step(policy))
        ci[kengine.C_HOL] = int(not opts.get("backfill", True))
        cf[kengine.CF_PROMOTE] = float(opts.get("promote", 0.0))
        cf[kengine.CF_THEMIS_F] = float(opts.get("f", 0.0))
        self.pp = _policy_params(policy, opts, self.w)
        self.planner = policy.planner(self, opts) if policy.planner is not None else None
        self._entries = {}  # (path marker type, no node events) -> the compiled kernel's entry point
        self._view_cls = None  # (the Python policy's JobView class: _make_view_cls)
        self._py_at = None  # (na, t) of the Python policy's call being answered
        self._register_callback()

    def _register_callback(self) -> None:
        """A run with a Python policy gets a token of its own in ``kernels.userpol.PY_RUNS``, by
        which its kernel calls back :meth:`_py_keys` (held weakly: the entry leaves with the run)."""
        if not hasattr(self.pp, "token"):
            return
        from .kernels.userpol import PY_RUNS

        token = next(_TOKENS)
        self.pp = self.pp._replace(token=np.array([token], dtype=np.int64))
        ref = weakref.ref(self)
        PY_RUNS[token] = lambda na, t: ref()._py_keys(na, t)
        weakref.finalize(self, PY_RUNS.pop, token, None)
        self._py_error = None  # (what the callback caught: drive raises it)

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
        kstate.call(kengine.rekey_waiting, policy.code, float(self.sf[kengine.F_T]), self.jobs, self.run, self.q,
                    self.pp, self.si, float(self.cf[kengine.CF_RESTART_S]))

    def copy(self) -> "NativeState":
        """An independent copy of the whole run state (for look-ahead simulation)."""
        new = object.__new__(NativeState)
        new.__dict__.update(self.__dict__)
        new._view_cls = None  # (a lazy one reads the state it was made for)
        new._entries = dict(self._entries)
        new.rec = copy_records(self.rec)
        f = record_fields(new.rec)
        new.jobs = Jobs(**f["jobs"])
        new.run = Run(**{k: getattr(self.run, k).copy() for k in Run._fields if k not in f["run"]}, **f["run"])
        new.nodes = copy_nodes(self.nodes)
        new.q = Queues(**{k: getattr(self.q, k).copy() for k in Queues._fields if k not in f["q"]}, **f["q"])
        new.s = Scratch(*(a.copy() for a in self.s))
        new.series = self.series.copy()
        new.si, new.sf, new.ci, new.cf = self.si.copy(), self.sf.copy(), self.ci.copy(), self.cf.copy()
        if hasattr(self.pp, "err"):  # (a compiled user policy's error record: each copy its own)
            new.pp = self.pp._replace(err=self.pp.err.copy())
        if hasattr(self.pp, "state"):  # (a compiled user policy's state and wake-ups: each copy its own)
            new.pp = new.pp._replace(state=self.pp.state.copy(), wake_at=self.pp.wake_at.copy())
        if hasattr(self.pp, "columns"):  # (a Python policy's view buffers, and its own call back)
            new.pp = new.pp._replace(columns=parts.JobView(*(b.copy() for b in self.pp.columns)),
                                     need=self.pp.need.copy())
            if hasattr(self.pp, "marks"):  # (a row-wise one's keys and marks)
                new.pp = new.pp._replace(**{f: getattr(self.pp, f).copy() for f in (
                    "rank_of", "key_of", "marks", "n_marks", "check", "check_key")})
            new._register_callback()
        new.planner = self.planner.copy(new) if self.planner is not None and hasattr(self.planner, "copy") else (
            self.policy.planner(new, self.opts) if self.policy.planner is not None else None)
        return new

    def kernel_args(self) -> tuple:
        """The arguments of ``kernels.engine.advance``. A run without node events passes None for
        them to a specialized kernel, which is then compiled without their handling; a generic
        kernel always gets them (``kernels/variants.py``)."""
        ev = self.events if self.events.t.shape[0] or kvariants.is_generic(kengine.path_of(self.ci)) else None
        return (self.jobs, self.run, self.nodes, self.q, self.s, self.rates, ev, self.pp, self.series, self.si, self.sf,
                self.ci, self.cf)

    def advance(self) -> int:
        """One call of the kernel (``kernels.engine.advance``): its compiled entry point is looked
        up once per path (typing the ~80 arrays of the arguments costs ~0.5 ms, and a Python
        policy or a planner calls the kernel at every step)."""
        args = self.kernel_args()
        path = kengine.path_of(self.ci)
        key = (type(path), args[6] is None)  # (the kernel's argument types: its path, node events or not)
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = kengine.entry_point(path, *args)
        code, self.series = entry(path, *args)
        return int(code)

    def drive(self, stop_t: float = np.inf, slicer: Slicer | None = None) -> DriveCode:
        """Advance to the end (or to ``stop_t``: ``DriveCode.PAUSED``), answering the policy's requests.
        With a ``slicer`` the kernel runs in slices of ``slicer.budget`` passes, and between
        them ``slicer.between`` may raise :class:`~fastblox.slices.RunInterrupted` or stop the
        run (``PAUSED`` before ``stop_t``)."""
        self.cf[kengine.CF_STOP_T] = stop_t
        self.ci[kengine.C_BUDGET] = 0 if slicer is None else slicer.budget
        while True:
            code = self.advance()
            self._raise_if_policy_failed()
            if code == kengine.SLICE_END:
                if slicer.between(self.progress):
                    return DriveCode.PAUSED
                self.ci[kengine.C_BUDGET] = slicer.budget
                continue
            if code == kengine.PY_FAILED:
                self._raise_py_error()
            elif code == kengine.NEED_PLAN:
                self._answer_plan()
            elif code == kengine.NO_PROGRESS:
                raise NoProgressError(
                    f"the replay stopped making progress at t={self.now!r} s (policy {self.policy.name!r}): more than "
                    f"{kengine.no_progress_limit(len(self.w), len(self.events.t))} passes at one instant; "
                    "this is a bug in fastblox, please report it")
            else:
                return DriveCode(code)
            # planners return every step: the slicer looks in once a slice's time
            if slicer is not None and slicer.due() and slicer.between(self.progress):
                return DriveCode.PAUSED

    def _raise_if_policy_failed(self) -> None:
        """A compiled user policy that raised or gave a non-finite key recorded it in ``pp.err``
        (the kernel goes on with a neutral key to the end of its slice): stop the run here."""
        err = getattr(self.pp, "err", None)
        if err is not None and err[0] != 0:
            from .userpol import error_message

            raise ConfigError(error_message(self.policy, self.pp, self.w))

    def progress(self) -> tuple:
        """``(simulated time, jobs finished, running, waiting, jobs)`` of the run (waiting: in
        the queue or held back by admission)."""
        si = self.si
        admitted, arrived = int(si[kengine.I_OV_HEAD]), int(si[kengine.I_NEXT_ARR])
        nw, nr = int(si[kengine.I_NW]), int(si[kengine.I_N_RUNNING])
        return self.now, admitted - nw - nr, nr, nw + arrived - admitted, len(self.w)

    @property
    def now(self) -> float:
        if self._py_at is not None:  # (in a Python policy's call: the kernel keeps the time in a local)
            return self._py_at[1]
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
        """The active jobs (in a Python policy's call: the jobs it keys)."""
        if self._py_at is not None:
            return self.s.active[: self._py_at[0]]
        return self.s.active[: self.si[kengine.I_N_ACTIVE]]

    def job_view(self, idx: np.ndarray | None = None) -> parts.JobView:
        """The active jobs' columns at the current time (for user policies): new arrays, which
        the caller may keep."""
        from .kernels.userpol import ALL_COLUMNS

        idx = self.active_idx() if idx is None else idx
        view = parts.JobView(*(np.empty(len(idx), dtype=d) for d in VIEW_DTYPES))
        self._view_into(idx, ALL_COLUMNS, view)
        return view

    def _view_into(self, idx: np.ndarray, mask: int, view, t: float | None = None) -> None:
        """The columns in ``mask`` (``kernels.userpol.view_into``) of the jobs ``idx`` at ``t``
        (default: the current time) into the first ``len(idx)`` entries of ``view``'s arrays."""
        from .kernels.userpol import view_into

        r, w = self.run, self.w
        kstate.call(view_into, idx, mask, self.now if t is None else t, float(self.cf[kengine.CF_RESTART_S]), w.job_id, w.submit_s,
                    w.num_gpus, w.duration_s, r.status, r.launch_t, r.wait_t, r.attained, r.attained_gpu, r.held,
                    r.work_left, r.rate, self.jobs.ref_rate, r.n_preempt, *view)

    def _fill_column(self, k: int) -> None:
        """Column ``k`` of the Python policy's view, which the kernel did not fill (the policy had
        not read it before): filled now, and by the kernel at every later step."""
        na, t = self._py_at
        self._view_into(self.s.active[:na], 1 << k, self.pp.columns, t)
        self.pp.need[0] |= 1 << k

    def _py_keys(self, na: int, t: float) -> int:
        """The kernel's call back for the Python policy's keys of the ``na`` active jobs at ``t``
        (``kernels.userpol.ask_python``), into ``s.keys[:na]``: 0. The policy gets views of the
        first ``na`` entries of the JobView buffers the kernel filled (valid during the call: a
        policy that keeps them between calls must copy them); a column it had not read before is
        filled when it first reads it (:func:`lazy_view_class`). Anything it raises (Ctrl-C
        included) is kept for :meth:`drive` to raise once the kernel has returned: 1."""
        try:
            self._py_at = (na, t)
            if self._view_cls is None:
                self._view_cls = self._make_view_cls()
            view = self._view_cls._make([b[:na] for b in self.pp.columns])
            self.s.keys[:na] = user_keys(self.policy, view, t)
            return 0
        except BaseException as e:  # noqa: BLE001 - raised by drive, outside the kernel
            self._py_error = e
            return 1
        finally:
            self._py_at = None

    def _raise_py_error(self):
        e, self._py_error = self._py_error, None
        bad = int(self.pp.check[2]) - 1 if hasattr(self.pp, "check") else -1
        if e is None and bad >= 0:  # (a row-wise policy whose keys depend on the other jobs)
            k0, k1 = (float(k) for k in self.pp.check_key)
            raise ConfigError(
                f"policy {self.policy.name!r} is declared rowwise=True, but job {int(self.w.job_id[bad])} got key {k0!r} "
                f"when it started waiting and {k1!r} at t = {self.now:g} s, keyed with the other jobs: its key depends "
                "on the other jobs (or on hidden state); drop rowwise=True")
        if e is None:  # (the kernel found no call back for its token)
            raise SimulationError(f"the kernel could not call policy {self.policy.name!r} back; this is a bug "
                                  "in fastblox, please report it")
        raise e

    def _make_view_cls(self) -> type:
        """The class of the Python policy's view: :func:`lazy_view_class`, or for a numba-compiled
        policy, which types and unboxes every field at each call, a plain ``JobView`` with all
        ten columns filled (now, and by the kernel from then on)."""
        if not hasattr(self.policy.fn, "py_func"):
            return lazy_view_class(self)
        from .kernels.userpol import ALL_COLUMNS

        na, t = self._py_at
        self._view_into(self.s.active[:na], ALL_COLUMNS, self.pp.columns, t)
        self.pp.need[0] = ALL_COLUMNS
        return parts.JobView

    def slots(self, idx: np.ndarray) -> np.ndarray:
        """The largest gang each of jobs ``idx`` may hold (its slots of ``run.alloc``; per job,
        not ``np.diff`` of all of them: that took seconds per 100k-job run at every round)."""
        off = self.jobs.alloc_off
        return off[idx + 1] - off[idx]

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
        cap = self.slots(idx)
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


RUNSPEC_FIELDS = {f.name: f for f in dataclasses.fields(RunSpec)}


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
    ``time_model``, ``round_s``, ``restart_s``, ``preempt``, ``track``, ``compat``, ...; each
    one's meaning and default is in ``fastblox.spec``). ``policy`` may also be a registered user
    policy or a function ``fn(jobs, now_s) -> keys``. ``compat="blox"`` runs Blox's own
    simulator, round for round. Returns a :class:`fastblox.results.Result`."""
    s = _api_spec(spec, options, "simulate")
    if s.compat == "blox":
        return _simulate_compat(workload, s)
    if s.compat is not None:
        return _simulate_peer(workload, s)
    if s.policy in ELASTIC_POLICIES:
        return _simulate_elastic(workload, s)
    run = prepare_native(workload, s)
    compile_s = _warm(state_kind(run.state))
    t0 = time.perf_counter()
    code, stopped_by = run.drive()
    sim_s = time.perf_counter() - t0
    run.raise_if_stuck(code)
    return run.result(sim_s, compile_s, stopped_by)


def _simulate_compat(workload: Workload, s: RunSpec) -> Result:
    from .kernels import compat as kcompat
    r = s.resolved(source=False)
    c, adm, tracked = _check_args(workload, r)
    pl = parts.PLACEMENTS.get(r.placement)
    check_sizes(workload, c)  # (Blox's clusters have one GPU type: its largest gang is all of it)
    _note_load(workload, c)
    blox_name, pol_code = parts.BLOX_POLICIES[r.policy]
    compile_s = _warm("compat")
    limits = r.limits()
    # the limits in rounds: every round at a time <= the stop time runs, the next one only credits
    stop_t, by = stop_time(limits, workload.submit_s)
    max_rounds = COMPAT_MAX_ROUNDS if by is None else min(COMPAT_MAX_ROUNDS, int(stop_t // r.round_s) + 1)
    args = _compat_args(workload, c, pol_code, pl, adm.theta, r.round_s, tracked, max_rounds)
    t0 = time.perf_counter()
    out, by_wall = _drive_compat(args, limits, len(workload))
    sim_s = time.perf_counter() - t0
    code = int(out[0])
    if code == kcompat.DEADLOCK:
        raise SimulationError(
            "Blox's placement can never place the waiting jobs on this cluster (its exact-sum scattered fit); "
            "use --placement first-fit or a cluster whose node size divides the job sizes"
        )
    stopped_by = None
    if code == kcompat.ROUND_LIMIT:
        if not by_wall and by is None:
            raise SimulationError("the replay hit the round limit without finishing the tracked jobs")
        stopped_by = "max_wall" if by_wall else by
    res = build_result(workload, c, r, tracked, compat_out=out, sim_s=sim_s, compile_s=compile_s,
                       blox_policy=blox_name, blox_admission=adm.blox_name)
    left = int((tracked & (out[3] < 0)).sum())
    mark(res.summary, stopped_by, stop_message(stopped_by, limits, float(out[2]), left, int(tracked.sum())))
    return res


def _simulate_peer(workload: Workload, s: RunSpec) -> Result:
    """A run of ``fastblox.compat_NAME`` (``--compat tiresias|gavel|pollux|sia``: plain Python, no
    kernel; ``synergy``: a kernel of its own). A Tiresias schedule the native engine reproduces
    exactly runs there; the Pollux and Sia simulators' elastic jobs have no fixed size to check
    against the cluster."""
    import importlib

    peer = importlib.import_module(f".compat_{s.compat}", __package__)
    r = s.resolved(source=False)
    c, _, tracked = _check_args(workload, r)
    native = getattr(peer, "NATIVE_EQUIVALENTS", {})
    if r.policy in native:  # reproduced exactly by the native engine
        res = simulate(workload, peer.native_spec(r, c))
        res.config = r.as_dict()
        res.summary["engine"] = native[r.policy][0]
        return res
    if s.compat not in ("pollux", "sia"):
        check_sizes(workload, c)
        _note_load(workload, c)
    return peer.run(workload, r, c, tracked, _Timer)


def _simulate_elastic(workload: Workload, s: RunSpec) -> Result:
    """``--policy pollux`` without --compat: elastic and rigid jobs in one run (``fastblox.mixed``)."""
    from . import mixed

    r = s.resolved(source=False)
    c, _, tracked = _check_args(workload, r)
    return mixed.run(workload, r, c, tracked, _Timer)


class _Timer:
    """``with _Timer() as t: ...`` then ``t.seconds``: the wall time of the block."""

    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0


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
    limits: RunLimits = NO_LIMITS

    def stop_time(self) -> tuple[float, str | None]:
        """The simulated time the limits end the run at (steps after it are not taken) and the
        limit that sets it (``inf, None``: no limit)."""
        return stop_time(self.limits, self.workload.submit_s)

    def drive(self) -> tuple[int, str | None]:
        """Drive the run in slices to its end or its first limit; Ctrl-C raises
        :class:`~fastblox.slices.RunInterrupted`. Returns the kernel's code and the limit that
        stopped the run (None: it ran to its end)."""
        stop_t, by = self.stop_time()
        slicer = Slicer(self.limits.max_wall)
        with sigint_deferred():
            code = self.state.drive(stop_t, slicer)
        if slicer.stopped_by is not None:
            return code, slicer.stopped_by
        return code, by if code == kengine.PAUSED else None

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

    def result(self, sim_s: float, compile_s: float = 0.0, stopped_by: str | None = None) -> Result:
        """The :class:`Result` of the run as it stands (normally after ``state.drive()`` finished;
        ``stopped_by``: the limit that ended it early, marked in the summary)."""
        st = self.state
        res = build_result(self.workload, self.cluster, self.config, self.tracked, native_state=st, sim_s=sim_s,
                           compile_s=compile_s)
        mark(res.summary, stopped_by, stop_message(stopped_by, self.limits, st.now, st.counter("tracked_left"),
                                                   int(self.tracked.sum())))
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
    if s.compat is not None:
        raise ConfigError(f"prepare_native builds a native run; --compat {s.compat} runs only through simulate")
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
    _note_load(workload, c)  # (after every check: an error is the only line of a run that fails them)
    opts = _prepare_opts(pol, opts, workload, sm)
    cfg = r.replace(throughput=sm.table_name or None, cluster_events=None if events is None else events.source,
                    policy_opts=tuple(sorted((k, v) for k, v in opts.items() if not k.startswith("_"))))
    st = NativeState(workload, c, tracked, pol, opts, parts.PLACEMENTS.get(r.placement), adm.theta,
                     parts.TIME_MODELS.get(r.time_model), r.round_s, r.restart_s, r.preempt, r.record_series,
                     speed=sm, checkpoint_s=r.checkpoint_s, rack_factor=r.rack_factor, events=events,
                     max_gpus=max_gpus)
    return NativeRun(workload, st, c, tracked, sm, events, cfg, r.limits())


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
    emulated (:func:`endless_stream`; this needs a ``track`` range to end the run), cut at
    ``max_jobs`` jobs (default: ``fastblox.slices.stream_bound``)."""
    from .runner import run_spec

    if num_jobs is None and track is None:
        raise ConfigError("Blox's workload is an endless stream: give --track A:B (Blox: 3000:4000) or --num-jobs N")
    return run_spec(RunSpec(workload="blox", load=load, seed=seed, num_jobs=num_jobs, track=track).replace(**options))


def endless_stream(make, run, track: tuple, limits: RunLimits = NO_LIMITS, margin: float = 0.0,
                   can_stop: bool = True, what: str = "the load") -> Result:
    """Blox's endless arrival stream, emulated by its prefixes: ``make(n)`` is the stream's first
    ``n`` jobs, ``run(w, **limits)`` one run (``can_stop`` False: ``run(w)``, which takes no limits).

    A prefix is the stream up to its last arrival ``S``: a run whose tracked jobs finish before
    ``S - margin`` is the stream's run (``num_generated_jobs`` = the prefix's length); otherwise
    the prefix doubles, each run stopped at ``S - margin`` (``can_stop``). The stream is cut at
    ``limits.max_jobs`` jobs, by default at ``stream_bound(track[1])``: when the tracked jobs have
    not finished by then (overload, or a policy that starves them) the result is marked
    incomplete (``stopped_by`` ``max_jobs`` or ``endless_stream``) and says what to change."""
    t0 = time.perf_counter()
    cap = limits.max_jobs if limits.max_jobs is not None else stream_bound(track[1])
    n = max(2 * (track[1] + 1), 2000)
    while True:
        n = min(n, cap)
        final = n == cap
        w = make(n)
        last = float(w.submit_s[-1])
        horizon = last if final else float(np.nextafter(last - margin, -np.inf))
        lim = {}
        if can_stop:
            user_t = limits.max_sim_time
            wall = None if limits.max_wall is None else max(limits.max_wall - (time.perf_counter() - t0), 1e-9)
            lim = dict(max_sim_time=horizon if user_t is None else min(horizon, user_t), max_wall=wall)
        res = run(w, **lim)
        s = res.summary
        s["num_generated_jobs"] = n
        by = s.get("stopped_by")
        if by == "max_wall" or (by == "max_sim_time" and limits.max_sim_time is not None
                                and limits.max_sim_time <= horizon):
            # the caller's own limit (the message with the caller's values)
            left, num_tracked = _tracked_left(res)
            return _remark(res, by, stop_message(by, limits, s["end_s"], left, num_tracked))
        if s["complete"] and (last > s["end_s"] + margin or (final and can_stop)):
            return res
        if final:
            return _stream_cut(res, track, cap, limits.max_jobs is not None, what)
        n *= 2


def _stream_cut(res: Result, track: tuple, cap: int, by_user: bool, what: str) -> Result:
    """Mark the run of an endless stream cut at ``cap`` jobs incomplete, saying what happened."""
    left, num_tracked = _tracked_left(res)
    hours = res.summary["end_s"] / 3600
    if by_user:
        why = (f"the endless arrival stream was cut at --max-jobs {cap} jobs ({hours:,.0f} simulated hours) with {left} "
               f"of the {num_tracked} tracked jobs unfinished; the statistics cover the jobs that finished")
        return _remark(res, "max_jobs", why)
    why = (f"{what} is more than the {res.config['policy']} policy can serve on {res.config['cluster']}: after "
           f"{cap} generated jobs and {hours:,.0f} simulated hours, {left} of the {num_tracked} tracked jobs "
           f"(ids {track[0]}-{track[1]}) have not finished (overload, or "
           "starvation of long jobs); lower --load, use a policy that does not starve them (e.g. fifo, which serves "
           "them in arrival order; --blox-compat has Blox's starvation guard), or raise the bound with --max-jobs")
    return _remark(res, "endless_stream", why)


def _tracked_left(res: Result) -> tuple[int, int]:
    """(unfinished tracked jobs, tracked jobs) of a result."""
    j = res.jobs
    tr = j["tracked"].to_numpy()
    return int((tr & np.isnan(j["finish_s"].to_numpy())).sum()), int(tr.sum())


def _remark(res: Result, stopped_by: str, why: str) -> Result:
    for k in ("stopped_by", "stop_reason"):
        res.summary.pop(k, None)
    mark(res.summary, stopped_by, why)
    return res


def _spec_signature(fn, *lead: inspect.Parameter) -> None:
    """``fn``'s signature as help() and editors show it: its leading parameters, then every
    run option of :class:`RunSpec` as a keyword with its default (generated: one declaration)."""
    kw = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default) for f in api_fields()]
    fn.__signature__ = inspect.Signature([*lead, *kw])


_P = inspect.Parameter
_spec_signature(simulate, _P("workload", _P.POSITIONAL_OR_KEYWORD), _P("spec", _P.POSITIONAL_OR_KEYWORD, default=None))
_spec_signature(prepare_native, _P("workload", _P.POSITIONAL_OR_KEYWORD),
                _P("spec", _P.POSITIONAL_OR_KEYWORD, default=None), _P("defaults", _P.POSITIONAL_OR_KEYWORD, default=None))
