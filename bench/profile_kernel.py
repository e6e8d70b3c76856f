"""Where the native kernel spends its time, by source line: ``perf`` over numba's compiled code.

    python bench/profile_kernel.py                          # 1M jobs, 2801x8, FIFO (bench_scale's input)
    python bench/profile_kernel.py --config 10000,128x8,las --top 60
    python bench/profile_kernel.py --trace my.parquet --config 0,64x8,tiresias   # 0: every job
    python bench/profile_kernel.py --config 20000,16x8,py:las     # an array-form user policy (LAS)
    python bench/profile_kernel.py --trace ../shared/traces/philly-rfold/jobs.csv.gz \
        --on-bad-rows drop --config 20000,v100:100x8,p100:100x8,k80:100x8,pollux  # Pollux's rigid replay (kernels/pollux_rigid.py)

``perf`` sees numba's code as anonymous JIT memory. This script runs the simulation in a child
under ``perf record`` with the kernels compiled with line tables (``FASTBLOX_KERNEL_LINES=1``: the
tables only, no bounds checks, so it profiles the kernel as it normally runs) into a fresh numba
cache of its own (a cached library keeps no object code, so the first call compiles: about a
minute). The child writes ``/tmp/perf-PID.map`` (perf's symbol map for JIT code) and each compiled
library's object file; samples are mapped to source lines with ``addr2line``. Helpers inlined into
the event loop are reported at their own lines (``kernels/placement.py:246``), samples LLVM cannot
attribute as ``?``.

Needs Linux ``perf`` (permission to sample: ``kernel.perf_event_paranoid`` <= 2) and binutils
(``nm``, ``addr2line``). Output: the table on stdout and in ``bench/out/profile/<config>.txt``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import OUT, ROOT  # noqa: E402

PROFILE = OUT / "profile"
DEFAULT_TRACE = OUT / "scale" / "philly_1m.parquet"
SOURCES = ("engine.py", "walk.py", "placement.py", "rates.py", "state.py", "compat.py", "planners.py",
           "pollux_rigid.py", "elastic.py", "admission.py")
#: policies replayed by a kernel of their own (not the native engine's ``advance``): the modules sampled
OWN_REPLAY = {"pollux": ("pollux_rigid", "elastic", "admission")}


#: ``--config ...,py:NAME``: an array-form user policy, called from Python at every step
PY_POLICIES = {"las": lambda jobs, now: jobs.attained_s, "srtf": lambda jobs, now: jobs.remaining_s,
               "fifo": lambda jobs, now: jobs.submit_s,
               "two-key": lambda jobs, now: jobs.num_gpus * 1e9 + jobs.attained_s}


def child(args) -> None:
    """Under perf: compile (fresh cache), write the symbol map and objects, run ``--runs`` times."""
    import fastblox
    from fastblox.engine import prepare_native
    import importlib

    from fastblox.kernels import engine as ke, placement as kp, rates as kr, walk as kw
    from fastblox.traces import read_trace
    from numba.core.registry import CPUDispatcher

    jobs, cluster, policy = args.config
    policy = PY_POLICIES[policy[3:]] if policy.startswith("py:") else policy
    w = read_trace(args.trace, on_bad_rows=args.on_bad_rows)
    if jobs:
        w = w.head(jobs)
    own = OWN_REPLAY.get(policy) if isinstance(policy, str) else None
    if own:
        fastblox.simulate(w.head(min(len(w), 1000)), cluster=cluster, policy=policy)
        mods = tuple(importlib.import_module(f"fastblox.kernels.{m}") for m in own)
    else:
        fastblox.simulate(w.head(min(len(w), 1000)), cluster=cluster, policy=policy, time_model="events")
        mods = (ke, kw, kp, kr)
    objdir = Path(args.child)
    syms = []  # (address, symbol, object file)
    k = 0
    for mod in mods:
        for name in sorted(vars(mod)):
            d = getattr(mod, name)
            if not isinstance(d, CPUDispatcher) or d.__module__ != mod.__name__:
                continue
            for cres in d.overloads.values():
                lib = cres.library
                try:
                    obj = lib._get_compiled_object()
                except RuntimeError:  # loaded from a cache: no object code kept
                    continue
                path = objdir / f"{k}.o"
                k += 1
                path.write_bytes(obj)
                for f in lib._final_module.functions:
                    if not f.is_declaration:
                        a = lib.get_pointer_to_function(f.name)
                        if a:
                            syms.append((a, f.name, str(path)))
    if not syms:
        sys.exit("profile_kernel: the kernels came from a numba cache (no object code): the cache dir must be empty")
    syms = sorted(set(syms))
    (objdir / "pid").write_text(str(os.getpid()))  # perf reads the map after this process ends: the parent removes it
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as pm, open(objdir / "syms.txt", "w") as st:
        for i, (a, name, path) in enumerate(syms):
            size = min((syms[i + 1][0] if i + 1 < len(syms) else a + 65536) - a, 1 << 16)
            pm.write(f"{a:x} {max(size, 1):x} {name}\n")
            st.write(f"{a:x} {path} {name}\n")
    for _ in range(args.runs):
        if own:
            t0 = time.thread_time()
            fastblox.simulate(w, cluster=cluster, policy=policy)
            print(f"  simulate {time.thread_time() - t0:.3f} s of CPU ({len(w):,} jobs)", file=sys.stderr)
            continue
        nr = prepare_native(w, cluster=cluster, policy=policy, time_model="events")
        t0 = time.thread_time()
        nr.state.drive()
        print(f"  kernel {time.thread_time() - t0:.3f} s of CPU ({len(w):,} jobs)", file=sys.stderr)


def attribute(objdir: Path, script: str) -> tuple[int, collections.Counter, collections.Counter]:
    """(kernel samples, samples per function, samples per file:line) of ``perf script`` output."""
    where = {}
    for line in (objdir / "syms.txt").read_text().splitlines():
        a, path, name = line.split(" ", 2)
        where[name] = (int(a, 16), path)
    offsets: dict = {}

    def sym_offset(path, name):
        if path not in offsets:
            out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
            offsets[path] = {p[2]: int(p[0], 16) for p in (ln.split() for ln in out.splitlines())
                             if len(p) == 3 and p[1] in "tTW"}
        return offsets[path].get(name)

    per_addr: collections.Counter = collections.Counter()
    per_fn: collections.Counter = collections.Counter()
    total = 0
    for line in script.splitlines():
        parts = line.split(None, 1)
        if len(parts) != 2 or parts[1].strip() not in where:
            continue
        name = parts[1].strip()
        total += 1
        a, path = where[name]
        m = re.search(r"(\w+?)B\d", name)  # mangled: ..._ZN8fastblox7kernels6engine7advanceB2v1...
        per_fn[re.sub(r"^\d+", "", m.group(1)) if m else name[:40]] += 1
        off = sym_offset(path, name)
        if off is not None:
            per_addr[(path, off + int(parts[0], 16) - a)] += 1
    per_line: collections.Counter = collections.Counter()
    by_obj = collections.defaultdict(list)
    for (path, off) in per_addr:
        by_obj[path].append(off)
    for path, offs in by_obj.items():
        # numba puts the code in .ltext (large code model)
        out = subprocess.run(["addr2line", "-e", path, "-j", ".ltext"], input="\n".join(map(hex, offs)),
                             capture_output=True, text=True).stdout.splitlines()
        for off, loc in zip(offs, out):
            loc = re.sub(r".*/(kernels|fastblox)/", "", loc.split(" (")[0])
            per_line[loc] += per_addr[(path, off)]
    return total, per_fn, per_line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="1000000,2801x8,fifo", help="JOBS,CLUSTER,POLICY (JOBS 0: the whole trace; CLUSTER may hold commas)")
    ap.add_argument("--trace", default=str(DEFAULT_TRACE), help="a trace file (default: bench_scale's 1M Parquet)")
    ap.add_argument("--runs", type=int, default=3, help="kernel runs sampled (default 3)")
    ap.add_argument("--freq", type=int, default=5000, help="samples per second (default 5000)")
    ap.add_argument("--top", type=int, default=40, help="source lines shown (default 40)")
    ap.add_argument("--on-bad-rows", choices=("error", "drop"), default="error",
                    help="the trace's bad rows: an error, or dropped and counted (read_trace's on_bad_rows)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    try:
        n, *cluster, policy = args.config.split(",")
        args.config = (int(n), ",".join(cluster), policy)
        if not cluster:
            raise ValueError
    except ValueError:
        ap.error(f"--config: expected JOBS,CLUSTER,POLICY (e.g. 1000000,2801x8,fifo), got {args.config!r}")
    if args.child:
        child(args)
        return
    if not Path(args.trace).exists():
        hint = " (python bench/bench_scale.py builds it)" if Path(args.trace) == DEFAULT_TRACE else ""
        sys.exit(f"profile_kernel: no trace at {args.trace}{hint}")
    missing = [t for t in ("perf", "nm", "addr2line") if shutil.which(t) is None]
    if missing:
        sys.exit(f"profile_kernel: needs {', '.join(missing)} on PATH (Linux perf, binutils)")
    PROFILE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fastblox-profile-") as tmp:
        objdir = Path(tmp) / "objs"
        objdir.mkdir()
        env = dict(os.environ, FASTBLOX_KERNEL_LINES="1", NUMBA_CACHE_DIR=str(Path(tmp) / "numba"))
        data = Path(tmp) / "perf.data"
        cmd = ["perf", "record", "-q", "-F", str(args.freq), "-o", str(data), "--", sys.executable, __file__,
               "--child", str(objdir), "--config", ",".join(map(str, args.config)), "--trace", args.trace,
               "--runs", str(args.runs), "--on-bad-rows", args.on_bad_rows]
        print(f"profile_kernel: compiling with line tables and sampling {args.runs} runs (about a minute or two)",
              file=sys.stderr)
        r = subprocess.run(cmd, env=env, cwd=ROOT)
        if r.returncode != 0:
            sys.exit(f"profile_kernel: perf record failed (exit {r.returncode}); "
                     "is sampling allowed (kernel.perf_event_paranoid <= 2)?")
        script = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip,sym"], capture_output=True,
                                text=True).stdout
        pid = objdir / "pid"
        if pid.exists():
            Path(f"/tmp/perf-{pid.read_text()}.map").unlink(missing_ok=True)
        total, per_fn, per_line = attribute(objdir, script)
    if total == 0:
        sys.exit("profile_kernel: no samples in the kernels")
    src = {f: (ROOT / "kernels" / f).read_text().splitlines() for f in SOURCES}
    n, cluster, policy = args.config
    jobs = f"{n:,} jobs" if n else "every job"
    out = [f"profile_kernel: {jobs} of {Path(args.trace).name}, {cluster}, {policy}: {total:,} samples in the kernels",
           "", "by compiled function (helpers inlined into advance count as advance):"]
    out += [f"  {100 * c / total:5.1f} %  {f}" for f, c in per_fn.most_common(12)]
    out += ["", "by source line:"]
    for loc, c in per_line.most_common(args.top):
        m = re.match(r"(\w+\.py):(\d+)", loc)
        text = src[m.group(1)][int(m.group(2)) - 1].strip() if m and m.group(1) in src else ""
        out.append(f"  {100 * c / total:5.1f} %  {loc:<20} {text[:100]}")
    report = "\n".join(out) + "\n"
    print(report)
    tag = re.sub(r"[^\w.-]+", "_", cluster)
    path = PROFILE / f"{n}_{tag}_{policy}.txt"
    path.write_text(report)
    print(f"written to {path.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
