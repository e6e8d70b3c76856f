"""Specialized kernels (kernels/variants.py) against the generic kernel of their path, at scale: the
1M-job Philly trace of bench_scale.py on its scaled cluster (2801x8), FIFO / LAS / SRTF / Tiresias
in events mode, the two kernels interleaved in one process, the median of ``--repeats`` runs of the
thread CPU time of the simulation (``NativeState.drive``), and the job tables compared byte for
byte. Both kernels are compiled (or loaded) before the timed runs.

    python bench/bench_variants.py            # prints the table
    python bench/bench_variants.py --write    # and writes docs/performance.md's variants block
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import bench_scale as bs  # noqa: E402
from _util import ROOT, machine, update_section  # noqa: E402

from fastblox import simulate  # noqa: E402

POLICIES = ["fifo", "las", "srtf", "tiresias"]
CLUSTER = "2801x8"
CHOICES = ("generic", "specialized")


def timed(w, policy: str, choice: str):
    os.environ["FASTBLOX_KERNELS"] = choice
    with bs.thread_time_of_drive() as got:
        r = simulate(w, cluster=CLUSTER, policy=policy)
    return sum(got), r.jobs.write_csv()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    ws, _, _ = bs.workloads()
    w = ws[bs.N_MAX]
    rows = ["| policy | generic kernel, CPU s | specialized, CPU s | ratio | job tables |", "|---|---|---|---|---|"]
    for pol in POLICIES:
        for choice in CHOICES:
            timed(w, pol, choice)  # (compile or load)
        t = {c: [] for c in CHOICES}
        tables = {}
        for _ in range(a.repeats):
            for choice in CHOICES:
                cpu, tables[choice] = timed(w, pol, choice)
                t[choice].append(cpu)
        g, s = statistics.median(t["generic"]), statistics.median(t["specialized"])
        same = "identical" if tables["generic"] == tables["specialized"] else "DIFFERENT"
        rows.append(f"| {pol} | {g:.3f} | {s:.3f} | {s / g:.2f} | {same} |")
        print(rows[-1], flush=True)
    note = (f"Measured by `python bench/bench_variants.py --write` on {machine()} ({time.strftime('%Y-%m-%d')}; "
            f"{bs.N_MAX:,} Philly jobs on {CLUSTER}, events, median of {a.repeats} interleaved runs each, thread "
            "CPU seconds of the simulation).")
    table = note + "\n\n" + "\n".join(rows)
    print(table)
    if a.write:
        update_section(ROOT / "docs" / "performance.md", "variants", table)


if __name__ == "__main__":
    main()
