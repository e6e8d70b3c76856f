"""``simulate``: validate a run's parts, hand arrays to the kernels, wrap what comes back.

Two engines sit behind one call:

* native (default): ``kernels.engine.advance`` — events or rounds, exact completion times,
  correct placements, victims put back when unused, backfilling, optional restart cost;
* ``blox_compat=True``: ``kernels.compat.run_blox`` — Blox's simulator, round for round.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from . import parts
from .cluster import Cluster
from .errors import ConfigError, SimulationError, WorkloadError
from .kernels import compat as kcompat
from .kernels import engine as kengine
from .kernels import enums
from .kernels import placement as kplacement
from .results import Result, build_result
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

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


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


def _warm(kind: str) -> float:
    """Compile (or load from the on-disk cache) a kernel on a tiny input, once per process, so
    that ``sim_wall_s`` measures simulation only. Returns the seconds it took."""
    if kind in _WARM:
        return 0.0
    t0 = time.perf_counter()
    tiny = Workload.from_arrays(submit_s=[0.0, 1.0], num_gpus=[1, 2], duration_s=[10.0, 20.0])
    c = Cluster.parse("2x2")
    if kind == "compat":
        _run_compat(tiny, c, enums.POL_LAS, enums.PL_BLOX, 0.0, 300.0, np.ones(2, dtype=np.bool_))
    else:
        _run_native(tiny, c, parts.POLICIES.get("fifo"), enums.PL_FIRST_FIT, 0.0, enums.TM_EVENTS, 300.0, 0.0, True,
                    np.ones(2, dtype=np.bool_), False)
    _WARM.add(kind)
    return time.perf_counter() - t0


def _compat_args(w: Workload, c: Cluster, pol: int, pl: int, theta: float, round_s: float, tracked, max_rounds=50_000_000):
    """The compat kernel's arguments (prepared outside the timed simulation)."""
    return (w.submit_s, w.num_gpus, w.blox_iter_time, w.total_iters, tracked, _alloc_offsets(w.num_gpus),
            c.node_gpus, c.node_base, c.gpu_node, pol, pl, float(theta), float(round_s), int(max_rounds))


def _run_compat(*args, **kw):
    return kcompat.run_blox(*_compat_args(*args, **kw))


