"""The elastic engine (fastblox.mixed) composed with the other parts: the Pollux simulator's
Tiresias and Optimus beside Pollux (``elastic-tiresias``, ``elastic-optimus``), the native
admission, and the native placements for the fixed-batch policies."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastblox
from fastblox import compat_pollux as cp
from fastblox import mixed
from fastblox.errors import SimulationError
from fastblox.spec import ELASTIC_RUNS, OptionError

W6 = Path(__file__).resolve().parents[1] / "datasets" / "pollux" / "workload-6.csv"
HEAD = "name,time,application,num_replicas,batch_size,duration\n"
POLICY_CLASS = {"pollux": cp.PolluxPolicy, "tiresias": cp.Tiresias, "optimus": cp.Optimus}
ORIGINAL = {k: c.optimize for k, c in POLICY_CLASS.items()}  # (a spy set twice must not wrap the first)


def write(tmp_path, rows: str, name="mix.csv"):
    p = tmp_path / name
    p.write_text(HEAD + rows)
    return p


def _spy(monkeypatch, policy: str) -> list:
    """Every call of the Pollux simulator's ``policy``: (time, jobs handed to it, its allocation)."""
    seen = []
    cls, orig = POLICY_CLASS[policy], ORIGINAL[policy]

    def spy(self, active, prev, now):
        out = orig(self, active, prev, now)
        seen.append((now, list(active), {j: list(v) for j, v in out.items()}))
        return out

    monkeypatch.setattr(cls, "optimize", spy)
    return seen


# ------------------------------------------------------------------ the three policies on elastic jobs
@pytest.mark.parametrize("name, jobs", [("elastic-tiresias", 160), ("elastic-optimus", 160), ("pollux", 12)])
def test_an_all_elastic_workload_runs_as_compat_pollux_job_by_job(name, jobs):
    w = mixed.read_mixed(W6).head(jobs)
    a = fastblox.simulate(w, policy=name, cluster="16x4")
    b = fastblox.simulate(w, compat="pollux", policy=ELASTIC_RUNS[name])
    for c in ("first_start_s", "finish_s", "num_preemptions", "attained_gpu_s"):
        assert a.jobs[c].to_numpy().tolist() == b.jobs[c].to_numpy().tolist(), c
    assert a.summary["restarts"] == b.summary["restarts"]
    assert a.summary["num_finished"] == jobs and a.summary["held_jobs"] == 0


@pytest.mark.parametrize("name, jobs", [("elastic-tiresias", 160), ("elastic-optimus", 160), ("pollux", 12)])
def test_compat_pollux_takes_the_same_admission(name, jobs):
    """--compat pollux --admission load:THETA lets in the jobs the elastic engine lets in (the same
    Gate), so an all-elastic workload still runs alike job by job, now with jobs held back."""
    w = mixed.read_mixed(W6).head(jobs)
    a = fastblox.simulate(w, policy=name, cluster="16x4", admission="load:0.5")
    b = fastblox.simulate(w, compat="pollux", policy=ELASTIC_RUNS[name], admission="load:0.5")
    for c in ("first_start_s", "finish_s", "num_preemptions", "attained_gpu_s"):
        assert a.jobs[c].to_numpy().tolist() == b.jobs[c].to_numpy().tolist(), c
    assert b.summary["held_jobs"] == a.summary["held_jobs"] > 0
    assert b.config["admission"] == "load:0.5"


@pytest.mark.slow
def test_workload6_whole_under_pollux_runs_as_compat_pollux_job_by_job():
    """(the quick test above runs the whole of workload-6, all 160 jobs, under the other two)"""
    w = mixed.read_mixed(W6)
    a = fastblox.simulate(w, policy="pollux", cluster="16x4")
    b = fastblox.simulate(w, compat="pollux", policy="pollux")
    assert a.jobs["finish_s"].to_numpy().tolist() == b.jobs["finish_s"].to_numpy().tolist()
    assert a.summary["num_finished"] == 160


