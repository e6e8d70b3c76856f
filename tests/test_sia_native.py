"""The native ``sia`` policy (fastblox/policies/sia.py): Sia's rigid-job objective over GPU types,
its exact solver against brute force and a per-job MILP, its compiled costs against their array
definitions, and runs in the native engine."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fastblox
from fastblox.policies import sia
from fastblox.reference.sia import best_rigid_choice

SIZES = (1, 2, 4, 8)


@st.composite
def rigid_case(draw, max_jobs=6, max_types=3, max_cap=14):
    """(cost, k, pin, held, cap) of a small problem: costs from Sia's rule on throughputs drawn
    from a few values, some jobs holding a type (some of them pinned to it, within its capacity)."""
    a = draw(st.integers(1, max_jobs))
    T = draw(st.integers(1, max_types))
    k = np.array(draw(st.lists(st.sampled_from(SIZES), min_size=a, max_size=a)), dtype=np.int64)
    thr = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 1.5, 2.0, 3.3]), min_size=a * T, max_size=a * T)))
    thr = thr.reshape(a, T)
    cap = np.array(draw(st.lists(st.integers(0, max_cap), min_size=T, max_size=T)), dtype=np.int64)
    held = np.array(draw(st.lists(st.integers(-1, T - 1), min_size=a, max_size=a)), dtype=np.int64)
    factor = np.array(draw(st.lists(st.sampled_from([1.0, 0.97, 0.6, 0.0]), min_size=a, max_size=a)))
    cost = sia.job_costs(thr, k, held, factor, cap)
    want_pin = np.array(draw(st.lists(st.booleans(), min_size=a, max_size=a)))
    pin = np.full(a, -1, dtype=np.int64)
    used = np.zeros(T, dtype=np.int64)
    for j in np.flatnonzero(want_pin & (held >= 0)):
        t = held[j]
        if np.isfinite(cost[j, t]) and used[t] + k[j] <= cap[t]:
            pin[j] = t
            used[t] += k[j]
    return cost, k, pin, held, cap


def _check(choice, cost, k, pin, cap):
    """The choice respects capacity and pins, and uses offered types only."""
    on = choice >= 0
    assert (np.bincount(choice[on], weights=k[on], minlength=len(cap)) <= cap).all()
    assert (choice[pin >= 0] == pin[pin >= 0]).all()
    assert np.isfinite(cost[np.flatnonzero(on), choice[on]]).all()


@given(rigid_case())
@settings(max_examples=150, deadline=None)
def test_solver_is_optimal_against_brute_force(case):
    cost, k, pin, held, cap = case
    choice = sia.SiaSolver().solve(cost, k, pin, held, cap)
    _check(choice, cost, k, pin, cap)
    _, best = best_rigid_choice(cost.tolist(), k.tolist(), pin.tolist(), cap.tolist(), sia.LAMBDA_N)
    assert sia.objective(cost, choice) == pytest.approx(best, abs=1e-9)


@given(rigid_case(max_jobs=40, max_types=3, max_cap=40), st.lists(st.floats(0, 0.2), min_size=3, max_size=3),
       st.booleans())
@settings(max_examples=40, deadline=None)
def test_class_optimum_with_any_hint_equals_the_milp(case, mu, warm_from_greedy):
    """Whatever GPU prices ``mu`` and warm start it is given, the class solver's answer has the
    class MILP's objective (the hints change the proof, never the optimum)."""
    cost, k, pin, held, cap = case
    T = cost.shape[1]
    uniq, inv, counts = sia._classes(cost, k, pin)
    kc, pc, cc = uniq[:, 0].astype(np.int64), uniq[:, 1].astype(np.int64), uniq[:, 3:]
    gain = np.where(np.isfinite(cc), sia.LAMBDA_N - cc, -np.inf)
    pinned = np.zeros(cc.shape, dtype=bool)
    pinned[np.flatnonzero(pc >= 0), pc[pc >= 0]] = True
    mu = np.array(mu[:T])
    warm = None
    if warm_from_greedy:
        warm = sia.greedy_fill(gain, kc, counts, cap, np.zeros(T), np.zeros(cc.shape, dtype=np.int64), pc < 0)
    y, how, _, slack = sia.class_optimum(cc, kc, pc, counts, cap, sia.LAMBDA_N, mu, warm)
    y_milp, _ = sia._class_milp(gain, kc, pc, counts, cap, pinned)
    best = sia._value(gain, y_milp)
    assert sia._value(gain, y) == pytest.approx(best, abs=1e-9) and slack < sia.CERTAIN
    # with a gap: an answer within it, and its proven slack covers the true one
    yg, _, _, slack = sia.class_optimum(cc, kc, pc, counts, cap, sia.LAMBDA_N, mu, warm, gap=0.05)
    v, total = sia._value(gain, yg), sia.LAMBDA_N * counts.sum()
    assert best - v <= slack + 1e-9 and best - v <= max(sia.CERTAIN, 0.05 * (total - v)) + 1e-9
    assert (yg.sum(axis=1) <= counts).all() and ((yg * kc[:, None]).sum(axis=0) <= cap).all()
    choice = sia.spread(y, inv, held)
    _check(choice, cost, k, pin, cap)
    assert (y.sum(axis=1) <= counts).all()


