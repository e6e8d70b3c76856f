"""The Sia simulator (siasosp23/artifacts, ``sia-simulator/``: ``multi_simulator.py``, ``cluster.py``,
``job.py``, ``sia.py``, ``simulator_config.py``) for ``--compat sia``, on the elastic job model of
:mod:`fastblox.elastic`, its allocation solved as a MILP with scipy's HiGHS.

How the simulator runs (its defaults, as ``run_experiment.sh`` invokes it: ``--policy sia
--policy_p_val -0.5 --mip_lambda_n 1.1 --interval 60 --project_throughputs --share_max_replicas``),
and so how this module runs:

* **Cluster.** GPU types in order, each nodes of one size: ``aws`` 6 x 4, ``dgx-ext`` 2 x 8, ``rtx``
  3 x 8 (``simulator_config.cluster_nnodes``). A job's *configuration* is a GPU type and a (nodes,
  GPUs) pair of ``CONFIGS_4GPU`` / ``CONFIGS_8GPU`` with at most the type's nodes (``sia.py``).
* **Jobs** are Pollux's elastic jobs (:mod:`fastblox.elastic`) with one throughput profile per GPU
  type, one goodput model fitted per type from what the job ran there, shared gradient statistics,
  a calibration slowdown per application (``SLOWDOWNS``: the true goodput is divided by it) and a
  restart delay per application (``applications.py``'s ``rescale_time``). The batch size adapts
  (up to the application's largest); ncf's target batch is 32,768.
* **Every interval** (60 s) every job advances, then the policy sees every submitted unfinished
  job: per GPU type it predicts each configuration's goodput (a type the job has not run on is
  projected from the first type it has, scaled by the ratio of the types' single-GPU
  throughputs; a job that has run nowhere may take one GPU of any type), normalises the row by its
  smallest goodput, discounts every configuration but the current one by the job's restart
  factor, and solves ``min sum X * round(goodput ** p, 2) + lambda_n * (jobs - sum X)``
  (binary ``X``, one configuration per job at most, each type's GPUs at most; a job still
  restarting keeps its configuration). Jobs are then placed from scratch on each type's nodes
  (``alloc_to_placement_fast``); a job restarts when its type or its GPUs per node change.

The simulator solves with CBC (gap 0.01 %); this module exactly (:func:`exact_allocation`: the costs
are whole hundredths, so a compiled branch and bound and, for the hard rounds, a dynamic
programme prove the optimum), with HiGHS at the simulator's gap where neither can
(:func:`highs_allocation`; none on the simulator's Philly workloads). Tied optima (goodputs are
rounded to 2 decimals) are broken differently by each solver (ours: toward the configurations
the jobs hold), so runs agree on averages, not job by job. :mod:`fastblox.reference.sia` holds the
brute-force twin of :func:`solve_allocation`; HiGHS at gap 0 is the other (the tests compare them).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import elastic
from .errors import ConfigError

POLICIES = ("sia",)
INTERVAL_S = 60
#: the simulator's default heterogeneous cluster (``simulator_config.cluster_nnodes``)
SIA_CLUSTER = "aws:6x4,dgx-ext:2x8,rtx:3x8"
#: GPU types the simulator has profiles for, with their profiled physical nodes (``cluster_max_physical_nnodes``)
MAX_PHYSICAL_NODES = {"azure": 5, "aws": 16, "dgx": 2, "dgx-ext": 2, "quad": 1, "rtx": 3}
#: (nodes, GPUs) a job may take on a type with 4 or 8 GPUs a node (``sia.py``: CONFIGS_4GPU, CONFIGS_8GPU)
CONFIGS = {
    4: ((1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16),
        (1, 2, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64)),
    8: ((1, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8), (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)),
}
#: the true goodput is divided by this (``simulator_config.SLOWDOWNS``: calibration to real runs)
SLOWDOWNS = {"cifar10": 1.8, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2, "deepspeech2": 1.2, "ncf": 1.5}
#: seconds a job is stopped after every (re-)allocation (``applications.py``: ``rescale_time``)
RESCALE_S = {"cifar10": 50, "deepspeech2": 25, "bert": 120, "yolov3": 80, "imagenet": 250, "ncf": 15}
#: the largest per-GPU batch where not the largest measured (``applications.py``)
MAX_LOCAL_BSZ = {("deepspeech2", "rtx"): 57}
P_FAIRNESS = -0.5  # --policy_p_val
LAMBDA_N = 1.1  # --mip_lambda_n (the gain of allocating a job; --mip_lambda_a is not used by the solver)
ZERO_ALLOC_GAIN = 1e-4  # sia.py: goodput of a configuration a job may not take
CLIP = 3000.0  # simulator_config.sia_goodput_clip_val
MIP_GAP = 1e-4  # simulator_config.sia_solver_thresh (CBC's allowablePercentageGap = 0.01 %)
NCF_BATCH = 32768  # cluster.py: every ncf job's target batch size
FIT_TOL = 1e-5  # goodput.py: fit_perf_params' scipy.optimize.minimize(tol=1e-5)
MAX_REPLICAS = 64  # cluster.py: "simulator can't handle more"


def policy_restart_s(name: str) -> float:
    """The restart penalty the policy assumes for a job, by its name (``sia.py``:
    ``get_restart_penalty``; not always the job's true restart delay, :data:`RESCALE_S`)."""
    for key, s in (("deepspeech", 25), ("imagenet", 250), ("cifar", 30), ("bert", 120), ("yolov3", 45)):
        if key in name:
            return float(s)
    return 30.0


# ------------------------------------------------------------------------------------------ profiles
def load_profiles(apps, types, root: str | None) -> dict:
    """``(app, type) -> Profile``: the Sia simulator's per-type files under ``root`` (its
    ``sia-simulator/traces`` folder: ``<app>/placements-<type>.csv``), or with ``root`` None the
    Pollux artifact's profiles (``datasets/pollux``; the Sia artifact's un-suffixed files are the
    same bytes) for every type."""
    out = {}
    for a in sorted(set(apps)):
        for t in types:
            if root is None:
                out[a, t] = _uncapped(a)  # (the Pollux simulator caps yolov3's per-GPU batch at 8; Sia does not)
                continue
            d = Path(root) / a
            for f in (f"placements-{t}.csv", f"scalability-{t}.csv"):
                if not (d / f).is_file():
                    raise ConfigError(f"--sia-profiles: no {f} for {a} in {d} (the Sia artifact's "
                                      f"sia-simulator/traces folder has one per GPU type)")
            out[a, t] = elastic.profile(a, str(root), t, MAX_LOCAL_BSZ.get((a, t)))
    return out


def _uncapped(app: str):
    """The Pollux profile of ``app`` with its largest measured per-GPU batch as the cap."""
    import dataclasses

    pr = elastic.profile(app)
    top = int(max(xs[-1] for xs, _, _ in pr.placements.values()))
    return dataclasses.replace(pr, max_local_bsz=top)


@dataclass(frozen=True)
class TypeInfo:
    """One GPU type of the cluster: its name, nodes, GPUs a node and configurations (global indices)."""

    name: str
    nodes: int
    per_node: int
    first: int  # index of its first configuration
    cfg_nodes: np.ndarray
    cfg_gpus: np.ndarray


def cluster_types(cluster, pollux_profiles: bool = False) -> list:
    """The cluster's GPU types (in its order) with their configurations; nodes of one type must be
    alike, of 4 or 8 GPUs (the simulator's configuration tables); of 4 with ``pollux_profiles``
    (they measure nodes of 4: 8 GPUs on one node is outside them). Raises ConfigError."""
    out, first = [], 0
    if cluster.node_rack is not None:
        raise ConfigError(f"--compat sia: a cluster of GPU types without racks (the simulator's: {SIA_CLUSTER}); "
                          f"not {cluster.spec!r}")
    for k, name in enumerate(cluster.gpu_types):
        g = np.asarray(cluster.node_gpus)[np.asarray(cluster.node_type) == k]
        if (g != g[0]).any() or int(g[0]) not in CONFIGS:
            raise ConfigError(f"--compat sia: the nodes of type {name!r} must all have 4 or all 8 GPUs (the "
                              f"simulator's configurations); not {cluster.spec!r}")
        n, per = len(g), int(g[0])
        if pollux_profiles and per != 4:
            raise ConfigError(f"--compat sia: type {name!r} has nodes of {per} GPUs; the bundled (Pollux) profiles "
                              f"measure nodes of 4: give --sia-profiles DIR (the Sia artifact's "
                              f"sia-simulator/traces) or a cluster of 4-GPU nodes")
        nn, gg = (np.array(x, dtype=np.int64) for x in CONFIGS[per])
        ok = nn <= min(n, MAX_PHYSICAL_NODES.get(name, n))
        out.append(TypeInfo(name, n, per, first, nn[ok], gg[ok]))
        first += int(ok.sum())
    return out


# ------------------------------------------------------------------------------------------ the MILP
def solve_allocation(cost: np.ndarray, cfg_type: np.ndarray, cfg_gpus: np.ndarray, capacity: np.ndarray,
                     fixed: np.ndarray, lambda_n: float = LAMBDA_N, gap: float = MIP_GAP, exact: bool = True,
                     prefer: np.ndarray | None = None) -> tuple:
    """Sia's allocation: binary ``X[job, config]`` minimising ``sum X * cost + lambda_n * (jobs -
    sum X)``, at most one configuration a job, at most ``capacity[t]`` GPUs of type ``t``
    (``cfg_type``, ``cfg_gpus``: each configuration's type and GPUs), ``X[j, fixed[j]] = 1`` where
    ``fixed[j] >= 0``. Returns (configuration per job, -1 for none; objective). ``exact``: first
    :func:`exact_allocation` (an optimum, proven, on costs in whole hundredths; among tied optima
    one where the most jobs get their configuration in ``prefer``); else, or where it gives up,
    HiGHS (scipy.optimize.milp) at the relative ``gap``."""
    if cost.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), 0.0
    if exact:
        choice = exact_allocation(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n, prefer)
        if choice is not None:
            return choice, objective(cost, choice, lambda_n)
    return highs_allocation(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n, gap)


