"""Fidelity: regenerate the table of docs/fidelity.md (``fastblox fidelity`` prints the same rows).

The comparisons, the peer data and how it was produced: ``fastblox/fidelity.py`` and
``datasets/peer/README.md``. This script only writes the table into the docs::

    python bench/fidelity.py [--write]           # the table
    python bench/fidelity.py --time [--write]    # how long `fastblox fidelity` takes, from a clone
                                                 # (an empty numba cache) and again warm
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import fastblox  # noqa: E402
from fastblox import fidelity  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the table into docs/fidelity.md")
    ap.add_argument("--time", action="store_true", help="time the whole `fastblox fidelity` command instead")
    a = ap.parse_args(argv)
    if a.time:
        return time_command(a.write)
    fastblox.simulate(fastblox.gavel_like_workload(20), cluster="4x4")  # compile outside the timings
    rows = fidelity.run_all()
    text = fidelity.markdown(rows)
    print(text)
    worst = worst_rows(rows)
    print(worst)
    if a.write:
        from _util import update_readme, update_section

        stamp = f"Measured by `python bench/fidelity.py --write` ({time.strftime('%Y-%m-%d')})."
        update_section(ROOT / "docs" / "fidelity.md", "fidelity", stamp + "\n\n" + text)
        update_readme("fidelity-worst", worst)
    return 0


def worst_rows(rows: list[dict], n: int = 6) -> str:
    """The README's sentence on the table's worst rows: how many compat rows have every job within
    1 s of the peer, the compat rows' lowest such share and largest average gap, and the ``n``
    native rows furthest from their peer."""
    compat = [r for r in rows if r["run"].endswith("(compat)")]
    native = sorted((r for r in rows if not r["run"].endswith("(compat)")), key=lambda r: -abs(r["diff_pct"]))
    exact = sum(r["same_1s"] == 1.0 for r in compat)
    lo = min(compat, key=lambda r: r["same_1s"])
    gap = max(compat, key=lambda r: abs(r["diff_pct"]))
    nat = "; ".join(f"{r['simulator']} {r['run']} `{r['policy']}` {r['diff_pct']:+.1f} %" for r in native[:n])
    return (f"Fidelity, worst rows of [docs/fidelity.md](docs/fidelity.md)'s table (`python bench/fidelity.py "
            f"--write`): compat modes, every job within 1 s of the peer in {exact} of {len(compat)} rows (lowest "
            f"share {100 * lo['same_1s']:.1f} %, {lo['simulator']} {lo['run']}; largest average gap "
            f"{gap['diff_pct']:+.2f} %); native policies, the largest gaps: {nat}.\n")


def time_command(write: bool) -> int:
    """``fastblox fidelity`` in fresh processes: with an empty numba cache (a fresh clone: every
    kernel it uses compiles), then warm. Wall and CPU seconds of each."""
    import os

    from _util import cold_start, machine

    load = os.getloadavg()[0]
    r = cold_start(["fidelity"], warm_repeats=1)
    one_s, one_cpu = _empty_cache_run(["fidelity", "--workers", "1"])
    solver = fidelity.gavel_optimum()
    workers = min(os.cpu_count() or 1, fidelity.MAX_WORKERS)
    text = (f"`fastblox fidelity` (every row of the table below, in {workers} worker processes, its default "
            f"here; the `--compat gavel` LP rows with `optimum={solver}`) on this machine ({machine()}, shared; "
            f"load average {load:.1f} when it started, {os.getloadavg()[0]:.1f} when it ended): "
            f"**{r['warm_cache_s']:.0f} s wall, {r['warm_cpu_s']:.0f} CPU-s** with a warm numba cache; "
            f"{r['empty_cache_s']:.0f} s wall, {r['empty_cache_cpu_s']:.0f} CPU-s on a fresh clone (an empty cache: "
            "the kernels it uses compile first). Wall and CPU seconds of the command, its worker processes' "
            f"CPU included. In one process (`--workers 1`), right after, on an empty cache: {one_s:.0f} s wall, "
            f"{one_cpu:.0f} CPU-s.")
    print(text)
    if write:
        from _util import update_section

        stamp = f"Measured by `python bench/fidelity.py --time --write` ({time.strftime('%Y-%m-%d')})."
        update_section(ROOT / "docs" / "fidelity.md", "fidelity-time", stamp + " " + text)
    return 0


def _empty_cache_run(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``fastblox ARGS`` in a fresh process on an empty numba cache."""
    import os
    import tempfile

    from _util import CLI, run_process

    with tempfile.TemporaryDirectory() as cache:
        wall, _, cpu = run_process(CLI + list(args), dict(os.environ, NUMBA_CACHE_DIR=cache))
    return wall, cpu


if __name__ == "__main__":
    sys.exit(main())
