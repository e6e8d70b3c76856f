"""How strong is the test suite? Plant realistic bugs one at a time and count how many it catches.

Each mutant below is one bug a careful engineer could write: the file, the exact original
snippet (it must occur once: a mutant whose snippet is gone is reported as stale, not skipped
silently), its replacement and the tests a developer would run for that file. Every mutant is
applied to a copy of the repository (``.git`` left out) in a temporary directory; the copy's
tests run against the copy's package (``PYTHONPATH``) with a fixed hypothesis seed, stopping at
the first failure. A mutant is *killed* when its tests fail (an assertion, an error, or the
per-test time limit: a hang is a failure too), *survived* when they pass.

numba caches a kernel by its own source file only. The baseline run (the unmutated copy, which
must pass) warms a cache; a mutant outside ``kernels/`` uses it as it is (the kernel files keep
their timestamps), a mutant under ``kernels/`` gets a copy of it without the entries of the
mutated module and of every kernel module that imports it, directly or not (those recompile:
~1.5-3 min when that includes the engine). The whole list takes ~1 h on 2 busy cores; ``--only``
runs a few.

    python bench/mutants.py                      # all: table on stdout, JSON in bench/out/mutants.json
    python bench/mutants.py --only las-gpu-key p99-as-p95
    python bench/mutants.py --list

``docs/testing.md`` has the last score and what survived.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
MAIN = "tests/test_engine_reference.py::test_kernel_matches_reference"
QUEUES = "tests/test_engine_reference_queues.py"
REALISM = "tests/test_engine_reference_realism.py"
SESSION_LIMIT_S = 3 * 3600  # a whole pytest session (the baseline runs every mutant's tests)


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository
    old: str  # exact snippet, found once
    new: str
    tests: tuple  # pytest arguments (files, node ids, -k)
    why: str  # the bug it stands for
    boundscheck: bool = False  # run the tests with numba's bounds checking (a build of its own: cold cache)


MUTANTS = (
    # ---- the event loop (kernels/engine.py)
    Mutant("tiresias-crossing-strict", "kernels/engine.py",
           "run.launch_t[j] + (thr[k] - ag) / g <= t", "run.launch_t[j] + (thr[k] - ag) / g < t", (QUEUES,),
           "a queue crossing at exactly t not counted: the wake-up re-arms for the same instant (issue 19's hang)"),
    Mutant("completion-strict", "kernels/engine.py",
           "while heap_n > 0 and heap_t[0] <= t:", "while heap_n > 0 and heap_t[0] < t:", (MAIN,),
           "a job finishing exactly at the step's time is not completed: the loop revisits that instant"),
    Mutant("las-gpu-key", "kernels/engine.py",
           "return 0, run.attained_gpu[j] + el * run.held[j]", "return 0, run.attained_gpu[j] + el", (MAIN,),
           "LAS-GPU's running key counts wall-seconds, not GPU-seconds (issue 19: escaped the main test)"),
    Mutant("srtf-ignores-restart", "kernels/engine.py",
           "    if policy == POL_SRTF:\n        left = run.work_left[j] - (max(0.0, el - restart_s)",
           "    if policy == POL_SRTF:\n        left = run.work_left[j] - (max(0.0, el)", (MAIN,),
           "SRTF's remaining work of a running job forgets the restart cost"),
    Mutant("admission-strict", "kernels/engine.py",
           "while demand + added <= theta * total_gpus and admit_to < next_arr:",
           "while demand + added < theta * total_gpus and admit_to < next_arr:", (MAIN,),
           "load admission refuses a job that brings demand exactly to θ × GPUs"),
    Mutant("checkpoint-ceil", "kernels/engine.py",
           "kept = math.floor(prod / ckpt_s) * ckpt_s", "kept = math.ceil(prod / ckpt_s) * ckpt_s", (REALISM,),
           "a stopped job keeps progress up to the next checkpoint instead of the last"),
    Mutant("promotion-sign", "kernels/engine.py",
           "return max(t, run.wait_t[j] + (promote * ran - run.pend0[j]))",
           "return max(t, run.wait_t[j] + (promote * ran + run.pend0[j]))", (QUEUES,),
           "Tiresias' starvation counter added instead of subtracted"),
    Mutant("rounds-floor", "kernels/engine.py",
           "t_new = max(math.ceil(t_ev / round_s) * round_s, tb + round_s)",
           "t_new = max(math.floor(t_ev / round_s) * round_s, tb + round_s)", (MAIN,),
           "rounds mode: an event mid-round is scheduled at the boundary before it, not after"),
    Mutant("fail-frees-down-gpus", "kernels/engine.py",
           "                            if nodes.up[nodes.gpu_node[alloc[o + x]]]:\n                                free += 1",
           "                            free += 1", (REALISM,),
           "a job killed by a node failure gives back GPUs of the failed node too"),
    # ---- placement and rates
    Mutant("best-fit-strict", "kernels/placement.py",
           "if f >= n and f < best_free and _eligible(nodes, nd, row):",
           "if f > n and f < best_free and _eligible(nodes, nd, row):", (MAIN,),
           "consolidated placement's best fit skips a node with exactly n free GPUs"),
    Mutant("next-node-past-end", "kernels/placement.py",
           "        wi += 1\n        if wi >= nw:\n            return -1",
           "        wi += 1\n        if wi > nw:\n            return -1", (REALISM,),
           "the free-node bit scan reads one word past the end (caught by bounds checking, else by luck; "
           "reached only when a GPU type or rack has too few free GPUs, which one-type clusters never have)",
           boundscheck=True),
    Mutant("rack-factor-always", "kernels/rates.py",
           "        if multi_rack:\n            r *= rack_factor", "        r *= rack_factor", (REALISM,),
           "the rack factor slows every gang spanning nodes, not only those spanning racks"),
    # ---- results (fastblox/results.py)
    Mutant("p99-as-p95", "fastblox/results.py",
           '("p50_jct_s", "p95_jct_s", "p99_jct_s"), _pcts(jct, [50, 95, 99])',
           '("p50_jct_s", "p95_jct_s", "p99_jct_s"), _pcts(jct, [50, 95, 95])', ("tests/test_cli.py",),
           "the p99 JCT computed as the p95 (issue 19)"),
    Mutant("rho-p99-as-p95", "fastblox/results.py",
           '("rho_p50", "rho_p95", "rho_p99"), _pcts(rho, [50, 95, 99])',
           '("rho_p50", "rho_p95", "rho_p99"), _pcts(rho, [50, 95, 95])', ("tests/test_cli.py",),
           "the p99 of finish-time fairness computed as the p95"),
    Mutant("makespan-from-zero", "fastblox/results.py",
           '"makespan_s": float(finish[done].max() - w.submit_s[done].min())',
           '"makespan_s": float(finish[done].max())', ("tests/test_cli.py", "tests/test_blox_compat.py"),
           "the makespan measured from t = 0 instead of the first submission"),
    Mutant("utilisation-span", "fastblox/results.py",
           '"utilisation": float(attained_gpu.sum() / (cluster.total_gpus * span))',
           '"utilisation": float(attained_gpu.sum() / (cluster.total_gpus * t_end))',
           ("tests/test_cli.py", "tests/test_blox_compat.py", "tests/test_engine_reference.py"),
           "utilisation over [0, end] instead of the run's span"),
    # ---- traces and speed
    Mutant("philly-min-in-seconds", "fastblox/traces/philly.py",
           "BLOX_MIN_S = math.pow(10, 1.5) * 60", "BLOX_MIN_S = math.pow(10, 1.5)", ("tests/test_traces.py",),
           "Blox's lower duration bound (10^1.5 min) written in seconds (issue 19)"),
    Mutant("philly-max-in-seconds", "fastblox/traces/philly.py",
           "BLOX_MAX_S = math.pow(10, 4) * 60", "BLOX_MAX_S = math.pow(10, 4)", ("tests/test_traces.py",),
           "Blox's upper duration bound (10^4 min) written in seconds"),
    Mutant("alibaba-gpu-milli", "fastblox/traces/csv_formats.py",
           "gpu_fraction = np.where(frac_pod, milli / 1000.0,", "gpu_fraction = np.where(frac_pod, milli / 100.0,",
           ("tests/test_traces.py",), "a GPU-sharing pod's share read as percent instead of thousandths"),
    Mutant("serial-fraction", "fastblox/speed.py",
           "DEFAULT_SERIAL_FRACTION = 0.05", "DEFAULT_SERIAL_FRACTION = 0.5", (REALISM, "tests/test_throughput.py"),
           "Amdahl's serial fraction of unknown models off by ten"),
)


def copy_repo(dst: Path) -> None:
    """A fresh copy (over an earlier one): the files keep their sources' timestamps, so a cache
    warmed on an earlier copy at the same place stays valid."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(ROOT, dst, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.pyc", ".hypothesis", ".pytest_cache", "*.egg-info", "out"))


