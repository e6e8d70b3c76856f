"""--compat synergy: Synergy's simulator (msr-fiddle/synergy) reproduced by fastblox.compat_synergy
and its kernel, against the simulator's own runs (datasets/synergy/results) and the plain-Python twin
(fastblox.reference.synergy)."""

from __future__ import annotations

import csv
import gzip
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastblox
from fastblox import compat_synergy as cs
from fastblox.errors import ConfigError, TraceError, WorkloadError
from fastblox.reference import synergy as ref
from fastblox.spec import OptionError, RunSpec

DATA = cs.data_dir()


def _cases() -> dict:
    with open(DATA / "results" / "cases.csv", newline="") as f:
        return {r["case"]: r for r in csv.DictReader(f)}


def _peer_runs() -> dict:
    """{(case, policy): {job_id: JCT s (NaN: never finished)}} of the simulator's own runs."""
    out = {}
    with gzip.open(DATA / "results" / "peer_runs.csv.gz", "rt", newline="") as f:
        for r in csv.DictReader(f):
            out.setdefault((r["case"], r["policy"]), {})[int(r["job_id"])] = float(r["jct_s"] or "nan")
    return out


CASES = _cases()
PEER = _peer_runs()


def _run_case(case, policy, engine="kernel"):
    c = CASES[case]
    w = cs.read_trace(DATA / "traces" / c["trace"])
    out = cs.simulate(w.extra["model"], w.submit_s, w.iterations, w.num_gpus, policy, int(c["servers"]),
                      int(c["gpus_per_server"]), {"cpus": int(c["cpus"]), "static": int(c["static"])}, engine=engine)
    return w, out


# ------------------------------------------------------------------ the simulator's own runs
@pytest.mark.parametrize("case,policy", sorted(PEER))
def test_every_job_as_in_the_simulators_run(case, policy):
    w, out = _run_case(case, policy)
    theirs = PEER[case, policy]
    ours = dict(zip(w.job_id.tolist(), (out["finish_s"] - w.submit_s).tolist()))
    assert sorted(ours) == sorted(theirs)
    for j, jct in theirs.items():
        assert (math.isnan(jct) and math.isnan(ours[j])) or ours[j] == pytest.approx(jct, abs=1e-6), j


def test_the_shipped_runs_cover_every_policy_and_trace():
    assert {p for _, p in PEER} == set(cs.POLICIES)
    assert len({c for c, _ in PEER}) >= 5


def test_synergy_beats_proportional_on_the_contended_trace():
    # the paper's claim on the simulator's runs themselves, and on ours (same numbers)
    for order in cs.ORDERINGS:
        fair = np.nanmean(list(PEER["synth200_c32", order + "+fair"].values()))
        tune = np.nanmean(list(PEER["synth200_c32", order + "+tune"].values()))
        assert tune < fair


# ------------------------------------------------------------------ kernel = reference
MODELS = ("alexnet", "res18", "res50", "mobilenet", "shufflenet", "gnmt", "transformer", "lstm", "m5", "deepspeech")


@st.composite
def problem(draw):
    servers = draw(st.integers(1, 4))
    per = draw(st.sampled_from([2, 4, 8]))
    ratio = draw(st.sampled_from([3, 4, 5]))
    n = draw(st.integers(1, 20))
    gpus = [draw(st.sampled_from([g for g in (1, 2, 3, 4, 8) if g <= servers * per])) for _ in range(n)]
    span = draw(st.sampled_from([3000, 30000]))  # (the wider: gaps in arrivals, which gaps= ends or waits out)
    arr = sorted(draw(st.lists(st.integers(0, span), min_size=n, max_size=n)))
    # (iterations over several orders of magnitude: jobs of one round and jobs of many, so that queues form)
    iters = [int(10 ** x) for x in draw(st.lists(st.floats(0, 5.3), min_size=n, max_size=n))]
    models = draw(st.lists(st.sampled_from(MODELS), min_size=n, max_size=n))
    policy = draw(st.sampled_from(cs.POLICIES))
    static = draw(st.integers(0, 1))
    mem = draw(st.sampled_from([500, 250]))
    return dict(models=models, submit=np.array(arr, float), iters=iters, gpus=gpus, policy=policy, servers=servers,
                per=per, opts={"cpus": ratio * per, "static": static, "mem_gb": mem, "gaps": draw(st.integers(0, 1))},
                theta=draw(st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0])))


