"""Workload generators.

``blox_paper_workload`` reproduces the workload of Blox's paper experiments bit for bit
(msr-fiddle/blox ``workload/utils.py``: ``get_gavel_like_iter`` and ``poisson_next_arrival_time``,
driven through ``simulator_runner/simulator.py`` with ``random.seed(1)``).
"""

from __future__ import annotations

import math
import random

import numpy as np

from .workload import Workload

#: Blox numbers the jobs of its filtered Philly list and takes durations from a stream of this length.
BLOX_DURATION_STREAM = 20_000


def blox_durations(n: int, seed: int = 1) -> np.ndarray:
    """Total iterations (= seconds, iteration time 1 s) of Blox's ``get_gavel_like_iter`` stream."""
    rng = random.Random(seed)
    m = min(n, BLOX_DURATION_STREAM)
    its = np.empty(m, dtype=np.float64)
    for i in range(m):
        if rng.random() >= 0.8:
            its[i] = 60 * (10 ** rng.uniform(3, 4))
        else:
            its[i] = 60 * (10 ** rng.uniform(1.5, 3))
    if n <= m:
        return its
    return its[np.arange(n) % m]


def blox_arrivals(n: int, load: float, seed: int = 1) -> np.ndarray:
    """Arrival times in whole seconds: Blox's ``poisson_next_arrival_time`` chained from 0.

    After each inter-arrival draw Blox draws one ``randint(0, 8)`` (its model-zoo pick); it is drawn
    and discarded here so the stream stays aligned.
    """
    if not load > 0:
        raise ValueError(f"load must be a positive number of jobs per hour, got {load!r}")
    rng = random.Random(seed)
    out = np.empty(n, dtype=np.float64)
    prev = 0
    for i in range(n):
        hours = -math.log(1.0 - rng.random()) / load
        prev = prev + math.ceil(hours * 60 * 60)
        out[i] = prev
        rng.randint(0, 8)
    return out


def blox_paper_workload(load: float, num_jobs: int = 6000, seed: int = 1) -> Workload:
    """Blox's paper workload: 1-GPU jobs, iteration time 1 s, Poisson arrivals at ``load`` jobs/hour."""
    if num_jobs <= 0:
        raise ValueError(f"num_jobs must be positive, got {num_jobs}")
    iters = blox_durations(num_jobs, seed)
    submit = blox_arrivals(num_jobs, load, seed)
    return Workload.from_arrays(
        submit_s=submit,
        num_gpus=np.ones(num_jobs, dtype=np.int64),
        duration_s=iters.copy(),
        iterations=iters,
        iter_time_s=np.ones(num_jobs, dtype=np.float64),
        name=f"blox(load={float(load)}, seed={seed})",
    )


#: Gavel's job types (stanford-futuredata/gavel, scheduler/job_table.py) — names only; their
#: throughputs live in fastblox.throughput once the heterogeneity model lands.
GAVEL_JOB_TYPES = (
    "ResNet-18",
    "ResNet-50",
    "Transformer",
    "LM",
    "Recommendation",
    "CycleGAN",
    "A3C",
)


def gavel_like_workload(
    num_jobs: int,
    mean_interarrival_s: float = 400.0,
    seed: int = 0,
    multi_gpu: bool = True,
) -> Workload:
    """A Gavel-style synthetic workload: Poisson arrivals, 1/2/4/8-GPU mix, durations 10^U(1.5,4) min.

    Follows the shape of Gavel's ``generate_trace.py`` (exponential inter-arrivals, 80/20 short/long
    durations, multi-GPU scale factors 1 (70%), 2 (10%), 4 (15%), 8 (5%)) with numpy's PCG64 so it is
    fast and deterministic for a given seed. It is not byte-compatible with Gavel's own generator
    (that one uses Python ``random`` and Gavel's oracle throughputs); use the traces in
    ``shared/peer-traces`` for side-by-side runs. Each job gets one of Gavel's 26 job types
    (uniformly, as Gavel's generator does; column ``model``); ``duration_s`` is its run time on
    V100s, so with a throughput table it runs at its type's speed on other GPUs.
    """
    if num_jobs <= 0:
        raise ValueError(f"num_jobs must be positive, got {num_jobs}")
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(mean_interarrival_s, size=num_jobs)
    gaps[0] = 0.0
    submit = np.cumsum(gaps)
    long = rng.random(num_jobs) >= 0.8
    expo = np.where(long, rng.uniform(3, 4, num_jobs), rng.uniform(1.5, 3, num_jobs))
    duration = 60.0 * 10.0**expo
    if multi_gpu:
        u = rng.random(num_jobs)
        gpus = np.select([u < 0.70, u < 0.80, u < 0.95], [1, 2, 4], 8).astype(np.int64)
    else:
        gpus = np.ones(num_jobs, dtype=np.int64)
    from .throughput import ThroughputTable

    types = ThroughputTable.builtin().models  # Gavel's 26 job types (model and batch size)
    model = rng.integers(0, len(types), num_jobs)
    return Workload.from_arrays(
        submit_s=submit,
        num_gpus=gpus,
        duration_s=duration,
        model=np.asarray(types, dtype=object)[model],
        name=f"gavel-like(n={num_jobs}, seed={seed})",
    )