def test_solver_equals_the_per_job_milp_of_compat_sia():
    """On instances too big for brute force: the objective of compat_sia's per-job MILP (HiGHS,
    configurations = type x gang size, a gang's other sizes left out)."""
    from fastblox.compat_sia import solve_allocation

    rng = np.random.default_rng(7)
    for _ in range(8):
        a, T = 60, 3
        k = rng.choice(SIZES, a)
        thr = rng.choice([1.0, 2.1, 3.3], (a, T))
        held = rng.integers(-1, T, a)
        cap = rng.integers(10, 60, T)
        cost = sia.job_costs(thr, k, held, rng.choice([1.0, 0.8, 0.99], a), cap)
        pin = np.full(a, -1)
        choice = sia.SiaSolver().solve(cost, k, pin, held, cap)
        _check(choice, cost, k, pin, cap)
        cfg_type = np.repeat(np.arange(T), len(SIZES))
        cfg_gpus = np.tile(SIZES, T)
        full = np.where(cfg_gpus[None, :] == k[:, None], cost[:, cfg_type], sia.LAMBDA_N)  # (left out)
        _, obj = solve_allocation(full, cfg_type, cfg_gpus, cap, np.full(a, -1), sia.LAMBDA_N, gap=0.0, exact=False)
        assert sia.objective(cost, choice) == pytest.approx(obj, abs=1e-6)


@st.composite
def round_case(draw):
    n = draw(st.integers(1, 12))
    T = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    thr = rng.choice([0.0, 0.5, 1.0, 2.7], (n, T))
    gpus = rng.choice(SIZES, n).astype(np.int64)
    submit = np.sort(rng.uniform(0, 500, n))
    status = rng.choice([1, 3], n).astype(np.int8)
    launch_t = submit + rng.uniform(0, 300, n)
    held = np.where(status == 3, gpus, 0).astype(np.int64)
    held_type = np.where(status == 3, rng.integers(0, T, n), -1).astype(np.int64)
    attained_gpu = rng.choice([0.0, 10.0, 5000.0], n)
    n_preempt = rng.integers(0, 4, n).astype(np.int64)
    now = 900.0
    idx = np.sort(rng.choice(n, rng.integers(1, n + 1), replace=False)).astype(np.int64)
    cap = rng.integers(0, 20, T).astype(np.int64)
    restart_s = float(rng.choice([0.0, 100.0, 700.0]))
    return idx, thr, gpus, submit, status, launch_t, held, held_type, attained_gpu, n_preempt, now, restart_s, cap


@given(round_case(), st.sampled_from([-0.5, -1.0, -0.25]))
@settings(max_examples=200, deadline=None)
def test_compiled_costs_equal_their_array_definitions(case, p):
    from fastblox.kernels.planners import sia_round
    from fastblox.reference.planners import sia_round_reference

    idx, thr, gpus, submit, status, launch_t, held, held_type, att, npre, now, restart_s, cap = case
    a, T = len(idx), thr.shape[1]
    cost, best, pin = np.empty((a, T)), np.empty(a, dtype=np.int64), np.empty(a, dtype=np.int64)
    keys, types = np.empty(a), np.empty(a, dtype=np.int64)
    fits = sia_round(idx, thr, gpus, submit, status, launch_t, held, held_type, att, npre, now, restart_s, 30.0, p,
                     sia.LAMBDA_N, sia.CLIP, cap, cost, best, pin, keys, types)
    rc, rb, rp, rf = sia_round_reference(idx, thr, gpus, submit, status, launch_t, held, held_type, att, npre, now,
                                         restart_s, 30.0, p, sia.LAMBDA_N, cap)
    np.testing.assert_array_equal(cost, rc)
    np.testing.assert_array_equal(best, rb)
    np.testing.assert_array_equal(pin, rp)
    assert fits == rf
    running = status[idx] == 3
    rk, rt = sia.plan_of(rb, running, np.where(running, held_type[idx], -1), gpus[idx])
    np.testing.assert_array_equal(keys, rk)
    np.testing.assert_array_equal(types, rt)


