"""Compile time (issue 13, part 3): ``fastblox run`` in fresh processes, each with an EMPTY numba
cache, for the default run, one run per scheduling path and time model, and ``--blox-compat``;
CPU seconds of the child (user + sys) and wall, median of ``--repeat`` runs, plus the same command
once more on the cache it filled (warm). The baseline (``--baseline REV``, default ``cef3dd1``:
main before the kernel split) is extracted from git into a temporary folder and measured in the
same session, so the table shows before -> after. Writes bench/out/compile.json and the README's
compile block.

    python bench/bench_compile.py                 # everything, 3 repeats (~1 h on 2 busy cores)
    python bench/bench_compile.py --repeat 1 --no-baseline
    python bench/bench_compile.py --only default,las-rounds
    FASTBLOX_KERNELS=generic python bench/bench_compile.py --repeat 1 --no-baseline --notice-only
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import CLI, ROOT, machine, run_process, save, update_readme, update_section  # noqa: E402

#: (name, what it exercises, ``fastblox run`` arguments)
CONFIGS = [
    ("default", "`fastblox run` (FIFO, events, no preemption)", []),
    ("las-rounds", "LAS, rounds (preemptive, static order)", ["--policy", "las", "--time-model", "rounds"]),
    ("tiresias-events", "Tiresias, events (wake-ups)", ["--policy", "tiresias", "--time-model", "events"]),
    ("themis", "Themis (every job re-keyed each round)", ["--policy", "themis"]),
    ("gavel", "Gavel (a planner), two GPU types", ["--policy", "gavel", "--workload", "gavel", "--num-jobs", "60",
                                                   "--cluster", "v100:2x4,k80:2x4"]),
    ("failures", "FIFO with node failures", ["--num-jobs", "300", "--cluster", "8x4", "--failures", "500:2"]),
    ("blox-compat", "`--blox-compat` (LAS)", ["--workload", "blox", "--load", "6", "--policy", "las", "--blox-compat",
                                              "--track", "0:199"]),
]


def baseline_tree(rev: str, dest: Path) -> Path:
    """``rev`` of this repository as an importable ``fastblox`` package under ``dest`` (the
    repository maps ``fastblox.kernels`` and ``fastblox.datasets`` to top-level folders)."""
    tree = dest / "tree"
    tree.mkdir(parents=True)
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=arch, check=True)
    src = dest / "src"
    pkg = src / "fastblox"
    shutil.copytree(tree / "fastblox", pkg, symlinks=True)
    for sub in ("kernels", "datasets"):
        (pkg / sub).unlink(missing_ok=True)  # a symlink in older revisions; absent since the package finds them itself
        shutil.copytree(tree / sub, pkg / sub)
    return src


def measure(args: list[str], repeat: int, pythonpath: str | None) -> dict:
    """``fastblox run ARGS --json`` with an empty cache ``repeat`` times, then once warm."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    cmd = CLI + ["run"] + args + ["--json"]
    cwd = tempfile.gettempdir()  # not the repository: ``python -c`` puts the working folder first on sys.path
    cold = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
            env["NUMBA_CACHE_DIR"] = cache
            wall, _, cpu = run_process(cmd, env, cwd)
            cold.append((cpu, wall))
            warm_wall, _, warm_cpu = run_process(cmd, env, cwd)
    return {"cold_cpu_s": statistics.median(c for c, _ in cold), "cold_wall_s": statistics.median(w for _, w in cold),
            "cold_all": cold, "warm_cpu_s": warm_cpu, "warm_wall_s": warm_wall}


def table(d: dict) -> str:
    base = d.get("baseline") or {}
    rows = ["| run | empty cache, CPU s | empty cache, wall s | warm cache, CPU s / wall s |", "|---|---|---|---|"]
    for name, what, _ in CONFIGS:
        r = d["after"].get(name)
        if r is None:
            continue
        b = base.get(name)
        cpu = f"{b['cold_cpu_s']:.1f} → **{r['cold_cpu_s']:.1f}**" if b else f"**{r['cold_cpu_s']:.1f}**"
        wall = f"{b['cold_wall_s']:.1f} → {r['cold_wall_s']:.1f}" if b else f"{r['cold_wall_s']:.1f}"
        rows.append(f"| {what} | {cpu} | {wall} | {r['warm_cpu_s']:.1f} / {r['warm_wall_s']:.1f} |")
    note = (f"Measured by `python bench/bench_compile.py --repeat {d['repeat']}` on {d['machine']} ({d['date']}; "
            f"median of {d['repeat']} fresh processes each with an empty `NUMBA_CACHE_DIR`"
            + (f"; before: `{d['baseline_rev']}`, measured in the same session" if base else "")
            + "). Wall time depends on how busy the machine is; CPU seconds are the child's user + sys.")
    return note + "\n\n" + "\n".join(rows)


