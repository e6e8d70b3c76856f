"""Scale-up speed: the 111k-job Philly trace (philly-rfold) scaled to 1,000,000 jobs.

    python bench/bench_trace_scale.py [--shared ../shared] [--jobs 1000000] [--runs 3] [--seed 0]

Times ``scale_trace`` (reading the trace is not timed) and prints the median of N runs, every run,
and the validation report (source vs synthetic) of the last run. Target: well under 10 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from fastblox.traces import read_trace  # noqa: E402
from fastblox.traces.scale import format_report, scale_trace  # noqa: E402

TARGET_S = 10.0
PHILLY_GPUS = 2490  # only for the offered-load line: a nominal source cluster, scaled by K in the report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=str(REPO.parent / "shared"))
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    path = Path(a.shared) / "traces" / "philly-rfold" / "jobs.csv.gz"
    if not path.exists():
        print(f"no trace at {path}", file=sys.stderr)
        return 1
    src = read_trace(path, on_bad_rows="drop")
    times, rep = [], None
    for _ in range(a.runs):
        t0 = time.perf_counter()
        syn, rep = scale_trace(src, a.jobs, seed=a.seed, total_gpus=PHILLY_GPUS, source_path=path)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"scale_trace {len(src):,} -> {a.jobs:,} jobs: median {med:.2f} s of {a.runs} "
          f"({', '.join(f'{t:.2f}' for t in times)} s); target < {TARGET_S:.0f} s: {'ok' if med < TARGET_S else 'MISSED'}")
    print(format_report(rep))
    hs, hy = rep["hour_of_day"]["source"], rep["hour_of_day"]["synthetic"]
    print("  hour-of-day share (source / synthetic, hour 0 = first submit's hour):")
    for h0 in range(0, 24, 6):
        print("    " + "  ".join(f"{h:2d}h {hs[h]:5.1%}/{hy[h]:5.1%}" for h in range(h0, h0 + 6)))
    return 0 if med < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
