"""Helpers shared by the benchmarks: medians of repeats, machine info, README tables."""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"


def timed(fn, repeats: int = 5):
    """Run ``fn`` ``repeats`` times; returns (median seconds, all times, last result)."""
    times, res = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, res


def run_process(cmd, env=None, cwd=None) -> tuple[float, int, float]:
    """Run ``cmd`` in a fresh process; returns (wall seconds, peak RSS in bytes, CPU seconds) of
    that process. CPU comes from ``os.wait4``'s rusage (this child's alone). The peak RSS is the
    child's own ``VmHWM`` when it reports one (``CLI`` does: the line ``VmHWM: N kB`` on stderr),
    else wait4's ``ru_maxrss``, which Linux carries over ``exec`` from the address space the child
    was forked with: a child of a large benchmark process reports that process's size."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}: {err.read().decode()[-2000:]}")
        err.seek(0)
        hwm = [ln for ln in err.read().decode(errors="replace").splitlines() if ln.startswith("VmHWM:")]
    rss = int(hwm[-1].split()[1]) * 1024 if hwm else ru.ru_maxrss * 1024
    return wall, rss, ru.ru_utime + ru.ru_stime


# `fastblox ARGS` in-process, then its peak RSS (this process's address space only) on stderr
CLI = [sys.executable, "-c", "import sys; from fastblox.cli import main; rc = main(sys.argv[1:]); "
       "sys.stderr.write(next((ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')), '')); "
       "sys.exit(rc)"]


def cold_start(args: list[str], warm_repeats: int = 1) -> dict:
    """``fastblox ARGS`` in fresh processes: first with an empty numba cache (everything compiles),
    then ``warm_repeats`` times with that cache warm. Also times ``import fastblox`` alone.
    Returns seconds (``empty_cache_s``, ``warm_cache_s`` = median of the warm runs, ``warm_all_s``,
    ``warm_cpu_s`` = median CPU seconds of the warm runs, ``import_s``) and the peak RSS of the warm
    runs (``warm_peak_rss_bytes``, the largest)."""
    out: dict = {"args": list(args)}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        out["empty_cache_s"], out["empty_cache_peak_rss_bytes"], out["empty_cache_cpu_s"] = run_process(CLI + list(args), env)
        warm = [run_process(CLI + list(args), env) for _ in range(warm_repeats)]
    out["warm_all_s"] = [w for w, _, _ in warm]
    out["warm_cache_s"] = statistics.median(out["warm_all_s"])
    out["warm_all_cpu_s"] = [c for _, _, c in warm]
    out["warm_cpu_s"] = statistics.median(out["warm_all_cpu_s"])
    out["warm_peak_rss_bytes"] = max(r for _, r, _ in warm)
    out["import_s"] = run_process([sys.executable, "-c", "import fastblox"])[0]
    return out


def machine() -> str:
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def save(name: str, data: dict) -> Path:
    OUT.mkdir(parents=True, exist_ok=True)
    p = OUT / f"{name}.json"
    p.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return p


def update_section(path: Path, section: str, text: str, comment: str = "") -> None:
    """Replace the block between ``<!-- bench:SECTION:start -->`` and ``...:end -->`` of a file
    (in a source file, each marker after ``comment``, e.g. ``"# "``)."""
    s = Path(path).read_text()
    start, end = f"{comment}<!-- bench:{section}:start -->", f"{comment}<!-- bench:{section}:end -->"
    if start not in s:
        raise SystemExit(f"{Path(path).name} has no {start} marker")
    pat = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    Path(path).write_text(pat.sub(lambda _: f"{start}\n{text.rstrip()}\n{end}", s))


#: the files that hold benchmark blocks (the tables are in docs/performance.md, a line or two in the README)
BLOCK_FILES = (ROOT / "README.md", ROOT / "docs" / "performance.md")


def update_readme(section: str, text: str) -> None:
    """Replace the block between ``<!-- bench:SECTION:start -->`` and ``...:end -->`` in whichever
    of :data:`BLOCK_FILES` holds it."""
    for path in BLOCK_FILES:
        if f"<!-- bench:{section}:start -->" in path.read_text():
            return update_section(path, section, text)
    raise SystemExit(f"no <!-- bench:{section}:start --> marker in " + ", ".join(p.name for p in BLOCK_FILES))