def _both(p):
    args = (p["models"], p["submit"], p["iters"], p["gpus"], p["policy"], p["servers"], p["per"], p["opts"])
    kw = {"theta": p.get("theta", 0.0)}
    try:
        k = cs.simulate(*args, **kw)["finish_s"]
    except fastblox.errors.SimulationError:
        k = "failed"
    except WorkloadError:  # (never placeable under Greedy: checked before either engine runs)
        return "refused", "refused"
    try:
        r = cs.simulate(*args, engine="reference", **kw)["finish_s"]
    except RuntimeError:
        r = "failed"
    return k, r


@given(problem())
@settings(max_examples=100, deadline=None)
def test_kernel_matches_reference(p):
    base = p["policy"].partition("+")[0]
    for mode in ("+fair", "", "+tune"):  # (the three allocations of the drawn ordering)
        k, r = _both(dict(p, policy=base + mode))
        if isinstance(k, str) or isinstance(r, str):
            assert k == r
        else:
            np.testing.assert_array_equal(k, r)


@pytest.mark.parametrize("engine", ["kernel", "reference"])
def test_las_does_not_backfill(engine):
    # las_synergy_new.py:97 walks only the jobs picked by GPU count: on 8 GPUs and 24 CPUs, the 4-GPU
    # gnmt and the 2-GPU alexnet (cut to all 24 CPUs) are picked; alexnet finds 20 CPUs and waits;
    # the second gnmt, not picked, waits too under LAS, but runs at once under FIFO (which walks all)
    args = (["gnmt", "alexnet", "gnmt"], np.array([0.0, 0.0, 0.0]), [1, 1, 1], [4, 2, 4])
    las = cs.simulate(*args, "las", 1, 8, engine=engine)["finish_s"]
    fifo = cs.simulate(*args, "fifo", 1, 8, engine=engine)["finish_s"]
    assert fifo[2] == 300.0 and las[2] > 300.0


# ------------------------------------------------------------------ invariants (on the twin's rounds)
def _setup(p):
    from fastblox.cluster import Cluster

    opts = cs.parse_options(p["opts"])
    _, _, ratio = cs.check_cluster(Cluster.parse(f"{p['servers']}x{p['per']}"), opts)
    js = cs.job_setup(p["models"], np.array(p["gpus"]), p["servers"], p["per"], opts, ratio)
    cap = [p["per"], opts["cpus"], opts["mem_gb"], cs.SSPEED_PER_SERVER, cs.NET_PER_SERVER]
    return js, cap, opts


def _twin_rounds(p, policy):
    js, cap, opts = _setup(p)
    order, mode = cs.split_policy(policy)
    if mode == 1:
        try:
            cs.check_placeable(js["demand"], p["gpus"], p["models"], p["servers"], p["per"], cap)
        except WorkloadError:
            return [], js, cap
    log = []
    try:
        ref.simulate(p["submit"], p["iters"], p["gpus"], js["demand"], js["speedup"], js["iter_s"], js["penalty"],
                     p["servers"], p["per"], cap, order, mode, static=bool(opts["static"]), log=log)
    except RuntimeError:
        pass  # (Synergy-Tune's dead end: the rounds before it still count)
    return log, js, cap


@given(problem())
@settings(max_examples=80, deadline=None)
def test_no_server_ever_gives_more_than_it_has(p):
    log, _, cap = _twin_rounds(p, p["policy"])
    for _, used, alloc in log:
        for u in used:
            assert all(x <= c + 1e-9 for x, c in zip(u, cap))
        gpus = [g for gs, _ in alloc.values() for g in gs]
        assert len(gpus) == len(set(gpus))  # no GPU given twice


@given(problem())
@settings(max_examples=80, deadline=None)
def test_each_allocation_is_the_share_its_rule_says(p):
    base = p["policy"].partition("+")[0]
    for mode in ("+fair", "", "+tune"):
        log, js, cap = _twin_rounds(p, base + mode)
        fair = [c / cap[0] for c in cap]
        for _, _, alloc in log:
            for j, (gpus, res) in alloc.items():
                n = len(gpus)
                tot = [sum(v[k] for v in res.values()) for k in range(4)]
                prop = [f * n for f in fair[:4]]
                ideal = list(js["demand"][j][:4])
                if mode == "+fair":  # the GPU-proportional share, exactly
                    assert tot == pytest.approx(prop)
                elif mode == "":  # Synergy-Greedy: the job's ideal demand or nothing (so never less than the
                    # proportional share of a resource it asks more of)
                    assert tot == pytest.approx(ideal)
                    assert all(t >= pr - 1e-9 for t, pr, i in zip(tot, prop, ideal) if i >= pr)
                else:  # Synergy-Tune: the ideal demand, else the proportional share (a peer brought back to it)
                    assert tot == pytest.approx(ideal) or tot == pytest.approx(
                        [prop[0]] + [min(i, pr) if i <= pr else pr for i, pr in zip(ideal[1:], prop[1:])]) \
                        or tot == pytest.approx(prop)