def test_rigid_jobs_run_at_their_gang_under_tiresias_and_optimus(monkeypatch):
    """A rigid 6-GPU job beside elastic ones: Optimus gives it its gang in its first pass (never
    one GPU, never more), Tiresias its gang; it runs its duration after the restart delay."""
    apps, gangs = ["cifar10", "", "bert"], np.array([2, 6, 6])
    dur, is_el, submit = np.array([1.0, 900.0, 1.0]), np.array([True, False, True]), np.array([0.0, 30.0, 50.0])
    bs = np.array([128, 0, 384])
    for policy in ("tiresias", "optimus"):
        seen = _spy(monkeypatch, policy)
        out = mixed.simulate_mixed(apps, gangs, dur, is_el, submit, 60.0, 4, 4, policy=policy, batch_size=bs)
        sizes = {len(alloc.get(1, [])) for _, _, alloc in seen}
        assert sizes <= {0, 6} and 6 in sizes
        assert out["finish_s"][1] - out["start_s"][1] >= 930.0 - 1e-9
        if policy == "optimus":  # (the elastic jobs grow beyond one GPU where they gain)
            assert max(len(alloc.get(0, [])) for _, _, alloc in seen) > 1


def test_optimus_gives_a_rigid_gang_that_does_not_fit_nothing_and_moves_on():
    jobs = cp.Jobs(["", "cifar10"], [0, 128], [0.0, 0.0], work_s=[100.0, 0.0])
    pol = cp.Optimus(jobs, np.array([6, 1]), 1, 4)
    out = pol.optimize([0, 1], {}, 60.0)
    assert 0 not in out and len(out[1]) > 1  # (the elastic job grows into the GPUs left)


