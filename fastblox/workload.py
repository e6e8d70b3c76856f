"""The columnar job table every part of fastblox works on.

A :class:`Workload` holds one numpy array per field, all of length N, sorted by submit time (ties
by input order). Units are in the names: ``submit_s`` seconds from the trace's start,
``duration_s`` run time in seconds at the reference speed on ``num_gpus`` GPUs, ``iterations``
total iterations (NaN when unknown) and ``iter_time_s`` seconds per iteration (NaN when unknown).
Optional string/number columns (user, vc, model, status, gpu_type, ...) live in ``extra``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from .errors import WorkloadError

CORE_COLUMNS = ("job_id", "submit_s", "num_gpus", "duration_s", "iterations", "iter_time_s")


def _first_rows(mask: np.ndarray, k: int = 5) -> str:
    rows = np.flatnonzero(mask)
    shown = ", ".join(str(int(r)) for r in rows[:k])
    more = f" and {len(rows) - k} more" if len(rows) > k else ""
    return f"{len(rows)} row(s) ({shown}{more})"


@dataclass(frozen=True, eq=False)
class Workload:
    job_id: np.ndarray
    submit_s: np.ndarray
    num_gpus: np.ndarray
    duration_s: np.ndarray
    iterations: np.ndarray
    iter_time_s: np.ndarray
    extra: dict = field(default_factory=dict)
    name: str = "workload"
    #: per-reason counts of rows dropped while reading (filled by trace readers)
    dropped: dict = field(default_factory=dict)
    #: per reason, where its first rows are in the file: ``(row numbers, label, note)``, e.g.
    #: ``([4, 9], "line", "line numbers count the header as line 1")`` (filled by trace readers)
    dropped_where: dict = field(default_factory=dict)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(
        cls,
        submit_s,
        num_gpus,
        duration_s=None,
        job_id=None,
        iterations=None,
        iter_time_s=None,
        name: str = "workload",
        dropped: dict | None = None,
        dropped_where: dict | None = None,
        **extra,
    ) -> "Workload":
        """Validate, normalise dtypes and sort by submit time (stable).

        Give ``duration_s``, or ``iterations`` with ``iter_time_s``. Raises :class:`WorkloadError`
        naming the column and the first offending rows."""
        submit = np.asarray(submit_s, dtype=np.float64).copy()
        n = submit.shape[0]
        gpus_raw = np.asarray(num_gpus)
        if gpus_raw.shape != (n,):
            raise WorkloadError(f"num_gpus has {gpus_raw.shape} entries, submit_s has {n}")
        if gpus_raw.dtype.kind == "f":
            bad = ~np.isfinite(gpus_raw) | (gpus_raw != np.round(gpus_raw))
            if bad.any():
                raise WorkloadError(f"column 'num_gpus' must hold whole numbers: {_first_rows(bad)}")
        gpus = gpus_raw.astype(np.int64)
        its = np.full(n, np.nan) if iterations is None else np.asarray(iterations, dtype=np.float64).copy()
        itt = np.full(n, np.nan) if iter_time_s is None else np.asarray(iter_time_s, dtype=np.float64).copy()
        if duration_s is None:
            if iterations is None or iter_time_s is None:
                raise WorkloadError("a workload needs duration_s, or iterations and iter_time_s")
            dur = its * itt
        else:
            dur = np.asarray(duration_s, dtype=np.float64).copy()
        ids = np.arange(n, dtype=np.int64) if job_id is None else np.asarray(job_id).astype(np.int64)
        for col, arr in (("job_id", ids), ("duration_s", dur), ("iterations", its), ("iter_time_s", itt)):
            if arr.shape != (n,):
                raise WorkloadError(f"column {col!r} has {arr.shape} entries, submit_s has {n}")
        checks = (
            ("submit_s", ~np.isfinite(submit), "is NaN or infinite"),
            ("submit_s", submit < 0, "is negative"),
            ("duration_s", ~np.isfinite(dur), "is NaN or infinite"),
            ("duration_s", dur <= 0, "is zero or negative"),
            ("num_gpus", gpus <= 0, "is zero or negative"),
        )
        for col, bad, what in checks:
            if bad.any():
                raise WorkloadError(f"column {col!r} {what} in {_first_rows(bad)}")
        _check_precision(submit, dur)
        # ids in increasing order (every trace reader's output) cannot repeat: skip the sort
        if n > 1 and not (ids[1:] > ids[:-1]).all():
            uniq, counts = np.unique(ids, return_counts=True)
            if (counts > 1).any():
                dup = uniq[counts > 1]
                raise WorkloadError(f"column 'job_id' has {len(dup)} duplicate id(s), e.g. {dup[:5].tolist()}")
        extra_arrays = {}
        for k, v in extra.items():
            if v is None:
                continue
            a = np.asarray(v)
            if a.shape != (n,):
                raise WorkloadError(f"column {k!r} has {a.shape} entries, submit_s has {n}")
            extra_arrays[k] = a
        if n and (np.diff(submit) < 0).any():
            perm = np.argsort(submit, kind="stable")
            submit, gpus, dur, its, itt, ids = (a[perm] for a in (submit, gpus, dur, its, itt, ids))
            extra_arrays = {k: v[perm] for k, v in extra_arrays.items()}
        return cls(ids, submit, gpus, dur, its, itt, extra_arrays, name, dict(dropped or {}), dict(dropped_where or {}))

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        return int(self.submit_s.shape[0])

    @property
    def total_iters(self) -> np.ndarray:
        """Iterations for Blox's progress model: ``iterations``, else ``duration_s`` (1 s/iter)."""
        return np.where(np.isnan(self.iterations), self.duration_s / self.blox_iter_time, self.iterations)

    @property
    def blox_iter_time(self) -> np.ndarray:
        """Seconds per iteration for Blox's progress model (1 s when unknown, as Blox assumes)."""
        itt = self.iter_time_s
        derived = np.where(np.isnan(self.iterations), 1.0, self.duration_s / self.iterations)
        return np.where(np.isnan(itt), derived, itt)

    def head(self, n: int) -> "Workload":
        return self.take(np.arange(min(n, len(self))))

    def take(self, idx) -> "Workload":
        idx = np.asarray(idx)
        return Workload(
            self.job_id[idx], self.submit_s[idx], self.num_gpus[idx], self.duration_s[idx],
            self.iterations[idx], self.iter_time_s[idx], {k: v[idx] for k, v in self.extra.items()},
            self.name, dict(self.dropped), dict(self.dropped_where),
        )

    def to_polars(self):
        import polars as pl

        cols = {
            "job_id": self.job_id,
            "submit_time_s": self.submit_s,
            "duration_s": self.duration_s,
            "num_gpus": self.num_gpus,
            "iterations": self.iterations,
            "iter_time_s": self.iter_time_s,
        }
        for k, v in self.extra.items():
            cols[k] = v.astype(str) if v.dtype == object else v
        return pl.DataFrame(cols)

    def at_offered_load(self, load: float, total_gpus: int) -> "Workload":
        """The same jobs with their arrival times stretched (or compressed) about the first one so
        that :meth:`offered_load` on ``total_gpus`` GPUs is ``load``; order and durations unchanged."""
        now = self.offered_load(total_gpus)
        if not (np.isfinite(now) and now > 0):
            raise WorkloadError(f"{self.name}: cannot rescale its arrivals to an offered load of {load:g}: "
                                + ("it has fewer than two jobs" if len(self) < 2 else "all its jobs arrive at once"))
        t0 = self.submit_s[0]
        submit = t0 + (self.submit_s - t0) * (now / load)
        _check_precision(submit - submit[0], self.duration_s)
        return dataclasses.replace(self, submit_s=submit)

    def offered_load(self, total_gpus: int) -> float:
        """GPU-seconds asked for / (GPUs × span from first to last submit)."""
        if len(self) < 2:
            return float("nan")
        span = float(self.submit_s[-1] - self.submit_s[0])
        with np.errstate(over="ignore"):  # (times near float64's range: inf, not a warning)
            return float((self.duration_s * self.num_gpus).sum() / (total_gpus * span)) if span > 0 else float("inf")


#: the coarsest time resolution accepted, as a fraction of the shortest job
PRECISION = 1e-3


def _check_precision(submit: np.ndarray, dur: np.ndarray) -> None:
    """Refuse times so large that a float64 cannot tell a job's start from its end: the run's
    clock must resolve a thousandth of the shortest job up to the last submit plus a few times the
    longest job (two submits at 1e300 s gave JCTs of 0)."""
    if submit.shape[0] == 0:
        return
    horizon = float(submit.max()) + 4.0 * float(dur.max())
    shortest = float(dur.min())
    step = float(np.spacing(horizon)) if np.isfinite(horizon) else np.inf
    if step > PRECISION * shortest:
        raise WorkloadError(
            f"times up to {horizon:.3g} s are kept to {step:.3g} s, coarser than {PRECISION:g} of the shortest job "
            f"({shortest:.3g} s): shift the submit times to start near 0 (subtract the first submit time)"
        )
