"""The policies beyond the simple orderings: Tiresias, Gittins, Themis, Optimus, Gavel — their rules
on small hand-made cases, and their building blocks (LPs, Gittins table) on their own."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import fastblox
from fastblox.policies.gavel import fifo_allocation, ftf_allocation, max_min_allocation
from fastblox.policies.tiresias import gittins_table


def W(submit, gpus, dur, **kw):
    return fastblox.Workload.from_arrays(submit_s=submit, num_gpus=gpus, duration_s=dur, **kw)


def by_id(res, col):
    return dict(zip(res.jobs["job_id"].to_list(), res.jobs[col].to_list()))


# ---------------------------------------------------------------- Tiresias
def test_tiresias_running_job_keeps_gpus_until_it_leaves_the_queue():
    w = W([0, 100], [1, 1], [10_000, 100])
    res = fastblox.simulate(w, cluster="1x1", policy="tiresias", policy_opts={"thresholds": "3250"})
    start, fin, pre = by_id(res, "first_start_s"), by_id(res, "finish_s"), by_id(res, "num_preemptions")
    # B waits behind A in queue 0 (no preemption within a queue) until A's service reaches 3,250
    # GPU-seconds, exactly at t = 3,250; then B preempts A
    assert start[1] == 3250.0 and fin[1] == 3350.0
    assert pre[0] == 1 and fin[0] == 10_100.0
    # continuous LAS would have preempted at once
    las = fastblox.simulate(w, cluster="1x1", policy="las-gpu")
    assert by_id(las, "first_start_s")[1] == 100.0


def test_tiresias_service_is_gpu_seconds():
    # a 2-GPU job leaves queue 0 after 3,250 / 2 seconds
    w = W([0, 10], [2, 2], [5_000, 50])
    res = fastblox.simulate(w, cluster="1x2", policy="tiresias", policy_opts={"thresholds": "3250"})
    assert by_id(res, "first_start_s")[1] == 1625.0


def test_tiresias_rounds_mode_demotes_at_boundaries():
    w = W([0, 100], [1, 1], [10_000, 100])
    res = fastblox.simulate(w, cluster="1x1", policy="tiresias", time_model="rounds", round_s=300,
                            policy_opts={"thresholds": "3250"})
    assert by_id(res, "first_start_s")[1] == 3300.0  # the first boundary after the crossing


def test_tiresias_promote_knob_rescues_a_starving_job():
    # A is demoted after 100 s of service; a stream of short queue-0 jobs then keeps the GPU busy
    n = 40
    submit = [0.0] + [100.0 + 90.0 * k for k in range(n)]
    w = W(submit, [1] * (n + 1), [1000.0] + [90.0] * n)
    opts = {"thresholds": "100"}
    off = fastblox.simulate(w, cluster="1x1", policy="tiresias", policy_opts=opts)
    on = fastblox.simulate(w, cluster="1x1", policy="tiresias", policy_opts={**opts, "promote": 2})
    pre_off, pre_on = by_id(off, "num_preemptions")[0], by_id(on, "num_preemptions")[0]
    last_b_off, last_b_on = by_id(off, "finish_s")[n], by_id(on, "finish_s")[n]
    assert pre_off == 1 and last_b_off == 100.0 + 90.0 * n  # A starves until the stream ends
    # promoted after waiting 2 x its 100 s of service, A runs during the stream (and the stream
    # waits for it), again and again
    assert pre_on >= 5 and last_b_on >= last_b_off + 500
    assert by_id(on, "finish_s")[0] == by_id(off, "finish_s")[0]  # the GPU was busy throughout


def test_tiresias_gittins_prefers_jobs_likely_to_finish_soon():
    # service distribution: most jobs need 100 GPU-s, a few 10,000; a job that has run 100 s has
    # outlived the short ones, so a fresh job (high index) goes first within the queue
    x, g = gittins_table(np.r_[np.full(90, 100.0), np.full(10, 10_000.0)], delta=200.0)
    at = lambda a: g[np.searchsorted(x, a, side="right") - 1]
    assert at(0.0) > at(150.0)
    assert at(20_000.0) == 0.0


@given(st.lists(st.floats(1.0, 1e6), min_size=1, max_size=200), st.floats(1.0, 1e5))
@example([1_000_000.0, 999_999.9999999999], 1.0)  # (e ~1e-10, the difference of two sums ~1e6)
@settings(max_examples=50, deadline=None)
def test_gittins_table_matches_its_definition(sizes, delta):
    s = np.asarray(sizes)
    x, g = gittins_table(s, delta)
    assert np.all(np.diff(x) > 0) and x[0] == 0.0
    for a, gi in zip(x[:20], g[:20]):
        alive = s[s > a]
        if len(alive) == 0:
            assert gi == 0.0
            continue
        done = np.sum(alive - a <= delta)
        e = np.sum(np.minimum(alive - a, delta))  # g = P(done within delta) / E[min(S - a, delta)] = done / e
        if done == 0:
            assert gi == 0.0
            continue
        # from prefix sums, e is exact to a few ulps of the total service, not of e itself (e may be
        # a difference of two sums of ~1e6 that is ~1e-10)
        assert abs(done / gi - e) <= 1e-6 * e + 8 * np.finfo(float).eps * s.sum()


# ---------------------------------------------------------------- Themis
def _contended(n=120, seed=3):
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0, 20_000, n))
    dur = rng.choice([600.0, 3_600.0, 36_000.0], n, p=[0.5, 0.35, 0.15])
    return W(submit, rng.choice([1, 2], n), dur)


def test_themis_is_fairer_than_fifo_and_srtf():
    w = _contended()
    fifo = fastblox.simulate(w, cluster="2x4", policy="fifo").summary
    srtf = fastblox.simulate(w, cluster="2x4", policy="srtf").summary
    themis = fastblox.simulate(w, cluster="2x4", policy="themis", policy_opts={"f": 0.9}).summary
    assert themis["rho_max"] < fifo["rho_max"]
    assert themis["rho_max"] < srtf["rho_max"]


def test_themis_knob_changes_the_order():
    w = _contended()
    a = fastblox.simulate(w, cluster="2x4", policy="themis", policy_opts={"f": 0.0})
    b = fastblox.simulate(w, cluster="2x4", policy="themis", policy_opts={"f": 0.95})
    assert a.summary["avg_jct_s"] != b.summary["avg_jct_s"]
    # f near 1 serves the worst-off first: the worst rho is no larger than with f = 0
    assert b.summary["rho_max"] <= a.summary["rho_max"] + 1e-9


# ---------------------------------------------------------------- Optimus
def test_optimus_gives_an_idle_cluster_to_a_scalable_job():
    w = W([0.0], [1], [3600.0], model=np.array(["ResNet-18 (batch size 256)"]))
    res = fastblox.simulate(w, cluster="v100:1x8", policy="optimus", throughput="gavel")
    j = res.jobs.row(0, named=True)
    assert j["jct_s"] < 0.5 * 3600  # ran on several GPUs
    assert j["attained_gpu_s"] > 2 * j["attained_s"]


def test_optimus_respects_capacity_and_caps():
    w = _contended(60)
    res = fastblox.simulate(w, cluster="2x4", policy="optimus", policy_opts={"max_gpus_per_job": 3},
                            record_series=True)
    s = res.series
    assert (s["free_gpus"].to_numpy() >= 0).all()
    assert res.summary["num_finished"] == 60
    # never more than 3 GPUs per job: GPU-seconds held <= 3 x wall-seconds held
    j = res.jobs
    assert (j["attained_gpu_s"].to_numpy() <= 3 * j["attained_s"].to_numpy() + 1e-6).all()


# ---------------------------------------------------------------- Gavel's LPs
@st.composite
def lp_case(draw):
    a = draw(st.integers(1, 12))
    T = draw(st.integers(1, 3))
    thr = np.array(draw(st.lists(st.lists(st.floats(0.0, 10.0), min_size=T, max_size=T), min_size=a, max_size=a)))
    thr[:, 0] = np.maximum(thr[:, 0], 0.5)  # every job can run somewhere
    sf = np.array(draw(st.lists(st.sampled_from([1, 2, 4]), min_size=a, max_size=a)))
    cap = np.array(draw(st.lists(st.integers(4, 16), min_size=T, max_size=T)), dtype=np.float64)
    return thr, sf, cap


def _feasible(x, sf, cap):
    assert (x >= -1e-9).all() and (x <= 1 + 1e-9).all()
    assert (x.sum(axis=1) <= 1 + 1e-6).all()
    assert ((sf[:, None] * x).sum(axis=0) <= cap + 1e-6).all()


@given(lp_case())
@settings(max_examples=40, deadline=None)
def test_max_min_allocation_is_feasible_and_beats_equal_shares(case):
    thr, sf, cap = case
    x = max_min_allocation(thr, sf, cap, aware=True)
    _feasible(x, sf, cap)
    p = (thr * cap).sum(axis=1) / cap.sum()
    norm = lambda y: ((thr * y).sum(axis=1) * sf / p)
    # the equal-share allocation (each job C_t / (m k_j) of every type, scaled into bounds) is feasible
    m = len(sf)
    xiso = np.where(thr > 0, (cap[None, :] / m) / sf[:, None], 0.0)
    xiso /= np.maximum(1.0, xiso.sum(axis=1, keepdims=True))
    assert norm(x).min() >= norm(xiso).min() - 1e-6
    assert (x[thr == 0] == 0).all()


@given(lp_case())
@settings(max_examples=25, deadline=None)
def test_ftf_allocation_does_no_worse_than_isolation(case):
    thr, sf, cap = case
    a = len(sf)
    rng = np.random.default_rng(a)
    elapsed = rng.uniform(0, 1000, a)
    remaining = rng.uniform(100, 10_000, a)
    m = a
    xiso = np.where(thr > 0, (cap[None, :] / m) / sf[:, None], 0.0)
    xiso /= np.maximum(1.0, xiso.sum(axis=1, keepdims=True))
    iso = (thr * xiso).sum(axis=1)
    denom = remaining / iso
    x, _ = ftf_allocation(thr, sf, cap, elapsed, remaining, denom)
    _feasible(x, sf, cap)
    rho = lambda y: (elapsed + remaining / np.maximum((thr * y).sum(axis=1), 1e-300)) / denom
    assert rho(x).max() <= rho(xiso).max() * (1 + 2e-3)


def test_fifo_allocation_takes_the_fastest_free_type_in_order():
    thr = np.array([[1.0, 3.0], [1.0, 3.0], [2.0, 1.0]])
    x = fifo_allocation(thr, np.array([2, 2, 1]), np.array([4.0, 2.0]))
    assert x.tolist() == [[0, 1], [1, 0], [1, 0]]
    # head-of-line: a job that fits nowhere stops the allocation
    x = fifo_allocation(thr, np.array([4, 8, 1]), np.array([4.0, 2.0]))
    assert x.tolist() == [[1, 0], [0, 0], [0, 0]]


def test_gavel_puts_jobs_where_they_run_fastest():
    # two job types with opposite preferences on a two-type cluster (numbers from Gavel's table)
    models = np.array(["Recommendation (batch size 512)", "ResNet-50 (batch size 64)"] * 8)
    w = W(np.zeros(16), np.ones(16, dtype=int), np.full(16, 7200.0), model=models)
    kw = dict(cluster="v100:1x8,k80:1x8", throughput="gavel", placement_effects=False)
    aware = fastblox.simulate(w, policy="gavel", **kw)
    agnostic = fastblox.simulate(w, policy="gavel-las-agnostic", **kw)
    assert aware.summary["avg_jct_s"] < agnostic.summary["avg_jct_s"]


# ---------------------------------------------------------------- backfilling
@pytest.mark.parametrize("policy", ["fifo", "sjf"])
def test_no_backfill_blocks_behind_the_head(policy):
    """1x4: A (2 GPUs) runs from 0; B (4 GPUs, t=1) waits for it; C (1 GPU, t=2) fits beside A.
    Backfilling starts C at once; without it C waits until B has run (head-of-line blocking)."""
    w = W([0.0, 1.0, 2.0], [2, 4, 1], [100.0, 100.0, 10.0] if policy == "fifo" else [100.0, 50.0, 60.0])
    bf = fastblox.simulate(w, cluster="1x4", policy=policy)
    hol = fastblox.simulate(w, cluster="1x4", policy=policy, policy_opts={"backfill": "false"})
    assert by_id(bf, "first_start_s") == {0: 0.0, 1: 100.0, 2: 2.0}
    b_end = 100.0 + (100.0 if policy == "fifo" else 50.0)
    assert by_id(hol, "first_start_s") == {0: 0.0, 1: 100.0, 2: b_end}
    assert hol.config["policy_opts"] == {"backfill": False}


# ---------------------------------------------------------------- options and errors
def test_policy_options_are_validated():
    w = W([0.0], [1], [10.0])
    with pytest.raises(fastblox.ConfigError, match="has no option 'bogus'"):
        fastblox.simulate(w, cluster="1x1", policy="tiresias", policy_opts={"bogus": 1})
    with pytest.raises(fastblox.ConfigError, match="ascending"):
        fastblox.simulate(w, cluster="1x1", policy="tiresias", policy_opts={"thresholds": "7200;3250"})
    with pytest.raises(fastblox.ConfigError, match="has no option '_aware'"):
        fastblox.simulate(w, cluster="1x1", policy="gavel", policy_opts={"_aware": False})
    with pytest.raises(fastblox.ConfigError, match=r"must be in \[0, 1\)"):
        fastblox.simulate(w, cluster="1x1", policy="themis", policy_opts={"f": 1})


def test_a_bad_planner_answer_is_a_clear_error():
    from fastblox import parts
    from fastblox.kernels import enums

    class Bad:
        def __init__(self, st, opts):
            pass

        def plan(self, idx, now):
            return np.zeros(len(idx)), np.zeros(len(idx) + 1, dtype=int), np.ones(len(idx), dtype=int)

    pol = parts.Policy("bad-planner", enums.POL_PLAN, True, True, "test", kind=enums.KIND_PLAN, planner=Bad)
    with pytest.raises(fastblox.ConfigError, match="keys, GPU types and sizes"):
        fastblox.simulate(W([0.0], [1], [10.0]), cluster="1x1", policy=pol)


def test_policies_are_deterministic():
    w = _contended(80)
    for pol in ("tiresias", "tiresias-gittins", "themis", "optimus", "gavel", "gavel-las-agnostic"):
        a = fastblox.simulate(w, cluster="2x4", policy=pol)
        b = fastblox.simulate(w, cluster="2x4", policy=pol)
        assert a.jobs.equals(b.jobs), pol


# ---------------------------------------------------------------- Gavel's round kernel vs its twin
@st.composite
def select_case(draw):
    a = draw(st.integers(0, 25))
    T = draw(st.integers(1, 3))
    f = st.floats(0.0, 4.0)
    grid = lambda: np.array(draw(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]) | f, min_size=T, max_size=T),
                                          min_size=a, max_size=a))).reshape(a, T)
    prio, deficit, x, thr = grid(), grid(), grid(), grid()
    sf = np.array(draw(st.lists(st.sampled_from([1, 2, 4]), min_size=a, max_size=a)), dtype=np.int64)
    left = np.array(draw(st.lists(st.integers(0, 12), min_size=T, max_size=T)), dtype=np.int64)
    eligible = np.array(draw(st.lists(st.booleans(), min_size=a, max_size=a)), dtype=bool)
    order = np.array(draw(st.permutations(list(range(T)))), dtype=np.int64)
    return order, prio, deficit, x, thr, sf, left, eligible, draw(st.booleans())


@given(select_case())
@settings(max_examples=100, deadline=None)
def test_gavel_select_matches_reference(case):
    from fastblox.kernels.planners import gavel_select
    from fastblox.reference.planners import gavel_select_reference

    order, prio, deficit, x, thr, sf, left, eligible, fifo = case
    a = len(sf)
    types, keys = np.empty(a, dtype=np.int64), np.empty(a)
    left_k = left.copy()
    gavel_select(order, prio, deficit, x, thr, sf, left_k, eligible, fifo, types, keys)
    rt, rk, rl = gavel_select_reference(order, prio.tolist(), deficit.tolist(), x.tolist(), thr.tolist(), sf.tolist(),
                                        left.tolist(), eligible.tolist(), fifo)
    assert types.tolist() == rt and keys.tolist() == rk and left_k.tolist() == rl
    # invariants: capacity never exceeded, every chosen job can run where it was put
    for t in range(len(left)):
        assert sf[types == t].sum() <= left[t]
    chosen = types >= 0
    assert (thr[chosen, types[chosen]] > 0).all() and eligible[chosen].all()


@given(select_case())
@settings(max_examples=100, deadline=None)
def test_gavel_fifo_allocation_matches_reference(case):
    from fastblox.policies.gavel import fifo_allocation
    from fastblox.reference.planners import fifo_allocation_reference

    _, _, _, _, thr, sf, left, _, _ = case
    x = fifo_allocation(thr, sf, left.astype(np.float64))
    np.testing.assert_array_equal(x, fifo_allocation_reference(thr, sf, left.astype(np.float64)))
    # invariants: a job gets one whole type or nothing, a prefix of the jobs is served, capacity holds
    assert set(np.unique(x)) <= {0.0, 1.0} and (x.sum(axis=1) <= 1).all()
    served = x.sum(axis=1) > 0
    assert not (served[1:] & ~served[:-1]).any()
    assert ((x * sf[:, None]).sum(axis=0) <= left).all()


@given(st.integers(0, 15), st.integers(1, 6), st.integers(0, 40), st.data())
@settings(max_examples=100, deadline=None)
def test_optimus_sizes_matches_reference(a, cmax, free, data):
    from fastblox.kernels.planners import optimus_sizes
    from fastblox.reference.planners import optimus_sizes_reference

    rows = data.draw(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0]), min_size=cmax, max_size=cmax),
                              min_size=a, max_size=a))
    S = np.zeros((a, cmax + 1))
    if a:
        S[:, 1:] = np.maximum.accumulate(np.array(rows), axis=1)  # speeds never fall with more GPUs
    work = np.array(data.draw(st.lists(st.floats(1.0, 1e4), min_size=a, max_size=a)))
    with np.errstate(divide="ignore"):
        T = np.where(S > 0, work[:, None] / np.where(S > 0, S, 1.0), np.inf)
    cap = np.array(data.draw(st.lists(st.integers(1, cmax), min_size=a, max_size=a)), dtype=np.int64)
    size = np.zeros(a, dtype=np.int64)
    left = optimus_sizes(S, T, cap, free, size)
    ref, ref_left = optimus_sizes_reference(S.tolist(), T.tolist(), cap.tolist(), free)
    assert size.tolist() == ref and left == ref_left
    assert size.sum() + left == free and (size <= np.maximum(cap, 0)).all()
    # nobody gets a second GPU while a runnable job has none and GPUs were short
    if (size == 0).any() and ((S[:, 1] > 0) & (size == 0)).any():
        assert (size <= 1).all()


def test_every_builtin_policy_is_one_file():
    """A built-in policy's kernel key function, rule and registration live in its own file
    under fastblox/policies/ (docs/policies.md)."""
    import inspect
    from pathlib import Path

    from fastblox import parts, policies
    from fastblox.kernels import enums

    here = Path(policies.__file__).parent
    for name in parts.POLICIES.names():
        p = parts.POLICIES.get(name)
        module = inspect.getmodule(p.fn or p.job_fn or p.planner or p.key or p.keys)
        if module is None or not module.__name__.startswith("fastblox."):
            continue  # (a user policy or planner some other test registered, maybe from exec'd code)
        assert Path(module.__file__).parent == here, name
        assert len((module.__doc__ or "").split()) > 20, f"{name}: its file's docstring should state the rule"
        if p.kind != enums.KIND_PLAN:
            assert (p.key is None) != (p.keys is None) and policies.is_builtin(p.key or p.keys), name


TOY = '''"""Fewest GPUs first: the narrowest waiting job starts first, ties by submit time; never preempts."""

from .. import parts
from ..kernels._calls import helper


@helper(nrt=False, inline=True)
def key(j, t, running, el, jobs, run, pp, restart_s):
    return jobs.gpus[j], jobs.submit[j]


POLICY = parts.POLICIES.register("fewest-gpus", parts.Policy(
    "fewest-gpus", 40, preemptive=False, dynamic=False, key=key, description="fewest GPUs first"))
'''

TOY_RUN = '''import json
import fastblox
w = fastblox.Workload.from_arrays(submit_s=[0, 1, 2, 3], num_gpus=[4, 4, 1, 2], duration_s=[100, 10, 10, 10])
out = {}
for pol in ("fifo", "fewest-gpus"):
    r = fastblox.simulate(w, cluster="1x4", policy=pol)
    out[pol] = r.jobs.sort("job_id")["first_start_s"].to_list()
print(json.dumps(out))
'''


@pytest.mark.slow  # (compiles the kernel of a package copy: ~30-60 CPU-s)
def test_a_policy_added_as_one_file_runs_in_the_kernel(tmp_path):
    """docs/policies.md's recipe: a file under fastblox/policies/ and one registry line. The
    kernel picks up the new key function (its cache is keyed on the policy files too)."""
    from pkgcopy import installed_copy, run_json

    pkg = installed_copy(tmp_path / "src")
    (pkg / "policies" / "fewest_gpus.py").write_text(TOY)
    with open(pkg / "policies" / "__init__.py", "a") as f:
        f.write("from . import fewest_gpus  # noqa: E402,F401\n")
    starts = run_json(tmp_path / "src", tmp_path / "cache", TOY_RUN)
    # FIFO: the 4-GPU job 1 goes when job 0 ends (100 s), then jobs 2 and 3 together (110 s)
    assert starts["fifo"] == [0.0, 100.0, 110.0, 110.0]
    # fewest GPUs first: jobs 2 (1 GPU) and 3 (2 GPUs) at 100 s, then the 4-GPU job 1
    assert starts["fewest-gpus"] == [0.0, 110.0, 100.0, 100.0]