# ------------------------------------------------------------------ admission
def _admission_respected(seen, submit, gangs, theta, total) -> None:
    """The jobs handed to the policy are those the native rule lets in: in arrival order, each
    new one while the GPUs asked for by the jobs already in plus the new ones before it are within
    theta x GPUs (accept-all: every arrived job), and no arrived job held back while that holds."""
    order = np.argsort(submit, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    before = set()
    for now, active, _ in seen:
        act = set(active)
        assert all(submit[j] <= now for j in act)
        new = sorted(act - before, key=lambda j: rank[j])
        demand = int(gangs[sorted(act & before)].sum())
        for j in new:
            assert theta <= 0 or demand <= theta * total, (now, j)
            demand += gangs[j]
        left = [j for j in order if submit[j] <= now and j not in act and j not in before]
        if left:  # (held back: the bound was crossed; and the held ones come after every admitted one)
            assert theta > 0 and demand > theta * total
            assert max((rank[j] for j in act | before), default=-1) < min(rank[j] for j in left)
        before |= act


@pytest.mark.parametrize("name", list(ELASTIC_RUNS))
@pytest.mark.parametrize("admission, theta", [("accept-all", 0.0), ("load:0.5", 0.5)])
def test_admission_gates_entry_into_the_elastic_engine(monkeypatch, tmp_path, name, admission, theta):
    """Under load:0.5 on 2x4 (a bound of 4 GPUs), five jobs asking for 9 GPUs arrive in the first
    interval: three 2-GPU rigid jobs get in (the third crosses the bound), the two elastic ones wait
    for completions (a run ignoring the gate hands the policy all five at once); under accept-all
    none waits."""
    rows = "".join(f"r{i},0,,2,,600\n" for i in range(3)) + "e0,0,cifar10,2,128,\ne1,10,ncf,1,32768,\n"
    w = mixed.read_mixed(write(tmp_path, rows))
    seen = _spy(monkeypatch, ELASTIC_RUNS[name])
    res = fastblox.simulate(w, policy=name, cluster="2x4", admission=admission)
    assert res.summary["num_finished"] == 5
    _admission_respected(seen, w.submit_s, w.num_gpus, theta, 8)
    first_call = set(seen[0][1])
    if theta:
        assert first_call == {0, 1, 2} and res.summary["held_jobs"] == 2
        assert (res.jobs["first_start_s"].to_numpy()[3:] > 600.0).all()
    else:
        assert first_call == {0, 1, 2, 3, 4} and res.summary["held_jobs"] == 0


def test_the_gate_is_the_native_rule():
    """Gate.step against the rule as the native reference engine states it
    (``fastblox.reference.native``: demand of the jobs in, the crossing job admitted too)."""
    submit, gpus = np.array([0.0, 0.0, 0.0, 5.0]), np.array([4, 4, 4, 1])
    g = mixed.Gate(submit, gpus, 1.0, 8)
    assert g.step(60.0, []) == [0, 1, 2]  # 0 + 4 <= 8, 4 + 4 <= 8, then 8 + 4 > 8: three in
    assert g.step(120.0, []) == []  # demand 12 > 8: nothing more
    assert g.step(180.0, [0]) == [3]  # demand 8 <= 8: the next one in
    assert g.demand == 9
    assert g.held().tolist() == [False, False, False, True]
    assert mixed.Gate(submit, gpus, 0.0, 8).step(60.0, []) == [0, 1, 2, 3]


# ------------------------------------------------------------------ placement
@pytest.mark.parametrize("name", ["elastic-tiresias", "elastic-optimus"])
def test_a_native_placement_places_the_fixed_batch_policies_gangs(monkeypatch, tmp_path, name):
    """Two 2-GPU rigid gangs on 2x4, the second arriving later: the Pollux simulator's packing puts
    it on the emptier node, first-fit and consolidated on the node the first one holds."""
    w = mixed.read_mixed(write(tmp_path, "a,0,,2,,3000\nb,70,,2,,3000\n"))
    where = {}
    for pl in (None, "first-fit", "consolidated"):
        seen = _spy(monkeypatch, ELASTIC_RUNS[name])
        fastblox.simulate(w, policy=name, cluster="2x4", placement=pl)
        alloc = seen[-1][2] if len(seen[-1][2]) == 2 else next(a for _, _, a in seen if len(a) == 2)
        where[pl] = (set(alloc[0]), set(alloc[1]))
    assert where[None] == ({0}, {1})
    assert where["first-fit"] == where["consolidated"] == ({0}, {0})


def test_a_gang_the_native_placement_cannot_place_waits():
    """consolidated places a 4-GPU gang on one node only: with 2 GPUs free on each of two nodes it
    waits (and Tiresias counts it no service), where the simulator's packing splits it."""
    place = mixed.native_placer("consolidated", 2, 4)
    import collections

    assert place({7: 4}, [7], collections.Counter({0: 2, 1: 2})) == {}
    assert place({7: 4, 8: 2}, [7, 8], collections.Counter({0: 2, 1: 4})) == {7: [1, 1, 1, 1], 8: [0, 0]}
    assert cp.place({7: 4}, [7], collections.Counter({0: 2, 1: 2})) == {7: [0, 0, 1, 1]}


def test_a_placement_that_can_never_place_a_gang_stops_the_run(tmp_path):
    """Blox's exact-sum walk cannot give 6 GPUs of two idle 4-GPU nodes (4 + 4 > 6): the run stops
    with an error rather than wait forever (beside a 2-GPU job on the first node it could)."""
    w = mixed.read_mixed(write(tmp_path, "b,0,,6,,600\n"))
    with pytest.raises(SimulationError, match="--placement blox can never place the waiting jobs .* workload row 0"):
        fastblox.simulate(w, policy="elastic-tiresias", cluster="2x4", placement="blox")
    assert fastblox.simulate(w, policy="elastic-tiresias", cluster="2x4").summary["num_finished"] == 1
    two = mixed.read_mixed(write(tmp_path, "a,0,,2,,600\nb,0,,6,,600\n"))
    assert fastblox.simulate(two, policy="elastic-tiresias", cluster="2x4", placement="blox").summary["num_finished"] == 2


def test_options_the_elastic_engine_cannot_honour_are_refused(tmp_path):
    w = mixed.read_mixed(write(tmp_path, "a,0,,2,,600\n"))
    with pytest.raises(OptionError, match="--placement: pollux chooses its jobs' nodes itself"):
        fastblox.simulate(w, policy="pollux", cluster="2x4", placement="first-fit")
    with pytest.raises(OptionError, match="--time-model: --policy elastic-tiresias replays"):
        fastblox.simulate(w, policy="elastic-tiresias", cluster="2x4", time_model="events")
    with pytest.raises(OptionError, match="did you mean 'elastic-optimus'"):
        fastblox.simulate(w, policy="elastic-optimu", cluster="2x4")


def test_cli_runs_the_three_on_one_mixed_file(tmp_path):
    from fastblox.cli import main

    rows = "e0,0,cifar10,2,128,\ne1,60,ncf,1,32768,\nr0,30,,4,,1800\nr1,90,,8,,900\n"
    p = write(tmp_path, rows)
    jct = {}
    for name in ELASTIC_RUNS:
        out = tmp_path / name
        args = ["run", "--trace", str(p), "--policy", name, "--cluster", "4x4", "--admission", "load:1", "--out", str(out)]
        if name != "pollux":
            args += ["--placement", "first-fit"]
        assert main(args) == 0
        s = json.loads((out / "summary.json").read_text())
        assert s["summary"]["num_finished"] == 4 and s["summary"]["elastic_jobs"] == 2
        assert s["config"]["admission"] == "load:1"
        assert ELASTIC_RUNS[name] in s["summary"]["engine"]
        jct[name] = s["summary"]["avg_jct_s"]
    assert len(set(jct.values())) == 3  # (three different schedules)


# ------------------------------------------------------------------ invariants on random mixes
ELASTIC = [("ncf", 1, 32768), ("cifar10", 2, 128), ("yolov3", 4, 64)]
job = st.one_of(
    st.tuples(st.sampled_from(range(len(ELASTIC))), st.integers(0, 1800)).map(lambda t: ("e", *ELASTIC[t[0]], t[1])),
    st.tuples(st.integers(1, 8), st.integers(60, 3000), st.integers(0, 1800)).map(lambda t: ("r", "", t[0], 0, *t[1:])),
)


def _invariants(monkeypatch, policy, jobs, nodes, theta, placement):
    per_node = 4
    apps = [j[1] for j in jobs]
    is_el = np.array([j[0] == "e" for j in jobs])
    gangs = np.array([j[2] for j in jobs])
    bs = np.array([j[3] for j in jobs])
    dur = np.array([1.0 if j[0] == "e" else float(j[4]) for j in jobs])
    submit = np.array([float(j[-1]) for j in jobs])
    seen = _spy(monkeypatch, policy)
    run = lambda: mixed.simulate_mixed(apps, gangs, dur, is_el, submit, 60.0, nodes, per_node, policy=policy,  # noqa: E731
                                       batch_size=bs, theta=theta, placement=placement)
    try:
        out = run()
    except SimulationError as e:  # (Blox's exact-sum walk places 5-7 GPUs on no cluster of 4-GPU nodes)
        assert placement == "blox" and "--placement blox can never place" in str(e)
        return
    assert (out["finish_s"] > submit).all()  # (every job finishes, after it arrived)
    for _, active, alloc in seen:
        used = np.bincount([n for a in alloc.values() for n in a], minlength=nodes)
        assert (used <= per_node).all()  # (no node over its GPUs)
        assert set(alloc) <= set(active)
        for j, a in alloc.items():
            if not is_el[j] or policy == "tiresias":  # (a gang: whole or nothing)
                assert len(a) in (0, gangs[j])
    _admission_respected(seen, submit, gangs, theta, nodes * per_node)
    rigid = ~is_el
    assert (out["finish_s"][rigid] - out["start_s"][rigid] >= dur[rigid] + 30.0 - 1e-9).all()
    again = run()
    assert np.array_equal(out["finish_s"], again["finish_s"]) and np.array_equal(out["start_s"], again["start_s"])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(job, min_size=1, max_size=7), nodes=st.integers(2, 3), theta=st.sampled_from([0.0, 0.5, 1.0]),
       policy=st.sampled_from(["tiresias", "optimus"]),
       placement=st.sampled_from([None, "first-fit", "consolidated", "yarn", "blox", "topology"]))
