"""--compat sia: the Sia simulator's allocation MILP (fastblox.compat_sia.solve_allocation) against
its brute-force twin (fastblox.reference.sia), its placement, its goodput rows and a replay of a
Sia workload (shared/ traces; the Pollux artifact's profiles, the ones we may ship)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastblox
from fastblox import compat_sia as cs
from fastblox.cluster import Cluster
from fastblox.compat_pollux import read_workload
from fastblox.errors import ConfigError
from fastblox.reference import sia as ref
from fastblox.spec import OptionError, RunSpec

from conftest import SHARED, need_shared

WORKLOADS = SHARED / "traces" / "sched-paper-workloads" / "sia-sosp23" / "workloads"


# ------------------------------------------------------------------ the MILP against brute force
@st.composite
def problems(draw):
    types = draw(st.integers(1, 2))
    per_type = [draw(st.integers(1, 3)) for _ in range(types)]
    cfg_type = np.concatenate([np.full(k, t) for t, k in enumerate(per_type)])
    cfg_gpus = np.array([draw(st.sampled_from([1, 2, 4, 8])) for _ in cfg_type])
    capacity = np.array([draw(st.integers(0, 12)) for _ in range(types)])
    jobs = draw(st.integers(0, 4))
    cost = np.array([[draw(st.sampled_from([0.05, 0.3, 0.5, 0.71, 0.9, 1.0, 1.09, 1.5, 100.0]))
                      for _ in cfg_type] for _ in range(jobs)], dtype=np.float32).reshape(jobs, len(cfg_type))
    fixed = np.full(jobs, -1)
    left = capacity.copy()
    for j in range(jobs):  # some jobs pinned where the capacity allows (jobs still restarting)
        c = draw(st.integers(-1, len(cfg_type) - 1))
        if c >= 0 and cfg_gpus[c] <= left[cfg_type[c]] and draw(st.booleans()):
            fixed[j] = c
            left[cfg_type[c]] -= cfg_gpus[c]
    return cost, cfg_type, cfg_gpus, capacity, fixed


@settings(max_examples=150, deadline=None)
@given(problems(), st.sampled_from([1.1, 0.6, 2.0]))
def test_milp_objective_equals_brute_force(prob, lambda_n):
    cost, cfg_type, cfg_gpus, capacity, fixed = prob
    choice, obj = cs.solve_allocation(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n, gap=0.0)
    _, best = ref.best_allocation(cost.tolist(), cfg_type.tolist(), cfg_gpus.tolist(), capacity.tolist(),
                                  fixed.tolist(), lambda_n)
    assert obj == pytest.approx(best, rel=1e-9, abs=1e-6)
    assert obj == pytest.approx(cs.objective(cost, choice, lambda_n))
    used = np.zeros(len(capacity))
    for c in choice[choice >= 0]:
        used[cfg_type[c]] += cfg_gpus[c]
    assert (used <= capacity).all()  # capacity never exceeded per type
    assert ((fixed < 0) | (choice == fixed)).all()


def test_milp_takes_the_cheaper_type_and_leaves_a_job_out_when_full():
    # two jobs, one type of 4 GPUs: configs 1 GPU (cost .9) and 4 GPUs (cost .2)
    cost = np.array([[0.9, 0.2], [0.9, 0.3]], dtype=np.float32)
    choice, obj = cs.solve_allocation(cost, np.array([0, 0]), np.array([1, 4]), np.array([4]), np.array([-1, -1]))
    # 4 GPUs to one job (0.2 - 1.1) beats 1 GPU each (0.9 + 0.9 - 2.2): -0.9 < -0.4
    assert choice.tolist() == [1, -1] and obj == pytest.approx(0.2 + 1.1)
    choice, _ = cs.solve_allocation(cost, np.array([0, 0]), np.array([1, 4]), np.array([4]), np.array([-1, 0]))
    assert choice.tolist() == [0, 0]  # a job still restarting keeps its configuration


# ------------------------------------------------------------------ placement
@settings(max_examples=100, deadline=None)
@given(st.sampled_from([4, 8]), st.integers(1, 4), st.data())
def test_place_fast_equals_twin(per_node, nodes, data):
    cap = per_node * nodes
    sizes = []
    while True:
        g = data.draw(st.sampled_from([1, 2, 4, 8, 12, 16]))
        if sum(sizes) + g > cap or len(sizes) >= 6 or data.draw(st.booleans()):
            break
        sizes.append(g)
    allocs = [(f"j{i}", g) for i, g in enumerate(sizes)]
    got = cs.place_fast(allocs, nodes, per_node)
    assert got == ref.place(allocs, nodes, per_node)
    for j, g in allocs:
        assert len(got[j]) == g
    used = np.bincount([n for v in got.values() for n in v], minlength=nodes)
    assert (used <= per_node).all()


def test_place_fast_round_robins_single_gpu_jobs():
    # the simulator's cursor moves on: three 1-GPU jobs land on three nodes (a restart-free
    # re-placement is not guaranteed: a 2-GPU job may be split over two nodes)
    assert cs.place_fast([("a", 1), ("b", 1), ("c", 1)], 3, 4) == {"a": [0], "b": [1], "c": [2]}
    assert cs.place_fast([("a", 3), ("b", 2)], 2, 4) == {"a": [0, 0, 0], "b": [1, 1]}
    assert cs.place_fast([("a", 1), ("b", 4)], 2, 4) == {"b": [0, 0, 0, 0], "a": [1]}


# ------------------------------------------------------------------ the policy's numbers
def test_power_costs_round_and_clip():
    g = np.array([[1.0, 4.0, 1e-4, 1e-7]], dtype=np.float32)
    assert cs.power_costs(g).tolist() == [[1.0, 0.5, 100.0, 3000.0]]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0, 1e6, width=32) | st.sampled_from([0.0, 1e-4, 0.01, 1.0, 4.0]), min_size=1, max_size=40),
       st.lists(st.integers(-1, 9) | st.floats(0.0, 1e4, width=32).map(lambda x: (x + 0.5) / 100)
                | st.sampled_from([np.inf, 0.125, 0.375, 2.625, 0.005, 2.675, 3000.004, 3000.006]),
                min_size=1, max_size=40),
       st.sampled_from([-0.5, -1.0, 0.5]), st.integers(0, 2**32 - 1))
def test_cost_kernels_are_their_numpy_twins(goodput, cost, p, seed):
    """kernels.elastic.restart_discount and round_costs (through power_costs) against reference.sia's
    numpy twins, bit for bit; round_costs also on values that are ties in hundredths, integers and
    values about the cap."""
    from fastblox.kernels.elastic import restart_discount, round_costs

    rng = np.random.default_rng(seed)
    J = int(rng.integers(1, 5))
    G = np.resize(np.array(goodput, dtype=np.float32), (J, 10))
    held = rng.integers(-1, 10, J).tolist()
    factor = rng.choice([1.0, 0.0, 0.3, 0.999, float(rng.random())], J).tolist()
    want = ref.restart_discount(G, held, factor)
    restart_discount(G, np.array(held, dtype=np.int64), np.array(factor))
    assert G.tobytes() == want.tobytes()
    with np.errstate(divide="ignore", over="ignore"):  # (a goodput 0 or subnormal: cost inf, capped)
        assert cs.power_costs(G, p).tobytes() == ref.power_costs(G, p, cs.CLIP).tobytes()
    c = np.array(cost, dtype=np.float32)  # (k / 8: ties in hundredths, to even)
    want = np.round(c, decimals=2)
    want[want > cs.CLIP] = cs.CLIP
    round_costs(c, np.float32(cs.CLIP))
    assert c.tobytes() == want.tobytes()


def test_restart_penalties_by_name():
    assert cs.policy_restart_s("imagenet-3") == 250 and cs.policy_restart_s("cifar10-1") == 30
    assert cs.policy_restart_s("yolov3-2") == 45 and cs.policy_restart_s("ncf-0") == 30
    # the job's own restart delay differs for cifar10 and yolov3 (applications.py's rescale_time)
    assert cs.RESCALE_S["cifar10"] == 50 and cs.RESCALE_S["yolov3"] == 80


def test_cluster_types_configs():
    t = cs.cluster_types(Cluster.parse(cs.SIA_CLUSTER))
    assert [x.name for x in t] == ["aws", "dgx-ext", "rtx"]
    assert t[0].cfg_gpus.tolist() == [1, 2, 4, 8, 12, 16, 20, 24]
    assert t[1].cfg_gpus.tolist() == [1, 2, 4, 8, 16] and t[1].first == 8
    assert t[2].cfg_gpus.tolist() == [1, 2, 4, 8, 16, 24] and t[2].cfg_nodes.tolist() == [1, 1, 1, 1, 2, 3]
    with pytest.raises(ConfigError, match="4 or all 8 GPUs"):
        cs.cluster_types(Cluster.parse("a:2x4,a:1x8"))


# ------------------------------------------------------------------ options
def test_spec_defaults_and_checks(tmp_path):
    r = RunSpec(compat="sia", policy="sia", trace="x.csv", sia_profiles=str(tmp_path)).resolved()
    assert r.cluster == cs.SIA_CLUSTER and r.round_s == 60.0
    with pytest.raises(OptionError, match="--sia-profiles DIR"):  # (8-GPU nodes need the Sia artifact's profiles)
        RunSpec(compat="sia", policy="sia", trace="x.csv").resolved()
    with pytest.raises(OptionError, match="--compat sia runs"):
        RunSpec(compat="sia", policy="fifo", trace="x.csv").resolved()
    native = RunSpec(policy="sia").resolved()  # (without --compat: the native policy, fastblox/policies/sia.py)
    assert native.compat is None and native.time_model == "rounds" and native.placement is not None
    with pytest.raises(OptionError, match="sia-profiles"):
        RunSpec(compat="pollux", policy="pollux", trace="x.csv", sia_profiles="/tmp").resolved()


def test_explicit_cluster_32x4_is_kept_under_pollux():
    # (it equals the option's old default and was taken for "not given": 16x4)
    assert RunSpec(compat="pollux", policy="pollux", trace="x.csv", cluster="32x4").resolved().cluster == "32x4"
    assert RunSpec(compat="pollux", policy="pollux", trace="x.csv").resolved().cluster == "16x4"
    assert RunSpec().resolved().cluster == "32x4"


# ------------------------------------------------------------------ a replay
@pytest.fixture(scope="module")
def small():
    w = read_workload(need_shared(WORKLOADS / "philly" / "workload-1.csv"))
    cifar = np.flatnonzero(np.asarray(w.extra["model"]) == "cifar10")[:6]  # (the short jobs: a few seconds)
    return w.take(cifar)


HET4 = "a:2x4,b:1x4"  # (two types of 4-GPU nodes: the bundled Pollux profiles for both)


def test_replay_small_workload(small):
    res = fastblox.simulate(small, compat="sia", policy="sia", cluster=HET4)
    s = res.summary
    assert s["num_finished"] == len(small)
    assert "Sia" in s["engine"] and s["restarts"] >= 0
    jct = res.jobs["jct_s"].to_numpy()
    assert (jct > 0).all()
    again = fastblox.simulate(small, compat="sia", policy="sia", cluster=HET4)
    assert again.jobs["finish_s"].to_list() == res.jobs["finish_s"].to_list()  # deterministic
    # fewer GPUs of one type only: the jobs cannot finish sooner on average
    tight = fastblox.simulate(small, compat="sia", policy="sia", cluster="a:1x4")
    assert tight.summary["avg_jct_s"] > s["avg_jct_s"]


# ------------------------------------------------------------------ the compiled fit loss against its numpy twin
@settings(max_examples=12, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_kernel_fit_equals_numpy_fit(n, seed):
    from fastblox import elastic

    rng = np.random.default_rng(seed)
    nodes = rng.integers(1, 4, n).astype(float)
    reps = nodes * rng.integers(1, 5, n)
    atomic = rng.integers(1, 128, n).astype(float)
    acc = rng.uniform(0.01, 1, n)
    step = acc + rng.uniform(0, 0.5, n)
    for tol in (cs.FIT_TOL, None):  # (Sia's tolerance, Pollux's)
        fit = elastic.fit_perf_params(nodes, reps, atomic, acc, step, tol=tol, kernel=True)
        ref_fit = elastic.fit_perf_params(nodes, reps, atomic, acc, step, tol=tol)
        assert fit.tobytes() == ref_fit.tobytes()  # the same fit, bit for bit


# ------------------------------------------------------------------ the exact allocation against HiGHS
@st.composite
def rounds(draw):
    """Sia rounds: 1-3 types of 4- or 8-GPU nodes with the simulator's configurations, up to 12 jobs
    of goodput rows rising with the GPUs (costs in whole hundredths, some not allowed), some jobs
    pinned, a held configuration per job."""
    types = draw(st.integers(1, 3))
    t_of, gpus = [], []
    cap = []
    for t in range(types):
        per = draw(st.sampled_from([4, 8]))
        nodes = draw(st.integers(1, 3))
        _, g = cs.CONFIGS[per]
        k = [x for x, n in zip(g, cs.CONFIGS[per][0]) if n <= nodes]
        t_of += [t] * len(k)
        gpus += k
        cap.append(nodes * per)
    cfg_type, cfg_gpus, capacity = np.array(t_of), np.array(gpus), np.array(cap)
    jobs = draw(st.integers(0, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    good = np.exp(rng.uniform(0, 1.5, (jobs, 1)) * np.log2(cfg_gpus)[None, :] / 3) * rng.uniform(0.3, 1.2, (jobs, 1))
    good[rng.random((jobs, len(cfg_gpus))) < 0.2] = cs.ZERO_ALLOC_GAIN
    cost = cs.power_costs(good.astype(np.float32))
    fixed = np.full(jobs, -1)
    left = capacity.copy()
    for j in range(jobs):
        c = int(rng.integers(-3, len(cfg_type)))
        if c >= 0 and cfg_gpus[c] <= left[cfg_type[c]] and rng.random() < 0.3:
            fixed[j] = c
            left[cfg_type[c]] -= cfg_gpus[c]
    prefer = rng.integers(-1, len(cfg_type), jobs)
    return cost, cfg_type, cfg_gpus, capacity, fixed, prefer


def _check_choice(choice, cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n):
    used = np.zeros(len(capacity))
    for c in choice[choice >= 0]:
        used[cfg_type[c]] += cfg_gpus[c]
    assert (used <= capacity).all()  # no type's GPUs exceeded
    assert ((fixed < 0) | (choice == fixed)).all()  # pinned jobs keep theirs
    free = np.flatnonzero((choice >= 0) & (fixed < 0))
    assert (cost.astype(np.float64)[free, choice[free]] < lambda_n).all()  # (a free job: where it lowers the objective)


@settings(max_examples=120, deadline=None)
@given(rounds(), st.sampled_from([1.1, 0.9]), st.booleans())
def test_exact_allocation_is_optimal_as_highs(prob, lambda_n, states):
    """The search (and, with ``states``, the dynamic programme alone) reach HiGHS's optimum (gap 0)."""
    cost, cfg_type, cfg_gpus, capacity, fixed, prefer = prob
    old = cs.SEARCH_NODES
    cs.SEARCH_NODES = 0 if states else old  # (0: the search gives up at once, the programme answers)
    try:
        choice = cs.exact_allocation(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n, prefer)
    finally:
        cs.SEARCH_NODES = old
    _, obj = cs.highs_allocation(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n, gap=0.0)
    assert choice is not None
    assert cs.objective(cost, choice, lambda_n) == pytest.approx(obj, abs=1e-6)
    _check_choice(choice, cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n)
    # and the second objective: HiGHS on the costs in hundredths x (free jobs + 1), less 1 where preferred
    m = int((fixed < 0).sum()) + 1
    c64 = cost.astype(np.float64)
    scaled = np.rint(c64 * 100) * m - (np.arange(len(cfg_type))[None, :] == prefer[:, None])
    scaled[~((c64 - lambda_n < 0) | (np.arange(len(cfg_type))[None, :] == fixed[:, None]))] = 1e6
    lam = round(lambda_n * 100) * m
    _, best = cs.highs_allocation(scaled, cfg_type, cfg_gpus, capacity, fixed, lam, gap=0.0)
    assert cs.objective(scaled, choice, lam) == pytest.approx(best, abs=1e-6)