def importers(module: str, kernels: Path) -> set:
    """``module`` and the kernel modules that import it, directly or through others."""
    deps = {}
    for f in kernels.glob("*.py"):
        text = f.read_text()
        deps[f.stem] = set(re.findall(r"^from \.(\w+) import", text, flags=re.M)) | set(
            re.findall(r"^from \. import (\w+)", text, flags=re.M))
    out, grew = {module}, True
    while grew:
        more = {m for m, d in deps.items() if d & out} - out
        out |= more
        grew = bool(more)
    return out


def kernel_cache(base: Path, dst: Path, stale: set) -> Path:
    """A copy of the warm cache ``base`` without the entries of the ``stale`` kernel modules."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(base, dst)
    for f in dst.glob("kernels_*/*"):
        if f.name.split(".", 1)[0] in stale:
            f.unlink()
    return dst


def env_for(repo: Path, cache: Path, boundscheck: bool = False) -> dict:
    env = dict(os.environ, PYTHONPATH=str(repo), NUMBA_CACHE_DIR=str(cache), HYPOTHESIS_PROFILE="ci")
    env.pop("NUMBA_BOUNDSCHECK", None)
    if boundscheck:
        env["NUMBA_BOUNDSCHECK"] = "1"
    return env


def run_tests(repo: Path, cache: Path, tests, timeout_s: int, boundscheck: bool = False) -> tuple[str, float, str]:
    """``(outcome, seconds, detail)``: outcome ``passed``, ``failed``, ``timeout`` (pytest-timeout
    or this function's own limit: a hang) or ``error`` (nothing collected: a broken mutant)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-n", "0", "-p", "no:cacheprovider", "--hypothesis-seed=0",
           "-o", f"timeout={timeout_s}", *tests]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=repo, env=env_for(repo, cache, boundscheck), capture_output=True, text=True,
                           timeout=SESSION_LIMIT_S)
    except subprocess.TimeoutExpired:  # (a safety net: pytest-timeout ends a hung test's session first)
        return "timeout", time.perf_counter() - t0, f"the session ran over {SESSION_LIMIT_S} s"
    dt = time.perf_counter() - t0
    text = p.stdout + p.stderr
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, flags=re.M)
    if "Timeout" in text and p.returncode != 0:
        return "timeout", dt, failed[0] if failed else "pytest-timeout"
    if p.returncode == 0:
        return "passed", dt, ""
    if p.returncode in (4, 5):
        return "error", dt, text.strip().splitlines()[-1] if text.strip() else f"exit {p.returncode}"
    return "failed", dt, failed[0] if failed else text.strip().splitlines()[-1]