def test_invariants_fixed_batch_policies(monkeypatch, jobs, nodes, theta, policy, placement):
    """No node over capacity, gangs whole or nothing, every job finishes, admission respected, the
    same run twice identical: the Pollux simulator's Tiresias and Optimus on random mixes, under
    every admission and placement."""
    _invariants(monkeypatch, policy, jobs, nodes, theta, placement)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(job, min_size=1, max_size=5), nodes=st.integers(2, 3), theta=st.sampled_from([0.0, 0.5, 1.0]))
def test_invariants_pollux_with_admission(monkeypatch, jobs, nodes, theta):
    _invariants(monkeypatch, "pollux", jobs, nodes, theta, None)


# ------------------------------------------------------------------ the rigid rows' twin
@settings(max_examples=40, deadline=None)
@given(work=st.lists(st.floats(1.0, 500.0), min_size=1, max_size=4),
       steps=st.lists(st.tuples(st.lists(st.booleans(), min_size=4, max_size=4), st.sampled_from([7.5, 30.0, 60.0])),
                      min_size=1, max_size=12))
def test_rigid_rows_of_jobs_match_rigid_job(work, steps):
    """compat_pollux.Jobs' rigid rows (arrays: the fixed-batch policies) against
    mixed.RigidJob (objects: Pollux), through random suspensions and resumptions."""
    n = len(work)
    arr = cp.Jobs([""] * n, [0] * n, np.zeros(n), work_s=work)
    twins = [mixed.RigidJob(2, w, 0.0) for w in work]
    t = 0.0
    for on, secs in steps:
        for j in range(n):
            pl = (2,) if on[j] else ()
            if pl != twins[j].placement and twins[j].finish is None:
                arr.reallocate(j, pl, t)
                twins[j].reallocate(pl, t)
        arr.advance(t, secs)
        for tw in twins:
            tw.advance(t, secs)
        t += secs
        for j, tw in enumerate(twins):
            assert arr.finish[j] == (-1.0 if tw.finish is None else tw.finish)
            assert arr.attained_gpu[j] == pytest.approx(tw.attained_gpu, rel=1e-12)
            assert arr.restarts[j] == (tw.restarts or 0) and arr.preempted[j] == tw.preempted
            assert arr.first[j] == (-1.0 if tw.first is None else tw.first)