def readme_line(d: dict) -> str:
    """The README's sentence: the default run's first-run cost and the range over the other paths."""
    r = d["after"]
    others = [v["cold_cpu_s"] for k, v in r.items() if k != "default"]
    line = "First runs on an empty kernel cache (`bench/bench_compile.py`, CPU seconds of the whole process): "
    if "default" in r:
        line += f"`fastblox run` {r['default']['cold_cpu_s']:.1f} s"
    if others:
        line += f", the other policies, paths and modes measured {min(others):.1f}–{max(others):.1f} s"
    warm = max(v["warm_wall_s"] for v in r.values())
    return line + f"; later runs load the cached kernel (warm runs ≤ {warm:.1f} s of wall, start-up included)."


def kernel_kind(args: list[str]) -> str:
    """The kernel a ``fastblox run ARGS`` compiles (``fastblox.engine.spec_kind``)."""
    from fastblox.cli import build_parser
    from fastblox.engine import spec_kind
    from fastblox.spec import cli_spec

    return spec_kind(cli_spec(build_parser().parse_args(["run"] + args)).resolved())


def write_notice_table(d: dict, every: bool) -> None:
    """The compile notice's CPU seconds per kernel (``fastblox.engine.COMPILE_CPU_S``), from this
    run's medians. Kinds not measured keep their value, unless ``every`` config was measured: the
    kinds of this run's kernel choice (``FASTBLOX_KERNELS``: specialized kinds name a policy and
    placement, ``native:queue/fifo/first-fit``; generic ones a path, ``native:queue``) are then
    all rewritten, and kinds the code no longer makes drop out."""
    from fastblox.engine import COMPILE_CPU_S
    from fastblox.kernels.variants import kernels_choice

    specialized = kernels_choice() == "specialized"
    cpu = {k: v for k, v in COMPILE_CPU_S.items() if not (every and (k == "compat" or ("/" in k) == specialized))}
    for name, _, args in CONFIGS:
        if name in d["after"]:
            cpu[kernel_kind(args)] = round(d["after"][name]["cold_cpu_s"])
    body = "COMPILE_CPU_S = {" + ", ".join(f"{k!r}: {v}" for k, v in sorted(cpu.items())) + "}"
    body = body.replace("'", '"')
    lines, line = [], ""
    for part in body.split(", "):  # wrapped at 120 columns
        if line and len(line) + len(part) + 2 > 118:
            lines.append(line + ",")
            line = " " * len("COMPILE_CPU_S = {") + part
        else:
            line = f"{line}, {part}" if line else part
    update_section(ROOT / "fastblox" / "engine.py", "compile-cpu", "\n".join(lines + [line]), comment="# ")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", default="cef3dd1", help="git revision measured as 'before' (default cef3dd1)")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--only", default=None, help="comma-separated config names (default: all)")
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--notice-only", action="store_true",
                    help="write only the compile notice's table (e.g. with FASTBLOX_KERNELS=generic)")
    a = ap.parse_args()
    only = set(a.only.split(",")) if a.only else {n for n, _, _ in CONFIGS}
    import time

    d = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "repeat": a.repeat, "after": {}, "baseline": {},
         "baseline_rev": None if a.no_baseline else a.baseline}
    with tempfile.TemporaryDirectory(prefix="fastblox-baseline-") as tmp:
        base_src = None if a.no_baseline else str(baseline_tree(a.baseline, Path(tmp)))
        for name, _, args in CONFIGS:
            if name not in only:
                continue
            d["after"][name] = measure(args, a.repeat, None)
            if base_src:
                d["baseline"][name] = measure(args, a.repeat, base_src)
            r, b = d["after"][name], d["baseline"].get(name)
            print(f"{name:16s} empty cache {r['cold_cpu_s']:6.1f} CPU-s {r['cold_wall_s']:6.1f} s wall, warm "
                  f"{r['warm_cpu_s']:.1f} CPU-s" + (f" | before {b['cold_cpu_s']:6.1f} CPU-s {b['cold_wall_s']:6.1f} s"
                                                     if b else ""), flush=True)
    save("compile-notice" if a.notice_only else "compile", d)
    t = table(d)
    print(t)
    if a.notice_only:
        write_notice_table(d, every=only == {n for n, _, _ in CONFIGS})
    elif not a.no_readme:
        update_readme("compile", t)
        update_section(ROOT / "README.md", "compile-line", readme_line(d))
        write_notice_table(d, every=only == {n for n, _, _ in CONFIGS})


if __name__ == "__main__":
    main()
