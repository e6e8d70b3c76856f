"""Start-up (issue 13, part 4): the whole process of a warm ``fastblox run`` on the 2,000-job peer
workload, with ``--out``, in fresh processes, beside the floors it sits on: ``python -c pass``,
``python -c "import numba"`` and ``python -c "import fastblox"``. Wall and CPU seconds of the child
(user + sys, from ``os.wait4``), median of ``--repeat`` runs, all measured in the same session;
``--baseline REV`` (default ``98e72a9``: main before this work) measures the same commands on
that revision, extracted from git into a temporary folder, so the table shows before -> after.
Then one more fresh process times the run's phases in order (imports, the kernel's load, reading
the trace, the simulation, the writes). Writes bench/out/startup.json and the README's startup
block.

"Warm" means both caches a second run has: numba's kernel cache (``NUMBA_CACHE_DIR`` if set, else
fastblox's default) and Python's bytecode cache. Each variant runs once untimed first to fill
them (a baseline on an empty kernel cache compiles there, ~30 s of CPU). Children run without
``PYTHONDONTWRITEBYTECODE`` (``--no-bytecode`` keeps it as the environment has it): with it set,
every fastblox module is compiled from source at each start, ~0.2 s that no installed copy pays.

The command is ``fastblox`` itself (``python -m fastblox.cli``, which runs ``main()`` as the
console script does), so the interpreter's exit is part of the time.

Tiresias' simulator (the peer of bench/peer) is measured on the same workload and cluster, in the
same session, interleaved with the commands above, when ``--tiresias DIR`` gives its
``simulator/`` folder (SymbioticLab/Tiresias; nothing of it is in this repository) and
``--python2 EXE`` a Python 2.7 with numpy (default: ``python2.7`` on PATH): ``run_sim.py
--schedule fifo --scheme yarn`` with the 2,000 jobs in Tiresias' format on ``n12g4.csv`` (12
nodes of 4 GPUs, as ``--cluster 12x4``), its logs into a scratch folder. On this project's
machine: ``--python2 ~/.pyenv/versions/2.7.18/bin/python2.7`` after ``pip install "numpy<1.17"``
into it.

    python bench/bench_startup.py                     # 5 repeats, with the baseline
    # (run it with the python of a regular install, `pip install .`, as users have it)
    python bench/bench_startup.py --repeat 3 --no-baseline --tiresias ../Tiresias/simulator
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import ROOT, machine, run_process, save, update_readme  # noqa: E402
from bench_compile import baseline_tree  # noqa: E402

PEER = ROOT.parent / "shared" / "peer-traces"
TRACE = str(PEER / "gavel_n2000_lam400_s0.neutral.csv")
CLUSTER = "12x4"
TIRESIAS_ARGS = ["run_sim.py", f"--cluster_spec={PEER / 'n12g4.csv'}", "--scheme=yarn", "--schedule=fifo",
                 f"--trace_file={PEER / 'gavel_n2000_lam400_s0.tiresias.csv'}", "--log_path={out}"]
BASELINE = "98e72a9"

#: (name, what, command after ``python``); ``{out}`` is a scratch output folder
COMMANDS = [
    ("python", "`python -c pass`", ["-c", "pass"]),
    ("numba", "`python -c \"import numba\"`", ["-c", "import numba"]),
    ("fastblox", "`python -c \"import fastblox\"`", ["-c", "import fastblox"]),
    ("run", "warm `fastblox run --trace gavel_n2000 ... --cluster 12x4 --out DIR`",
     ["-m", "fastblox.cli", "run", "--trace", TRACE, "--cluster", CLUSTER, "--out", "{out}"]),
]

#: the run's phases, in order, in one process (no prewarm thread: each phase alone)
PHASES = r"""
import json, sys, time
T = [("start", time.perf_counter())]
def mark(name):
    T.append((name, time.perf_counter()))