def _gpu_only(submit, iters, gpus, iter_s, total_gpus, round_s=300.0, static=False, gaps=False):
    """A plain GPU-only round scheduler in arrival order with backfill: the proportional baseline
    without any CPU or memory at all (``gaps``: empty rounds step on to a later arrival)."""
    n = len(submit)
    done, fin = [0] * n, [math.nan] * n
    now = 1.0 if static else math.ceil(submit[0] / round_s) * round_s
    last = []
    while True:
        for j in last:
            if done[j] >= iters[j]:
                fin[j] = now
        live = [j for j in range(n) if submit[j] <= now and math.isnan(fin[j])]
        free, last = total_gpus, []
        for j in live:
            if gpus[j] <= free:
                free -= gpus[j]
                last.append(j)
                done[j] += math.floor(round_s / iter_s[j])
        if not live and not (gaps and (np.asarray(submit) > now).any()):
            return fin
        now += round_s


@given(problem())
@settings(max_examples=80, deadline=None)
def test_proportional_baseline_equals_a_plain_gpu_scheduler(p):
    js, _, opts = _setup(p)
    out = cs.simulate(p["models"], p["submit"], p["iters"], p["gpus"], "fifo+fair", p["servers"], p["per"], p["opts"])
    plain = _gpu_only(p["submit"], p["iters"], p["gpus"], js["iter_s"], p["servers"] * p["per"],
                      static=bool(opts["static"]), gaps=bool(opts["gaps"]))
    np.testing.assert_array_equal(out["finish_s"], plain)


# ------------------------------------------------------------------ job model
def test_profiles_as_shipped():
    pr = cs.profiles()
    assert pr[3, "res18"] == (9.0, 62.5, 2.4, 0.64, 1.0)  # simulator/models/res18_1.py
    assert pr[6, "alexnet"][0] == 24.0 and pr[6, "alexnet"][2] == 2.18  # models-6/alexnet_1.py
    assert cs.profile_ratios() == (3, 4, 5, 6)


def test_demand_cut_to_a_server_and_speedup_on_the_cpu_line():
    opts = cs.parse_options({})
    js = cs.job_setup(["alexnet", "alexnet", "res18", "m5"], np.array([1, 4, 8, 4]), 16, 8, opts, 3)
    assert js["demand"][0].tolist() == [1, 12, 125, 62.5, 0] and js["speedup"][0] == 2.94
    # 4 GPUs x 12 CPUs cut to the server's 24: 1 + (2.94-1)/(48-12) * (24-12)
    assert js["demand"][1][1] == 24 and js["speedup"][1] == pytest.approx(1 + 1.94 / 36 * 12)
    assert js["demand"][2][1] == 24 and js["speedup"][2] == 1.0  # 8 GPUs: cut to the proportional share
    assert js["demand"][3][2] == 500 and js["speedup"][3] == 2.5  # memory cut, CPUs not: the speedup stays


def test_where_the_simulator_divides_by_zero_the_line_runs_in_memory():
    opts = cs.parse_options({"cpus": 48})
    js = cs.job_setup(["m5", "alexnet"], np.array([4, 4]), 4, 8, opts, 6)  # m5 at 6 CPUs/GPU: speedup 1
    assert js["speedup"][0] == 1.0
    assert np.isfinite(js["speedup"]).all()


def test_deterministic_and_tune_beats_fair_on_average():
    a = _run_case("synth200_c32", "srtf+tune")[1]
    b = _run_case("synth200_c32", "srtf+tune")[1]
    np.testing.assert_array_equal(a["finish_s"], b["finish_s"])
    f = _run_case("synth200_c32", "srtf+fair")[1]
    assert np.nanmean(a["finish_s"]) < np.nanmean(f["finish_s"])


def test_a_gap_in_arrivals_ends_the_replay():
    # schedule_event.py: the replay stops at the first round with no runnable job
    out = cs.simulate(["gnmt", "gnmt"], np.array([0.0, 5000.0]), [10, 10], [1, 1], "fifo+fair", 1, 8)
    assert out["finish_s"][0] == 300.0 and math.isnan(out["finish_s"][1])