# ------------------------------------------------------------------ the restart delay
@pytest.mark.parametrize("name", list(ELASTIC_RUNS))
def test_restart_s_is_the_elastic_engines_restart_delay(tmp_path, name):
    """A rigid job alone: first allocated at the first interval after it arrives, then stopped
    --restart-s (default Pollux's 30 s) before its run time; an elastic job too, before its epochs."""
    w = mixed.read_mixed(write(tmp_path, "r,10,,3,,1000\ne,10,ncf,1,32768,\n"))
    fin = {}
    for restart in (None, 0.0, 90.0):
        res = fastblox.simulate(w, policy=name, cluster="2x4", restart_s=restart)
        assert res.config["restart_s"] == (30.0 if restart is None else restart)
        j = res.jobs
        assert j["first_start_s"][0] == 60.0 and j["finish_s"][0] == 60.0 + res.config["restart_s"] + 1000.0
        fin[restart] = j["finish_s"][1]
    assert fin[0.0] + 30.0 == fin[None] == fin[90.0] - 60.0


def test_a_gang_tiresias_could_not_place_gets_no_service():
    """Tiresias' walk counts a 4-GPU gang in (8 GPUs, 4 held), but consolidated finds no node with
    4 free: it is not started and its service does not grow (it would move it down a queue)."""
    jobs = cp.Jobs(["", "", ""], [0, 0, 0], np.zeros(3), work_s=[1e4, 1e4, 1e4])
    pol = cp.Tiresias(jobs, np.array([2, 2, 4]), 2, 4, mixed.native_placer("consolidated", 2, 4))
    held = {0: [0, 0], 1: [1, 1]}
    out = pol.optimize([0, 1, 2], held, 60.0)
    assert 2 not in out and not pol.running[2]
    pol.optimize([0, 1, 2], out, 120.0)
    assert pol.executed[2] == 0 and pol.executed[0] == 60
