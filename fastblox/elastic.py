"""The elastic job model of the Pollux simulator (petuum/adaptdl ``osdi21-artifact``, ``simulator/``),
from its measured profiles (``datasets/pollux/``), for ``--compat pollux``.

A job is an application (one of :data:`APPLICATIONS`) trained for the application's number of
epochs. Its speed is its *goodput*: throughput (from the measured step times of its placement and
per-GPU batch size) times statistical efficiency (from the gradient noise measured at its global
batch size, epoch by epoch). Progress is counted in the profiles' own unit (steps at the
application's initial batch size, scaled by the statistical gain), so an epoch ends when the
job's progress reaches the epoch's progress in the profiles.

What the simulator computes, and so what this module computes:

* **Throughput**: a placement (GPUs per node) in its lexicographically smallest rotation; if it
  was measured, step and sync time are linear in the per-GPU batch size between the measured
  ones; otherwise they are interpolated linearly (a Delaunay triangulation) over (nodes, GPUs,
  per-GPU batch) of the placement means and the scalability runs. A step with ``k``
  gradient-accumulation steps takes ``step + k * (step - sync)``.
* **Batch size**: a fixed global batch ``B`` on ``r`` GPUs runs ``ceil(B / r)`` per GPU, split
  into ``accum + 1`` atomic batches no larger than the largest measured per-GPU batch; a single
  GPU above the initial batch size accumulates at least once; the whole never exceeds the
  largest validated batch size.
* **Efficiency**: ``gain = (var + sqr) / (var / scale + sqr)`` with ``scale = batch / initial
  batch`` and ``sqr``, ``var`` interpolated linearly between the validated batch sizes around the
  batch; goodput = ``gain / step time`` progress per second.
* **Restarts**: every re-allocation stops the job for :data:`RESTART_S` seconds.

Everything here works on arrays of jobs (numpy); :mod:`fastblox.reference.elastic` holds the plain
one-job-at-a-time twin the tests compare it to.
"""

from __future__ import annotations

import bisect
import csv
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import TraceError

#: application -> (epochs trained, largest per-GPU batch if not the largest measured), as the
#: simulator's ``applications.py`` declares them (no target metric: every job trains all epochs)
APPLICATIONS = {
    "bert": (2, None), "cifar10": (100, None), "ncf": (10, None), "imagenet": (90, None),
    "deepspeech2": (80, None), "yolov3": (50, 8),
}
#: seconds a job is stopped after every (re-)allocation (``Job.reallocate``: ``rescale_time = 30``)
RESTART_S = 30.0
EPS = 1e-8  # the simulator's tolerance for ceil() of a ratio


def data_dir() -> Path:
    from . import datasets  # the installed package data (fastblox.datasets)

    return Path(datasets.__file__).resolve().parent / "pollux"


