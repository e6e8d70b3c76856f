"""Tiresias (Gu et al., NSDI'19): discretized two-dimensional LAS and its Gittins-index variant.

``tiresias`` (2D-LAS, Tiresias' ``dlas-gpu``): a job's service is the GPU-seconds it has run
(GPUs × seconds) since it arrived or was last promoted. K queues split service at K - 1
thresholds (``thresholds``, GPU-seconds; default 3,250 and 7,200, the Tiresias simulator's
default K = 3); queue 0 runs first. A running job moves to the next queue the instant its
service crosses a threshold (a scheduling step in ``events`` mode). Within a queue, running jobs
come first (a job never preempts one of its own queue) and waiting jobs follow in the order they
entered the queue (arrival, demotion or promotion time). Higher queues preempt lower ones, the
lowest-priority running jobs first; jobs that do not fit are skipped (backfilling).
Starvation: with ``promote`` = P > 0 a waiting job of a lower queue that has waited P × the
seconds it ran (both counted since its last promotion, waiting only after it first ran) is
promoted to the tail of queue 0 and its service starts again from 0 (Tiresias' PROMOTE knob;
default 0: off, as in Tiresias' ``dlas-gpu``).

``tiresias-gittins`` (Tiresias' discretized 2D-Gittins, ``dlas-gpu-gittins``): the same queues
(and knob), but within a queue the job with the highest Gittins index of its service goes first
(running or not):
``G(a) = P(S - a <= delta | S > a) / E[min(S - a, delta) | S > a]`` for a job that has had ``a``
GPU-seconds, ``S`` the GPU-service distribution of the jobs (``distribution``: ``workload``, the
GPU-seconds of this workload's own jobs at the reference speed — the distribution, not each
job's own size, is what Tiresias assumes known from history; the default, because a replay's
own trace is the history a deployment on that cluster would have; ``tiresias-yarn``, the
1,001 YARN job sizes Tiresias' simulator ships and uses whatever the workload; or a CSV/text
file of GPU-seconds, one per line, an optional header first) and ``delta`` the quantum (default 3,250 GPU-seconds, Tiresias' default). The index
is tabulated at the distribution's quantiles (at most 4,096 points) and read as a step function.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import parts
from ..errors import ConfigError
from ..kernels import enums
from ..kernels._calls import helper
from ..kernels.engine import _crossing, _gittins, run_level
from . import PREPARE
from ._opts import ascending_list, nonneg, positive

DEFAULT_THRESHOLDS = (3250.0, 7200.0)
DEFAULT_DELTA = 3250.0
MAX_POINTS = 4096


#: named GPU-service distributions (``distribution=NAME``): bundled files of GPU-seconds
DISTRIBUTIONS = {
    # Tiresias' simulator's ``yarn-gput1000.csv``: 1,001 job sizes (GPU-seconds) from a production
    # YARN cluster, the distribution its 2D-Gittins runs use (datasets/peer/README.md)
    "tiresias-yarn": "peer/tiresias_yarn_gput1000.csv",
}


def _dist(v):
    s = str(v).strip()
    if s.lower() == "workload" or s.lower() in DISTRIBUTIONS:
        return s.lower()
    if not Path(s).exists():
        raise ValueError(f"expected 'workload', {', '.join(repr(k) for k in DISTRIBUTIONS)} or an existing file "
                         f"of GPU-seconds, got {s!r}")
    return s


def read_service(src: str) -> np.ndarray:
    """GPU-seconds, one number per line, from a file (or a name of :data:`DISTRIBUTIONS`); a first
    line that is not a number is a header."""
    if src in DISTRIBUTIONS:
        from ..datasets import HERE

        src = str(HERE / DISTRIBUTIONS[src])
    with open(src) as f:
        first = f.readline().split(",")[0].strip()
    try:
        float(first)
        skip = 0
    except ValueError:
        skip = 1
    try:
        service = np.loadtxt(src, delimiter=",", ndmin=1, dtype=np.float64, skiprows=skip)
    except ValueError as e:
        raise ConfigError(f"{src}: cannot read GPU-seconds, one number per line: {e}") from None
    return service.reshape(-1)


_COMMON = (
    parts.Option("thresholds", DEFAULT_THRESHOLDS, ascending_list,
                 "queue limits in GPU-seconds, ascending (K - 1 of them for K queues), e.g. 3250;7200"),
    parts.Option("promote", 0.0, nonneg, "starvation knob: promote a job that waited this many times what it ran (0: off)"),
)

@helper(nrt=False, inline=True)
def tiresias_key(j, t, running, el, jobs, run, pp, restart_s):
    """Queue by service; within a queue running jobs first (a job never preempts one of its own
    queue), then waiting jobs in the order they entered the queue."""
    if running:
        lvl = run_level(pp, j, t, run)
        return 2 * lvl, (run.qentry[j] if lvl == run.rank[j] else _crossing(pp, j, run, lvl))
    return 2 * run.rank[j] + 1, run.qentry[j]


@helper(nrt=False, inline=True)
def gittins_key(j, t, running, el, jobs, run, pp, restart_s):
    """Queue by service, then the highest Gittins index of the service attained."""
    svc = run.attained_gpu[j] - run.svc0[j] + el * run.held[j]
    lvl = run_level(pp, j, t, run) if running else run.rank[j]
    return lvl, -_gittins(pp, svc)


TIRESIAS = parts.Policy(
    "tiresias", enums.POL_TIRESIAS, True, True, key=tiresias_key,
    description="Tiresias' discretized 2D-LAS: queues of attained GPU-seconds, queue-entry order within a queue",
    options=_COMMON,
)
GITTINS = parts.Policy(
    "tiresias-gittins", enums.POL_GITTINS, True, True, key=gittins_key,
    description="Tiresias' 2D-Gittins: the same queues, the highest Gittins index of attained GPU-seconds first",
    options=_COMMON + (
        parts.Option("delta", DEFAULT_DELTA, positive, "Gittins quantum in GPU-seconds"),
        parts.Option("distribution", "workload", _dist, "GPU-service distribution: 'workload' (this workload's own "
                     "jobs), 'tiresias-yarn' (Tiresias' simulator's YARN jobs) or a file of GPU-seconds"),
    ),
)
for _p in (TIRESIAS, GITTINS):
    parts.POLICIES.register(_p.name, _p)


def gittins_table(service: np.ndarray, delta: float, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """The Gittins index of attained service as a step function ``(x, g)``: ``g[i]`` from
    ``x[i]`` on. ``service``: samples of total service (GPU-seconds)."""
    s = np.sort(np.asarray(service, dtype=np.float64))
    s = s[np.isfinite(s) & (s > 0)]
    if len(s) == 0:
        raise ConfigError("Gittins index: the service distribution is empty")
    n = len(s)
    csum = np.concatenate([[0.0], np.cumsum(s)])
    xs = np.unique(np.concatenate([[0.0], np.quantile(s, np.linspace(0, 1, min(max_points, n)), method="lower")]))
    lo = np.searchsorted(s, xs, side="right")  # first sample > a
    hi = np.searchsorted(s, xs + delta, side="right")  # first sample > a + delta
    alive = n - lo
    done = hi - lo
    # E[min(S - a, delta) ; S > a] = sum_{a < S <= a+delta} (S - a) + delta · #(S > a + delta)
    e = (csum[hi] - csum[lo]) - xs * done + delta * (n - hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where((alive > 0) & (e > 0), done / np.where(e > 0, e, 1.0), 0.0)
    return xs, g


def _prepare_gittins(opts: dict, workload, sm) -> dict:
    src = opts["distribution"]
    if src == "workload":
        service = sm.work / sm.ref_rate * workload.num_gpus
    else:
        service = read_service(src)
    x, g = gittins_table(service, opts["delta"])
    return {**opts, "_gittins_x": x, "_gittins_v": g}


PREPARE[GITTINS.name] = _prepare_gittins