@settings(max_examples=120, deadline=None)
@given(st.one_of(rounds(), problems().map(lambda p: (*p, np.arange(len(p[0])) % 3 - 1))),
       st.sampled_from([1.1, 0.9, 1.105]), st.booleans())
def test_alloc_kernels_are_their_numpy_twins(prob, lambda_n, prefer_none):
    """kernels.elastic.alloc_options and alloc_bounded against fastblox.reference.sia's numpy: the
    same arrays, bit for bit (``problems``: few distinct costs, many ties; 1.105: not in whole
    hundredths)."""
    from fastblox.kernels.elastic import alloc_bounded, alloc_options

    cost, cfg_type, cfg_gpus, capacity, fixed, prefer = prob
    prefer = None if prefer_none else prefer
    c64 = cost.astype(np.float64)
    pref = np.full(len(cost), -1) if prefer is None else prefer
    got = alloc_options(c64, cfg_type.astype(np.int64), cfg_gpus.astype(np.int64), capacity.astype(np.int64),
                        fixed.astype(np.int64), lambda_n, round(lambda_n * 100), pref.astype(np.int64))
    want = ref.alloc_options(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n, prefer)
    assert got[0] == want[0]
    assert [a.tolist() for a in got[1:]] == [a.tolist() for a in want[1:]]
    if got[0] == 0:
        a = alloc_bounded(*(x.copy() for x in got[2:]), cs.PRICE_SWEEPS, cs.SEARCH_NODES)
        b = ref.alloc_bounded(*(x.copy() for x in want[2:]), cs.PRICE_SWEEPS, cs.SEARCH_NODES)
        assert [x.tobytes() for x in a[:4]] == [x.tobytes() for x in b[:4]] and a[4] == b[4]