def _read_table(path: Path, columns: tuple) -> dict:
    """A profile CSV as float columns; a missing column or a bad number names the file, row, column."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise TraceError("empty profile file", path=path)
    head = [h.strip() for h in rows[0]]
    for c in columns:
        if c not in head:
            raise TraceError(f"missing column (has {', '.join(head)})", path=path, column=c)
    try:  # (a column at a time; on a bad cell, the loop below names it)
        return {c: np.array([float(row[k]) for row in rows[1:]], dtype=np.float64).reshape(-1)
                for c, k in ((c, head.index(c)) for c in columns)}
    except (IndexError, ValueError):
        pass
    out = {c: np.empty(len(rows) - 1) for c in columns}
    for i, row in enumerate(rows[1:], start=2):
        for c in columns:
            k = head.index(c)
            try:
                out[c][i - 2] = float(row[k])
            except (IndexError, ValueError):
                raise TraceError(f"not a number: {row[k] if k < len(row) else ''!r}", path=path, row=i,
                                 column=c) from None
    return out


@dataclass(frozen=True, eq=False)
class Profile:
    """One application's measurements (read once: :func:`profile`)."""

    name: str
    batch_sizes: np.ndarray  # validated global batch sizes, ascending
    progress: np.ndarray  # [batch size, epoch] cumulative progress at the end of each epoch
    iteration: np.ndarray  # [batch size, epoch] cumulative iterations at the end of each epoch
    grad_sqr: np.ndarray  # [batch size, epoch]
    grad_var: np.ndarray  # [batch size, epoch]
    placements: dict  # placement id (int, e.g. 24) -> (local_bsz, step_time, sync_time), local_bsz ascending
    points: np.ndarray  # (nodes, replicas, local_bsz) rows: the placement means, then the scalability runs
    values: np.ndarray  # (step_time, sync_time) of each point
    max_epochs: int
    init_batch_size: int
    max_batch_size: int
    min_local_bsz: int
    max_local_bsz: int
    scalability: np.ndarray = None  # (nodes, replicas, local_bsz) of the scalability runs

    @functools.cached_property
    def epoch_progress(self) -> np.ndarray:
        """Progress at the start of epoch e (e = 0..max_epochs): the least over the batch sizes."""
        return np.concatenate([[0.0], self.progress.min(axis=0)])

    @functools.cached_property
    def max_measured_replicas(self) -> int:
        """The most GPUs of a measured placement or scalability run (64 for every application)."""
        return int(self.points[:, 1].max())

    @functools.cached_property
    def _nd(self):
        from scipy.interpolate import LinearNDInterpolator

        return LinearNDInterpolator(self.points, self.values)

    @functools.lru_cache(maxsize=None)  # noqa: B019 (profiles live as long as the process)
    def step_time(self, placement: tuple, local_bsz: int) -> tuple:
        """(step seconds, sync seconds) of one step of ``local_bsz`` per GPU on ``placement`` (GPUs per node)."""
        p = normal_placement(placement)
        pid = int("".join(map(str, p)))
        if pid in self.placements:
            xs, st, sy = self.placements[pid]
            if not xs[0] <= local_bsz <= xs[-1]:
                raise ValueError(f"{self.name}: per-GPU batch {local_bsz} is outside the measured "
                                 f"{xs[0]:g}..{xs[-1]:g} of placement {pid}")
            return float(np.interp(local_bsz, xs, st)), float(np.interp(local_bsz, xs, sy))
        v = self._nd([min(len(p), 16), sum(p), local_bsz])[0]
        if not np.isfinite(v).all():
            raise ValueError(f"{self.name}: no measurements around placement {p} with per-GPU batch {local_bsz}")
        return float(v[0]), float(v[1])

    def step_times(self, placements, atomic_bsz, accum) -> np.ndarray:
        """Seconds per optimizer step of each job (its placement, atomic batch and accumulation steps)."""
        st = np.array([self.step_time(tuple(p), int(b)) for p, b in zip(placements, atomic_bsz)]).reshape(-1, 2)
        return st[:, 0] + (st[:, 0] - st[:, 1]) * accum

    def _bracket(self, batch_size):
        b = np.asarray(batch_size, dtype=np.float64)
        bs = self.batch_sizes
        lo = np.searchsorted(bs, b, side="right") - 1
        hi = np.searchsorted(bs, b, side="left")
        if (lo < 0).any() or (hi >= len(bs)).any():
            bad = b[(lo < 0) | (hi >= len(bs))][0]
            raise ValueError(f"{self.name}: batch size {bad:g} is outside the validated {bs[0]}..{bs[-1]}")
        return b, lo, hi

    def _interp(self, table, batch_size, epoch):
        """``table[batch, epoch]`` interpolated linearly between the validated batch sizes around each batch."""
        b, lo, hi = self._bracket(batch_size)
        e = np.asarray(epoch)
        vlo, vhi = table[lo, e], table[hi, e]
        blo, bhi = self.batch_sizes[lo], self.batch_sizes[hi]
        same = lo == hi
        den = np.where(same, 1.0, bhi - blo)
        return np.where(same, vlo, ((b - blo) * vhi + (bhi - b) * vlo) / den)

    @functools.cached_property
    def _batch_list(self) -> list:
        return self.batch_sizes.tolist()

    @functools.lru_cache(maxsize=None)  # noqa: B019 (profiles live as long as the process)
    def grad_stats_at(self, batch_size: float, epoch: int) -> tuple:
        """``grad_stats`` of one batch size and epoch, as floats (remembered): :meth:`_interp`'s
        operations on Python floats (the same doubles; tests compare them)."""
        bs, b = self._batch_list, float(batch_size)
        lo, hi = bisect.bisect_right(bs, b) - 1, bisect.bisect_left(bs, b)
        if lo < 0 or hi >= len(bs):
            self._bracket(b)  # (raises)
        if lo == hi:
            return float(self.grad_sqr[lo, epoch]), float(self.grad_var[lo, epoch])
        blo, bhi = bs[lo], bs[hi]
        return tuple(((b - blo) * float(t[hi, epoch]) + (bhi - b) * float(t[lo, epoch])) / (bhi - blo)
                     for t in (self.grad_sqr, self.grad_var))

    def grad_stats(self, batch_size, epoch) -> tuple:
        """(grad_sqr, grad_var) during ``epoch`` at global ``batch_size`` (arrays broadcast)."""
        return self._interp(self.grad_sqr, batch_size, epoch), self._interp(self.grad_var, batch_size, epoch)

    def iterations(self, batch_size, epoch) -> np.ndarray:
        """Iterations done after ``epoch`` epochs' rows (the simulator's ``get_iteration``)."""
        return self._interp(self.iteration, batch_size, epoch)

    def gains(self, batch_size) -> np.ndarray:
        """[job, epoch] statistical gain of each batch size over every epoch."""
        b = np.atleast_1d(np.asarray(batch_size, dtype=np.float64))[:, None]
        e = np.arange(self.max_epochs)[None, :]
        sqr, var = self.grad_stats(b, e)
        return gain(sqr, var, b / self.init_batch_size)


