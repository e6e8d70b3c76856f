"""User policies against the built-in ones (issue 18): LAS, SRTF and "fewest GPUs first, then least
attained service", each as a built-in key function, as a per-job policy compiled into the kernel
(``fastblox.policy(..., per_job=True)``), as the numpy form declared row-wise
(``fastblox.policy(..., rowwise=True)``: called back from the kernel for the jobs that start
waiting and the running ones), and as the array form called back for every active job at every
step (numpy, and ``numba.njit``); and Tiresias' 2D-LAS as a per-job policy with state
(``fastblox.examples.tiresias_user``) against the built-in ``tiresias``. Checks that every form gives the built-in's results job by job,
then times them in the same process (median of repeats; the ratio to the built-in of the same
run). Also the compile time of a per-job policy's kernel: on an empty numba cache, then loaded.

    python bench/bench_userpol.py            # 20,000 jobs on 16x8 (the Python forms take minutes)
    python bench/bench_userpol.py --quick    # 4,000 jobs, fewer repeats

The two-key policy has no built-in, so the benchmark adds one the way docs/policies.md says (a
file under ``fastblox/policies/``) in a copy of the package and runs everything in that copy,
with its own numba cache under bench/out/ (the first run compiles its kernels).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _util import OUT, ROOT, machine, save, update_readme  # noqa: E402

TWO_KEY_BUILTIN = '''"""Fewest GPUs first, then least attained service (a benchmark's built-in twin of a user policy)."""

from .. import parts
from ..kernels._calls import helper


@helper(nrt=False, inline=True)
def key(j, t, running, el, jobs, run, pp, restart_s):
    return jobs.gpus[j], run.attained[j] + el


POLICY = parts.POLICIES.register("fewest-gpus-las", parts.Policy(
    "fewest-gpus-las", 90, preemptive=True, dynamic=True, key=key, description="fewest GPUs, then LAS"))
'''

USER = '''
import numba
import fastblox


def las_job(job, now):
    return job.attained_s


def srtf_job(job, now):
    return job.remaining_s


def two_key_job(job, now):
    return job.num_gpus, job.attained_s


def las_np(jobs, now):
    return jobs.attained_s


def srtf_np(jobs, now):
    return jobs.remaining_s


def two_key_np(jobs, now):
    return jobs.num_gpus * 1e9 + jobs.attained_s


EXAMPLES = {
    "LAS": ("las", las_job, las_np),
    "SRTF": ("srtf", srtf_job, srtf_np),
    "fewest GPUs, then LAS": ("fewest-gpus-las", two_key_job, two_key_np),
}
'''


def child(n: int, repeats: int, py_repeats: int) -> dict:
    sys.path.insert(0, os.path.dirname(__file__))
    ns: dict = {}
    exec(compile(USER, "bench_userpol_policies.py", "exec"), ns)
    import numba

    import fastblox
    from fastblox import userpol

    w = fastblox.gavel_like_workload(n, seed=0)
    cluster = "16x8"

    def run(pol):
        return fastblox.simulate(w, cluster=cluster, policy=pol)

    rows = []
    for label, (builtin, job_fn, np_fn) in ns["EXAMPLES"].items():
        fastblox.policy(np_fn.__name__ + "-rowwise", rowwise=True, replace=True)(np_fn)
        forms = {"built-in": builtin, "per-job, compiled": userpol.make_policy(job_fn.__name__, job_fn),
                 "numpy, rowwise=True": np_fn.__name__ + "-rowwise", "numpy, every active job": np_fn,
                 "njit array, every active job": numba.njit(np_fn)}
        ref = run(builtin)
        row = {"policy": label, "steps": ref.summary["num_steps"]}
        for form, pol in forms.items():
            res = run(pol)  # (compiles or loads its kernel; checked before timing)
            if not res.jobs.equals(ref.jobs):
                raise SystemExit(f"bench_userpol: {label} {form} differs from the built-in")
            reps = py_repeats if "every" in form else repeats
            times = [res.summary["sim_wall_s"]] + [run(pol).summary["sim_wall_s"] for _ in range(reps - 1)]
            row[form] = statistics.median(times)
            print(f"{label:24s} {form:28s} {row[form]:8.3f} s", file=sys.stderr, flush=True)
        rows.append(row)
    from fastblox.examples.tiresias_user import tiresias

    ref = run("tiresias")
    row = {"policy": "Tiresias (2D-LAS), with state", "steps": ref.summary["num_steps"]}
    for form, pol in (("built-in", "tiresias"), ("per-job, compiled", tiresias())):
        res = run(pol)
        if not res.jobs.select(ref.jobs.columns).equals(ref.jobs):
            raise SystemExit(f"bench_userpol: Tiresias {form} differs from the built-in")
        row[form] = statistics.median([res.summary["sim_wall_s"]] + [run(pol).summary["sim_wall_s"]
                                                                     for _ in range(repeats - 1)])
        print(f"{'Tiresias':24s} {form:28s} {row[form]:8.3f} s", file=sys.stderr, flush=True)
    rows.append(row)
    return {"rows": rows, "jobs": n, "cluster": cluster}


COMPILE = '''
import json, resource, time, fastblox
@fastblox.policy("mine", per_job=True)
def mine(job, now):
    return job.num_gpus, job.attained_s
w = fastblox.gavel_like_workload(50, seed=0)
r = fastblox.simulate(w, cluster="2x8", policy="mine")
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"compile_s": r.summary["compile_s"], "cpu_s": ru.ru_utime + ru.ru_stime}))
'''


def compile_times(env: dict) -> dict:
    """A per-job policy's kernel on an empty cache, then loaded from it (fresh processes)."""
    out = {}
    with tempfile.TemporaryDirectory() as cache:
        e = dict(env, NUMBA_CACHE_DIR=cache)
        for k in ("cold", "warm"):
            p = subprocess.run([sys.executable, "-c", COMPILE], env=e, capture_output=True, text=True, check=True)
            out[k] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


def package_copy(root: Path) -> Path:
    """The package with the two-key built-in added, laid out as installed, under ``root``."""
    sys.path.insert(0, str(ROOT / "tests"))
    from pkgcopy import installed_copy

    pkg = installed_copy(root)
    (pkg / "policies" / "fewest_gpus_las.py").write_text(TWO_KEY_BUILTIN)
    with open(pkg / "policies" / "__init__.py", "a") as f:
        f.write("from . import fewest_gpus_las  # noqa: E402,F401\n")
    return root


FORMS = ("per-job, compiled", "numpy, rowwise=True", "numpy, every active job", "njit array, every active job")


def render(d: dict) -> str:
    lines = [f"{d['jobs']:,} Gavel-style jobs (`gavel_like_workload(seed=0)`) on {d['cluster']} GPUs, events, "
             f"preemptive; simulation seconds, median of repeats, each form's results identical to the "
             f"built-in's job by job ({d['machine']}):", "",
             "| policy | steps | built-in | " + " | ".join(FORMS) + " |", "|---|---:|---:|" + "---:|" * len(FORMS)]
    for r in d["rows"]:
        b = r["built-in"]
        cells = [f"{r[f]:.2f} s ({r[f] / b:.1f}×)" if f in r else "—" for f in FORMS]
        lines.append(f"| {r['policy']} | {r['steps']:,} | {b:.2f} s | " + " | ".join(cells) + " |")
    c = d["compile"]
    lines += ["", f"Compiling a per-job policy's kernel (a fresh process, empty numba cache): "
              f"{c['cold']['compile_s']:.0f} s ({c['cold']['cpu_s']:.0f} CPU-s for the whole process); "
              f"loading it from the cache in the next process: {c['warm']['compile_s']:.2f} s."]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4,000 jobs, fewer repeats")
    ap.add_argument("--no-write", action="store_true", help="print, do not update docs/performance.md")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, default=None)
    a = ap.parse_args(argv)
    n = a.jobs or (4000 if a.quick else 20_000)
    repeats, py_repeats = (3, 1) if a.quick else (5, 3)
    if a.child:
        print(json.dumps(child(n, repeats, py_repeats)))
        return 0
    cache = OUT / "userpol-cache"
    with tempfile.TemporaryDirectory() as tmp:
        src = package_copy(Path(tmp) / "src")
        env = dict(os.environ, PYTHONPATH=str(src), NUMBA_CACHE_DIR=str(cache))
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, __file__, "--child", "--jobs", str(n)] + (["--quick"] if a.quick else []),
                           env=env, cwd=src, stdout=subprocess.PIPE, text=True, check=True)
        d = json.loads(p.stdout.strip().splitlines()[-1])
        d["compile"] = compile_times(env)
    d["machine"] = machine()
    d["bench_s"] = time.perf_counter() - t0
    save("userpol", d)
    text = render(d)
    print(text)
    if not a.no_write and not a.quick:
        update_readme("userpol", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