def highs_allocation(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n: float = LAMBDA_N,
                     gap: float = MIP_GAP) -> tuple:
    """:func:`solve_allocation`'s MILP solved by HiGHS (scipy.optimize.milp) at the relative ``gap``."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    J, C = cost.shape
    fixed = np.asarray(fixed)
    full = np.asarray(cost, dtype=np.float64) - lambda_n
    pinned = np.zeros((J, C), dtype=bool)
    f = np.flatnonzero(fixed >= 0)
    pinned[f, fixed[f]] = True
    # (a configuration that does not lower the objective is never needed: left out, unless pinned)
    job, cfg = np.nonzero((full < 0) | pinned)
    choice = np.full(J, -1, dtype=np.int64)
    n = len(job)
    if n:
        var = np.arange(n)
        M = coo_matrix((np.concatenate([np.ones(n), cfg_gpus[cfg].astype(np.float64)]),
                        (np.concatenate([job, J + cfg_type[cfg]]), np.concatenate([var, var]))),
                       shape=(J + len(capacity), n)).tocsr()
        ub_rows = np.concatenate([np.ones(J), np.asarray(capacity, dtype=np.float64)])
        lb = pinned[job, cfg].astype(np.float64)
        res = milp(full[job, cfg], constraints=LinearConstraint(M, -np.inf, ub_rows), bounds=Bounds(lb, np.ones(n)),
                   integrality=np.ones(n), options={"mip_rel_gap": gap})
        if res.x is None:
            raise RuntimeError(f"the Sia allocation MILP has no solution ({res.message})")
        on = np.round(res.x) > 0
        choice[job[on]] = cfg[on]
    return choice, objective(cost, choice, lambda_n)


#: branch-and-bound nodes exact_allocation visits at most before it solves by dynamic programming
SEARCH_NODES = 2_000
#: jobs x GPU-use states at most of exact_allocation's dynamic programme (beyond: HiGHS)
DP_CELLS = 1 << 22
#: passes of the price search over the GPU types (exact_allocation's Lagrangian bound)
PRICE_SWEEPS = 3
#: free jobs at most whose choice local search improves before the dynamic programme (its pair moves: jobs^2)
IMPROVE_JOBS = 256


def exact_allocation(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n: float = LAMBDA_N, prefer=None):
    """An optimal choice of :func:`solve_allocation`'s MILP, proven, or None (costs or
    ``lambda_n`` not whole hundredths, pinned jobs over a type's GPUs, or a problem too large for
    both the search and the dynamic programme). The costs are whole hundredths (``power_costs``
    rounds them to 2 decimals), so in integer hundredths each job's gain ``lambda_n - cost`` of a
    configuration is maximised exactly. The variables are the MILP's (configurations with a
    positive gain; pinned jobs keep theirs) less those another configuration of as many GPUs or
    fewer of the same type beats (no optimum takes them): ``kernels.elastic.alloc_options``.

    * **Ties.** Among tied optima, one where the most jobs get their configuration in ``prefer``
      (-1: none; the policy's: the one each job holds, so that ties restart no job), as a second
      objective: each gain is scaled by the free jobs + 1, and a preferred configuration adds 1.
    * **A branch and bound** (``kernels.elastic.alloc_search``), bounded by the sum of the
      remaining jobs' best gains and by the Lagrangian bound at GPU prices per type
      (``alloc_prices``), branching on the jobs of fewer configurations first (then in their
      order), each job's configurations by decreasing scaled gain less its GPUs' price (then more
      gain, then the higher index; waiting ranks as gain 0). Among the remaining ties, the first
      found.
    * **Past** :data:`SEARCH_NODES` **nodes**, a dynamic programme over the GPUs used of each type
      (``alloc_dp``, at most :data:`DP_CELLS` jobs x states), from the search's best choice
      improved by local search (``alloc_improve``); among ties, the programme's first."""
    from .kernels.elastic import alloc_bounded, alloc_options

    c64 = np.asarray(cost, dtype=np.float64)
    J, C = c64.shape
    if J == 0:
        return np.zeros(0, dtype=np.int64)
    fixed = np.asarray(fixed, dtype=np.int64)
    pref = np.full(J, -1, dtype=np.int64) if prefer is None else np.asarray(prefer, dtype=np.int64)
    status, jobs, start, o_cfg, o_type, o_gpus, o_val, cap = alloc_options(
        c64, np.asarray(cfg_type, dtype=np.int64), np.asarray(cfg_gpus, dtype=np.int64),
        np.asarray(capacity, dtype=np.int64), fixed, float(lambda_n), round(lambda_n * 100), pref)
    if status == 1:
        return None
    if status == 2:
        return fixed.copy()
    mu, lag, most, pick, nodes = alloc_bounded(start, o_cfg, o_type, o_gpus, o_val, cap, PRICE_SWEEPS, SEARCH_NODES)
    if nodes < 0 and not _by_states(start, o_type, o_gpus, o_val, cap, mu, lag, most, pick):
        return None
    choice = np.where(fixed >= 0, fixed, -1)
    choice[jobs] = o_cfg[pick]
    return choice


def _by_states(start, o_type, o_gpus, o_val, cap, mu, lag, most, pick) -> bool:
    """``kernels.elastic.alloc_dp`` into ``pick`` where its table is at most :data:`DP_CELLS`, from
    the search's best choice ``pick`` improved by local search (``alloc_improve``, up to
    :data:`IMPROVE_JOBS` jobs): the better that choice, the fewer states the programme keeps."""
    from .kernels.elastic import alloc_dp, alloc_improve

    J = len(start) - 1
    stride = np.cumprod(np.concatenate([[1], cap[:-1] + 1])).astype(np.int64)
    states = int(np.prod(cap + 1, dtype=np.float64))
    if states * J > DP_CELLS:
        return False
    if J <= IMPROVE_JOBS:
        best = alloc_improve(start, o_type, o_gpus, o_val, cap, pick, np.empty(len(cap), dtype=np.int64))
    else:
        best = int(o_val[pick].sum())
    neg = np.full(states, -(1 << 62), dtype=np.int64)
    alloc_dp(start, o_type, o_gpus, o_val, cap, mu, lag, most, best, stride, np.empty(len(cap), dtype=np.int64),
             neg, neg.copy(), np.empty(states, dtype=np.int64), np.empty(states, dtype=np.int64),
             _dp_table(J * states).reshape(J, states), pick)
    return True


_DP_TABLE = [np.empty(0, dtype=np.int64)]


def _dp_table(cells: int) -> np.ndarray:
    """Scratch of ``cells`` int64 for ``alloc_dp``'s choices, kept between rounds (read only where written:
    a fresh table of up to DP_CELLS each hard round cost more in page faults than the programme)."""
    if len(_DP_TABLE[0]) < cells:
        _DP_TABLE[0] = np.empty(max(cells, 2 * len(_DP_TABLE[0])), dtype=np.int64)
    return _DP_TABLE[0][:cells]


def objective(cost: np.ndarray, choice: np.ndarray, lambda_n: float = LAMBDA_N) -> float:
    """Sia's objective of a choice (configuration per job, -1 none)."""
    on = choice >= 0
    return float(np.asarray(cost, dtype=np.float64)[np.flatnonzero(on), choice[on]].sum() + lambda_n * (~on).sum())


def power_costs(goodput: np.ndarray, p: float = P_FAIRNESS) -> np.ndarray:
    """``round(goodput ** p, 2)`` capped at :data:`CLIP` (float32, as the simulator computes it)."""
    a = np.power(np.ascontiguousarray(goodput, dtype=np.float32), np.float32(p))  # (numpy's: kept for its bits)
    elastic._kernels().round_costs(a.reshape(-1), np.float32(CLIP))
    return a


# ------------------------------------------------------------------------------------------ jobs
@functools.lru_cache(maxsize=None)
def max_local_for(pr, placement: tuple) -> int:
    """The largest per-GPU batch measured on ``placement`` (else on any scalability run with at
    least its nodes and GPUs): ``Application.get_max_local_bsz``."""
    p = elastic.normal_placement(placement)
    pid = int("".join(map(str, p)))
    if pid in pr.placements:
        return int(pr.placements[pid][0].max())
    sc = pr.scalability
    ok = (sc[:, 0] >= len(p)) & (sc[:, 1] >= sum(p))
    return int(sc[ok, 2].max())


@functools.lru_cache(maxsize=None)
def memory_cap(pr, reps: int) -> int | None:
    """The largest per-GPU batch measured on any placement of ``reps`` GPUs (None: none measured):
    ``Job.update_local_bsz``'s memory correction."""
    top = [xs.max() for pid, (xs, _, _) in pr.placements.items() if sum(map(int, str(pid))) == reps]
    return int(max(top)) if top else None


def single_gpu_xput(pr) -> float:
    """Largest per-GPU batch over largest step time of the single-GPU measurements (``cluster.py``:
    ``compute_throughput_ratios``)."""
    xs, st, _ = pr.placements[1]
    return float(xs.max() / st.max())


class RunMemo:
    """What the jobs of one run compute once for all of them, each a pure function of its key: the
    fits (by chains of observations: :meth:`fit_after`) and ``elastic.batch_speeds`` (by application,
    type, model, configuration, batch limits; :meth:`one` picks the batch on them). Jobs of one
    application often run the same configurations with the same model and statistics (the same
    observations in the same order give the same fit). The speeds and batch choices are emptied
    past :attr:`LIMIT` entries (then computed again: the same values); the fits, their chains and
    the lanes of ``kernels.sia.job_steps`` (:meth:`lane`) are kept for the run."""

    LIMIT = 1 << 16

    def __init__(self):
        self.fits, self.speeds, self.batches = {}, {}, {}
        self.lanes, self.tables = {}, {}  # (lane; the profiles' tables there)
        # the chains (fit_after) for kernels.sia.job_steps: int and float fields (kernels.sia.C_*), models
        self.links, self.times, self.chain_pp = np.full((64, 6), -1, dtype=np.int64), np.zeros((64, 2)), [None]
        self._one = elastic.pick_scratch(1)  # (one's outputs: written and read at once)

    def fit_after(self, chain: int, key: tuple, step: float, sync: float, seen: dict) -> tuple:
        """(chain, model) after observations ``chain`` (0: none) and then configuration ``key`` (nodes,
        GPUs, atomic batch) with ``step`` and ``sync`` seconds, all of them ``seen`` (in their order):
        ``elastic.fit_perf_params`` on them, computed once per run. A chain names one sequence of
        observations (positive, finite: equal as floats when equal in bits): jobs of one application
        on one type often measure the same configurations in the same order."""
        link = (chain, key, step, sync)
        hit = self.fits.get(link)
        if hit is None:
            k = np.array(list(seen), dtype=np.float64)
            v = np.array(list(seen.values()))
            pp = elastic.fit_perf_params(k[:, 0], k[:, 1], k[:, 2], v[:, 0] - v[:, 1], v[:, 0], tol=FIT_TOL,
                                         compiled=True)
            hit = self.fits[link] = (self._new_chain(chain, key, step, sync, pp), pp)
        return hit

    def _new_chain(self, chain: int, key: tuple, step: float, sync: float, pp) -> int:
        """The number of a new chain, ``chain`` and then the observation (``key``, ``step``, ``sync``)
        fitted as model ``pp``: its fields written (the first child of ``chain``)."""
        c = len(self.chain_pp)
        if c == len(self.links):
            self.links, self.times = _grown(self.links), _grown(self.times)
        self.links[c] = (chain, *key, -1, self.links[chain, 4])  # (kernels.sia.C_*)
        self.times[c] = step, sync
        self.links[chain, 4] = c  # (C_CHILD)
        self.chain_pp.append(pp)
        return c

    def one(self, app: str, t: str, pr, pp, grad, n: int, r: int, max_batch: int, top: int) -> tuple:
        """(atomic batch, accumulation steps) of ``elastic.best_batch`` on one configuration (``n`` nodes,
        ``r`` GPUs)."""
        return elastic.pick_one(self.speeds_one(app, t, pr, pp, n, r, max_batch, top), grad, self._one)

    def speeds_one(self, app: str, t: str, pr, pp, n: int, r: int, max_batch: int, top: int) -> tuple:
        """``elastic.batch_speeds`` of :meth:`one`'s configuration (read-only)."""
        at = (app, t, pp.tobytes(), (n, r), max_batch, top)
        sp = self.speeds.get(at)
        if sp is None:
            if len(self.speeds) > self.LIMIT:
                self.speeds.clear()
            sp = self.speeds[at] = elastic.batch_speeds(pp, pr.init_batch_size, [n], [r], max_batch,
                                                        pr.min_local_bsz, top)
        return sp

    def lane(self, app: str, t: str, pr, placement: tuple) -> StepLane:
        """The run's :class:`StepLane` of application ``app`` (profile ``pr``) on ``placement`` of type ``t``."""
        key = (pr, placement)
        hit = self.lanes.get(key)
        if hit is None:
            tabs = self.tables.get(pr)
            if tabs is None:
                tabs = self.tables[pr] = (pr.batch_sizes.astype(np.float64), np.ascontiguousarray(pr.grad_sqr),
                                          np.ascontiguousarray(pr.grad_var), np.ascontiguousarray(pr.epoch_progress))
            hit = self.lanes[key] = StepLane(app, t, pr, placement, tabs)
        return hit


class StepLane:
    """What ``kernels.sia.job_steps`` reads of one application's profile on one placement, filled as
    the run needs it: the step and sync seconds of each atomic batch run there
    (``pr.step_time``), the speeds of each chain's model there (:meth:`RunMemo.speeds_one`), the
    profile's tables."""

    def __init__(self, app: str, t: str, pr, placement: tuple, tabs: tuple):
        self.app, self.t, self.pr, self.placement, self.tabs = app, t, pr, placement, tabs
        self.r = sum(placement)
        self.top, cap = max_local_for(pr, placement), memory_cap(pr, self.r)
        self.ints = np.array([0, len(placement), -1 if cap is None else cap, pr.init_batch_size, pr.max_batch_size],
                             dtype=np.int64)  # (kernels.sia.L_*)
        self.st_atomic, self.st_times = np.empty(8, dtype=np.int64), np.empty((8, 2))
        self.sp_row = np.full(8, -1, dtype=np.int64)  # chain -> its row of the speeds (-1: none)
        P, self.rows, self._fixed = elastic.GEOM_POINTS, 0, None
        # (batch, scale, compute time, optimizer-step time; atomic batch, accumulation steps; allowed)
        self.sp_f, self.sp_i, self.sp_ok = np.empty((8, 4, P, 1)), np.empty((8, 2, P, 1), dtype=np.int64), \
            np.empty((8, P, 1), dtype=bool)

    def fixed_batch(self) -> tuple:
        """(atomic batch, accumulation steps) here without a model or statistics (``Job.update_local_bsz``:
        the initial batch, at least the smallest per GPU; kept)."""
        if self._fixed is None:
            pr, r = self.pr, self.r
            a, k = elastic.fixed_batch_config(max(pr.init_batch_size, pr.min_local_bsz * r), r, pr.init_batch_size,
                                              pr.max_batch_size, self.top)
            self._fixed = self.capped(int(a), int(k))
        return self._fixed

    def capped(self, atomic: int, accum: int) -> tuple:
        """(atomic batch, accumulation steps) with the atomic batch within the memory correction's cap
        and the profile's largest global batch (``Job.update_local_bsz``)."""
        cap = self.ints[2]  # (L_CAP)
        if cap >= 0:
            atomic = min(atomic, int(cap))
        return min(atomic, int(self.pr.max_batch_size / (self.r * (accum + 1)))), accum

    def add_step(self, atomic: int) -> None:
        """``pr.step_time(placement, atomic)`` into the step table."""
        k = self.ints[0]  # (L_STEPS)
        if k == len(self.st_atomic):
            self.st_atomic, self.st_times = _grown(self.st_atomic), _grown(self.st_times)
        self.st_times[k] = self.pr.step_time(self.placement, atomic)
        self.st_atomic[k] = atomic
        self.ints[0] = k + 1

    def add_speeds(self, memo: RunMemo, chain: int) -> None:
        """The speeds of chain ``chain``'s model here into the speeds."""
        if chain >= len(self.sp_row):
            self.sp_row = np.concatenate([self.sp_row, np.full(max(chain + 1, 2 * len(self.sp_row)) - len(self.sp_row),
                                                               -1, dtype=np.int64)])
        k = self.rows
        if k == len(self.sp_f):
            self.sp_f, self.sp_i, self.sp_ok = _grown(self.sp_f), _grown(self.sp_i), _grown(self.sp_ok)
        pr = self.pr
        atomic, accum, batch, ok, scale, accum_time, optim = memo.speeds_one(
            self.app, self.t, pr, memo.chain_pp[chain], len(self.placement), self.r, pr.max_batch_size, self.top)
        f, i = self.sp_f[k], self.sp_i[k]
        f[0], f[1], f[2], f[3], i[0], i[1], self.sp_ok[k] = batch, scale, accum_time, optim, atomic, accum, ok
        self.sp_row[chain] = k
        self.rows = k + 1


def _grown(a: np.ndarray) -> np.ndarray:
    """``a`` with twice its rows (the new ones uninitialised)."""
    return np.concatenate([a, np.empty_like(a)])


class SiaJob:
    """One job of the Sia simulator (``job.py``'s ``Job`` under the Sia policy): per GPU type its
    measured configurations and fitted goodput model; the batch size adapts on the type it runs."""

    def __init__(self, name: str, app: str, submit: float, target_bs: int, profs: dict, types: list,
                 memo: RunMemo | None = None):
        self.name, self.app, self.submit, self.target_bs = name, app, submit, target_bs
        self.memo = RunMemo() if memo is None else memo  # (shared by the jobs of a run)
        self.profs = {t: profs[app, t] for t in types}
        self.types = types
        self.seen = {t: {} for t in types}  # type -> (nodes, replicas, atomic) -> (step s, sync s)
        self.chain = {t: 0 for t in types}  # type -> RunMemo.fit_after's name of seen[type] (0: empty)
        self.pp = {t: None for t in types}
        self.grad = None
        self.cluster, self.placement, self.atomic, self.accum = None, (), 0, 0
        self.epoch, self.progress, self.rescale = 0, 0.0, 0.0
        self.finish, self.first, self.restarts = None, None, None
        self.attained_gpu, self.preempted = 0.0, 0
        self.calib = 1.0 / SLOWDOWNS[app]
        self.models = 0  # (counts the observations, each a fit: goodputs depend on (models, grad), _choose_batch)
        self._batch_for = None  # (type, models, grad, placement) the batch was last chosen for
        self._maxr = self._models_key = (-1, None)  # (models, max_replicas / models_key: kept while models is)
        self._lane_for = (None, None)  # ((type, placement), its lane)
        self._steady = (None,)  # (_steps' last step, to take again while in its epoch)

    def max_replicas(self) -> int:
        """The most GPUs the policy offers (``--share_max_replicas``: the largest over the types;
        kept until the next observation)."""
        if self._maxr[0] != self.models:
            self._maxr = self.models, max(min(max(2 * max((k[1] for k in self.seen[t]), default=0), 1), MAX_REPLICAS,
                                              pr.max_batch_size // pr.min_local_bsz) for t, pr in self.profs.items())
        return self._maxr[1]

    def models_key(self) -> tuple:
        """The models per type (in :attr:`types`' order) as bytes, None where none (kept until the next fit)."""
        if self._models_key[0] != self.models:
            self._models_key = self.models, tuple(None if self.pp[t] is None else self.pp[t].tobytes()
                                                  for t in self.types)
        return self._models_key[1]

    def _choose_batch(self) -> None:
        key = (self.cluster, self.models, self.grad, self.placement)
        if key == self._batch_for:  # (the same inputs: the same batch)
            return
        self._batch_for = key
        pp, lane = self.pp[self.cluster], self._lane()
        if self.grad is None or pp is None:
            hit = lane.fixed_batch()
        else:  # (one choice per run for alike jobs: by application, type, model, statistics, placement)
            at = (self.app, self.cluster, pp.tobytes(), self.grad, self.placement)
            hit = self.memo.batches.get(at)
            if hit is None:
                if len(self.memo.batches) > RunMemo.LIMIT:
                    self.memo.batches.clear()
                a, k = self.memo.one(self.app, self.cluster, lane.pr, pp, self.grad, len(self.placement), lane.r,
                                     lane.pr.max_batch_size, lane.top)
                hit = self.memo.batches[at] = lane.capped(a, k)
        self.atomic, self.accum = hit

    def _observe(self, key: tuple, step: float, sync: float) -> None:
        """A configuration ``key`` (nodes, GPUs, atomic batch) run the first time on this type: the
        model fitted again."""
        seen = self.seen[self.cluster]
        seen[key] = (step, sync)
        self.chain[self.cluster], self.pp[self.cluster] = self.memo.fit_after(self.chain[self.cluster], key, step,
                                                                             sync, seen)
        self.models += 1

    def _start(self, placement: tuple, now: float) -> None:
        self.placement = tuple(placement)
        self._choose_batch()
        self.rescale = float(RESCALE_S[self.app])
        if self.restarts is None:
            self.restarts, self.first = 0, now
        else:
            self.restarts += 1

    def _suspend(self) -> None:
        if self.placement:
            self.preempted += 1
        self.placement, self.atomic, self._batch_for = (), 0, None

    def reallocate(self, placement: tuple, now: float) -> None:
        """New GPUs on the same type: a restart only if the GPUs per node change (``Job.reallocate``)."""
        if not placement:
            self._suspend()
        elif tuple(placement) != self.placement:
            self._start(placement, now)

    def migrate(self, gpu_type, placement: tuple, now: float) -> None:
        """Another type (or none): always a restart (``Job.migrate``)."""
        self.cluster = gpu_type
        if placement:
            self._start(placement, now)
        else:
            self._suspend()

    def advance(self, t0: float, secs: float) -> None:
        """Progress over ``[t0, t0 + secs)`` on the placement held (``Job.step``): the restart's delay,
        then ``kernels.sia.job_steps`` (one step per epoch crossed, the batch chosen again after each),
        back here for what it cannot compute: a step time or speeds not yet in the lane, a fit (a
        configuration run the first time after observations never fitted with it). A step that
        ended the last interval in its epoch and left the job's state as it found it is taken again
        here while the epoch lasts (its speed, batch and statistics depend on that state only). Its
        twin: ``fastblox.reference.sia.advance``."""
        if not self.placement or self.finish is not None:
            return
        lane = self._lane()
        r = lane.r
        d = min(self.rescale, secs)
        used = d
        self.attained_gpu += d * r
        self.rescale -= d
        secs -= d
        if not secs > 0:
            return
        chain = self.chain[self.cluster]
        state = (lane, chain, self.atomic, self.accum, self.epoch)
        steady = self._steady
        if steady[0] == state and self.progress + steady[1] * secs < steady[2]:
            self.progress += steady[1] * secs  # (job_steps' step within the epoch, the same again)
            self.attained_gpu += secs * r
            self.grad = steady[3]
            self._batch_for = (self.cluster, self.models, self.grad, self.placement)
            return
        self._steps(lane, t0, secs, used, chain)

    def _steps(self, lane: StepLane, t0: float, secs: float, used: float, chain: int) -> None:
        """:meth:`advance` from ``secs`` left (``used`` used) by ``kernels.sia.job_steps``; a last step
        that ends the interval in its epoch with the job's state as it found it kept (:attr:`_steady`:
        the state, progress per second, the epoch's end, the statistics)."""
        ks, memo, r = _sia_kernels(), self.memo, lane.r
        secs, used = float(secs), float(used)
        atomic, accum, epoch, progress, attained = self.atomic, self.accum, self.epoch, self.progress, self.attained_gpu
        while True:
            (ans, secs, used, atomic, accum, epoch, progress, attained, finish, now, sqr, var, stepped, step,
             sync, good, steady) = ks.job_steps(t0, secs, used, r, atomic, accum, epoch, progress, attained, chain, self.calib,
                                  lane.ints, lane.st_atomic, lane.st_times, lane.sp_row, lane.sp_f, lane.sp_i,
                                  lane.sp_ok, *lane.tabs, memo.links, memo.times, *memo._one)
            if now != chain:
                self._follow(chain, now)
                chain = now
            if stepped:
                self.grad = (sqr, var)
            if ans == ks.DONE:
                break
            if ans == ks.NEED_STEP:
                lane.add_step(atomic)
            elif ans == ks.NEED_FIT:
                self._observe((len(self.placement), r, atomic), step, sync)
                chain = self.chain[self.cluster]
                lane.add_speeds(memo, chain)  # (what job_steps asks for next: a new chain has none)
            elif ans == ks.NEED_SPEEDS:
                lane.add_speeds(memo, chain)
            else:
                self.profs[self.cluster].grad_stats_at(r * atomic * (accum + 1), epoch)  # (raises: outside them)
                raise AssertionError("job_steps: a batch outside the validated sizes")
        self.atomic, self.accum, self.epoch, self.progress, self.attained_gpu = atomic, accum, epoch, progress, attained
        if not np.isnan(finish):
            self.finish = finish
        self._batch_for = (self.cluster, self.models, self.grad, self.placement)
        if steady:
            self._steady = ((lane, chain, atomic, accum, epoch), good, float(lane.tabs[3][epoch + 1]), self.grad)

    def _lane(self) -> StepLane:
        """The run's lane of the job's profile on its placement (kept until either changes)."""
        key = (self.cluster, self.placement)
        if self._lane_for[0] != key:
            self._lane_for = key, self.memo.lane(self.app, self.cluster, self.profs[self.cluster], self.placement)
        return self._lane_for[1]

    def _follow(self, chain: int, now: int) -> None:
        """Observations ``chain`` on the job's type extended to ``now`` (by ``job_steps``: fits known):
        as :meth:`_observe` of each observation between them, in their order."""
        links, times, new = self.memo.links, self.memo.times, []
        c = now
        while c != chain:  # (kernels.sia.C_*: parent, nodes, GPUs, atomic batch)
            new.append(((int(links[c, 1]), int(links[c, 2]), int(links[c, 3])), (float(times[c, 0]),
                                                                                   float(times[c, 1]))))
            c = int(links[c, 0])
        seen = self.seen[self.cluster]
        for key, v in reversed(new):
            seen[key] = v
        self.chain[self.cluster], self.pp[self.cluster] = now, self.memo.chain_pp[now]
        self.models += len(new)


@functools.cache
def _sia_kernels():
    """``kernels.sia`` (imported at the first call: importing fastblox compiles nothing)."""
    from .kernels import sia as k

    return k


# ------------------------------------------------------------------------------------------ the policy
class RowSpeeds:
    """The part of the policy's goodput rows without the gradient statistics, for one run: each
    ``elastic.batch_speeds`` (by application, type, model, configurations offered, batch limits)
    once, packed by ``kernels.elastic.speeds_pack`` as columns (one per configuration) of one
    array that ``kernels.elastic.row_goodputs`` reads; and each row's columns and ratios (by the
    row's :meth:`SiaPolicy._plan` key). Emptied, before a row's columns are gathered, when they
    might not fit in :attr:`LIMIT` columns (then computed again: the same values)."""

    LIMIT = 1 << 15  # columns (1.2 kB each; allocated at once, memory only as written)

    def __init__(self):
        self.packed = np.empty((self.LIMIT, 3, elastic.GEOM_POINTS))
        self.work = np.empty(elastic.GEOM_POINTS)  # (row_goodputs' scratch)
        self.used, self.first, self.plans = 0, {}, {}

    def columns(self, key, pp, pr, nodes, gpus, max_batch: int) -> int:
        """The first of the columns of ``elastic.batch_speeds(pp, pr.init_batch_size, nodes, gpus,
        max_batch, pr.min_local_bsz, pr.max_local_bsz)`` (``key`` names them in this run)."""
        first = self.first.get(key)
        if first is None:
            atomic, accum, batch, ok, scale, accum_time, optim = elastic.batch_speeds(
                pp, pr.init_batch_size, nodes, gpus, max_batch, pr.min_local_bsz, pr.max_local_bsz)
            first = self.first[key] = self.used
            self.used += len(gpus)
            elastic._kernels().speeds_pack(batch, accum, accum_time, optim, scale, ok, self.packed[first:self.used])
        return first

    def make_room(self, columns: int) -> None:
        """Empty all if ``columns`` more might not fit (call before gathering a row's columns)."""
        if self.used + columns > self.LIMIT:
            self.used, self.first, self.plans = 0, {}, {}


class SiaPolicy:
    """``sia.py``'s ``SiaPolicy.optimize_mip`` for elastic jobs (no rigid ones in the workloads)."""

    def __init__(self, jobs: list, types: list, p: float = P_FAIRNESS, lambda_n: float = LAMBDA_N):
        self.jobs, self.types, self.p, self.lambda_n = jobs, types, p, lambda_n
        self.C = sum(len(t.cfg_gpus) for t in types)
        self.cfg_type = np.concatenate([np.full(len(t.cfg_gpus), k) for k, t in enumerate(types)])
        self.cfg_nodes = np.concatenate([t.cfg_nodes for t in types])
        self.cfg_gpus = np.concatenate([t.cfg_gpus for t in types])
        self.capacity = np.array([t.nodes * t.per_node for t in types])
        self.prev = {}  # job -> configuration chosen last time (None: none)
        self.objectives = []  # (time, objective)
        self._last = None  # (problem, choice, objective) of the last MILP
        self._rows = {}  # job -> ((models, grad), its row): a row depends on nothing else
        self._alike = {}  # _row_of's rows by what they depend on
        self._cfgs = {}  # (type index, most GPUs, type projected from or None) -> configurations offered
        self._speeds = RowSpeeds()
        self._per = {t.name: t.per_node for t in types}
        apps = sorted({j.app for j in jobs})
        names = [t.name for t in types]
        x = {(a, t): single_gpu_xput(jobs[[j.app for j in jobs].index(a)].profs[t]) for a in apps for t in names}
        self.ratio = {(a, s, d): x[a, s] / x[a, d] for a in apps for s in names for d in names}
        self._no_model = np.where(self.cfg_gpus == 1, 1.0, ZERO_ALLOC_GAIN).astype(np.float32)
        self._no_model.flags.writeable = False

    def _row(self, j: int) -> np.ndarray:
        """Job ``j``'s goodput per configuration, normalised to its smallest, ZERO_ALLOC_GAIN where not
        allowed (read-only; computed again when the job's models or gradient statistics change)."""
        job = self.jobs[j]
        key = (job.models, job.grad)
        hit = self._rows.get(j)
        if hit is None or hit[0] != key:
            hit = self._rows[j] = (key, self._row_of(job))
        return hit[1]

    def _row_of(self, job: SiaJob) -> np.ndarray:
        """:meth:`_new_row`, once per run for all jobs alike in what it depends on (application,
        target batch, most GPUs offered, gradient statistics, model per type; read-only)."""
        maxr = job.max_replicas()
        key = (job.app, job.target_bs, maxr, job.grad, job.models_key())
        row = self._alike.get(key)
        if row is None:
            if len(self._alike) > RunMemo.LIMIT:
                self._alike.clear()
            row = self._alike[key] = self._new_row(job, maxr)
            row.flags.writeable = False
        return row

    def _offered(self, k: int, maxr: int, d: str | None) -> tuple:
        """(positions within the type, nodes, GPUs, their key for :meth:`RowSpeeds.columns`) of type
        ``k``'s configurations of at most ``maxr`` GPUs; projected from type ``d`` (not None): their GPUs
        on nodes of ``d``'s size."""
        key = (k, maxr, d)
        hit = self._cfgs.get(key)
        if hit is None:
            t = self.types[k]
            ok = t.cfg_gpus <= maxr
            nodes, gpus = t.cfg_nodes[ok], t.cfg_gpus[ok]
            if d is not None:
                nodes = np.ceil(gpus / self._per[d])
            hit = self._cfgs[key] = (np.flatnonzero(ok).tolist(), nodes, gpus, key)
        return hit

    def _new_row(self, job: SiaJob, maxr: int) -> np.ndarray:
        """The job's goodput per configuration of at most ``maxr`` GPUs (float32, normalised to its
        smallest, ZERO_ALLOC_GAIN where not offered): ``kernels.elastic.row_goodputs`` on its
        :meth:`_plan`. Raises ValueError if no goodput is above ZERO_ALLOC_GAIN."""
        if job.grad is None or all(job.pp[t.name] is None for t in self.types):
            return self._no_model  # (no model anywhere: one GPU of any type, goodput 1)
        cols, ratio = self._plan(job, maxr)
        row = np.empty(self.C, dtype=np.float32)
        sqr, var = job.grad
        if not elastic._kernels().row_goodputs(self._speeds.packed, cols, ratio, sqr, var,
                                               np.float32(ZERO_ALLOC_GAIN), row, self._speeds.work):
            raise ValueError(f"{job.name}: no configuration with a goodput above {ZERO_ALLOC_GAIN}")
        return row

    def _plan(self, job: SiaJob, maxr: int) -> tuple:
        """(:class:`RowSpeeds` column of each configuration, -1 where not offered; the ratio its goodput
        is scaled by) of the job's row: per GPU type its model's goodputs, or where it has none
        (``--project_throughputs``) those of the first type with a model on its configurations, scaled
        by the single-GPU throughput ratio."""
        models = job.models_key()
        key = (job.app, job.target_bs, maxr, models)
        hit = self._speeds.plans.get(key)
        if hit is None:
            self._speeds.make_room(self.C)
            has = [k for k, m in enumerate(models) if m is not None]
            cols, ratio = [-1] * self.C, [1.0] * self.C
            for k, t in enumerate(self.types):
                d = k if k in has else has[0]
                src = self.types[d].name
                pos, nodes, gpus, cfg = self._offered(k, maxr, None if d == k else src)
                pr = job.profs[src]
                first = self._speeds.columns((job.app, src, models[d], cfg, job.target_bs, pr.max_local_bsz),
                                             job.pp[src], pr, nodes, gpus, job.target_bs)
                f = 1.0 if d == k else self.ratio[job.app, t.name, src]
                for i, c in enumerate(pos):
                    cols[t.first + c], ratio[t.first + c] = first + i, f
            hit = self._speeds.plans[key] = (np.array(cols, dtype=np.int64), np.array(ratio))
        return hit

    def restart_factor(self, job: SiaJob, now: float) -> float:
        """The share of the job's age its restarts would leave it (``sia_use_pollux_realloc_factor``)."""
        pen = policy_restart_s(job.name)
        age = now - job.submit
        if age < pen:
            return 1.0
        return max(age - (job.restarts or 0) * pen, 0.0) / (age + pen)

    def costs(self, active: list, now: float) -> tuple:
        """(cost matrix [job, configuration], configuration each job must keep or -1, configuration each
        job holds or -1): the rows, each but at the configuration its job holds times the job's
        :meth:`restart_factor` (``kernels.elastic.restart_discount``), to :func:`power_costs`."""
        rows, held, factor, fixed = [], [], [], []
        for j in active:
            rows.append(self._row(j))
            prev = self.prev.get(j)
            if prev is None:
                held.append(-1)
                factor.append(1.0)
                fixed.append(-1)
            else:
                job = self.jobs[j]
                held.append(prev)
                factor.append(self.restart_factor(job, now))
                fixed.append(prev if job.rescale > 0 else -1)  # (still restarting: keeps its configuration)
        G = np.array(rows)  # (float32 [job, configuration], as np.stack, in fewer steps)
        held = np.array(held, dtype=np.int64)
        elastic._kernels().restart_discount(G, held, np.array(factor))
        return power_costs(G, self.p), np.array(fixed, dtype=np.int64), held

    def optimize(self, active: list, now: float) -> dict:
        """``{job: (type index, node indices within the type)}`` for the allocated jobs."""
        A, fixed, held = self.costs(active, now)
        if self.p < 0:
            key = (A.shape, A.tobytes(), fixed.tobytes())  # (the same problem as last round: the same answer)
            if self._last is not None and self._last[0] == key:
                choice, obj = self._last[1].copy(), self._last[2]
            else:
                choice, obj = solve_allocation(A, self.cfg_type, self.cfg_gpus, self.capacity, fixed, self.lambda_n,
                                               prefer=held)
                self._last = (key, choice.copy(), obj)
        else:
            raise ConfigError("--compat sia: the simulator's Sia minimises with p < 0 (its default -0.5)")
        self.objectives.append((now, obj))
        choice = choice.tolist()
        self.prev = {j: (c if c >= 0 else None) for j, c in zip(active, choice)}
        out, of_type, gpus = {}, self.cfg_type.tolist(), self.cfg_gpus.tolist()
        for k, t in enumerate(self.types):
            mine = [(j, gpus[c]) for j, c in zip(active, choice) if c >= 0 and of_type[c] == k]
            for j, nodes in place_fast(mine, t.nodes, t.per_node).items():
                out[j] = (k, nodes)
        return out


def place_fast(allocs: list, nodes: int, per_node: int) -> dict:
    """Node indices for each ``(job, GPUs)`` on empty nodes (``alloc_to_placement_fast``): largest
    first (ties in the given order), whole free nodes first from a cursor that moves on, then any
    free GPUs from the cursor on."""
    free = np.full(nodes, per_node, dtype=np.int64)
    out, cur = {}, 0
    for j, gpus in sorted(allocs, key=lambda x: -x[1]):
        node, full, got = cur, gpus // per_node, []
        checked = 0
        while checked < nodes and full > 0:
            if free[node] == per_node:
                free[node] = 0
                gpus -= per_node
                got += [node] * per_node
                full -= 1
            node = (node + 1) % nodes
            checked += 1
        while gpus > 0:
            if free[node]:
                take = min(gpus, int(free[node]))
                gpus -= take
                free[node] -= take
                got += [node] * take
            node = (node + 1) % nodes
        out[j] = got
        cur = node
    return out


# ------------------------------------------------------------------------------------------ run
def simulate_sia(names, apps, batch_size, submit_s, cluster, profiles_root: str | None = None,
                 interval_s: float = INTERVAL_S, max_intervals: int = 1_000_000, gate=None) -> dict:
    """Replay the jobs (workload order) as the Sia simulator does on ``cluster`` (a
    :class:`~fastblox.cluster.Cluster` of GPU types). Returns per-job ``start_s``, ``finish_s``,
    ``preemptions``, ``restarts``, ``attained_gpu_s``, ``end_s`` and ``objectives`` (time, MILP objective).
    ``gate`` (``fastblox.mixed.Gate``; None: every submitted job, as the simulator): the jobs the
    native admission lets in."""
    types = cluster_types(cluster, profiles_root is None)
    profs = load_profiles(apps, [t.name for t in types], profiles_root)
    memo = RunMemo()
    jobs = [SiaJob(str(n), a, float(t), NCF_BATCH if a == "ncf" else int(b), profs, [u.name for u in types], memo)
            for n, a, b, t in zip(names, apps, batch_size, submit_s)]
    pol = SiaPolicy(jobs, types)
    with elastic.one_blas_thread():
        _run(jobs, pol, types, np.asarray(submit_s, dtype=np.float64), interval_s, max_intervals, gate)
    f = lambda a, d=-1.0: np.array([d if x is None else x for x in a], dtype=np.float64)  # noqa: E731
    finish = f([j.finish for j in jobs])
    return {"start_s": f([j.first for j in jobs]), "finish_s": finish,
            "preemptions": np.array([j.preempted for j in jobs]), "restarts": np.array([j.restarts or 0 for j in jobs]),
            "attained_gpu_s": f([j.attained_gpu for j in jobs], 0.0), "end_s": float(finish.max()),
            "objectives": np.array(pol.objectives)}


def _run(jobs, pol, types, submit, interval_s, max_intervals, gate=None) -> None:
    from .compat_pollux import to_placement

    order, submit = np.argsort(submit, kind="stable").tolist(), submit.tolist()
    arrived, live, left = 0, [], len(jobs)  # live: the submitted unfinished jobs, in workload order
    now, alloc, let_in = 0.0, {}, set()
    for _ in range(max_intervals):
        if not left:
            return
        ended = 0
        for j in live:  # (only they can hold GPUs; advance does nothing to the others)
            if jobs[j].placement:
                jobs[j].advance(now, interval_s)
                ended += jobs[j].finish is not None
        if ended:
            left -= ended
            live = [j for j in live if jobs[j].finish is None]
        now += interval_s
        first = arrived
        while arrived < len(order) and submit[order[arrived]] <= now:
            arrived += 1
        if arrived > first:
            live = sorted(live + order[first:arrived])
        if gate is None:
            active = live
        else:
            done = [i for i in let_in if jobs[i].finish is not None]
            let_in = (let_in - set(done)) | set(gate.step(now, done))
            active = sorted(let_in)
        if not active:
            continue
        new = pol.optimize(active, now)
        for j in active:
            k, nodes = new.get(j, (None, []))
            if (k, nodes) == alloc.get(j, (None, None)):
                continue
            name = None if k is None else types[k].name
            if jobs[j].cluster != name:
                jobs[j].migrate(name, to_placement(nodes), now)
            else:
                jobs[j].reallocate(to_placement(nodes), now)
        alloc = {j: new.get(j, (None, [])) for j in active}
    raise RuntimeError(f"the replay did not finish in {max_intervals} intervals")


def run(workload, r, cluster, tracked, sim_timer):
    """``--compat sia``: replay ``workload`` (a Sia workload: :func:`fastblox.compat_pollux.read_workload`)
    with resolved spec ``r`` and build the run's :class:`~fastblox.results.Result`."""
    from .compat_pollux import job_table
    from .mixed import admission_gate
    from .results import Result, _jobs_table, _summary
    from .slices import mark

    apps, bs, _ = job_table(workload)
    names = workload.extra.get("source_id", np.arange(len(apps)))
    gate = admission_gate(r.admission, workload.submit_s, workload.num_gpus, cluster.total_gpus)
    with sim_timer() as t:
        out = simulate_sia(list(names), apps, bs, workload.submit_s, cluster, r.sia_profiles, r.round_s, gate=gate)
    finish, first, att_gpu = out["finish_s"], out["start_s"], out["attained_gpu_s"]
    att = att_gpu / np.maximum(workload.num_gpus, 1)
    jobs = lambda: _jobs_table(workload, first, finish, out["preemptions"], att, att_gpu, tracked)  # noqa: E731
    summ = _summary(workload, cluster, tracked, finish, first, out["preemptions"], att_gpu,
                    float(workload.submit_s.min()), out["end_s"], t.seconds, 0.0)
    summ["engine"] = "the Sia simulator's sia (--compat sia)" + (
        "" if r.sia_profiles else ", the Pollux artifact's profiles for every GPU type")
    summ["restarts"] = int(out["restarts"].sum())
    if gate is not None:
        summ["held_jobs"] = int(gate.held().sum())  # (by --admission)
    mark(summ, None)
    return Result(jobs, summ, r.as_dict())