@settings(max_examples=150, deadline=None)
@given(problems(), st.sampled_from([1.1, 0.6]), st.integers(0, 2**32 - 1), st.booleans())
def test_exact_allocation_keeps_the_most_preferred_among_ties(prob, lambda_n, seed, states):
    """Among the optima (brute force), the most jobs on their preferred configuration."""
    import itertools

    cost, cfg_type, cfg_gpus, capacity, fixed = prob
    cost = np.round(cost, 1).astype(np.float32)  # (coarse costs: many ties)
    prefer = np.random.default_rng(seed).integers(-1, len(cfg_type), len(fixed))
    old = cs.SEARCH_NODES
    cs.SEARCH_NODES = 0 if states else old
    try:
        choice = cs.exact_allocation(cost, cfg_type, cfg_gpus, capacity, fixed, lambda_n, prefer)
    finally:
        cs.SEARCH_NODES = old
    best = None
    for c in itertools.product(*[[f] if f >= 0 else [-1, *np.flatnonzero(cost[j] < lambda_n)]
                                 for j, f in enumerate(fixed)]):
        c = np.array(c, dtype=np.int64)
        used = np.bincount(cfg_type[c[c >= 0]], weights=cfg_gpus[c[c >= 0]], minlength=len(capacity))
        if (used > capacity).any():
            continue
        key = (round(-cs.objective(cost, c, lambda_n), 6), int(((c == prefer) & (c >= 0)).sum()))
        best = key if best is None or key > best else best
    got = (round(-cs.objective(cost, choice, lambda_n), 6), int(((choice == prefer) & (choice >= 0)).sum()))
    assert got == best


