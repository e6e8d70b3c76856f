"""Policy benchmarks (issue 4): every policy on the 2,000-job peer workload and on a 100k-job trace,
with the planners' LP cost per allocation. Checks outputs before timing, takes medians, writes
bench/out/policies.json and the README's policy block.

    python bench/bench_policies.py              # both workloads (the 100k Gavel runs take minutes)
    python bench/bench_policies.py --quick      # the 2,000-job workload only
    python bench/bench_policies.py --only sia   # these policies' rows only, merged into the block

The 2,000-job workload (../shared/peer-traces/gavel_n2000_lam400_s0.trace, Gavel's job types) runs
on Gavel's heterogeneous cluster (36 V100, 36 P100, 36 K80 in 4-GPU servers) with Gavel's
throughputs; Gavel's own simulator takes 6–46 CPU-seconds per policy on it (docs/fidelity.md).
The 100k-job trace is the first 100,000 jobs of the real Philly trace
(../shared/traces/philly-rfold) on 2,400 GPUs of three types. Each of its runs is a child process
stopped after ``--budget-s`` (default 600 s); a policy that takes longer is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _util import OUT, machine, save, update_readme  # noqa: E402

import fastblox  # noqa: E402
from fastblox.traces import read_trace  # noqa: E402

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared")
POLICIES = ["fifo", "las", "srtf", "tiresias", "tiresias-gittins", "themis", "optimus", "gavel",
            "gavel-las-agnostic", "gavel-ftf", "gavel-fifo", "sia", "pollux"]
SMALL = ("peer 2,000 jobs", os.path.join(SHARED, "peer-traces", "gavel_n2000_lam400_s0.trace"), None,
         "v100:9x4,p100:9x4,k80:9x4")
BIG = ("Philly 100k jobs", os.path.join(SHARED, "traces", "philly-rfold", "jobs.csv.gz"), 100_000,
       "v100:100x8,p100:100x8,k80:100x8")


def check(res, n):
    j = res.jobs
    fin = j["finish_s"].to_numpy()
    assert res.summary["num_finished"] == n and np.isfinite(fin).all(), "every job finishes"
    assert (fin >= j["submit_s"].to_numpy()).all()
    assert (j["attained_s"].to_numpy() > 0).all()


def bench_child(label, path, head, cluster, policies, repeats, budget_s):
    """``bench`` of each policy in a fresh interpreter stopped after ``budget_s`` seconds."""
    rows = []
    for pol in policies:
        cmd = [sys.executable, __file__, "--child", pol, "--repeats", str(repeats)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=budget_s, check=True)
        except subprocess.TimeoutExpired:
            rows.append({"workload": label, "policy": pol, "timeout_s": budget_s})
            print(f"{label:18s} {pol:20s} stopped after {budget_s:.0f} s", flush=True)
            continue
        except subprocess.CalledProcessError as e:
            raise SystemExit(f"bench_policies: {pol} failed:\n{e.stderr[-3000:]}")
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
        print(p.stdout.strip().splitlines()[-2], flush=True)
    return rows


def bench(label, path, head, cluster, policies, repeats):
    w = read_trace(path, on_bad_rows="drop")
    if head:
        w = w.head(head)
    rows = []
    for pol in policies:
        fastblox.simulate(w.head(min(len(w), 200)), cluster=cluster, policy=pol)  # warm (compile, imports)
        res = fastblox.simulate(w, cluster=cluster, policy=pol)
        check(res, len(w))
        reps = repeats if res.summary["sim_wall_s"] < 20 else 1
        times = [res.summary["sim_wall_s"]]
        for _ in range(reps - 1):
            times.append(fastblox.simulate(w, cluster=cluster, policy=pol).summary["sim_wall_s"])
        s = res.summary
        p = s.get("planner", {})
        rows.append({
            "workload": label, "policy": pol, "sim_s": statistics.median(times), "repeats": len(times),
            "steps": s["num_steps"], "avg_jct_h": s["avg_jct_s"] / 3600, "preemptions": s["num_preemptions"],
            "allocations": p.get("allocations"), "lp_ms_per_allocation": p.get("lp_ms_per_allocation"),
            "lp_s": p.get("lp_s"), "us_per_step": 1e6 * statistics.median(times) / max(s["num_steps"], 1),
            "planner": p,
        })
        print(f"{label:18s} {pol:20s} {rows[-1]['sim_s']:8.3f} s  {s['num_steps']:7d} steps  "
              f"JCT {rows[-1]['avg_jct_h']:.2f} h  LP {p.get('lp_ms_per_allocation', '-')} ms/alloc", flush=True)
    return rows


def table(rows) -> str:
    out = ["| workload | policy | simulation | steps | µs per step | avg JCT | preemptions | LP per allocation (allocations) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "timeout_s" in r:
            out.append(f"| {r['workload']} | `{r['policy']}` | stopped after {r['timeout_s']:.0f} s | | | | | |")
            continue
        lp = (f"{r['lp_ms_per_allocation']:.1f} ms ({r['allocations']})" if r["lp_ms_per_allocation"] is not None
              else "–")
        out.append(f"| {r['workload']} | `{r['policy']}` | {r['sim_s']:.3f} s | {r['steps']:,} | {r['us_per_step']:,.1f} | "
                   f"{r['avg_jct_h']:.2f} h | {r['preemptions']:,} | {lp} |")
    return "\n".join(out)


def render(d: dict) -> str:
    return (f"Measured by `python bench/bench_policies.py` on {d['machine']} ({d.get('date', '')}); "
            "simulation time only (median of 3 runs, one run where a run takes over 20 s), planners and LPs included.\n\n"
            + table(d["rows"]))


def block_text() -> str:
    """The policies block as the docs hold it now (between its markers)."""
    import re

    from _util import BLOCK_FILES

    for path in BLOCK_FILES:
        m = re.search(r"<!-- bench:policies:start -->\n(.*?)\n<!-- bench:policies:end -->", path.read_text(), re.S)
        if m:
            return m.group(1)
    raise SystemExit("no <!-- bench:policies:start --> marker")


def merge(old: str, d: dict) -> str:
    """``old`` (the block) with the rows of ``d``'s policies replaced or added after their
    workload's last row, and a line saying when and how those rows were measured."""
    new = {(r["workload"], r["policy"]): line for r, line in zip(d["rows"], table(d["rows"]).splitlines()[2:])}
    names = ", ".join(f"`{p}`" for p in dict.fromkeys(r["policy"] for r in d["rows"]))
    # (the line of an earlier --only run of other policies stays)
    lines = [ln for ln in old.splitlines() if not ln.startswith(f"Rows of {names} measured")]
    while lines and not lines[-1].strip():
        lines.pop()
    for key, line in new.items():
        row = f"| {key[0]} | `{key[1]}` |"
        at = [i for i, ln in enumerate(lines) if ln.startswith(row)]
        if at:
            lines[at[0]] = line
        else:
            same = [i for i, ln in enumerate(lines) if ln.startswith(f"| {key[0]} |")]
            lines.insert(same[-1] + 1 if same else len(lines), line)
    return "\n".join(lines) + (f"\n\nRows of {names} measured by `python bench/bench_policies.py --only "
                               f"{','.join(dict.fromkeys(r['policy'] for r in d['rows']))}` on {d['machine']} ({d['date']})."
                               + "".join(proofs(r) for r in d["rows"]))