def test_costs_follow_sias_rule():
    """Goodput normalised to the slowest type = the gang size, raised to p, rounded; a held
    job's other types scaled by its restart factor; waiting costs lambda_n."""
    thr = np.array([[3.0, 1.0], [3.0, 1.0]])
    k = np.array([4, 4])
    cost = sia.job_costs(thr, k, np.array([-1, 1]), np.array([1.0, 0.5]), np.array([8, 8]))
    assert cost[0].tolist() == [round(12 ** -0.5, 2), round(4 ** -0.5, 2)]  # 0.29, 0.5
    assert cost[1].tolist() == [round(6 ** -0.5, 2), 0.5]  # held on type 1: type 0 at half its goodput
    f = sia.restart_factor(np.array([1000.0, 1000.0]), np.array([2, 2]), np.array([10.0, 100.0]), 30.0)
    assert f.tolist() == [1.0, (1000 - 60) / 1030]


def test_a_waiting_job_does_not_take_a_full_type_and_gangs_respect_capacity():
    """Two 4-GPU jobs and one 2-GPU job on fast:4 / slow:4 GPUs: the optimum runs both 4-GPU gangs
    (one per type) and leaves the small job waiting (0.29 + 0.5 + 1.1 against 0.29 + 0.5... any
    choice running three jobs needs 10 GPUs). A capacity check that let a type take 6 GPUs, or an
    objective that counted waiting as free, would answer otherwise."""
    thr = np.array([[3.0, 1.0]] * 3)
    k = np.array([4, 4, 2])
    cost = sia.job_costs(thr, k, np.full(3, -1), np.ones(3), np.array([4, 4]))
    choice = sia.SiaSolver().solve(cost, k, np.full(3, -1), np.full(3, -1), np.array([4, 4]))
    assert sorted(choice[:2].tolist()) == [0, 1] and choice[2] == -1


def _workload(n=30, seed=3):
    rng = np.random.default_rng(seed)
    return fastblox.Workload.from_arrays(
        submit_s=np.sort(rng.uniform(0, 4000, n)), num_gpus=rng.choice([1, 2, 4, 8], n),
        duration_s=rng.uniform(300, 6000, n))


def test_native_run_on_types_is_deterministic_and_composes_with_parts():
    w = _workload()
    kw = dict(cluster="v100:2x8,k80:2x8", policy="sia")
    a = fastblox.simulate(w, **kw)
    b = fastblox.simulate(w, **kw)
    assert a.summary["num_finished"] == len(w)
    assert a.jobs.equals(b.jobs)
    assert a.summary["planner"]["allocations"] > 0
    c = fastblox.simulate(w, placement="consolidated", admission="load:0.9", **kw)
    assert c.summary["num_finished"] == len(w) and not c.jobs.equals(a.jobs)
    p = a.summary["planner"]
    assert 0 <= p["largest_proven_gap"] <= sia.GAP / (1 - sia.GAP) + 1e-12 and p["not_proven_optimal"] <= p["allocations"]
    exact = fastblox.simulate(w, policy_opts={"gap": 0}, **kw).summary["planner"]
    assert exact["not_proven_optimal"] == 0 and exact["largest_proven_gap"] == 0


def test_spec_keeps_native_sia_apart_from_compat_sia():
    from fastblox.spec import RunSpec

    native = RunSpec(policy="sia", cluster="v100:2x8,k80:2x8").resolved(source=False)
    assert native.compat is None and native.round_s == 60.0 and native.time_model == "rounds"
    with pytest.raises(fastblox.errors.ConfigError, match="p"):
        RunSpec(policy="sia", policy_opts={"p": 0.5}).resolved(source=False)


def test_options_are_checked():
    from fastblox.spec import RunSpec

    for opts, what in (({"lambda_n": 1.123}, "hundredths"), ({"penalty_s": -1}, "positive"), ({"q": 1}, "no option")):
        with pytest.raises(fastblox.errors.ConfigError, match=what):
            RunSpec(policy="sia", policy_opts=opts).resolved(source=False)