def test_exact_allocation_gives_up_and_solve_allocation_asks_highs(monkeypatch):
    t, g, cap = np.array([0, 0]), np.array([1, 2]), np.array([2])
    cost = np.array([[0.5, 0.3], [0.4, 0.2]], dtype=np.float32)
    # costs that are not whole hundredths: no exact answer
    assert cs.exact_allocation(np.array([[0.505, 2.0], [0.4, 2.0]]), t, g, cap, np.array([-1, -1])) is None
    # one GPU, the cheaper job gets it; a preferred configuration wins a tie
    one = np.array([[0.5, 2], [0.4, 2]], dtype=np.float32)
    assert cs.exact_allocation(one, t, g, np.array([1]), np.array([-1, -1])).tolist() == [-1, 0]
    tie = np.array([[0.5, 2], [0.5, 2]], dtype=np.float32)
    for prefer in ([-1, 0], [0, -1]):
        got = cs.exact_allocation(tie, t, g, np.array([1]), np.array([-1, -1]), prefer=np.array(prefer))
        assert got.tolist() == prefer
    # past the search's nodes and the programme's cells: None, and solve_allocation's answer is HiGHS's
    monkeypatch.setattr(cs, "SEARCH_NODES", 0)
    monkeypatch.setattr(cs, "DP_CELLS", 0)
    assert cs.exact_allocation(cost, t, g, cap, np.array([-1, -1])) is None
    calls = []
    real = cs.highs_allocation
    monkeypatch.setattr(cs, "highs_allocation", lambda *a, **k: calls.append(1) or real(*a, **k))
    choice, obj = cs.solve_allocation(cost, t, g, cap, np.array([-1, -1]))
    assert calls and choice.tolist() == [0, 0] and obj == pytest.approx(0.5 + 0.4)