class NativeState:
    """All arrays of a native run. Owning them here lets a run pause (user policies), resume and
    be copied to simulate ahead."""

    def __init__(self, w: Workload, c: Cluster, tracked: np.ndarray, ci: np.ndarray, cf: np.ndarray):
        n = len(w)
        self.w, self.c = w, c
        self.jobs = (w.submit_s, w.num_gpus, w.duration_s, tracked.astype(np.bool_), _alloc_offsets(w.num_gpus))
        self.status = np.zeros(n, dtype=np.int8)
        self.work_left = w.duration_s.copy()
        self.attained = np.zeros(n)
        self.attained_gpu = np.zeros(n)
        self.launch_t = np.zeros(n)
        self.first_start = np.full(n, enums.NO_TIME)
        self.finish = np.full(n, enums.NO_TIME)
        self.n_preempt = np.zeros(n, dtype=np.int64)
        self.rate = np.ones(n)
        self.version = np.zeros(n, dtype=np.int64)
        self.alloc = np.zeros(int(w.num_gpus.sum()), dtype=np.int64)
        ng = c.node_gpus
        self.cluster = (
            ng, c.node_base, c.gpu_node, ng.copy(),
            np.array([(1 << int(g)) - 1 if g < 64 else (1 << 64) - 1 for g in ng], dtype=np.uint64),
            np.ones(c.num_nodes, dtype=np.uint8),
        )
        self.cluster += (kplacement.node_bits_of(self.cluster[3], self.cluster[5]),
                         np.full(c.total_gpus, enums.FREE, dtype=np.int64))
        self.queues = (
            np.empty(n, dtype=np.int64),  # wq: waiting jobs sorted by key
            np.zeros(n, dtype=np.float64),  # wkey: a waiting job's key
            np.empty(n, dtype=np.int64),  # rq: running jobs
            np.zeros(n, dtype=np.int64),  # rpos: a running job's slot in rq
        )
        self.active = np.empty(n, dtype=np.int64)
        self.scratch = (
            np.empty(n, dtype=np.int64),  # order
            np.empty(n, dtype=np.float64),  # keys
            np.zeros(n, dtype=np.int64),  # prio (native mode: none)
            np.empty(n, dtype=np.int64),  # launched
            np.empty(n, dtype=np.int64),  # suspended
            np.empty(n, dtype=np.int64),  # victims
            np.empty(n, dtype=np.int64),  # victims_pos
            np.empty(n + 1, dtype=np.int64),  # run_suffix
            np.empty(max(c.total_gpus, 1), dtype=np.int64),  # tmp
        )
        self.heap = (np.empty(n + 1), np.empty(n + 1, dtype=np.int64), np.empty(n + 1, dtype=np.int64))
        self.series = np.empty((1024 if ci[kengine.C_SERIES] else 1, 6))
        self.si = np.zeros(kengine.I_SIZE, dtype=np.int64)
        self.si[kengine.I_TRACKED_LEFT] = int(tracked.sum())
        self.sf = np.zeros(kengine.F_SIZE)
        self.ci, self.cf = ci, cf

    def advance(self) -> int:
        code, self.series = kengine.advance(
            *self.jobs,
            self.status, self.work_left, self.attained, self.attained_gpu, self.launch_t, self.first_start,
            self.finish, self.n_preempt, self.rate, self.version, self.alloc,
            *self.cluster,
            *self.queues,
            self.active, *self.scratch,
            *self.heap,
            self.series,
            self.si, self.sf, self.ci, self.cf,
        )
        return int(code)

    @property
    def keys(self) -> np.ndarray:
        return self.scratch[1]

    def job_view(self) -> parts.JobView:
        """The active jobs' columns at the current time (for user policies)."""
        idx = self.active[: self.si[kengine.I_N_ACTIVE]]
        t = self.sf[kengine.F_T]
        running = self.status[idx] == enums.RUNNING
        el = np.where(running, t - self.launch_t[idx], 0.0)
        restart = self.cf[kengine.CF_RESTART_S]
        w = self.w
        return parts.JobView(
            job_id=w.job_id[idx], submit_s=w.submit_s[idx], num_gpus=w.num_gpus[idx], duration_s=w.duration_s[idx],
            attained_s=self.attained[idx] + el, attained_gpu_s=self.attained_gpu[idx] + el * w.num_gpus[idx],
            remaining_s=self.work_left[idx] - np.maximum(0.0, el - restart) * self.rate[idx] * running,
            running=running.astype(np.int8), num_preemptions=self.n_preempt[idx],
        )


def _run_native(w, c, policy: parts.Policy, pl, theta, tm, round_s, restart_s, preempt, tracked, series):
    return _drive(_native_state(w, c, policy, pl, theta, tm, round_s, restart_s, preempt, tracked, series), policy)


def _native_state(w, c, policy: parts.Policy, pl, theta, tm, round_s, restart_s, preempt, tracked, series):
    ci = np.zeros(kengine.C_SIZE, dtype=np.int64)
    ci[kengine.C_POLICY] = policy.code
    ci[kengine.C_PLACEMENT] = pl
    ci[kengine.C_PREEMPT] = int(preempt)
    ci[kengine.C_TIME_MODEL] = tm
    ci[kengine.C_DYNAMIC] = int(policy.dynamic)
    ci[kengine.C_SERIES] = int(series)
    ci[kengine.C_CUSTOM] = int(policy.fn is not None)
    cf = np.zeros(kengine.CF_SIZE)
    cf[kengine.CF_ROUND_S] = round_s
    cf[kengine.CF_RESTART_S] = restart_s
    cf[kengine.CF_THETA] = theta
    return NativeState(w, c, tracked, ci, cf)


def _drive(st: NativeState, policy: parts.Policy):
    """Advance a native run to its end, answering a user policy's requests for priorities."""
    while True:
        code = st.advance()
        if code != kengine.NEED_KEYS:
            return code, st
        view = st.job_view()
        keys = np.asarray(policy.fn(view, float(st.sf[kengine.F_T])), dtype=np.float64)
        if keys.shape != (len(view.job_id),) or not np.isfinite(keys).all():
            raise ConfigError(
                f"policy {policy.name!r} must return one finite priority per active job "
                f"(expected shape ({len(view.job_id)},), got {keys.shape})"
            )
        st.keys[: len(keys)] = keys