@pytest.mark.parametrize("engine", ["kernel", "reference"])
def test_load_admission_holds_jobs_back(engine):
    # Two long 8-GPU jobs and a short one, all at 0, on one server, under SRTF: with every job
    # admitted the short one goes first; at load:1 the second long job (which crosses 8 GPUs) is
    # the last admitted, so the short one waits until a long one finishes.
    args = (["gnmt"] * 3, np.array([0.0, 0.0, 0.0]), [20000, 20000, 10], [8, 8, 8], "srtf+fair", 1, 8)
    every = cs.simulate(*args, engine=engine)["finish_s"]
    gated = cs.simulate(*args, engine=engine, theta=1.0)["finish_s"]
    assert every[2] == 300.0 and every[2] < min(every[:2])
    assert gated[2] > min(gated[:2]) and gated[2] == min(gated[:2]) + 300.0


def test_run_spec_takes_the_admission_option():
    from fastblox.runner import run_spec

    tr = str(DATA / "traces" / CASES["dynamic100_c32"]["trace"])
    spec = RunSpec(trace=tr, compat="synergy", policy="srtf+tune", cluster="4x8")
    every, gated = run_spec(spec), run_spec(spec.replace(admission="load:0.5"))
    assert gated.config["admission"] == "load:0.5"
    assert gated.summary["avg_jct_s"] != every.summary["avg_jct_s"]
    theirs = np.array(list(PEER["dynamic100_c32", "srtf+tune"].values()))
    assert every.summary["avg_jct_s"] == pytest.approx(theirs.mean(), abs=1e-6)


@pytest.mark.parametrize("engine", ["kernel", "reference"])
def test_gaps_1_waits_for_the_next_arrivals_round(engine):
    out = cs.simulate(["gnmt", "gnmt", "gnmt"], np.array([0.0, 5000.0, 5100.0]), [10, 10, 10], [1, 1, 1], "fifo+fair",
                      1, 8, {"gaps": 1}, engine=engine)
    np.testing.assert_array_equal(out["finish_s"], [300.0, 5400.0, 5400.0])  # (rounds stay on the 300 s grid)


# ------------------------------------------------------------------ front ends and bad input
def test_run_spec_reads_a_synergy_trace_and_uses_its_cluster():
    from fastblox.runner import run_spec

    c = CASES["static100_c128"]
    res = run_spec(RunSpec(trace=str(DATA / "traces" / c["trace"]), compat="synergy", policy="fifo+tune",
                           policy_opts=(("static", "1"),)))
    assert res.config["cluster"] == "16x8" and res.config["round_s"] == 300.0
    theirs = np.array(list(PEER["static100_c128", "fifo+tune"].values()))
    assert res.summary["avg_jct_s"] == pytest.approx(theirs.mean(), abs=1e-6)
    assert "Synergy" in res.summary["engine"]


def test_cli_runs_it(tmp_path, capsys):
    from fastblox.cli import main

    tr = DATA / "traces" / CASES["dynamic100_c32"]["trace"]
    assert main(["run", "--trace", str(tr), "--compat", "synergy", "--policy", "srtf", "--cluster", "4x8",
                 "--out", str(tmp_path / "o")]) in (0, None)
    import json

    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    theirs = np.array(list(PEER["dynamic100_c32", "srtf"].values()))
    assert s["summary"]["avg_jct_s"] == pytest.approx(theirs.mean(), abs=1e-6)
    assert "Synergy's pick" in capsys.readouterr().out
    assert main(["parts"]) in (0, None)
    assert "fifo+tune" in capsys.readouterr().out


@pytest.mark.parametrize("line,col", [("0,alexnot,0,10,1", "model"), ("0,alexnet,soon,10,1", "arrival_s"),
                                      ("0,alexnet,0,1.5,1", "iterations"), ("0,alexnet,0,10,0", "gpus")])
def test_bad_line_names_file_line_column(tmp_path, line, col):
    p = tmp_path / "t.csv"
    p.write_text("1,gnmt,0,10,1\n" + line + "\n")
    with pytest.raises(TraceError, match=f"t.csv.*row 2.*{col}|{col}.*row 2"):
        cs.read_trace(p)
    p.write_text("1,gnmt,0,10\n")
    with pytest.raises(TraceError, match="5"):
        cs.read_trace(p)


def test_bad_options_are_refused_with_their_name():
    tr = str(DATA / "traces" / CASES["test8_c128"]["trace"])
    with pytest.raises(OptionError, match="policy"):
        RunSpec(trace=tr, compat="synergy", policy="fifo").replace(policy="tiresias").resolved()
    with pytest.raises(OptionError, match="placement"):
        RunSpec(trace=tr, compat="synergy", policy="fifo", placement="first-fit").resolved()
    with pytest.raises(OptionError, match="policy_opts|policy-opt"):
        RunSpec(trace=tr, compat="synergy", policy="fifo", policy_opts=(("cpus", "20"),)).resolved()
    with pytest.raises(OptionError, match="policy_opts|policy-opt"):
        RunSpec(trace=tr, compat="synergy", policy="fifo", policy_opts=(("cpu", "24"),)).resolved()
    with pytest.raises(OptionError, match="cluster"):
        RunSpec(trace=tr, compat="synergy", policy="fifo", cluster="4x8,2x4").resolved()
    with pytest.raises(OptionError, match="trace"):
        RunSpec(compat="synergy", policy="fifo").resolved()


