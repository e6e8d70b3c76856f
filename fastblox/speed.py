"""The speed model of a run: how fast each job progresses on each GPU type, gang size and spread.

Without a throughput table every job runs at 1 work-second per second on any GPU: ``work`` is
``duration_s``. With a table (``throughput=`` a :class:`fastblox.throughput.ThroughputTable`,
``"gavel"`` for the built-in one, or a file), a job whose ``model`` the table knows does its
work in iterations (``iterations``, or ``duration_s`` × its throughput on the reference GPU type
when the trace has no iteration count) at the table's throughput for the type and gang size it
holds; a job of unknown model keeps ``duration_s`` at the reference speed and runs at its GPU
type's relative speed (``ThroughputTable.type_speed``).

Placement effects: a gang spread over several nodes runs at its measured multi-node throughput
where the table has one (Gavel's "unconsolidated" measurements), else at the table's per-model
factor × its rate, else at ``multi_node_factor`` × its rate; and at ``rack_factor`` × that again
when it spans racks.

Jobs of unknown model that run on another number of GPUs than they asked for (elastic policies)
follow Amdahl's law with serial fraction ``serial_fraction``: ``S(n) = n / (1 + s (n - 1))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cluster import Cluster
from .errors import ConfigError, WorkloadError
from .kernels.state import Rates
from .workload import Workload

DEFAULT_SERIAL_FRACTION = 0.05


def amdahl(n: np.ndarray, serial: float) -> np.ndarray:
    n = np.asarray(n, dtype=np.float64)
    return np.where(n > 0, n / (1.0 + serial * (n - 1.0)), 0.0)


def resolve_table(throughput):
    """A ThroughputTable from ``None``/``"none"`` (no table), ``"gavel"``, a path, or a table."""
    if throughput is None or (isinstance(throughput, str) and throughput.lower() in ("none", "")):
        return None
    from .throughput import ThroughputTable

    if isinstance(throughput, ThroughputTable):
        return throughput
    if isinstance(throughput, str) and throughput.lower() in ("gavel", "builtin", "default"):
        return ThroughputTable.builtin()
    return ThroughputTable.read(throughput)


@dataclass(frozen=True, eq=False)
class SpeedModel:
    """Per-job arrays and the rate tables the kernel reads (see ``kernels.state.Jobs``/``Rates``)."""

    cls: np.ndarray  # int64[N]: row of the table, -1 unknown model
    work: np.ndarray  # float64[N]: work units
    ref_rate: np.ndarray  # float64[N]: work units/s on the reference type with the GPUs asked for
    rates: Rates
    reference: str | None
    table_name: str | None
    num_known: int

    def describe(self) -> dict:
        return {"throughput_table": self.table_name, "reference_gpu": self.reference,
                "jobs_with_known_model": self.num_known}


def build_speed_model(w: Workload, c: Cluster, throughput=None, max_gpus: int | None = None,
                      multi_node_factor: float = 1.0, reference: str | None = None,
                      serial_fraction: float = DEFAULT_SERIAL_FRACTION, measured_spread: bool = True) -> SpeedModel:
    """The speed model of ``w`` on ``c`` (``max_gpus``: the largest gang any job may hold)."""
    if not (0 < multi_node_factor <= 1):
        raise ConfigError(f"--multi-node-factor must be in (0, 1], got {multi_node_factor!r}")
    n = len(w)
    g_max = int(max(max_gpus or 0, int(w.num_gpus.max()) if n else 1, 1))
    T = len(c.gpu_types)
    speedup = amdahl(np.arange(g_max + 1), serial_fraction)
    table = resolve_table(throughput)
    if table is None:
        if reference is not None:
            raise ConfigError("--reference-gpu needs a throughput table (--throughput gavel or a file)")
        empty = np.zeros((0, T, g_max + 1))
        rates = Rates(empty, np.ones(T), speedup, np.array([multi_node_factor]), empty.copy())
        return SpeedModel(np.full(n, -1, dtype=np.int64), w.duration_s.astype(np.float64), np.ones(n), rates,
                          None, None, 0)
    ref = (reference or ("v100" if "v100" in table.gpu_types else table.gpu_types[0])).lower()
    if ref not in table.gpu_types:
        raise ConfigError(f"--reference-gpu {ref!r} is not in the throughput table (it has: {', '.join(table.gpu_types)})")
    tab = table.rates(c.gpu_types, g_max)  # [M, T, G+1]; raises on unknown cluster types
    type_speed = np.asarray(table.type_speed(c.gpu_types, ref), dtype=np.float64)
    ref_tab = table.rates((ref,), g_max)[:, 0, :]  # [M, G+1]
    names = w.extra.get("model")
    cls = np.full(n, -1, dtype=np.int64) if names is None else np.asarray(table.model_codes(names), dtype=np.int64)
    gpus = w.num_gpus
    known = cls >= 0
    rr = np.ones(n)
    rr[known] = ref_tab[cls[known], gpus[known]]
    # a known model with no throughput on the reference type at its size: treated as unknown
    bad = known & ~(np.isfinite(rr) & (rr > 0))
    cls[bad] = -1
    rr[bad] = 1.0
    known = cls >= 0
    its = w.iterations
    work = w.duration_s.astype(np.float64).copy()
    use_its = known & np.isfinite(its) & (its > 0)
    work[use_its] = its[use_its]
    est = known & ~use_its
    work[est] = w.duration_s[est] * rr[est]
    node_factor = np.asarray(table.multi_node_factor, dtype=np.float64).copy()
    node_factor[~np.isfinite(node_factor)] = multi_node_factor
    node_factor = np.append(node_factor, multi_node_factor)
    spread = table.multi_node_rates(c.gpu_types, g_max) if measured_spread else np.full_like(tab, np.nan)
    rates = Rates(np.ascontiguousarray(np.nan_to_num(tab, nan=0.0)), type_speed, speedup, node_factor,
                  np.ascontiguousarray(np.nan_to_num(spread, nan=0.0)))
    return SpeedModel(cls, work, rr, rates, ref, getattr(table, "name", None) or "table", int(known.sum()))


def check_sizes(w: Workload, c: Cluster) -> None:
    """Every job fits the cluster's largest GPU type: checked before anything is sized by the
    largest job (a trace with a job of 1e9 GPUs must not allocate for it)."""
    big = w.num_gpus > c.largest_gang()
    if big.any():
        i = int(np.flatnonzero(big)[0])
        _too_big(w, c, i, int(big.sum()))


def _too_big(w: Workload, c: Cluster, i: int, n: int) -> None:
    largest = c.largest_gang()
    if len(c.gpu_types) == 1:
        what = f"asks for {int(w.num_gpus[i])} GPUs but the cluster {c.spec!r} has {largest}"
    else:
        what = (f"asks for {int(w.num_gpus[i])} GPUs but the largest GPU type of {c.spec!r} has {largest} "
                "(a gang runs on one type)")
    raise WorkloadError(f"job {int(w.job_id[i])} {what} ({n} job(s) cannot run; "
                        "drop them with on_bad_rows='drop' when reading the trace)")


def check_runnable(w: Workload, c: Cluster, sm: SpeedModel) -> None:
    """Every job must fit on one GPU type it can run on (a gang never mixes types)."""
    per_type = c.gpus_of_type()
    gpus = w.num_gpus
    ok = np.zeros(len(w), dtype=bool)
    for t in range(len(c.gpu_types)):
        fits = gpus <= per_type[t]
        if sm.rates.tab.shape[0]:
            known = sm.cls >= 0
            r = np.zeros(len(w))
            r[known] = sm.rates.tab[sm.cls[known], t, gpus[known]]
            r[~known] = sm.rates.type_speed[t]
            fits &= r > 0
        elif sm.rates.type_speed[t] <= 0:
            fits[:] = False
        ok |= fits
    if not ok.all():
        i = int(np.flatnonzero(~ok)[0])
        largest = c.largest_gang()
        if len(c.gpu_types) == 1:
            big = f"asks for {int(gpus[i])} GPUs but the cluster {c.spec!r} has {largest}"
        else:
            big = f"asks for {int(gpus[i])} GPUs but the largest GPU type of {c.spec!r} has {largest} (a gang runs on one type)"
        what = (big if gpus[i] > largest else
                f"asks for {int(gpus[i])} GPUs and its model has no throughput on any GPU type of {c.spec!r} large enough")
        raise WorkloadError(f"job {int(w.job_id[i])} {what} ({int((~ok).sum())} job(s) cannot run; "
                            "drop them with on_bad_rows='drop' when reading the trace)")
