"""Trace reading speed: the 111k-job Philly CSV and a 1M-row Parquet into a Workload.

    python bench/bench_traces.py [--shared ../shared] [--runs 5]

Prints the median of N runs (after one untimed warm-up run) and the first (cold) run. Targets:
< 1 s for each. The 1M-row Parquet is the Philly trace tiled 9x (ids and submit times shifted),
with a string ``vc`` column, written to a temporary folder.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]

from fastblox.traces import read_parquet, read_trace, write_parquet  # noqa: E402
from fastblox.workload import Workload  # noqa: E402

TARGET_S = 1.0


def timed(fn, runs: int):
    t0 = time.perf_counter()
    out = fn()
    cold = time.perf_counter() - t0
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, cold, statistics.median(times), times


def tile(w: Workload, n: int) -> Workload:
    reps = -(-n // len(w))
    span = float(w.submit_s[-1] - w.submit_s[0]) + 1.0
    idx = np.tile(np.arange(len(w)), reps)[:n]
    k = np.repeat(np.arange(reps), len(w))[:n]
    vcs = np.array([f"vc{i:02d}" for i in range(15)], dtype=object)
    return Workload.from_arrays(
        w.submit_s[idx] + k * span, w.num_gpus[idx], duration_s=w.duration_s[idx], job_id=np.arange(n),
        name=f"{w.name} x{reps}", vc=vcs[idx % 15],
    )


def report(label: str, n: int, cold: float, med: float, times) -> bool:
    ok = med < TARGET_S
    print(f"{label:42s} {n:>9,} jobs  median {med * 1e3:7.1f} ms  (cold {cold * 1e3:7.1f} ms; runs "
          + ", ".join(f"{t * 1e3:.0f}" for t in times) + f")  target < {TARGET_S:g} s: {'ok' if ok else 'MISSED'}")
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=str(REPO.parent / "shared"), help="the shared data folder (default ../shared)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the Parquet benchmark (default 1M)")
    a = ap.parse_args(argv)
    csv = Path(a.shared) / "traces" / "philly-rfold" / "jobs.csv.gz"
    all_ok = True
    if csv.exists():
        w, cold, med, times = timed(lambda: read_trace(csv, on_bad_rows="drop"), a.runs)
        all_ok &= report("philly-rfold/jobs.csv.gz (normalized, gzip)", len(w), cold, med, times)
        raw = Path(a.shared) / "traces" / "philly-rfold" / "philly_trace.csv.gz"
        r, cold, med, times = timed(lambda: read_trace(raw, on_bad_rows="drop"), a.runs)
        report("philly-rfold/philly_trace.csv.gz (rfold)", len(r), cold, med, times)
        pol = Path(a.shared) / "traces" / "philly-pollux" / "philly.csv.gz"
        r, cold, med, times = timed(lambda: read_trace(pol, on_bad_rows="drop"), a.runs)
        report("philly-pollux/philly.csv.gz (pollux, sort)", len(r), cold, med, times)
        dre = Path(a.shared) / "traces" / "philly-dre-sample" / "sampled_jobs.json.gz"
        r, cold, med, times = timed(lambda: read_trace(dre, on_bad_rows="drop"), a.runs)
        report("philly-dre-sample JSON (philly-log)", len(r), cold, med, times)
    else:
        print(f"{csv} not found: benchmarking the bundled 2,000-job sample instead")
        from fastblox.datasets import load_sample

        w = load_sample()
    big = tile(w, a.rows)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "big.parquet"
        t0 = time.perf_counter()
        write_parquet(big, p)
        wt = time.perf_counter() - t0
        print(f"(wrote {len(big):,}-row Parquet, {p.stat().st_size / 2**20:.1f} MiB, in {wt * 1e3:.0f} ms)")
        r, cold, med, times = timed(lambda: read_parquet(p), a.runs)
        all_ok &= report(f"{len(big) // 1000:,}k-row Parquet (+ string vc column)", len(r), cold, med, times)
        assert len(r) == len(big) and np.array_equal(r.job_id, big.job_id)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