def test_a_greedy_job_that_never_fits_is_refused_by_name():
    # 3 alexnet GPUs cut to a 20-CPU server: 20/3 CPUs a GPU, whose three holds sum past 20
    with pytest.raises(WorkloadError, match="job 0 \\(alexnet, 3 GPUs\\) never fits"):
        cs.simulate(["alexnet"], np.array([0.0]), [1], [3], "fifo", 1, 4, {"cpus": 20})
    out = cs.simulate(["alexnet"], np.array([0.0]), [1], [3], "fifo+tune", 1, 4, {"cpus": 20})
    assert out["finish_s"][0] == 300.0  # Tune falls back to the proportional share


def test_a_job_larger_than_the_cluster_is_refused():
    with pytest.raises(WorkloadError, match="16 GPUs.*cluster has 8"):
        cs.simulate(["gnmt"], np.array([0.0]), [10], [16], "fifo", 1, 8)
    with pytest.raises(ConfigError, match="fifo\\+tune"):
        cs.simulate(["gnmt"], np.array([0.0]), [10], [1], "dlas", 1, 8)


# ------------------------------------------------------------------ any trace: models drawn from the zoo


def _neutral_trace():
    from pathlib import Path

    p = Path(__file__).resolve().parents[2] / "shared" / "peer-traces" / "gavel_n100_lam400_s0.neutral.csv"
    if not p.exists():
        pytest.skip(f"{p} not found (../shared beside the clone)")
    return p


def test_any_trace_gets_models_drawn_from_the_zoo_and_iterations_from_its_run_times():
    from fastblox.traces import read_trace
    from fastblox.workload import Workload

    w = read_trace(_neutral_trace())  # (its 'model' column holds Gavel's job types, not Synergy's models)
    assert not set(w.extra["model"]) <= set(cs.models())
    a, b, c = cs.with_models(w, 0), cs.with_models(w, 0), cs.with_models(w, 1)
    assert set(a.extra["model"]) <= set(cs.models()) and len(set(a.extra["model"])) > 5
    assert list(a.extra["model"]) == list(b.extra["model"]) and list(a.extra["model"]) != list(c.extra["model"])
    it = np.array([cs.profiles()[3, m][3] for m in a.extra["model"]])
    assert np.array_equal(a.iter_time_s, it)
    assert np.array_equal(a.iterations, np.maximum(1, np.floor(w.duration_s / it)))
    assert np.array_equal(a.submit_s, w.submit_s) and np.array_equal(a.num_gpus, w.num_gpus)
    short = cs.with_models(Workload.from_arrays([0.0], [1], duration_s=[0.001]), 0)
    assert short.iterations[0] == 1


def test_run_spec_replays_any_trace_with_the_drawn_models():
    from fastblox.runner import run_spec

    tr = str(_neutral_trace())
    spec = RunSpec(trace=tr, compat="synergy", policy="srtf+tune", cluster="4x8")
    res, again, other = run_spec(spec), run_spec(spec), run_spec(spec.replace(seed=1))
    jobs = res.jobs
    assert jobs.equals(again.jobs) and not jobs["model"].equals(other.jobs["model"])
    assert "drawn uniformly from Synergy's zoo (seed 0)" in res.summary["engine"]
    assert "num_dropped" not in res.summary  # (gaps=1 by default on a trace that is not Synergy's)
    w = cs.with_models(cs.read_any(tr), 0)
    assert jobs["model"].to_list() == [str(m) for m in w.extra["model"]]
    out = cs.simulate(w.extra["model"], w.submit_s, w.iterations, w.num_gpus, "srtf+tune", 4, 8, {"gaps": 1})
    assert res.summary["avg_jct_s"] == pytest.approx(float(np.mean(out["finish_s"] - w.submit_s)), rel=1e-12)


def test_a_synergy_trace_keeps_its_own_models():
    tr = DATA / "traces" / CASES["dynamic100_c32"]["trace"]
    assert cs.is_synergy_trace(tr) and not cs.is_synergy_trace(_neutral_trace())
    w = cs.read_any(tr)
    assert list(w.extra["model"]) == list(cs.read_trace(tr).extra["model"])