@settings(max_examples=60, deadline=None)
@given(rounds())
def test_prices_give_a_bound_at_least_the_optimum(prob):
    """``alloc_prices``' bound is the Lagrangian's value at its prices (plain twin below) and at
    least the best total gain (HiGHS), never more than the prices-0 bound."""
    from fastblox.kernels.elastic import alloc_prices

    cost, cfg_type, cfg_gpus, capacity, fixed, _ = prob
    free = np.flatnonzero(fixed < 0)
    lam = 110
    val = [[(lam - round(float(cost[j, c]) * 100), c) for c in range(len(cfg_type)) if cost[j, c] < 1.1]
           for j in free]
    start = np.concatenate([[0], np.cumsum([len(v) + 1 for v in val])]).astype(np.int64)
    o_cfg = np.array([c for v in val for c in [x[1] for x in v] + [-1]], dtype=np.int64)
    o_val = np.array([x for v in val for x in [y[0] for y in v] + [0]], dtype=np.float64)
    o_type = np.where(o_cfg >= 0, cfg_type[np.maximum(o_cfg, 0)], -1)
    o_gpus = np.where(o_cfg >= 0, cfg_gpus[np.maximum(o_cfg, 0)], 0)
    cap = capacity.copy()
    np.subtract.at(cap, cfg_type[fixed[fixed >= 0]], cfg_gpus[fixed[fixed >= 0]])
    mu = np.zeros(len(cap))
    bound = alloc_prices(start, o_type, o_gpus, o_val, cap, mu, cs.PRICE_SWEEPS)

    def lagrangian(m):
        return float(m @ cap) + sum(max([0.0] + [v - m[cfg_type[c]] * cfg_gpus[c] for v, c in row]) for row in val)

    assert (mu >= 0).all()
    assert bound == pytest.approx(lagrangian(mu), abs=1e-9)
    assert bound <= lagrangian(np.zeros(len(cap))) + 1e-9
    sub = cost[free]
    _, obj = cs.highs_allocation(sub, cfg_type, cfg_gpus, cap, np.full(len(free), -1), 1.1, gap=0.0)
    assert bound >= (len(free) * 1.1 - obj) * 100 - 1e-4  # (obj: float32 costs summed)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 600), st.integers(0, 2**32 - 1))
def test_pairwise_sum_is_numpys(n, seed):
    from fastblox.kernels.elastic import pairwise_sum

    rng = np.random.default_rng(seed)
    a = rng.normal(size=n) * 10.0 ** rng.uniform(-6, 6, n)
    assert pairwise_sum(a, 0, n) == np.sum(a)
    if n > 3:
        assert pairwise_sum(a, 2, n - 3) == np.sum(a[2:-1])


def test_sia_profiles_cli_equals_api(tmp_path):
    """--sia-profiles reads per-type files (here the Pollux artifact's cifar10 profiles copied as types
    a and b: a stand-in for the Sia artifact's, which we may not ship); CLI and API give the same jobs."""
    import shutil

    from fastblox import elastic
    from fastblox.cli import main

    src = elastic.data_dir() / "cifar10"
    d = tmp_path / "traces" / "cifar10"
    d.mkdir(parents=True)
    for f in src.glob("validation-*.csv"):
        shutil.copy(f, d / f.name)
    for t in ("a", "b"):
        shutil.copy(src / "placements.csv", d / f"placements-{t}.csv")
        shutil.copy(src / "scalability.csv", d / f"scalability-{t}.csv")
    trace = tmp_path / "w.csv"
    trace.write_text("name,time,application,num_replicas,batch_size\n"
                     "cifar10-0,0,cifar10,2,1024\ncifar10-1,30,cifar10,4,2048\ncifar10-2,90,cifar10,1,512\n")
    opts = dict(compat="sia", policy="sia", cluster="a:1x4,b:1x4", sia_profiles=str(tmp_path / "traces"))
    api = fastblox.simulate(read_workload(trace), **opts)
    assert api.summary["num_finished"] == 3 and api.config["sia_profiles"] == opts["sia_profiles"]
    argv = ["run", "--trace", str(trace), "--compat", "sia", "--policy", "sia", "--cluster", opts["cluster"],
            "--sia-profiles", opts["sia_profiles"], "--out", str(tmp_path / "cli")]
    assert main(argv) == 0
    api.write(tmp_path / "api")
    assert (tmp_path / "cli" / "jobs.parquet").read_bytes() == (tmp_path / "api" / "jobs.parquet").read_bytes()
    with pytest.raises(ConfigError, match="placements-c.csv"):
        fastblox.simulate(read_workload(trace), **{**opts, "cluster": "c:1x4"})


