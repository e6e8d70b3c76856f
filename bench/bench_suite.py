"""The test suite's own time (issue 13, part 6): ``pytest -q`` as the README runs it (the fast part:
tests marked slow are left out outside CI; workers as pyproject's ``addopts`` sets them), first on
an EMPTY numba cache (cold: every kernel the tests need is compiled), then again on the cache it
filled (warm); then, once, the whole suite as CI runs it (``CI=true``: slow tests and CI's
hypothesis profile included) on a cold cache. Wall seconds of the pytest process. Writes
bench/out/suite.json and the ``bench:suite`` block of docs/testing.md.

    python bench/bench_suite.py            # cold, warm, and the whole suite cold (~20 min on 2 cores)
    python bench/bench_suite.py --no-full  # cold and warm only (~5 min)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _util import ROOT, machine, save, update_section  # noqa: E402


def pytest_run(env: dict) -> dict:
    """``python -m pytest -q`` in the repository with ``env``: wall seconds and pytest's summary line."""
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = p.communicate()[0]
    wall = time.perf_counter() - t0
    lines = [ln for ln in out.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
    summary = re.sub(r"=+", "", lines[-1]).strip() if lines else out[-500:]
    if p.returncode != 0:
        raise SystemExit(f"pytest failed ({p.returncode}): {summary}")
    return {"wall_s": wall, "summary": summary}


def measure(env_extra: dict, warm_too: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="numba-suite-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, **env_extra)
        for k in ("CI", "HYPOTHESIS_PROFILE"):
            if k not in env_extra:
                env.pop(k, None)
        r = {"cold": pytest_run(env)}
        if warm_too:
            r["warm"] = pytest_run(env)
    return r


def block(d: dict) -> str:
    fast = d["fast"]
    s = (f"Measured by `python bench/bench_suite.py` on {d['machine']} ({d['date']}): `pytest -q` (the README's "
         f"command: slow tests left out, {d['workers']}) **{fast['cold']['wall_s']:.0f} s on an empty numba cache**, "
         f"{fast['warm']['wall_s']:.0f} s warm ({fast['cold']['summary']})")
    if d.get("full"):
        s += (f"; the whole suite as CI runs it (`CI=true`: slow tests and 60 examples per property included), "
              f"cold: {d['full']['cold']['wall_s'] / 60:.1f} min ({d['full']['cold']['summary']})")
    return s + "."


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-full", action="store_true", help="skip the whole suite (CI's run)")
    a = ap.parse_args()
    d = {"machine": machine(), "date": time.strftime("%Y-%m-%d"),
         "workers": f"{min(os.cpu_count() or 1, 4)} workers", "fast": measure({}, True)}
    print("fast:", d["fast"], flush=True)
    if not a.no_full:
        d["full"] = measure({"CI": "true"}, False)
        print("full:", d["full"], flush=True)
    save("suite", d)
    text = block(d)
    print(text)
    update_section(ROOT / "docs" / "testing.md", "suite", text)


if __name__ == "__main__":
    main()