def proofs(r) -> str:
    """What a row's planner proved of its answers (``sia``: rounds not proven optimal, largest gap;
    ``pollux``: rounds whose plan could not be packed)."""
    p = r.get("planner") or {}
    if "not_proven_optimal" not in p:
        return ""
    if "largest_proven_gap" not in p:
        return (f" {r['workload']}, `{r['policy']}`: {p['not_proven_optimal']:,} of {p['allocations']:,} rounds not "
                "proven optimal (the plan over GPU counts could not be packed; the elastic engine's local search "
                f"would run there), {p['programme_rounds']:,} plans over classes of gangs.")
    a = p["allocations"]
    return (f" {r['workload']}, `{r['policy']}`: {a - p['not_proven_optimal']:,} of {a:,} rounds proven optimal, the "
            f"others within {100 * p['largest_proven_gap']:.3f} % of the optimum (answers: "
            + ", ".join(f"{k} {v:,}" for k, v in p["answers"].items()) + ").")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the 2,000-job workload only")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--budget-s", type=float, default=600.0, help="stop a 100k-job run after this long (default 600)")
    ap.add_argument("--only", metavar="P1,P2", help="run these policies only and merge their rows into the block")
    ap.add_argument("--child", metavar="POLICY", help=argparse.SUPPRESS)
    ap.add_argument("--from-json", action="store_true", help="re-render the README block from bench/out/policies.json")
    a = ap.parse_args(argv)
    if a.from_json:
        d = json.loads((OUT / "policies.json").read_text())
        update_readme("policies", render(d))
        return 0
    if a.child:
        print(json.dumps(bench(*BIG, [a.child], a.repeats)[0]))
        return 0
    policies = POLICIES
    if a.only:
        policies = [p.strip() for p in a.only.split(",")]
        unknown = [p for p in policies if p not in POLICIES]
        if unknown:
            raise SystemExit(f"bench_policies: --only: {', '.join(unknown)} not in {', '.join(POLICIES)}")
    rows = bench(*SMALL, policies, a.repeats)
    if not a.quick:
        rows += bench_child(*BIG, policies, a.repeats, a.budget_s)
    d = {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "rows": rows}
    save("policies-only" if a.only else "policies", d)
    text = merge(block_text(), d) if a.only else render(d)
    print(text)
    if not a.no_readme and not a.quick:
        update_readme("policies", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