def test_policy_rows_and_restart_factor():
    from fastblox import elastic

    types = cs.cluster_types(Cluster.parse("a:2x4,b:1x4"), pollux_profiles=True)
    profs = cs.load_profiles(["cifar10"], ["a", "b"], None)
    job = cs.SiaJob("cifar10-0", "cifar10", 0.0, 2048, profs, ["a", "b"])
    pol = cs.SiaPolicy([job], types)
    row = pol._row(0)  # no model anywhere: one GPU of any type, goodput 1
    assert row[pol.cfg_gpus == 1].tolist() == [1.0, 1.0]
    assert (row[pol.cfg_gpus > 1] == cs.ZERO_ALLOC_GAIN).all()
    # a model on type a only: b is projected from a (same profiles: ratio 1); smallest goodput -> 1
    job.grad = (1.0, 1.0)
    pr = profs["cifar10", "a"]
    n, r, b = np.array([1.0, 1.0, 2.0]), np.array([1.0, 2.0, 8.0]), np.array([64.0, 64.0, 64.0])
    st = np.array([pr.step_time((1,), 64), pr.step_time((2,), 64), pr.step_time((4, 4), 64)])
    job.pp["a"] = elastic.fit_perf_params(n, r, b, st[:, 0] - st[:, 1], st[:, 0])
    job.seen["a"] = {(1, 8, 64): (0.1, 0.01)}  # (most GPUs run: 8, so up to 16 are offered)
    job.models += 1  # (set by hand: as SiaJob._observe counts an observation)
    row = pol._row(0)  # (computed again: the gradient statistics changed)
    a, bb = row[:types[1].first], row[types[1].first:]
    assert row.min() == pytest.approx(1.0)
    assert (a[types[0].cfg_gpus > 16] == cs.ZERO_ALLOC_GAIN).all()
    np.testing.assert_allclose(bb, a[types[0].cfg_gpus <= 4], rtol=1e-6)  # (b has one node: at most 4 GPUs)
    job.restarts = 2
    assert pol.restart_factor(job, 20.0) == 1.0  # younger than its penalty (cifar: 30 s)
    assert pol.restart_factor(job, 300.0) == pytest.approx((300 - 60) / 330)


def test_restart_rules():
    profs = cs.load_profiles(["cifar10"], ["a", "b"], None)
    job = cs.SiaJob("cifar10-0", "cifar10", 0.0, 2048, profs, ["a", "b"])
    job.migrate("a", (2,), 60.0)  # first start
    assert (job.restarts, job.first, job.rescale) == (0, 60.0, cs.RESCALE_S["cifar10"])
    job.rescale = 0.0
    job.reallocate((2,), 120.0)  # other nodes, same shape: no restart
    assert job.restarts == 0 and job.rescale == 0.0
    job.reallocate((1, 1), 180.0)  # same type, GPUs per node changed
    assert job.restarts == 1 and job.rescale == cs.RESCALE_S["cifar10"]
    job.migrate("b", (1, 1), 240.0)  # another type: always a restart
    assert job.restarts == 2 and job.cluster == "b"
    job.migrate(None, (), 300.0)
    assert job.placement == () and job.preempted == 1 and job.restarts == 2


def _active_sets(monkeypatch, w, **kw):
    """Each interval's active jobs (the rows the policy sees) of a --compat sia run, and its result."""
    seen = []
    real = cs.SiaPolicy.optimize

    def spy(self, active, now):
        seen.append(list(active))
        return real(self, active, now)

    monkeypatch.setattr(cs.SiaPolicy, "optimize", spy)
    return seen, fastblox.simulate(w, compat="sia", policy="sia", cluster=HET4, **kw)


def test_admission_gates_the_jobs_sia_sees(small, monkeypatch):
    gpus = small.num_gpus
    bound = 0.25 * 12 + gpus.max()  # (load:0.25 on 12 GPUs: the job that crosses the bound is let in too)
    every_seen, every = _active_sets(monkeypatch, small)
    gated_seen, gated = _active_sets(monkeypatch, small, admission="load:0.25")
    assert max(gpus[a].sum() for a in every_seen) > bound  # (without the gate the bound does not hold)
    assert all(gpus[a].sum() <= bound for a in gated_seen)
    assert gated.summary["held_jobs"] > 0 and "held_jobs" not in every.summary
    assert gated.summary["num_finished"] == len(small)
    # a gate that never binds is the simulator's run, job by job
    _, loose = _active_sets(monkeypatch, small, admission="load:100")
    assert loose.jobs["finish_s"].to_list() == every.jobs["finish_s"].to_list() and loose.summary["held_jobs"] == 0


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 8), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_local_search_returns_a_feasible_local_optimum_and_its_value(jobs, types, seed):
    """``alloc_improve`` (before the dynamic programme): its value is its choice's, the choice fits,
    and no move of one job, or of two, to other options fits and adds value (plain Python)."""
    import itertools

    from fastblox.kernels.elastic import alloc_improve

    rng = np.random.default_rng(seed)
    per = rng.integers(1, 5, jobs)
    start = np.concatenate([[0], np.cumsum(per + 1)]).astype(np.int64)
    o_type = np.concatenate([np.r_[rng.integers(0, types, p), -1] for p in per]).astype(np.int64)
    o_gpus = np.where(o_type >= 0, rng.choice([1, 2, 4, 8], len(o_type)), 0).astype(np.int64)
    o_val = np.where(o_type >= 0, rng.integers(1, 60, len(o_type)), 0).astype(np.int64)
    cap = rng.integers(0, 12, types).astype(np.int64)
    pick = start[1:] - 1  # (everyone waits)
    val = alloc_improve(start, o_type, o_gpus, o_val, cap, pick, np.empty(types, dtype=np.int64))

    def fits(p):
        on = o_type[p] >= 0
        return (np.bincount(o_type[p][on], weights=o_gpus[p][on], minlength=types) <= cap).all()

    assert val == o_val[pick].sum() and fits(pick)
    assert all(start[d] <= pick[d] < start[d + 1] for d in range(jobs))
    for d, e in itertools.combinations_with_replacement(range(jobs), 2):
        for k in range(start[d], start[d + 1]):
            for m in range(start[e], start[e + 1]) if e != d else [None]:
                p = pick.copy()
                p[d] = k
                if m is not None:
                    p[e] = m
                assert not (fits(p) and o_val[p].sum() > val)