def gain(grad_sqr, grad_var, scale):
    """Statistical gain of a batch ``scale`` times the initial one (progress per step)."""
    return (grad_var + grad_sqr) / (grad_var / scale + grad_sqr)


def normal_placement(placement) -> tuple:
    """A placement without empty nodes in its lexicographically smallest rotation."""
    p = tuple(int(x) for x in placement if x)
    return min(p[i:] + p[:i] for i in range(len(p))) if p else ()


def packed(num_replicas: int, per_node: int = 4) -> tuple:
    """``num_replicas`` GPUs on as few nodes as possible: (4, 4, ..., rest)."""
    return (per_node,) * (num_replicas // per_node) + ((num_replicas % per_node,) if num_replicas % per_node else ())


def fixed_batch_config(batch_size, num_replicas, init_batch_size, max_batch_size, max_local_bsz,
                       single_accum: str = "above-init"):
    """(atomic batch, accumulation steps) of a fixed global batch on ``num_replicas`` GPUs (arrays).
    ``single_accum``: when one GPU accumulates at least once: ``"above-init"`` (a batch above the
    initial one: the simulator's jobs) or ``"always"`` (Optimus' step-time predictions)."""
    b = np.asarray(batch_size, dtype=np.float64)
    r = np.asarray(num_replicas, dtype=np.int64)
    local = np.ceil(b / r - EPS)
    accum = (np.ceil(local / max_local_bsz - EPS) - 1).astype(np.int64)
    one = r == 1 if single_accum == "always" else (r == 1) & (b > init_batch_size)
    accum = np.where(one, np.maximum(accum, 1), accum)
    atomic = np.ceil(local / (accum + 1) - EPS).astype(np.int64)
    atomic = np.minimum(atomic, (max_batch_size / (r * (accum + 1))).astype(np.int64))
    return atomic, accum


@functools.lru_cache(maxsize=None)
def _validation(d: Path, name: str, max_epochs: int) -> list:
    """[(batch size, {column: per-epoch values})] of ``d``'s validation files (read once: the Sia
    simulator's GPU types share them; read-only)."""
    vals = []
    for bsz, p in _validation_files(d):
        t = _read_table(p, ("progress", "iteration", "grad_sqr", "grad_var"))
        if len(t["progress"]) < max_epochs:
            raise TraceError(f"{len(t['progress'])} epochs, {name} trains {max_epochs}", path=p)
        vals.append((bsz, {k: v[:max_epochs] for k, v in t.items()}))
    for _, t in vals:
        for v in t.values():
            v.flags.writeable = False
    return vals


def _validation_files(d: Path) -> list:
    out = []
    for p in d.glob("validation-*.csv"):
        try:
            out.append((int(p.stem.split("-")[-1]), p))
        except ValueError:
            raise TraceError("a validation file's name must end in its batch size", path=p) from None
    if not out:
        raise TraceError("no validation-<batch size>.csv files", path=d)
    return sorted(out)


@functools.lru_cache(maxsize=None)
def profile(name: str, root: str | None = None, suffix: str | None = None, max_local_bsz: int | None = None) -> Profile:
    """The profiles of application ``name`` (``root``: the folder of the application folders;
    default the bundled ``datasets/pollux``). ``suffix``: read ``placements-SUFFIX.csv`` and
    ``scalability-SUFFIX.csv`` (the Sia simulator's per-GPU-type files) with ``max_local_bsz`` as
    the largest per-GPU batch (None: the largest measured) instead of the Pollux simulator's."""
    if name not in APPLICATIONS:
        raise ValueError(f"unknown application {name!r}; the Pollux simulator's: {', '.join(sorted(APPLICATIONS))}")
    max_epochs, max_local = APPLICATIONS[name]
    if suffix is not None:
        max_local = max_local_bsz
    tail = "" if suffix is None else f"-{suffix}"
    d = Path(root) if root is not None else data_dir()
    d = d / name
    vals = _validation(d, name, max_epochs)
    pl = _read_table(d / f"placements{tail}.csv", ("placement", "local_bsz", "step_time", "sync_time"))
    sc = _read_table(d / f"scalability{tail}.csv", ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"))
    placements = {}
    ids = pl["placement"].astype(np.int64)
    for pid in np.unique(ids):
        m = ids == pid
        o = np.argsort(pl["local_bsz"][m], kind="stable")
        placements[int(pid)] = tuple(pl[k][m][o] for k in ("local_bsz", "step_time", "sync_time"))
    digits = [str(int(i)) for i in ids]
    nodes = np.array([len(s) for s in digits], dtype=np.float64)
    reps = np.array([sum(map(int, s)) for s in digits], dtype=np.float64)
    # the means over the placements of each (nodes, replicas, local_bsz), in sorted key order, then the scalability rows
    keys = np.stack([nodes, reps, pl["local_bsz"]], axis=1)
    uk, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    cnt = np.bincount(inv, minlength=len(uk))
    means = np.stack([np.bincount(inv, weights=pl[k], minlength=len(uk)) / cnt for k in ("step_time", "sync_time")],
                     axis=1)
    points = np.concatenate([uk, np.stack([sc["num_nodes"], sc["num_replicas"], sc["local_bsz"]], axis=1)])
    values = np.concatenate([means, np.stack([sc["step_time"], sc["sync_time"]], axis=1)])
    bs = np.array([b for b, _ in vals], dtype=np.int64)
    stack = lambda k: np.stack([v[k] for _, v in vals])  # noqa: E731
    return Profile(
        name=name, batch_sizes=bs, progress=stack("progress"), iteration=stack("iteration"),
        grad_sqr=stack("grad_sqr"), grad_var=stack("grad_var"), placements=placements, points=points, values=values,
        max_epochs=max_epochs, init_batch_size=int(bs[0]), max_batch_size=int(bs[-1]),
        min_local_bsz=int(pl["local_bsz"].min()), max_local_bsz=int(max_local or pl["local_bsz"].max()),
        scalability=points[len(uk):, :],
    )


def isolated_run_s(app: str, batch_size: int, num_replicas: int) -> float:
    """Seconds ``app`` takes to train alone at ``batch_size`` on ``num_replicas`` GPUs packed on
    nodes of 4 (no restart): the job's length in fastblox's terms (its ``duration_s``)."""
    pr = profile(app)
    atomic, accum = fixed_batch_config(batch_size, num_replicas, pr.init_batch_size, pr.max_batch_size,
                                       pr.max_local_bsz)
    b = float(num_replicas * atomic * (accum + 1))
    t = pr.step_times([packed(num_replicas)], [atomic], np.array([accum]))[0]
    work = np.diff(pr.epoch_progress)
    return float((work / (pr.gains(b)[0] / t)).sum())


# ------------------------------------------------------------------------------------------ the agent's model
# What a Pollux job learns about itself while it runs (adaptdl's goodput model, as the simulator's
# jobs fit it): step time = (compute^gamma + network^gamma)^(1/gamma) with compute = alpha_c +
# beta_c * atomic batch and network = alpha + beta * max(replicas - 2, 0) over the slowest link
# (inter-node: _n, intra-node: _r), accumulation steps adding compute each. Parameters, in order:
PERF_PARAMS = ("alpha_c", "beta_c", "alpha_n", "beta_n", "alpha_r", "beta_r", "gamma")
TINY = 1e-8
GEOM_POINTS = 50  # batch sizes tried between the smallest and the largest (np.geomspace's default)


def _network_time(pp, nodes, reps):
    inter, intra = nodes > 1, reps > 1
    alpha = np.where(inter, pp[2], np.where(intra, pp[4], TINY))
    beta = np.where(inter, pp[3], np.where(intra, pp[5], TINY))
    return alpha + beta * np.maximum(reps - 2, TINY)


def _log_optim_time(gamma, accum_time, network_time):
    return np.log(accum_time ** gamma + network_time ** gamma) / gamma


def model_throughput(pp, nodes, reps, atomic, accum):
    """Samples per second the fitted model ``pp`` predicts (arrays broadcast)."""
    accum_time = pp[0] + pp[1] * atomic
    optim = np.exp(_log_optim_time(pp[6], accum_time, _network_time(pp, nodes, reps)))
    return reps * atomic * (accum + 1) / (accum * accum_time + optim)


def model_efficiency(grad, init_batch_size, batch_size):
    """Statistical efficiency of ``batch_size`` (progress per sample relative to the initial batch)."""
    sqr, var = grad
    scale = batch_size / init_batch_size
    denom = var / scale + sqr
    return np.where(denom > 0, (var + sqr) / np.where(denom > 0, denom, 1.0), 1.0) / scale


def best_batch(pp, grad, init_batch_size, nodes, reps, max_batch_size, min_atomic, max_atomic, reuse=None):
    """(goodput, atomic batch, accumulation steps) of the best of :data:`GEOM_POINTS` global batch
    sizes (geometric, from the smallest allowed to ``max_batch_size``) on ``nodes``/``reps`` (1-D
    arrays); a job on one GPU above the initial batch accumulates at least once. The arithmetic
    between numpy's powers, log and exp is compiled (``kernels.elastic.batch_times``,
    ``batch_pick``): :func:`best_batch_numpy`'s bits (the tests compare them). The same as
    :func:`pick_batch` of :func:`batch_speeds` (the part without ``grad``, to keep across calls).
    ``reuse``: a dict for this model ``pp`` (and these limits) only, emptied by the caller when
    they change: the :func:`batch_speeds` of each set of configurations are kept there and reused."""
    if reuse is None:
        return pick_batch(batch_speeds(pp, init_batch_size, nodes, reps, max_batch_size, min_atomic, max_atomic), grad)
    key = np.asarray(nodes, dtype=np.float64).tobytes(), np.asarray(reps, dtype=np.float64).tobytes()
    speeds = reuse.get(key)
    if speeds is None:
        speeds = reuse[key] = batch_speeds(pp, init_batch_size, nodes, reps, max_batch_size, min_atomic, max_atomic)
    return pick_batch(speeds, grad)


def batch_speeds(pp, init_batch_size, nodes, reps, max_batch_size, min_atomic, max_atomic) -> tuple:
    """:func:`best_batch`'s candidates and their step times under model ``pp`` (what does not
    depend on the gradient statistics): (atomic, accum, batch, allowed, scale, compute time,
    optimizer-step time), each [point, config]."""
    nodes = np.asarray(nodes, dtype=np.float64)
    reps = np.asarray(reps, dtype=np.float64)
    atomic, accum, batch, ok, scale, link, spread = _batch_grid(init_batch_size, max_batch_size, min_atomic, max_atomic,
                                                                nodes.tobytes(), reps.tobytes())
    P, K = atomic.shape
    accum_time, network = np.empty((P, K)), np.empty(K)
    _kernels().batch_times(pp, atomic, link, spread, accum_time, network)
    g = pp[6]
    optim = accum_time ** g  # (numpy's powers, log and exp on _log_optim_time's values, in its order)
    optim += network ** g
    np.log(optim, out=optim)
    optim /= g
    np.exp(optim, out=optim)
    return atomic, accum, batch, ok, scale, accum_time, optim


def pick_batch(speeds, grad, out=None) -> tuple:
    """:func:`best_batch` from its :func:`batch_speeds` and the gradient statistics ``grad``
    (into ``out``, :func:`pick_scratch` of as many configurations, if given)."""
    atomic, accum, batch, ok, scale, accum_time, optim = speeds
    if out is None:
        out = pick_scratch(atomic.shape[1])
    sqr, var = grad
    _kernels().batch_pick(batch, accum, accum_time, optim, scale, ok, float(sqr), float(var), atomic, *out)
    return out


def pick_scratch(k: int) -> tuple:
    """:func:`pick_batch`'s outputs for ``k`` configurations: (goodput, atomic batch, accumulation steps)."""
    return np.empty(k), np.empty(k, dtype=np.int64), np.empty(k, dtype=np.int64)


def pick_one(speeds, grad, out) -> tuple:
    """(atomic batch, accumulation steps) of :func:`pick_batch` on one configuration, as ints (``out``:
    :func:`pick_scratch` of 1, overwritten)."""
    _, atomic, accum = pick_batch(speeds, grad, out)
    return int(atomic[0]), int(accum[0])


@functools.cache
def _kernels():
    """``kernels.elastic`` (imported at the first call: importing fastblox compiles nothing)."""
    from .kernels import elastic as k

    return k


def best_batch_numpy(pp, grad, init_batch_size, nodes, reps, max_batch_size, min_atomic, max_atomic):
    """:func:`best_batch` in numpy (its twin): :func:`model_throughput` x :func:`model_efficiency`."""
    nodes = np.asarray(nodes, dtype=np.float64)
    reps = np.asarray(reps, dtype=np.float64)
    atomic, accum, batch, ok = _batch_grid(init_batch_size, max_batch_size, min_atomic, max_atomic, nodes.tobytes(),
                                           reps.tobytes())[:4]
    good = model_throughput(pp, nodes, reps, atomic, accum) * model_efficiency(grad, init_batch_size, batch)
    good = np.where(ok, good, 0.0)
    k = np.argmax(good, axis=0)
    cols = np.arange(good.shape[1])
    return good[k, cols], atomic[k, cols], accum[k, cols]


@functools.lru_cache(maxsize=1 << 14)
def _batch_grid(init_batch_size, max_batch_size, min_atomic, max_atomic, nodes: bytes, reps: bytes) -> tuple:
    """(atomic batch, accumulation steps, global batch, allowed, global batch / initial, the link
    (0: inter-node, 1: intra-node, 2: none), GPUs beyond 2 (at least TINY)) of best_batch's
    candidates: they depend on the job's limits and configurations only, not on its model (computed
    once; read-only)."""
    nodes, reps = np.frombuffer(nodes, dtype=np.float64), np.frombuffer(reps, dtype=np.float64)
    lo = np.maximum(init_batch_size, min_atomic * reps)
    bs = np.geomspace(lo, max_batch_size, GEOM_POINTS)  # (points, jobs)
    local = bs / reps
    accum = np.ceil(local / max_atomic - TINY) - 1
    accum = np.where((reps == 1) & (local > init_batch_size + TINY), np.maximum(accum, 1), accum).astype(np.int64)
    atomic = np.ceil(local / (accum + 1) - TINY).astype(np.int64)
    batch = reps * atomic * (accum + 1)
    out = (atomic, accum, batch, (min_atomic <= atomic) & (atomic <= max_atomic), batch / init_batch_size,
           np.where(nodes > 1, 0, np.where(reps > 1, 1, 2)), np.maximum(reps - 2, TINY))
    for a in out:
        a.flags.writeable = False
    return out


def _fit_objective(p, nodes, reps, atomic, accum_time, step_time):
    """adaptdl's fitting loss (RMS log errors of compute and step time, a pull of gamma towards 1
    and of the betas towards 0) and its gradient in the 7 parameters."""
    inter = nodes > 1
    intra = ~inter & (reps > 1)
    m = np.maximum(reps - 2, TINY)
    A = p[0] + p[1] * atomic
    N = _network_time(p, nodes, reps)
    g = p[6]
    Ag, Ng = A ** g, N ** g
    S = Ag + Ng
    L = np.log(S) / g
    n = len(A)
    d1 = np.log(A) - np.log(accum_time)
    d2 = L - np.log(step_time)
    e1, e2 = np.sqrt(np.mean(d1 ** 2)), np.sqrt(np.mean(d2 ** 2))
    f = e1 + e2 + 1e-3 * (g - 1) ** 2 + 1e-2 * ((p[3] / p[2]) ** 2 + (p[5] / p[4]) ** 2)
    w1 = d1 / (n * e1) if e1 > 0 else np.zeros(n)
    w2 = d2 / (n * e2) if e2 > 0 else np.zeros(n)
    dA = w1 / A + w2 * Ag / (A * S)  # d f / d A per observation
    dN = w2 * Ng / (N * S)
    dg = np.sum(w2 * (-np.log(S) / g ** 2 + (Ag * np.log(A) + Ng * np.log(N)) / (g * S)))
    grad = np.array([
        dA.sum(), (dA * atomic).sum(),
        (dN * inter).sum() - 2e-2 * p[3] ** 2 / p[2] ** 3, (dN * inter * m).sum() + 2e-2 * p[3] / p[2] ** 2,
        (dN * intra).sum() - 2e-2 * p[5] ** 2 / p[4] ** 3, (dN * intra * m).sum() + 2e-2 * p[5] / p[4] ** 2,
        dg + 2e-3 * (g - 1),
    ])
    return f, grad


class one_blas_thread:
    """Context: the loaded OpenBLAS libraries (numpy's, scipy's) on one thread, as before on exit.
    L-BFGS-B on 7 parameters calls BLAS on vectors of 7; OpenBLAS' worker threads then cost more
    than the work (7x on 2 busy cores). Linux only; elsewhere it does nothing."""

    _SYMS = ("scipy_openblas_{}_num_threads64_", "scipy_openblas_{}_num_threads", "openblas_{}_num_threads64_",
             "openblas_{}_num_threads")

    def __enter__(self):
        import ctypes

        import scipy.optimize  # noqa: F401 (scipy's own OpenBLAS loads with it: limit it too, not only numpy's)

        self._saved = []
        try:
            with open("/proc/self/maps") as f:
                libs = {ln.split()[-1] for ln in f if "openblas" in ln.rsplit("/", 1)[-1].lower()}
        except OSError:
            return self
        for lib in sorted(libs):
            try:
                h = ctypes.CDLL(lib)
            except OSError:
                continue
            for sym in self._SYMS:
                get, set_ = getattr(h, sym.format("get"), None), getattr(h, sym.format("set"), None)
                if get is not None and set_ is not None:
                    self._saved.append((set_, get()))
                    set_(1)
                    break
        return self

    def __exit__(self, *exc):
        for set_, n in self._saved:
            set_(n)
        return False


def fit_perf_params(nodes, reps, atomic, accum_time, step_time, tol: float | None = None,
                    kernel: bool = False, compiled: bool = False) -> np.ndarray:
    """The model's parameters fitted (bounded L-BFGS-B on log errors) to the configurations a job
    has run: each one's nodes, GPUs, atomic batch, compute seconds (step - sync) and step seconds.
    Parameters the observations cannot tell are pinned as adaptdl pins them: one atomic batch size
    fixes alpha_c to half the mean compute time; no multi-node (single-node multi-GPU) run fixes
    the inter-node (intra-node) terms to their floor; no run above 2 GPUs fixes both betas.
    ``tol``: the minimiser's tolerance (the Sia simulator's fit passes 1e-5; None: scipy's default).
    ``kernel``: evaluate the loss with :class:`FitLoss` (compiled, the same bits) and drive the
    minimiser with :func:`lbfgsb` (scipy's own, without its wrappers): the same fit, faster.
    ``compiled``: the whole fit in one compiled call (``kernels.lbfgsb``: scipy's L-BFGS-B
    followed step by step, the loss's logs and powers libm's): the same minimiser on a loss that
    differs in the last bits, so not always the same bits (tests/test_lbfgsb.py measures how far)."""
    if compiled:
        return _fit_compiled(nodes, reps, atomic, accum_time, step_time, tol)
    from scipy.optimize import Bounds, minimize

    nodes, reps, atomic = (np.asarray(x, dtype=np.float64) for x in (nodes, reps, atomic))
    accum_time, step_time = np.asarray(accum_time, dtype=np.float64), np.asarray(step_time, dtype=np.float64)
    p0, lo, hi, free = _fit_start(nodes, reps, atomic, accum_time)
    args = (nodes, reps, atomic, accum_time, step_time)
    # (the free parameters only, with the exact gradient, as adaptdl's autograd gives it)
    def f(x):
        p = p0.copy()
        p[free] = x
        v, g = _fit_objective(p, *args)
        return v, g[free]

    if kernel:
        f = FitLoss(p0, free, *args)  # noqa: F811

    with np.errstate(all="ignore"):
        if kernel:
            x = lbfgsb(f, p0[free], lo[free], hi[free], tol)
        else:
            x = minimize(f, p0[free], jac=True, method="L-BFGS-B", bounds=Bounds(lo[free], hi[free]), tol=tol).x
    p = p0.copy()
    p[free] = x
    return _pin_inter(p, nodes)


def _fit_start(nodes, reps, atomic, accum_time) -> tuple:
    """(start, lower and upper bounds, free mask) of the fit's 7 parameters, those the observations
    cannot tell pinned (lower = upper = start; :func:`fit_perf_params`)."""
    p0 = np.array([1e-1, 1e-2] * 3 + [1.0 + 1e-3])
    lo = np.array([1e-8, 1e-8] * 3 + [1.0])
    hi = np.array([np.inf, np.inf] * 3 + [10.0])
    if len(np.unique(atomic)) == 1:
        p0[0] = lo[0] = hi[0] = np.mean(accum_time) / 2
    fixed = []
    if not np.any(nodes > 1):
        fixed += [2, 3]
    if not np.any((nodes == 1) & (reps > 1)):
        fixed += [4, 5]
    if not np.any(reps > 2):
        fixed += [3, 5]
    for k in fixed:
        p0[k] = hi[k] = lo[k]
    return p0, lo, hi, lo < hi


def _pin_inter(p, nodes) -> np.ndarray:
    """Without a multi-node run, the inter-node terms at least 1.1 times the intra-node ones (adaptdl's rule)."""
    if not np.any(nodes > 1):
        p[2] = max(p[2], p[4] * 1.1)
        p[3] = max(p[3], p[5] * 1.1)
    return p


def _fit_compiled(nodes, reps, atomic, accum_time, step_time, tol) -> np.ndarray:
    """The fit of ``kernels.lbfgsb.fit_model`` with ``minimize``'s options for ``tol``. No scipy
    import here: even of a loaded module it costs ~0.3 us, a tenth of the wrapper's time before."""
    f64 = np.float64
    out = np.empty(7)
    ftol, pgtol = (2.2204460492503131e-09, 1e-5) if tol is None else (tol, tol)
    _fit_model()(np.asarray(nodes, f64), np.asarray(reps, f64), np.asarray(atomic, f64), np.asarray(accum_time, f64),
                 np.asarray(step_time, f64), ftol, pgtol, out)
    return out


@functools.cache
def _fit_model():
    from .kernels.lbfgsb import fit_model

    return fit_model


@functools.cache
def _fit_kernels() -> tuple:
    from .kernels.elastic import fit_sums, fit_terms

    return fit_sums, fit_terms


class FitLoss:
    """``_fit_objective`` over the free parameters, bit for bit, about ten times faster: numpy
    computes its powers and logs (on the same values, so with the same bits: numpy's SIMD log and
    pow are not libm's), the compiled ``kernels.elastic.fit_terms`` and ``fit_sums`` the rest in
    the same order with numpy's pairwise sums, and the scalar terms are the same expressions."""

    def __init__(self, p0, free, nodes, reps, atomic, accum_time, step_time):
        self.p0, self.free = p0, free
        self.nodes, self.reps, self.atomic = nodes, reps, atomic
        self.n = n = len(nodes)
        self.log_acc, self.log_step = np.log(accum_time), np.log(step_time)
        self.AN, self.work, self.sums = np.empty(2 * n), np.empty(9 * n), np.empty(9)

    def __call__(self, x):
        fit_sums, fit_terms = _fit_kernels()
        p = self.p0.copy()
        p[self.free] = x
        n, AN, s = self.n, self.AN, self.sums
        fit_terms(p, self.nodes, self.reps, self.atomic, AN)
        g = p[6]
        P = AN ** g
        S = P[:n] + P[n:]
        fit_sums(g, g ** 2, AN, P, np.log(AN), S, np.log(S), self.log_acc, self.log_step, self.nodes, self.reps,
                 self.atomic, self.work, s)
        # (the scalar terms on Python floats: the same IEEE operations and libm pow as on numpy's scalars, faster)
        s, (_, _, p2, p3, p4, p5, g) = s.tolist(), p.tolist()
        f = s[0] + s[1] + 1e-3 * (g - 1) ** 2 + 1e-2 * ((p3 / p2) ** 2 + (p5 / p4) ** 2)
        grad = np.array([
            s[2], s[3],
            s[4] - 2e-2 * p3 ** 2 / p2 ** 3, s[5] + 2e-2 * p3 / p2 ** 2,
            s[6] - 2e-2 * p5 ** 2 / p4 ** 3, s[7] + 2e-2 * p5 / p4 ** 2,
            s[8] + 2e-3 * (g - 1),
        ])
        return f, grad[self.free]


def lbfgsb(fun, x0, lo, hi, tol: float | None = None) -> np.ndarray:
    """``scipy.optimize.minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=Bounds(lo, hi),
    tol=tol).x`` with the same calls of scipy's L-BFGS-B routine (``_lbfgsb.setulb``) in the same
    order, without the wrappers around it (they cost more than the 7-parameter fit's loss):
    ``scipy.optimize._lbfgsb_py._minimize_lbfgsb``'s loop with its defaults (10 corrections, 20
    line-search steps, at most 15,000 iterations and evaluations) and no callback. The same
    result bit for bit (tests/test_compat_pollux.py compares the two). scipy before 1.15 (whose
    routine was another): ``minimize`` itself."""
    import scipy
    from scipy.optimize import _lbfgsb

    if tuple(int(x) for x in scipy.__version__.split(".")[:2]) < (1, 15):  # (before 1.15: another routine)
        from scipy.optimize import Bounds, minimize

        return minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=Bounds(lo, hi), tol=tol).x
    m, maxls, maxiter, maxfun = 10, 20, 15000, 15000
    ftol, pgtol = (2.2204460492503131e-09, 1e-5) if tol is None else (tol, tol)
    factr = ftol / np.finfo(float).eps
    x = np.clip(np.asarray(x0, dtype=np.float64).ravel(), lo, hi)
    n = len(x)
    nbd = np.zeros(n, np.int32)
    low, up = np.zeros(n), np.zeros(n)
    fin_lo, fin_hi = np.isfinite(lo), np.isfinite(hi)
    low[fin_lo], up[fin_hi] = lo[fin_lo], hi[fin_hi]
    nbd[:] = np.where(fin_lo, np.where(fin_hi, 2, 1), np.where(fin_hi, 3, 0))
    f, g = np.array(0.0), np.zeros(n)
    wa = np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m)
    iwa, task, ln_task = np.zeros(3 * n, np.int32), np.zeros(2, np.int32), np.zeros(2, np.int32)
    lsave, isave, dsave = np.zeros(4, np.int32), np.zeros(44, np.int32), np.zeros(29)
    last_x, last, nfev, nit = None, None, 0, 0
    while True:
        _lbfgsb.setulb(m, x, low, up, nbd, f, g, factr, pgtol, wa, iwa, task, lsave, isave, dsave, maxls, ln_task)
        t = int(task[0])
        if t == 3:  # f and g at x (scipy evaluates each new x once)
            xl = x.tolist()  # (a list compares as np.array_equal does, faster)
            if last_x is None or xl != last_x:
                last_x, last = xl, fun(x.copy())
                nfev += 1
            f, g = last[0], np.array(last[1], dtype=np.float64, ndmin=1)  # (a copy, as atleast_1d + astype)
        elif t == 1:  # a new iteration
            nit += 1
            if nit >= maxiter:
                task[0], task[1] = 5, 504
            elif nfev > maxfun:
                task[0], task[1] = 5, 502
        else:
            return x