import numpy; mark("import numpy")
import numba; mark("import numba")
import fastblox.cli as cli; mark("import fastblox")
ap = cli.build_parser(); mark("argument parser (subcommands' modules)")
a = ap.parse_args(sys.argv[1:])
r = cli.cli_spec(a).resolved()
from fastblox import engine
from fastblox.runner import build_workload, workload_key
kind = engine.spec_kind(r)
engine._warm(kind); mark("kernel load: numba runtime + cached kernels")
w = build_workload(workload_key(r)); mark("read the trace (parsed-trace cache, else polars)")
res = engine.simulate(w, r); mark("simulate (+ summary)")
res.write(a.out); mark("write jobs.parquet + summary.json")
cli.format_summary(res, "x"); mark("format the summary")
mods = [m for m in ("polars", "pyarrow", "scipy.linalg", "matplotlib") if m in sys.modules]
print(json.dumps({"phases": [[n, t - p] for (_, p), (n, t) in zip(T, T[1:])], "modules": mods}))
"""


def python2(exe: str | None) -> str | None:
    """``--version`` of a working Python 2 with numpy (``exe``, else ``python2.7`` on PATH), else None."""
    exe = exe or shutil.which("python2.7")
    if exe is None:
        return None
    try:
        p = subprocess.run([exe, "-c", "import sys, numpy; print(sys.version.split()[0])"], capture_output=True,
                           text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return f"Python {p.stdout.strip()}" if p.returncode == 0 else None


def child_env(pythonpath: str | None, bytecode: bool) -> dict:
    env = dict(os.environ)
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def measure(repeat: int, pythonpath: str | None, bytecode: bool, tiresias: tuple | None = None) -> dict:
    """Each command ``repeat`` times in fresh processes, after one untimed run of each (caches);
    with ``tiresias = (python2, simulator folder)`` its simulator too."""
    env = child_env(pythonpath, bytecode)
    cwd = {}  # not the repository: ``-c``/``-m`` put the working folder first on sys.path
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="fastblox-startup-") as scratch:
        cmds = {name: [sys.executable] + [a.replace("{out}", os.path.join(scratch, "out")) for a in args]
                for name, _, args in COMMANDS}
        if tiresias:
            os.makedirs(os.path.join(scratch, "tiresias"))
            cmds["tiresias"] = [tiresias[0]] + [a.replace("{out}", os.path.join(scratch, "tiresias"))
                                                for a in TIRESIAS_ARGS]
            cwd["tiresias"] = tiresias[1]
        for name, cmd in cmds.items():
            run_process(cmd, env, cwd.get(name, tempfile.gettempdir()))  # fill the kernel and bytecode caches
        runs = {name: [] for name in cmds}
        for _ in range(repeat):  # interleaved: a busy spell of the machine touches every command alike
            for name, cmd in cmds.items():
                wall, _, cpu = run_process(cmd, env, cwd.get(name, tempfile.gettempdir()))
                runs[name].append((wall, cpu))
    for name, rs in runs.items():
        out[name] = {"wall_s": statistics.median(w for w, _ in rs), "cpu_s": statistics.median(c for _, c in rs),
                     "all": rs}
    return out


def phases(pythonpath: str | None, bytecode: bool) -> dict:
    env = child_env(pythonpath, bytecode)
    with tempfile.TemporaryDirectory(prefix="fastblox-startup-") as scratch:
        args = ["run", "--trace", TRACE, "--cluster", CLUSTER, "--out", os.path.join(scratch, "out")]
        p = subprocess.run([sys.executable, "-c", PHASES] + args, env=env, cwd=tempfile.gettempdir(),
                           capture_output=True, text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def table(d: dict) -> str:
    base = d.get("baseline") or {}
    rows = ["| process | wall s | CPU s |", "|---|---|---|"]
    for name, what, _ in COMMANDS:
        r, b = d["after"][name], base.get(name)
        if b:
            rows.append(f"| {what} | {b['wall_s']:.2f} → **{r['wall_s']:.2f}** | {b['cpu_s']:.2f} → {r['cpu_s']:.2f} |")
        else:
            rows.append(f"| {what} | **{r['wall_s']:.2f}** | {r['cpu_s']:.2f} |")
    ti = d["after"].get("tiresias")
    if ti:
        rows.append(f"| Tiresias' simulator, same workload and cluster (`run_sim.py --schedule fifo`, "
                    f"{d['python2']}) | {ti['wall_s']:.2f} | {ti['cpu_s']:.2f} |")
    ph = d["phases"]
    br = "; ".join(f"{n} {s:.2f}" for n, s in ph["phases"])
    py2 = ("" if ti else " Tiresias' simulator (Python 2) was not measured in this run: "
           + ("no `--tiresias`" if d["python2"] else "no Python 2 with numpy") + ".")
    note = (f"Measured by `python bench/bench_startup.py --repeat {d['repeat']}` on {d['machine']} ({d['date']}; "
            f"median of {d['repeat']} fresh processes, {d.get('install', 'an install')}, warm numba cache, "
            + ("warm bytecode cache" if d["bytecode_cache"] else "no bytecode cache (`PYTHONDONTWRITEBYTECODE`)")
            + (f"; before: `{d['baseline_rev']}`, measured in the same session" if base else "")
            + "). Wall time depends on how busy the machine is; CPU seconds are the child's user + sys.")
    tail = (f"\n\nPhases of the run, in seconds, one process (no overlap): {br}. Imported by the run: "
            f"{', '.join(ph['modules']) or 'none of polars, pyarrow, scipy.linalg, matplotlib'}.{py2}")
    return note + "\n\n" + "\n".join(rows) + tail


def install_kind() -> str:
    """How this interpreter has fastblox: a regular install (``pip install .``: what users run) or the
    source checkout (editable, whose import finder adds ~10 ms to every start)."""
    out = subprocess.run([sys.executable, "-c", "import fastblox; print(fastblox.__file__)"], capture_output=True,
                         text=True, cwd=tempfile.gettempdir()).stdout.strip()
    if Path(out).resolve().is_relative_to(ROOT):
        return "fastblox from the source checkout (editable)"
    return "fastblox installed by `pip install .`"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", default=BASELINE, help=f"git revision measured as 'before' (default {BASELINE})")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as the environment has it")
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--tiresias", metavar="DIR", help="Tiresias' simulator/ folder: measure it in the same session")
    ap.add_argument("--python2", metavar="EXE", help="a Python 2.7 with numpy (default: python2.7 on PATH)")
    a = ap.parse_args()
    if not Path(TRACE).is_file():
        raise SystemExit(f"{TRACE}: not found (the shared peer traces)")
    bytecode = not a.no_bytecode
    d = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "repeat": a.repeat, "trace": TRACE, "cluster": CLUSTER,
         "bytecode_cache": bytecode or not os.environ.get("PYTHONDONTWRITEBYTECODE"),  # as the children ran
         "numba_cache_dir": os.environ.get("NUMBA_CACHE_DIR"), "python2": python2(a.python2),
         "baseline_rev": None if a.no_baseline else a.baseline, "after": {}, "baseline": {},
         "install": install_kind()}
    tiresias = None
    if a.tiresias:
        if not d["python2"]:
            raise SystemExit("--tiresias: no Python 2.7 with numpy (give --python2 EXE)")
        if not (Path(a.tiresias) / "run_sim.py").is_file():
            raise SystemExit(f"--tiresias {a.tiresias}: no run_sim.py there (give Tiresias' simulator/ folder)")
        tiresias = (a.python2 or shutil.which("python2.7"), str(Path(a.tiresias).resolve()))
    with tempfile.TemporaryDirectory(prefix="fastblox-baseline-") as tmp:
        if not a.no_baseline:
            src = str(baseline_tree(a.baseline, Path(tmp)))
            d["baseline"] = measure(a.repeat, src, bytecode)
        d["after"] = measure(a.repeat, None, bytecode, tiresias)
    d["phases"] = phases(None, bytecode)
    for name in d["after"]:
        r, b = d["after"][name], d["baseline"].get(name)
        print(f"{name:9s} {r['wall_s']:5.2f} s wall {r['cpu_s']:5.2f} CPU-s"
              + (f" | before {b['wall_s']:5.2f} s wall {b['cpu_s']:5.2f} CPU-s" if b else ""))
    print("phases of the run (one process, in order):")
    for n, s in d["phases"]["phases"]:
        print(f"  {s:6.3f} s  {n}")
    print(f"  imported: {', '.join(d['phases']['modules']) or '-'}")
    save("startup", d)
    t = table(d)
    print(t)
    if not a.no_readme:
        update_readme("startup", t)


if __name__ == "__main__":
    main()