# ------------------------------------------------------------------ the run-wide memos keep the replay's bits
#: sixteen jobs of philly/workload-1 (cifar10, deepspeech2, yolov3, bert) on a:2x4,b:1x4 with the bundled
#: profiles, as the replay gave them before its run-wide memos (main a2dabb2): finish and attained GPU seconds
GOLDEN_ROWS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 22, 27, 31, 51, 52, 78]
GOLDEN_FINISH = [4034.0, 10300.0, 2381.0, 10730.0, 4438.0, 6436.0, 8112.0, 6392.0, 8472.0, 10476.0, 14526.0, 14580.0,
                 25564.0, 27764.0, 29745.0, 20051.0]
GOLDEN_GPU_S = [8548.0, 23800.0, 8504.0, 23720.0, 7856.0, 8012.0, 8124.0, 7924.0, 8124.0, 8052.0, 24084.0, 17940.0,
                52876.0, 50456.0, 50820.0, 17144.0]


def test_replay_job_by_job_as_before_the_memos():
    w = read_workload(need_shared(WORKLOADS / "philly" / "workload-1.csv")).take(np.array(GOLDEN_ROWS))
    res = fastblox.simulate(w, compat="sia", policy="sia", cluster=HET4)
    assert res.jobs["finish_s"].to_list() == GOLDEN_FINISH
    assert res.jobs["attained_gpu_s"].to_list() == GOLDEN_GPU_S
    assert res.summary["restarts"] == 71


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["cifar10", "bert", "deepspeech2", "yolov3", "imagenet", "ncf"]), st.data())
def test_grad_stats_at_is_grad_stats_bit_for_bit(app, data):
    from fastblox import elastic

    pr = elastic.profile(app)
    bs = pr.batch_sizes
    b = data.draw(st.one_of(st.sampled_from(bs.tolist()), st.integers(int(bs[0]), int(bs[-1])),
                            st.floats(float(bs[0]), float(bs[-1]))))
    e = data.draw(st.integers(0, pr.max_epochs - 1))
    want = tuple(float(x) for x in pr.grad_stats(b, e))
    assert pr.grad_stats_at(b, e) == want
    with pytest.raises(ValueError, match="outside the validated"):
        pr.grad_stats_at(float(bs[-1]) * 1.5, e)


def _models(rng, pr, n):
    """``n`` fitted models of profile ``pr`` (one to three configurations observed) and gradient statistics."""
    from fastblox import elastic

    out = []
    for _ in range(n):
        pls = [(1,), (2,), (4,), (4, 4)][:int(rng.integers(1, 4)) + 1]
        a = int(rng.integers(pr.min_local_bsz, pr.max_local_bsz + 1))
        st_ = np.array([pr.step_time(p, a) for p in pls])
        pp = elastic.fit_perf_params([len(p) for p in pls], [sum(p) for p in pls], [a] * len(pls),
                                     st_[:, 0] - st_[:, 1], st_[:, 0], tol=cs.FIT_TOL, kernel=True)
        b = float(rng.uniform(pr.batch_sizes[0], pr.batch_sizes[-1]))
        out.append((pp, pr.grad_stats_at(b, int(rng.integers(0, pr.max_epochs)))))
    return out


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["cifar10", "bert", "yolov3"]), st.integers(0, 2**32 - 1))
def test_run_memo_is_best_batch_bit_for_bit(app, seed):
    """RunMemo.one (speeds kept per model and configuration, shared by the jobs) against
    elastic.best_batch computed afresh, over calls that repeat and mix their inputs."""
    from fastblox import elastic

    rng = np.random.default_rng(seed)
    pr = elastic.profile(app)
    memo, models = cs.RunMemo(), _models(rng, pr, 3)
    cfgs = [(np.array([1.0]), np.array([1.0])), (np.array([1.0, 1.0, 2.0]), np.array([1.0, 4.0, 8.0])),
            (np.array([1.0, 2.0]), np.array([2.0, 8.0]))]
    for _ in range(30):
        pp, _ = models[int(rng.integers(3))]
        grad = models[int(rng.integers(3))][1]
        nodes, reps = cfgs[int(rng.integers(3))]
        top = int(rng.choice([pr.max_local_bsz, pr.min_local_bsz + 1]))
        mb = int(rng.choice([pr.max_batch_size, 2 * pr.init_batch_size]))
        want = elastic.best_batch(pp, grad, pr.init_batch_size, nodes, reps, mb, pr.min_local_bsz, top)
        for i in range(len(nodes)):
            n, r = int(nodes[i]), int(reps[i])
            assert memo.one(app, "a", pr, pp, grad, n, r, mb, top) == (int(want[1][i]), int(want[2][i]))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["cifar10", "bert", "yolov3", "ncf"]), st.integers(0, 2**32 - 1),
       st.sampled_from([1.0, 1.7, 3.7]), st.sampled_from(["profile", "no variance", "negative", "nan"]))
