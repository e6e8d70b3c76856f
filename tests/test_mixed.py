"""Elastic and rigid jobs in one run (fastblox.mixed: ``--policy pollux`` without --compat)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fastblox
from fastblox import compat_pollux as cp
from fastblox import mixed
from fastblox.errors import ConfigError, TraceError, WorkloadError
from fastblox.spec import OptionError, RunSpec

from fastblox.traces import read_trace

DATA = Path(__file__).resolve().parents[1] / "datasets"
W6 = DATA / "pollux" / "workload-6.csv"
HEAD = "name,time,application,num_replicas,batch_size,duration\n"
#: (application, GPUs, batch size) of short elastic jobs (ncf: 10 epochs; yolov3 and bert as in workload-6)
ELASTIC = [("ncf", 1, 32768), ("bert", 6, 384), ("yolov3", 4, 64)]


def write(tmp_path, rows: str, name="mix.csv"):
    p = tmp_path / name
    p.write_text(HEAD + rows)
    return p


def test_only_elastic_rows_run_exactly_as_compat_pollux():
    w = mixed.read_mixed(W6).head(10)
    assert mixed.elastic_rows(w).all()
    a = fastblox.simulate(w, policy="pollux", cluster="16x4")
    b = fastblox.simulate(w, compat="pollux", policy="pollux")
    assert a.jobs["finish_s"].to_numpy().tolist() == b.jobs["finish_s"].to_numpy().tolist()
    assert a.summary["restarts"] == b.summary["restarts"] > 0
    assert a.summary["avg_jct_s"] == b.summary["avg_jct_s"]


def test_the_reader_tells_the_kinds_apart(tmp_path):
    p = write(tmp_path, "a,0,ncf,1,32768,\nb,5,,3,,1000\n")
    w = read_trace(p)  # (format detected: elastic-mix)
    assert mixed.elastic_rows(w).tolist() == [True, False]
    assert w.num_gpus.tolist() == [1, 3]
    assert w.duration_s[1] == 1000.0
    assert w.duration_s[0] == pytest.approx(fastblox.elastic.isolated_run_s("ncf", 32768, 1))
    assert mixed.read_any(W6).extra["elastic"].all()  # a Pollux workload: all elastic
    t = tmp_path / "trace.csv"
    t.write_text("job_id,submit_time_s,duration_s,num_gpus\n0,0,100,2\n1,10,50,1\n")
    assert not mixed.elastic_rows(mixed.read_any(t)).any()  # any other trace: all rigid


@pytest.mark.parametrize("rows, row, col, what", [
    ("a,0,resnet,1,32,\n", 2, "application", "unknown application 'resnet'"),
    ("a,0,ncf,1,32768,\nb,0,,2,,\n", 3, "duration", "needs its run time"),
    ("a,0,ncf,1,32768,600\n", 2, "duration", "leave duration empty"),
    ("a,0,,2,64,600\n", 2, "batch_size", "has no batch size"),
    ("a,0,,2,,0\n", 2, "duration", "seconds > 0"),
    ("a,0,cifar10,2,1,\n", 2, "batch_size", "outside its validated"),
    ("a,x,,2,,60\n", 2, "time", "not a number of seconds"),
])
def test_bad_rows_name_file_row_column(tmp_path, rows, row, col, what):
    p = write(tmp_path, rows)
    with pytest.raises(TraceError, match=what) as e:
        mixed.read_mixed(p)
    assert f"row {row}" in str(e.value) and repr(col) in str(e.value) and "mix.csv" in str(e.value)


def test_bad_runs_are_refused_clearly(tmp_path):
    w = mixed.read_mixed(write(tmp_path, "a,0,ncf,1,32768,\nb,5,,3,,1000\n"))
    with pytest.raises(ConfigError, match="--cluster: elastic jobs need nodes of at most 4 GPUs"):
        fastblox.simulate(w, policy="pollux", cluster="4x8")
    rigid = w.take(np.array([1]))
    res = fastblox.simulate(rigid, policy="pollux", cluster="2x8")  # (rigid jobs only: any node size)
    assert res.summary["num_finished"] == 1
    with pytest.raises(WorkloadError, match="rigid job 1 asks for 3 GPUs; the cluster has 2"):
        fastblox.simulate(w, policy="pollux", cluster="1x2")
    with pytest.raises(ConfigError, match="--cluster: --policy pollux runs elastic jobs on one GPU type"):
        fastblox.simulate(w, policy="pollux", cluster="v100:1x4,k80:1x4")  # (rigid jobs only: several)
    with pytest.raises(OptionError, match="--placement: pollux chooses its jobs' nodes itself"):
        fastblox.simulate(w, policy="pollux", placement="consolidated")
    with pytest.raises(OptionError, match="--checkpoint-s: --policy elastic-optimus replays"):
        fastblox.simulate(w, policy="elastic-optimus", checkpoint_s=60.0)
    big = mixed.read_mixed(write(tmp_path, "a,0,bert,6,384,\n", "big.csv"))
    with pytest.raises(WorkloadError, match="job 0 asks for 6 GPUs .tiresias runs every job at its GPUs.; the cluster has 4"):
        fastblox.simulate(big, policy="elastic-tiresias", cluster="1x4")
    assert fastblox.simulate(big, policy="elastic-optimus", cluster="1x4").summary["num_finished"] == 1
    with pytest.raises(OptionError, match="'elastic-optimus' is the elastic engine's name for the Pollux simulator's "
                       "optimus: drop --compat, or run --compat pollux --policy optimus"):
        fastblox.simulate(w, compat="pollux", policy="elastic-optimus")
    with pytest.raises(OptionError, match="finite workload"):
        RunSpec(policy="pollux").resolved()
    bad = fastblox.Workload.from_arrays([0.0], [1], duration_s=[5.0], elastic=np.array([True]),
                                        model=np.array(["resnet"], dtype=object), batch_size=np.array([32]))
    with pytest.raises(WorkloadError, match="unknown application 'resnet'"):
        fastblox.simulate(bad, policy="pollux")


def _spy(monkeypatch):
    """Every allocation PolluxPolicy returns, as (time, {job: [node per GPU]})."""
    seen = []
    orig = cp.PolluxPolicy.optimize

    def spy(self, active, prev, now):
        out = orig(self, active, prev, now)
        seen.append((now, {j: list(v) for j, v in out.items()}))
        return out

    monkeypatch.setattr(cp.PolluxPolicy, "optimize", spy)
    return seen


job = st.one_of(
    st.tuples(st.sampled_from(range(len(ELASTIC))), st.integers(0, 1800)).map(lambda t: ("e", *ELASTIC[t[0]], t[1])),
    st.tuples(st.integers(1, 8), st.integers(60, 5000), st.integers(0, 1800)).map(lambda t: ("r", "", *t)),
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(job, min_size=1, max_size=6), nodes=st.integers(2, 4), seed=st.integers(0, 3))
def test_invariants_on_random_mixes(monkeypatch, jobs, nodes, seed):
    """No node over capacity, rigid jobs at their gang or stopped, every job finishes once, a
    rigid job runs at least its duration after its first start, the same run twice is identical."""
    per_node = 4
    apps = [j[1] if j[0] == "e" else "" for j in jobs]
    is_el = np.array([j[0] == "e" for j in jobs])
    gangs = np.array([j[2] for j in jobs])
    dur = np.array([1.0 if j[0] == "e" else float(j[3]) for j in jobs])
    submit = np.array([float(j[-1]) for j in jobs])
    seen = _spy(monkeypatch)
    out = mixed.simulate_mixed(apps, gangs, dur, is_el, submit, 60.0, nodes, per_node)
    assert (out["finish_s"] > submit).all()
    for _, alloc in seen:
        used = np.bincount([n for a in alloc.values() for n in a], minlength=nodes)
        assert (used <= per_node).all()
        for j, a in alloc.items():
            if not is_el[j]:
                assert len(a) in (0, gangs[j])
    rigid = ~is_el
    assert (out["finish_s"][rigid] - out["start_s"][rigid] >= dur[rigid] + 30.0 - 1e-9).all()
    assert (out["attained_gpu_s"][rigid] >= gangs[rigid] * (dur[rigid] + 30.0) - 1e-6).all()
    again = mixed.simulate_mixed(apps, gangs, dur, is_el, submit, 60.0, nodes, per_node)
    assert np.array_equal(out["finish_s"], again["finish_s"])


def test_rigid_job_alone_takes_restart_plus_duration():
    out = mixed.simulate_mixed([""], np.array([3]), np.array([1000.0]), np.array([False]), np.array([10.0]), 60.0, 2, 4)
    # allocated at the first interval boundary after its arrival (60 s), then 30 s of restart
    assert out["start_s"][0] == 60.0 and out["finish_s"][0] == 60.0 + 30.0 + 1000.0
    assert out["attained_gpu_s"][0] == 3 * 1030.0


def test_mixed_cli_run_and_native_baseline(tmp_path):
    from fastblox.cli import main

    rows = "".join(f"e{i},{60 * i},{a},{g},{b},\n" for i, (a, g, b) in enumerate(ELASTIC))
    rows += "r0,30,,4,,1800\nr1,90,,8,,900\n"
    p = write(tmp_path, rows)
    assert main(["run", "--trace", str(p), "--policy", "pollux", "--cluster", "4x4", "--out", str(tmp_path / "o")]) == 0
    import json

    s = json.loads((tmp_path / "o" / "summary.json").read_text())["summary"]
    assert s["num_finished"] == 5 and s["elastic_jobs"] == 3
    assert s["avg_jct_rigid_s"] > 0 and s["avg_jct_elastic_s"] > 0
    # the baseline: a native policy runs the same file, elastic rows at their requested GPUs
    assert main(["run", "--trace", str(p), "--policy", "fifo", "--cluster", "4x4", "--out", str(tmp_path / "f")]) == 0
    f = json.loads((tmp_path / "f" / "summary.json").read_text())["summary"]
    assert f["num_finished"] == 5


def test_a_rigid_gang_the_packing_can_only_split_does_not_run():
    """Two 4-GPU nodes each half held by a kept two-node gang: the DP counts 4 free GPUs for a new
    4-GPU rigid job, but the packing (no second multi-node job on a node) could give it only 2.
    The local search after it (kernels/pollux.py) moves the gang onto one node, and all three run,
    each on its whole gang."""
    jobs = [mixed.RigidJob(4, 1000.0, 0.0) for _ in range(3)]
    for j in (0, 2):
        jobs[j].restarts = 0
    pol = cp.PolluxPolicy(jobs, 3, 4)
    out = pol.optimize([0, 1, 2], {0: [0, 0, 1, 1], 2: [2, 2, 2, 2]}, 600.0)
    assert sorted(len(v) for v in out.values()) == [4, 4, 4]
    assert all(len(set(v)) == 1 for v in out.values())  # (one node each: no GPU left over for a split)
    # the packing itself leaves it out rather than give it part of its gang
    base = np.array([[2, 2, 0], [0, 0, 0], [0, 0, 4]])
    pol._gang = np.array([4, 4, 4])
    packed = pol._pack([(4, True), (4, False), (4, True)], base)
    assert packed[1].tolist() == [0, 0, 0] and (packed.sum(axis=0) <= 4).all()


def test_the_plan_offers_a_rigid_job_its_gang_or_nothing():
    pol = cp.PolluxPolicy([], 2, 4)
    v = pol._values(mixed.RigidSpeedups(3, 2.0), 6, 1.0, False)
    assert np.isfinite(v).tolist() == [True, False, False, True, False, False, False]
    assert v[3] < v[0]  # (running beats waiting)


value = st.sampled_from([0.25, 0.5, 1.0, 2.0, 999.0, float("inf")])  # (few values: many ties)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), nodes=st.integers(1, 4), per_node=st.integers(1, 4))
def test_the_compiled_plan_is_the_numpy_plan(data, nodes, per_node):
    """kernels.elastic.pollux_sizes against PolluxPolicy._sizes_numpy on random options, ties and
    impossible sizes (inf) included: the same GPUs and keep flags for every job."""
    G = nodes * per_node
    jobs = data.draw(st.integers(0, 6))
    opts = []
    for _ in range(jobs):
        vals = np.array(data.draw(st.lists(value, min_size=1, max_size=G + 2)))
        keep = data.draw(st.one_of(st.none(), st.tuples(st.integers(1, G), value)))
        if keep is not None and keep[0] < len(vals) and data.draw(st.booleans()):
            keep = (keep[0], float(vals[keep[0]]))  # (a tie between keeping and a new allocation of as many GPUs)
        opts.append((vals, keep))
    pol = cp.PolluxPolicy([], nodes, per_node)
    pol._options = lambda *a: opts
    assert pol._sizes(None, None, None, None, False) == pol._sizes_numpy(None, None, None, None, False)


def test_the_compiled_plan_breaks_ties_as_numpy():
    pol = cp.PolluxPolicy([], 1, 2)
    pol._options = lambda *a: [(np.array([np.inf, 1.0]), (1, 1.0))]  # (a new GPU or keeping one: the same value)
    assert pol._sizes(None, None, None, None, False) == pol._sizes_numpy(None, None, None, None, False) == [(1, False)]


def test_mix_joins_a_pollux_workload_and_a_trace():
    e = mixed.read_mixed(W6).head(3)
    r = fastblox.Workload.from_arrays([5.0, 400.0], [2, 8], duration_s=[100.0, 7200.0])  # (any trace)
    w = mixed.mix(e, r)
    assert len(w) == 5 and mixed.elastic_rows(w).sum() == 3
    rigid = ~mixed.elastic_rows(w)
    assert sorted(w.duration_s[rigid].tolist()) == sorted(r.duration_s.tolist())
    assert sorted(w.num_gpus[rigid].tolist()) == sorted(r.num_gpus.tolist())
    assert (np.diff(w.submit_s) >= 0).all()
    assert set(w.extra["model"][~rigid].tolist()) <= set(fastblox.elastic.APPLICATIONS)


def test_scaled_is_deterministic_at_the_offered_load():
    base = mixed.read_mixed(W6)
    a, b = (mixed.scaled(base, 500, 256, load=0.9, seed=3) for _ in range(2))
    assert a.submit_s.tolist() == b.submit_s.tolist() and a.extra["model"].tolist() == b.extra["model"].tolist()
    assert len(a) == 500 and mixed.elastic_rows(a).all()
    span = a.submit_s.max() - a.submit_s.min()
    assert (a.duration_s * a.num_gpus).sum() / (256 * span) == pytest.approx(0.9, rel=0.02)
    c = mixed.scaled(base, 500, 256, load=0.9, seed=4)
    assert c.submit_s.tolist() != a.submit_s.tolist()


@pytest.mark.slow
def test_a_thousand_mixed_jobs_finish_with_gangs_kept_and_beat_fifo(monkeypatch):
    """1,000 jobs drawn from workload-6, a fifth of them rigid, on 32x4 at offered load 1: every
    job finishes, rigid jobs only ever hold their gang, and Pollux's average JCT beats native FIFO
    running every job at its requested GPUs."""
    w = mixed.scaled(mixed.read_mixed(W6), 1000, 128, load=1.0, seed=7)
    w.extra["elastic"] = mixed.elastic_rows(w) & (np.random.default_rng(8).random(len(w)) >= 0.2)
    e = mixed.elastic_rows(w)
    seen = _spy(monkeypatch)
    res = fastblox.simulate(w, policy="pollux", cluster="32x4")
    assert res.summary["num_finished"] == 1000 and 100 < (~e).sum() < 300
    gang = w.num_gpus
    for _, alloc in seen[::10]:
        assert all(len(a) in (0, gang[j]) for j, a in alloc.items() if not e[j])
    fifo = fastblox.simulate(w, policy="fifo", cluster="32x4", restart_s=30.0)
    assert res.summary["avg_jct_s"] < fifo.summary["avg_jct_s"]


def test_the_local_search_may_give_a_rigid_job_only_its_gang():
    """The local search's table (``PolluxPolicy._table``, read by ``kernels/pollux.py``) values a
    rigid job only on no GPUs or its gang, on any number of nodes: every other size is inf, so no
    move can leave it part of its gang."""
    jobs = [mixed.RigidJob(3, 1000.0, 0.0), cp.ElasticJob("cifar10", 0.0, None, {})]
    pol = cp.PolluxPolicy(jobs, 2, 4)
    pol._gang = np.array([3, 0])
    base = np.zeros((2, 2), dtype=np.int64)
    table, _ = pol._table(base, [j.speedups(4.0) for j in jobs], np.ones(2), np.array([3, 8]))
    finite = np.isfinite(table[0]).any(axis=0)  # (over node counts)
    assert finite.tolist() == [True, False, False, True] + [False] * 5  # (0..8 GPUs: the elastic job's cap)
    assert np.isfinite(table[1]).any(axis=0).sum() > 2  # (the elastic job: many sizes)