def simulate(
    workload: Workload,
    cluster: "str | Cluster" = "32x4",
    scheduler="fifo",
    placement: str | None = None,
    admission="accept-all",
    time_model: str | None = None,
    round_s: float = DEFAULT_ROUND_S,
    restart_s: float = 0.0,
    preempt: bool | None = None,
    track: tuple | None = None,
    blox_compat: bool = False,
    record_series: bool = False,
) -> Result:
    """Replay ``workload`` on ``cluster`` with a scheduler composed of named parts.

    ``scheduler`` is a policy name (``fastblox.parts.POLICIES``), a registered user policy, or a
    function ``fn(jobs, now_s) -> keys``. ``placement`` defaults to ``first-fit`` (``blox`` in compat
    mode); ``admission`` is ``accept-all`` or ``load:θ``; ``time_model`` is ``events`` (default) or
    ``rounds`` of ``round_s`` seconds (compat mode: always rounds). ``restart_s`` is paid at every
    (re)launch. ``track=(first_id, last_id)`` (inclusive) limits the averages and ends the run when
    those jobs are done. Returns a :class:`fastblox.results.Result`.
    """
    if not isinstance(workload, Workload):
        raise ConfigError(f"workload must be a fastblox Workload, got {type(workload).__name__}")
    c = Cluster.parse(cluster)
    adm = parts.Admission.parse(admission)
    if not (np.isfinite(round_s) and round_s > 0):
        raise ConfigError(f"--round-s must be a positive number of seconds, got {round_s!r}")
    if not (np.isfinite(restart_s) and restart_s >= 0):
        raise ConfigError(f"--restart-s must be zero or a positive number of seconds, got {restart_s!r}")
    if len(workload) == 0:
        raise WorkloadError(f"workload {workload.name!r} has no jobs")
    tracked = _tracked_mask(workload, track)

    if blox_compat:
        if callable(scheduler) or isinstance(scheduler, parts.Policy):
            raise ConfigError("--blox-compat runs Blox's own policies only: " + ", ".join(parts.BLOX_POLICIES))
        key = str(scheduler).lower()
        if key not in parts.BLOX_POLICIES:
            raise ConfigError(f"--blox-compat: unknown policy {scheduler!r}; Blox has: {', '.join(parts.BLOX_POLICIES)}")
        if time_model not in (None, "rounds"):
            raise ConfigError("--blox-compat simulates Blox's fixed rounds; --time-model events is not available with it")
        if preempt is False:
            raise ConfigError("--blox-compat always preempts, as Blox does; drop --no-preempt")
        if restart_s:
            raise ConfigError("--blox-compat has no restart cost (Blox has none); drop --restart-s")
        pl_name = placement or "blox"
        pl = parts.PLACEMENTS.get(pl_name)
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

    pol = parts.resolve_policy(scheduler)
    pl_name = placement or "first-fit"
    pl = parts.PLACEMENTS.get(pl_name)
    tm_name = time_model or "events"
    tm = parts.TIME_MODELS.get(tm_name)
    do_preempt = pol.preemptive if preempt is None else bool(preempt)
    _check_fits(workload, c)
    cfg = RunConfig(c.spec, pol.name, pl_name, adm.name, tm_name, float(round_s), float(restart_s), do_preempt,
                    track, False, record_series)
    compile_s = _warm("native")
    st = _native_state(workload, c, pol, pl, adm.theta, tm, float(round_s), float(restart_s), do_preempt,
                       tracked, record_series)
    t0 = time.perf_counter()
    code, st = _drive(st, pol)
    sim_s = time.perf_counter() - t0
    if code == kengine.DEADLOCK:
        stuck = np.flatnonzero((st.status != enums.DONE) & tracked)
        ids = ", ".join(str(int(workload.job_id[i])) for i in stuck[:5])
        raise SimulationError(
            f"{len(stuck)} tracked job(s) can never be placed with placement {pl_name!r} on {c.spec!r} (e.g. job ids {ids}); "
            "try --placement first-fit"
        )
    return build_result(workload, c, cfg, tracked, native_state=st, sim_s=sim_s, compile_s=compile_s)


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