def check_copy_is_imported(repo: Path, cache: Path) -> None:
    out = subprocess.run([sys.executable, "-c", "import fastblox; print(fastblox.__file__)"], cwd=repo,
                         env=env_for(repo, cache), capture_output=True, text=True, check=True).stdout.strip()
    if not out.startswith(str(repo)):
        raise SystemExit(f"the copy's tests would import {out}, not the copy in {repo}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run these mutants only")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per test (pytest-timeout) [900]")
    ap.add_argument("--json", type=Path, default=OUT / "mutants.json", help="where to write the results")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy")
    ap.add_argument("--workdir", type=Path, help="work in this directory and keep it (its warm cache is reused "
                                                 "by the next run given the same directory)")
    ap.add_argument("--skip-baseline", action="store_true",
                    help="trust the baseline of the last run in --workdir (the sources unchanged since)")
    a = ap.parse_args(argv)
    names = {m.name for m in MUTANTS}
    if a.only and set(a.only) - names:
        raise SystemExit(f"unknown mutant(s): {', '.join(sorted(set(a.only) - names))}")
    # the cheap ones first (no recompiling), the bounds-checked build last
    chosen = sorted((m for m in MUTANTS if not a.only or m.name in a.only),
                    key=lambda m: (m.boundscheck, m.path.startswith("kernels/")))
    if a.list:
        for m in MUTANTS:
            print(f"{m.name:26s} {m.path:30s} {m.why}")
        return 0
    for m in chosen:
        n = (ROOT / m.path).read_text().count(m.old)
        if n != 1:
            raise SystemExit(f"mutant {m.name}: its snippet occurs {n} times in {m.path} (stale: update it)")

    if a.skip_baseline and not a.workdir:
        raise SystemExit("--skip-baseline needs the --workdir of a run whose baseline passed")
    work = a.workdir.resolve() if a.workdir else Path(tempfile.mkdtemp(prefix="fastblox-mutants-"))
    repo, base_cache = work / "repo", work / "cache-base"
    copy_repo(repo)
    if (ROOT.parent / "shared").exists() and not (work / "shared").exists():  # the real traces, beside the repo
        (work / "shared").symlink_to(ROOT.parent / "shared")
    check_copy_is_imported(repo, base_cache)
    tests = sorted({t for m in chosen for t in m.tests})
    if not a.skip_baseline:
        print(f"baseline: {' '.join(tests)}", flush=True)
        outcome, dt, detail = run_tests(repo, base_cache, tests, a.timeout)
        if outcome != "passed":
            raise SystemExit(f"the unmutated copy does not pass its tests ({outcome}: {detail}): fix that first")
        print(f"baseline passed in {dt:.0f} s", flush=True)

    rows = []
    for i, m in enumerate(chosen):
        target = repo / m.path
        target.write_text((ROOT / m.path).read_text().replace(m.old, m.new))
        kernel = m.path.startswith("kernels/")
        cache = base_cache
        if m.boundscheck:
            cache = work / f"cache-{i}"  # numba's cache does not key on the flag: a cold one
            shutil.rmtree(cache, ignore_errors=True)
        elif kernel:
            cache = kernel_cache(base_cache, work / f"cache-{i}", importers(Path(m.path).stem, repo / "kernels"))
        outcome, dt, detail = run_tests(repo, cache, m.tests, a.timeout, m.boundscheck)
        shutil.copy2(ROOT / m.path, target)  # the original back, with its timestamp (the shared cache stays valid)
        if cache != base_cache:
            shutil.rmtree(cache, ignore_errors=True)
        status = "killed" if outcome in ("failed", "timeout") else "survived" if outcome == "passed" else "error"
        rows.append(dict(asdict(m), tests=list(m.tests), outcome=outcome, status=status, seconds=round(dt, 1),
                         detail=detail))
        print(f"{m.name:26s} {status:8s} {outcome:8s} {dt:6.0f} s  {detail}", flush=True)

    killed = sum(r["status"] == "killed" for r in rows)
    valid = sum(r["status"] != "error" for r in rows)
    score = killed / valid if valid else float("nan")
    print(f"\nmutation score: {killed}/{valid} killed ({100 * score:.0f} %)"
          + (f"; {len(rows) - valid} broken mutant(s) not counted" if valid < len(rows) else ""))
    print("\n| mutant | file | status | how | s |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['path']} | {r['status']} | {r['outcome']}: {r['detail']} | {r['seconds']:.0f} |")
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps({"killed": killed, "counted": valid, "score": score, "mutants": rows}, indent=1))
    if not a.keep and not a.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
