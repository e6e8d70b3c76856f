"""Pollux's own allocation search (NSGA-II, its ``pollux.py``) on the allocation problems that
``bench/pollux.py --dump`` saved from the ``--compat pollux`` replay, against the answer of
fastblox's search, both scored by Pollux's own ``Problem`` (its objective: the power mean of the
jobs' scaled speedups)::

    SIM=/path/to/adaptdl/simulator   # petuum/adaptdl osdi21-artifact, simulator/, unmodified
    $SIM_PYTHON bench/pollux_vs_nsga2.py --simulator $SIM bench/out/pollux_instances.json

Runs in an environment where that code imports (numpy, scipy, autograd, pymoo 0.4.2): it imports
nothing from fastblox. NumPy >= 1.24 lacks the ``np.int``/``np.float`` aliases the code uses; they
are set back to the builtins before it is imported. Writes ``bench/out/pollux_nsga2.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "out" / "pollux_nsga2.json"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--simulator", type=Path, required=True, help="the Pollux simulator's folder")
    ap.add_argument("instances", type=Path)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    for name, v in (("int", int), ("float", float), ("bool", bool)):
        if not hasattr(np, name):
            setattr(np, name, v)
    sys.path.insert(0, str(a.simulator))
    from goodput import GoodputFunction
    from pollux import PolluxPolicy, Problem
    from speedup import SpeedupFunction
    from utils import JobInfo, NodeInfo

    rounds, cpu_theirs, cpu_mine = [], [], []
    for k, inst in enumerate(json.loads(a.instances.read_text())):
        def infos():
            out = {}
            for jd in inst["jobs"]:
                if jd["pp"] is None:
                    fn = lambda n, r: r  # noqa: E731
                else:
                    fn = SpeedupFunction(GoodputFunction(jd["pp"], jd["grad"], jd["init_bs"]), jd["max_bs"],
                                         (jd["min_local"], jd["max_local"]), accumulation=True)
                info = JobInfo(resources={"nvidia.com/gpu": 1}, speedup_fn=fn, creation_timestamp=jd["submit"],
                               attained_service=jd["attained"], min_replicas=0, max_replicas=jd["max_replicas"],
                               preemptible=True)
                info.num_restarts, info.age = jd["restarts"], jd["age"]
                out[jd["key"]] = info
            return out

        nodes = {i: NodeInfo({"nvidia.com/gpu": inst["per_node"]}, preemptible=False) for i in range(inst["nodes"])}
        base = {jd["key"]: jd["base"] for jd in inst["jobs"] if jd["base"]}
        np.random.seed(a.seed + k)
        pol = PolluxPolicy()
        t0 = time.process_time()
        theirs, _ = pol.optimize(infos(), nodes, base, nodes[0])
        cpu_theirs.append(time.process_time() - t0)
        cpu_mine.append(inst["cpu_s"])
        jobs = infos()
        order = sorted(jobs, key=lambda key: (jobs[key].attained_service, jobs[key].creation_timestamp))
        jobs = {key: jobs[key] for key in order}

        def state(alloc):
            s = np.zeros((len(order), inst["nodes"]), dtype=int)
            for i, key in enumerate(order):
                for n in alloc.get(key, []):
                    s[i, n] += 1
            return s

        base_state = state(base)
        prob = Problem(list(jobs.values()), list(nodes.values()), base_state)
        mine = {jd["key"]: jd["mine"] for jd in inst["jobs"]}
        x = np.stack([state(theirs).ravel(), state(mine).ravel(), base_state.ravel()])
        f = prob.evaluate(x, return_values_of=["F"])
        rounds.append({"now": inst["now"], "jobs": len(order), "nsga2": float(-f[0, 0]), "mine": float(-f[1, 0]),
                       "unchanged": float(-f[2, 0])})
        print(rounds[-1], f"{cpu_theirs[-1]:.1f} s", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"rounds": rounds, "cpu_nsga2_s": float(np.mean(cpu_theirs)),
                               "cpu_mine_s": float(np.mean(cpu_mine)), "seed": a.seed}, indent=1))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