def test_row_kernels_are_their_plain_twin(app, seed, gamma, case):
    """kernels.elastic.speeds_pack, packed_goodput (each configuration's goodput, float64) and
    row_goodputs (a goodput row from several types' speeds, some configurations not offered, ratios,
    normalised) against their twins in reference.sia, bit for bit; NaN throughputs, configurations
    with no point allowed and statistics that zero the denominator included."""
    from fastblox import elastic
    from fastblox.kernels.elastic import packed_goodput, row_goodputs, speeds_pack

    rng = np.random.default_rng(seed)
    pr = elastic.profile(app)
    sqr, var = pr.grad_stats_at(pr.init_batch_size, int(rng.integers(0, pr.max_epochs)))
    grad = {"no variance": (sqr, 0.0), "negative": (sqr, -sqr * float(rng.uniform(0.5, 2)))}.get(case, (sqr, var))
    speeds, cols, packed = [], [], np.empty((0, 3, elastic.GEOM_POINTS))
    for _ in range(int(rng.integers(1, 4))):  # (types)
        k = int(rng.integers(1, 6))
        nodes = rng.integers(1, 4, k).astype(float)
        reps = nodes * rng.integers(1, 5, k)
        pp = np.concatenate([rng.uniform(1e-4, 1, 6), [gamma]])
        sp = elastic.batch_speeds(pp, pr.init_batch_size, nodes, reps, int(rng.choice([pr.max_batch_size, 4096])),
                                  pr.min_local_bsz, pr.max_local_bsz)
        if case == "nan":
            sp = sp[:5] + (sp[5], np.where(rng.random(sp[6].shape) < 0.05, np.nan, sp[6]))
            sp = sp[:3] + (sp[3] & (rng.random(k) < 0.7), *sp[4:])
        part = np.empty((k, 3, elastic.GEOM_POINTS))
        speeds_pack(sp[2], sp[1], sp[5], sp[6], sp[4], sp[3], part)
        for c in range(k):
            want = ref.packed_goodput(sp, c, grad)
            assert np.float64(packed_goodput(part[c], *grad, np.empty(elastic.GEOM_POINTS))).tobytes() == \
                np.float64(want).tobytes()
        cols += [(len(speeds), c) if rng.random() < 0.8 else None for c in range(k)]
        speeds.append(sp)
        packed = np.concatenate([packed, part])
    first = np.cumsum([0] + [s[0].shape[1] for s in speeds])
    at = np.array([-1 if c is None else first[c[0]] + c[1] for c in cols], dtype=np.int64)
    ratio = rng.choice([1.0, 0.37, 2.5], len(cols))
    row = np.empty(len(cols), dtype=np.float32)
    above = row_goodputs(packed, at, ratio, *grad, np.float32(cs.ZERO_ALLOC_GAIN), row, np.empty(elastic.GEOM_POINTS))
    want = ref.row_goodputs(speeds, cols, ratio.tolist(), grad, cs.ZERO_ALLOC_GAIN)
    assert (above == 0) == (want is None)
    if want is not None:
        assert row.tobytes() == np.array(want, dtype=np.float32).tobytes()


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_shared_rows_are_each_jobs_own(seed):
    """SiaPolicy._row (rows shared by alike jobs, computed again when a job's models or statistics
    change; their speeds and columns kept for the run) against reference.sia.policy_row (numpy,
    afresh) for the job's state, as jobs' states change."""
    rng = np.random.default_rng(seed)
    types = cs.cluster_types(Cluster.parse("a:2x4,b:1x4"), pollux_profiles=True)
    profs = cs.load_profiles(["cifar10", "bert"], ["a", "b"], None)
    memo = cs.RunMemo()
    jobs = [cs.SiaJob(f"{a}-{k}", a, 0.0, int(b), profs, ["a", "b"], memo)
            for k, (a, b) in enumerate([("cifar10", 2048), ("cifar10", 2048), ("cifar10", 1024), ("bert", 96)])]
    pol = cs.SiaPolicy(jobs, types)
    models = {a: _models(rng, profs[a, "a"], 2) for a in ("cifar10", "bert")}
    for _ in range(12):
        j = int(rng.integers(len(jobs)))
        job = jobs[j]
        for t in ("a", "b"):  # a model on each type or none; the statistics of one of them
            job.pp[t] = None if rng.random() < 0.3 else models[job.app][int(rng.integers(2))][0]
        job.grad = models[job.app][int(rng.integers(2))][1]
        job.seen["a"] = {(1, int(rng.choice([1, 2, 4])), 8): (0.1, 0.01)}
        job.models += 1
        for i, other in enumerate(jobs):
            assert pol._row(i).tobytes() == ref.policy_row(pol, other, other.max_replicas()).tobytes()
    assert not pol._row(0).flags.writeable


def test_profile_with_a_bad_cell_names_file_row_column(tmp_path):
    import shutil

    from fastblox import elastic
    from fastblox.errors import TraceError

    d = tmp_path / "cifar10"
    shutil.copytree(elastic.data_dir() / "cifar10", d)
    f = d / "placements.csv"
    lines = f.read_text().splitlines()
    head = lines[0].split(",")
    cells = lines[3].split(",")
    cells[head.index("step_time")] = "fast"
    lines[3] = ",".join(cells)
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match=r"row 4, column 'step_time': not a number: 'fast'") as e:
        elastic.profile("cifar10", str(tmp_path))
    assert str(f) in str(e.value) and "\n" not in str(e.value)
    good = elastic.profile("cifar10")  # (the same table from the bundled file, read a column at a time)
    shutil.copy(elastic.data_dir() / "cifar10" / "placements.csv", f)
    again = elastic.profile("cifar10", str(tmp_path))
    assert again.points.tobytes() == good.points.tobytes() and again.values.tobytes() == good.values.tobytes()