@given(rigid_case(max_jobs=30, max_types=3, max_cap=30), st.lists(st.floats(0, 0.2), min_size=3, max_size=3))
@settings(max_examples=100, deadline=None)
def test_class_kernels_equal_their_plain_twins(case, mu):
    from fastblox.kernels import planners as kp
    from fastblox.reference.planners import sia_prices_reference

    cost, k, pin, held, cap = case
    uniq, inv, counts = sia._classes(cost, k, pin)
    kc, pc, cc = uniq[:, 0].astype(np.int64), uniq[:, 1].astype(np.int64), uniq[:, 3:]
    C, T = cc.shape
    gain = np.where(np.isfinite(cc), sia.LAMBDA_N - cc, -np.inf)
    mu = np.array(mu[:T])
    bound = kp.sia_bound(gain, kc, counts, cap, mu, pc)
    assert bound == pytest.approx(sia.lagrangian_bound(gain, kc, counts, cap, mu, pc), abs=1e-9)
    start = np.zeros((C, T), dtype=np.int64)
    start[np.flatnonzero(pc >= 0), pc[pc >= 0]] = counts[pc >= 0]
    y = np.empty_like(start)
    kp.sia_greedy(gain, kc, counts, cap, mu, start, pc < 0, y)
    np.testing.assert_array_equal(y, sia.greedy_fill(gain, kc, counts, cap, mu, start, pc < 0))
    assert sia._value(gain, y) <= bound + 1e-9  # (the bound is one)
    choice = np.empty(len(inv), dtype=np.int64)
    kp.sia_spread(y, inv, held, choice)
    np.testing.assert_array_equal(choice, sia.spread(y, inv, held))
    m = mu.copy()
    b2 = kp.sia_prices(gain, kc, counts, cap, m, pc, 2)
    rm, rb = sia_prices_reference(gain.tolist(), kc.tolist(), counts.tolist(), cap.tolist(), mu.tolist(), pc.tolist(), 2)
    np.testing.assert_allclose(m, rm, atol=1e-12)
    assert b2 == pytest.approx(rb, abs=1e-9) and b2 <= bound + 1e-9
    pinned = np.zeros((C, T), dtype=bool)
    pinned[np.flatnonzero(pc >= 0), pc[pc >= 0]] = True
    assert sia._value(gain, sia._class_milp(gain, kc, pc, counts, cap, pinned)[0]) <= b2 + 1e-9  # (still a bound)


def test_pollux_takes_gpu_types_for_rigid_jobs_only():
    """docs/policies.md: Pollux over several GPU types runs rigid jobs (type-blind,
    tests/test_pollux_rigid.py); the Pollux simulator's fixed-batch policies stay on one type."""
    from fastblox.spec import RunSpec

    assert RunSpec(policy="pollux", cluster="v100:2x4,k80:2x4").resolved(source=False).policy == "pollux"
    with pytest.raises(fastblox.errors.ConfigError, match="runs on one GPU type"):
        RunSpec(policy="elastic-optimus", cluster="v100:2x4,k80:2x4").resolved(source=False)


def test_among_optima_running_jobs_keep_their_type():
    """Two alike 1-GPU jobs want one GPU of type 0: the one running there (its other type
    penalised, so a class of its own) keeps it, not the waiting one, whatever their order."""
    thr = np.array([[2.0, 1.0], [2.0, 1.0]])
    k = np.array([1, 1])
    for held in ([-1, 0], [0, -1]):
        held = np.array(held)
        cap = np.array([1, 0])
        cost = sia.job_costs(thr, k, held, np.array([0.5, 0.5]), cap)
        for mu in (None, np.zeros(2)):  # (from the LP, and from the greedy at given prices)
            solver = sia.SiaSolver()
            solver.mu = mu
            choice = solver.solve(cost, k, np.full(2, -1), held, cap)
            assert choice.tolist() == [0 if h == 0 else -1 for h in held]


def test_highs_noise_is_dropped_and_other_output_kept(capfd):
    from fastblox.highs import NOISE, quiet

    print("before", flush=True)
    with quiet():
        os.write(1, NOISE + b"transformNewIntegerFeasibleSolution tmpSolver.run();\n")
        os.write(1, b"a line of someone else's\n")
        print("printed inside", flush=True)
    print("after", flush=True)
    out = capfd.readouterr().out.splitlines()  # (what reached descriptor 1 in the block comes back at its end)
    assert out[0] == "before" and out[-1] == "after" and "Highs" not in "".join(out)
    assert sorted(out[1:-1]) == ["a line of someone else's", "printed inside"]
