"""Pollux on rigid jobs, compiled (kernels/pollux_rigid.py, fastblox.mixed.simulate_rigid), on one
GPU type or several (type-blind)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SHARED, need_shared
import fastblox
from fastblox import mixed
from fastblox.errors import ConfigError
from fastblox.reference.pollux import rigid_sizes
from fastblox.spec import OptionError, RunSpec

KEYS = ("start_s", "finish_s", "preemptions", "restarts", "attained_gpu_s")


def _twin(gangs, dur, submit, nodes, per_node, node_type=None, speeds=None, theta=0.0, search=False):
    """The elastic engine's Python replay (``search=False``: the compiled rule's plain twin)."""
    n = len(gangs)
    gate = mixed.Gate(submit, gangs, theta, nodes * per_node)
    return mixed.simulate_mixed([""] * n, gangs, dur, np.zeros(n, bool), submit, 60.0, nodes, per_node, gate=gate,
                                speeds=speeds, node_type=node_type, search=search)


rigid_job = st.tuples(st.sampled_from([1, 1, 1, 2, 3, 4, 6, 8, 12]), st.integers(30, 4000), st.integers(0, 2400))


@settings(max_examples=25, deadline=None)
@given(jobs=st.lists(rigid_job, min_size=1, max_size=14), nodes=st.integers(1, 4), per_node=st.sampled_from([2, 4, 8]),
       types=st.integers(1, 3), theta=st.sampled_from([0.0, 1.0]), seed=st.integers(0, 9))
def test_the_kernel_is_its_plain_twin(jobs, nodes, per_node, types, theta, seed):
    """kernels.pollux_rigid.replay gives the Python replay (PolluxPolicy with the class plan and no
    local search, RigidJob at its nodes' slowest type) bit for bit, on one or several GPU types."""
    gangs = np.array([min(g, nodes * per_node) for g, _, _ in jobs], dtype=np.int64)
    dur = np.array([float(d) for _, d, _ in jobs])
    submit = np.array([float(t) for _, _, t in jobs])
    node_type = np.arange(nodes) % types
    speeds = np.round(np.random.default_rng(seed).uniform(0.2, 1.0, (len(jobs), types)), 3)
    a = _twin(gangs, dur, submit, nodes, per_node, node_type, speeds, theta)
    b = mixed.simulate_rigid(gangs, dur, submit, 60.0, node_type, per_node, speeds, theta)
    for k in KEYS:
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k
    assert (b["finish_s"] > submit).all()


def _brute(opts, total):
    """The least sum of values over every choice of options within ``total`` GPUs."""
    best = np.inf
    for pick in itertools.product(*(range(len(o)) for o in opts)):
        if sum(o[k][0] for o, k in zip(opts, pick)) <= total:
            best = min(best, sum(o[k][1] for o, k in zip(opts, pick)))
    return best


value = st.sampled_from([2.0, 7.5, 40.0, 120.0, 333.0, 999.0, 1000.0])  # (few values: many ties)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), J=st.integers(1, 7), total=st.integers(1, 12))
def test_the_class_plan_is_its_twin_and_an_optimum(data, J, total):
    """kernels.pollux_rigid.sizes (over classes of gangs, by halving) chooses as its plain twin
    does, and its sum of values is the least of every choice (brute force) within the GPUs."""
    from fastblox.kernels.pollux_rigid import sizes

    opts = []
    for _ in range(J):
        g = data.draw(st.sampled_from([1, 1, 2, 3, 4, 8]))
        o = [(0, 1000.0)]
        if data.draw(st.booleans()):
            o.append((g, data.draw(value)))
        if data.draw(st.booleans()):
            o.append((g, data.draw(value)))
        opts.append(o)
    opt_r, opt_v = np.zeros((J, 3), np.int64), np.zeros((J, 3))
    nopt = np.array([len(o) for o in opts], dtype=np.int64)
    for i, o in enumerate(opts):
        for k, (r, v) in enumerate(o):
            opt_r[i, k], opt_v[i, k] = r, v
    out = np.zeros(J, np.int64)
    sizes(J, opt_r, opt_v, nopt, total, out)
    assert out.tolist() == rigid_sizes(opts, total)
    assert sum(o[k][0] for o, k in zip(opts, out)) <= total
    assert sum(o[k][1] for o, k in zip(opts, out)) == pytest.approx(_brute(opts, total), abs=1e-9)


def _pollux_like(rng, J, per_node, fair, running_share, gangs, factors):
    """Options as a busy Pollux round gives them: the no-GPU value, the gang discounted by the
    restart factor, and (for jobs holding a row) the gang kept, alike jobs of equal values."""
    opts = []
    for _ in range(J):
        g = int(rng.choice(gangs))
        o = [(0, 1.0 / (0.0 + 1e-3))]
        f = float(rng.choice(factors))
        o.append((g, 1.0 / (g / fair / per_node * f + 1e-3)))
        if rng.random() < running_share:
            o.append((g, 1.0 / (g / fair / per_node + 1e-3)))
        opts.append(o)
    return opts


def _arrays(opts):
    J = len(opts)
    opt_r, opt_v = np.zeros((J, 3), np.int64), np.zeros((J, 3))
    nopt = np.array([len(o) for o in opts], dtype=np.int64)
    for i, o in enumerate(opts):
        for k, (r, v) in enumerate(o):
            opt_r[i, k], opt_v[i, k] = r, v
    return opt_r, opt_v, nopt


def _bounds(opt_r, opt_v, nopt, total):
    """The classes of a plan's candidates and _core's bounds on their counts: (members in class
    order, class starts, nlo, nhi), or None when every candidate fits."""
    from fastblox.kernels import pollux_rigid as pr

    J = len(nopt)
    run, gain, g = np.empty(J, np.int64), np.empty(J), np.empty(J, np.int64)
    if pr._runs(J, opt_r, opt_v, nopt, run, gain, g) <= total:
        return None
    srt, cls_g, cls_lo = (np.empty(n, np.int64) for n in (J, J, J + 1))
    _, ncls = pr._classes(J, run, gain, g, srt, cls_g, cls_lo)
    lo = cls_lo[:ncls + 1].copy()
    pref = np.concatenate([np.concatenate([[0.0], np.cumsum(gain[srt[lo[q]:lo[q + 1]]])]) for q in range(ncls)])
    nlo, nhi = np.empty(ncls, np.int64), np.empty(ncls, np.int64)
    pr._core(srt, lo, lo[1:].copy(), pref, gain, cls_g, ncls, total, nlo, nhi, np.empty(ncls, np.int64))
    return srt, lo, nlo, nhi


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), J=st.integers(20, 400), total=st.integers(8, 640),
       gangs=st.sampled_from([(1, 2, 4, 8), (1, 1, 1, 2, 4, 8, 16, 32), (2, 4, 8, 16), (1, 3, 7, 12, 24), (1, 2)]),
       factors=st.sampled_from([(0.5,), (0.2, 0.5, 0.9, 0.99), None]), running=st.sampled_from([0.0, 0.5, 0.9]))
def test_the_bounded_programme_chooses_as_the_whole_programme(seed, J, total, gangs, factors, running):
    """On rounds the size of busy Pollux rounds (hundreds of jobs, many alike), sizes (the
    programme between the bounds _core proves) chooses exactly as the plain twin's programme over
    every count and capacity; and the bounds hold every optimum of that programme."""
    from fastblox.kernels import pollux_rigid as pr

    rng = np.random.default_rng(seed)
    fac = factors if factors is not None else tuple(rng.uniform(0.01, 0.999, 8))
    opts = _pollux_like(rng, J, 8, max(1, -(-total // J)), running, gangs, fac)
    opt_r, opt_v, nopt = _arrays(opts)
    out = np.zeros(J, np.int64)
    pr.sizes(J, opt_r, opt_v, nopt, total, out)
    twin = rigid_sizes(opts, total)
    assert out.tolist() == twin
    b = _bounds(opt_r, opt_v, nopt, total)
    if b is None:
        return
    srt, lo, nlo, nhi = b
    ncls = len(nlo)
    for q in range(ncls):
        taken = sum(1 for i in srt[lo[q]:lo[q + 1]] if twin[i] > 0)
        assert nlo[q] <= taken <= nhi[q]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), J=st.integers(30, 300), total=st.integers(16, 400), rounds=st.integers(1, 4))
def test_rows_kept_from_the_solve_before_give_the_solve_anew(seed, J, total, rounds):
    """A round's plans lose a few chosen jobs at a time (the gangs the packing could not place);
    _solve keeps the rows of the classes before the first whose bounds or members changed: each
    later solve chooses exactly as a solve with nothing kept."""
    from fastblox.kernels import pollux_rigid as pr

    rng = np.random.default_rng(seed)
    opts = _pollux_like(rng, J, 8, max(1, -(-total // J)), 0.6, (1, 1, 2, 2, 4, 8, 16), (0.3, 0.6, 0.9, 0.97))
    opt_r, opt_v, nopt = _arrays(opts)
    run, gain, g = np.empty(J, np.int64), np.empty(J), np.empty(J, np.int64)
    if pr._runs(J, opt_r, opt_v, nopt, run, gain, g) <= total:
        return
    srt, cls_g, cls_lo = (np.empty(n, np.int64) for n in (J, J, J + 1))
    _, ncls = pr._classes(J, run, gain, g, srt, cls_g, cls_lo)
    alive = np.ones(J, bool)
    Fs, pick = np.empty((ncls + 1, total + 1)), np.empty((ncls, total + 1), np.int64)
    memo, memo_st = np.empty((4, ncls), np.int64), np.zeros(3, np.int64)
    out, fresh = np.empty(J, np.int64), np.empty(J, np.int64)
    pr._solve(srt, ncls, cls_g, cls_lo, alive, gain, run, total, Fs, pick, memo, memo_st, out)
    for _ in range(rounds):
        chosen = np.flatnonzero((out > 0) & alive)
        if len(chosen) == 0:
            break
        big = chosen[g[chosen] >= np.sort(g[chosen])[len(chosen) // 2]]  # (the larger gangs fail to pack)
        alive[rng.choice(big, size=min(len(big), int(rng.integers(1, 4))), replace=False)] = False
        pr._solve(srt, ncls, cls_g, cls_lo, alive, gain, run, total, Fs, pick, memo, memo_st, out)
        F2, p2 = np.empty_like(Fs), np.empty_like(pick)
        pr._solve(srt, ncls, cls_g, cls_lo, alive, gain, run, total, F2, p2, np.empty_like(memo),
                  np.zeros(3, np.int64), fresh)
        assert out.tolist() == fresh.tolist()


@settings(max_examples=150, deadline=None)
@given(data=st.data(), J=st.integers(2, 9), total=st.integers(1, 24))
def test_the_bounds_hold_every_optimum_of_the_counts(data, J, total):
    """_core's counts per class (its price's shortfall, with the GPUs a class leaves or takes
    run or freed by the others at their best densities) hold every count vector of the least sum
    of values (every optimum and every tie, brute force over the counts of each class's jobs of
    most gain): fails if a class's bound ignored what other classes can take up or give."""
    from fastblox.kernels import pollux_rigid as pr

    gangs = [data.draw(st.sampled_from([1, 2, 3, 4, 8])) for _ in range(J)]
    opts = [[(0, 1000.0), (g, data.draw(st.sampled_from([5.0, 7.5, 250.0, 500.0, 996.0, 998.0, 999.0])))]
            for g in gangs]
    b = _bounds(*_arrays(opts), total)
    if b is None:
        return
    srt, lo, nlo, nhi = b
    ncls = len(nlo)
    gain = [[1000.0 - opts[i][1][1] for i in srt[lo[q]:lo[q + 1]]] for q in range(ncls)]
    size = [gangs[srt[lo[q]]] for q in range(ncls)]
    vecs = [c for c in itertools.product(*(range(len(x) + 1) for x in gain))
            if sum(g * n for g, n in zip(size, c)) <= total]
    val = {c: sum(sum(x[:n]) for x, n in zip(gain, c)) for c in vecs}
    best = max(val.values())
    for c, v in val.items():
        if v >= best - 1e-9:
            assert all(nlo[q] <= c[q] <= nhi[q] for q in range(ncls)), (c, nlo.tolist(), nhi.tolist())


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), J=st.integers(1, 300), rounds=st.integers(1, 5))
def test_the_members_kept_after_jobs_died_are_the_members_anew(seed, J, rounds):
    """A round's later plans lose chosen jobs; _slots_after compacts only the classes that lost
    some (from the first that died) and their prefix sums: each class's slot, end and sums are
    those built anew (_slot fresh), bit for bit."""
    from fastblox.kernels import pollux_rigid as pr

    rng = np.random.default_rng(seed)
    opts = _pollux_like(rng, J, 8, 2, 0.6, (1, 1, 2, 4, 8, 16), (0.3, 0.6, 0.9, 0.97))
    opt_r, opt_v, nopt = _arrays(opts)
    run, gain, g = np.empty(J, np.int64), np.empty(J), np.empty(J, np.int64)
    pr._runs(J, opt_r, opt_v, nopt, run, gain, g)
    srt, cls_g, cls_lo = (np.empty(n, np.int64) for n in (J, J, J + 1))
    m, ncls = pr._classes(J, run, gain, g, srt, cls_g, cls_lo)
    ord_j, gang = np.arange(J), g.copy()
    alive = np.ones(J, bool)
    mem, hi, pref = np.empty(J, np.int64), np.empty(J, np.int64), np.empty(2 * J + 1)
    for q in range(ncls):
        pr._slot(q, srt, cls_lo, alive, gain, mem, hi, pref, True)
    for _ in range(rounds):
        lost = rng.choice(srt[:m], size=min(m, int(rng.integers(0, 6))), replace=False) if m else np.empty(0, np.int64)
        alive[lost] = False
        pr._slots_after(lost.astype(np.int64), len(lost), ord_j, gang, srt, cls_g, cls_lo, ncls, alive, gain, mem,
                        hi, pref, np.zeros(J, bool))
        m2, h2, p2 = np.empty(J, np.int64), np.empty(J, np.int64), np.empty(2 * J + 1)
        for q in range(ncls):
            pr._slot(q, srt, cls_lo, alive, gain, m2, h2, p2, True)
            a0, base = cls_lo[q], cls_lo[q] + q
            assert hi[q] == h2[q] and mem[a0:hi[q]].tolist() == m2[a0:h2[q]].tolist()
            assert pref[base:base + hi[q] - a0 + 1].tobytes() == p2[base:base + h2[q] - a0 + 1].tobytes()


def test_the_bounds_leave_a_busy_round_few_jobs_to_decide():
    """The reason for _core: on a round of a thousand jobs, most of them alike, the bounds decide
    the count of every class (else the programme would search every class over every capacity).
    A bound by each job's own r_i alone would leave the break class open over many counts: a
    class's count is bounded by what the GPUs it leaves or takes cost the other classes too."""
    from fastblox.kernels import pollux_rigid as pr

    rng = np.random.default_rng(7)
    J, total = 1000, 800
    opts = _pollux_like(rng, J, 8, 1, 0.7, (1, 1, 1, 1, 2, 4, 8, 16), (0.3, 0.6, 0.9))
    opt_r, opt_v, nopt = _arrays(opts)
    b = _bounds(opt_r, opt_v, nopt, total)
    assert b is not None
    _, _, nlo, nhi = b
    ncls = len(nlo)
    assert ncls >= 4 and (nhi - nlo).sum() <= 1
    out = np.zeros(J, np.int64)
    pr.sizes(J, opt_r, opt_v, nopt, total, out)
    assert out.tolist() == rigid_sizes(opts, total)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), J=st.integers(2, 24), total=st.integers(1, 40))
def test_a_plan_after_jobs_lost_options_is_the_plan_solved_anew(data, J, total):
    """optimize's later plans of a round: the classes sorted once, jobs that lost their run
    option marked (_kept), the programme solved over the jobs left (the rows of the classes before
    the first that changed kept from the solve before) choose exactly as sizes over those jobs
    and as the plain twin; a new gain needs a new sort; a class over flat totals read off its sums
    (_flat_class) is the halving's result."""
    from fastblox.kernels import pollux_rigid as pr

    gangs = np.array([data.draw(st.sampled_from([1, 1, 2, 2, 4, 4, 8, 3])) for _ in range(J)], np.int64)
    vals = np.array([data.draw(value) for _ in range(J)])
    opt_r, opt_v = np.zeros((J, 3), np.int64), np.zeros((J, 3))
    opt_v[:, 0] = 1000.0
    opt_r[:, 1], opt_v[:, 1] = gangs, vals
    nopt = np.full(J, 2, np.int64)
    run, gain, g = np.empty(J, np.int64), np.empty(J), np.empty(J, np.int64)
    pr._runs(J, opt_r, opt_v, nopt, run, gain, g)
    srt, cls_g, cls_lo = (np.empty(n, np.int64) for n in (J, J, J + 1))
    _, ncls = pr._classes(J, run, gain, g, srt, cls_g, cls_lo)
    if ncls == 0:
        return
    alive = np.ones(J, bool)
    Fs, pick = np.empty((ncls + 1, total + 1)), np.empty((ncls, total + 1), np.int64)
    memo, memo_st = np.empty((4, ncls), np.int64), np.zeros(3, np.int64)
    out = np.empty(J, np.int64)
    pr._solve(srt, ncls, cls_g, cls_lo, alive, gain, run, total, Fs, pick, memo, memo_st, out)
    full = np.zeros(J, np.int64)
    pr.sizes(J, opt_r, opt_v, nopt, total, full)
    if run.sum() > 0 and g[run > 0].sum() > total:
        assert out.tolist() == full.tolist()
    gone = data.draw(st.lists(st.integers(0, J - 1), max_size=J, unique=True))
    nopt[gone] = 1  # (their gang option gone: no run option left)
    r2, g2, gg2 = np.empty(J, np.int64), np.empty(J), np.empty(J, np.int64)
    p_run, p_gain, p_g = run.copy(), gain.copy(), g.copy()
    pr._runs(J, opt_r, opt_v, nopt, r2, g2, gg2)
    assert pr._kept(J, ncls, r2, g2, gg2, p_run, p_gain, p_g, alive)
    assert alive.tolist() == [i not in gone or run[i] <= 0 for i in range(J)]
    pr._solve(srt, ncls, cls_g, cls_lo, alive, g2, r2, total, Fs, pick, memo, memo_st, out)  # (rows kept)
    fresh = np.zeros(J, np.int64)
    pr.sizes(J, opt_r, opt_v, nopt, total, fresh)
    if gg2.sum() > total:
        assert out.tolist() == fresh.tolist()
        assert out.tolist() == rigid_sizes([[(0, 1000.0)] + ([(int(gangs[i]), float(vals[i]))] if nopt[i] > 1
                                                               else []) for i in range(J)], total)
    g3 = g2.copy()
    g3[int(np.argmax(r2 > 0))] += 0.5 if (r2 > 0).any() else 0.0
    if (r2 > 0).any():
        assert not pr._kept(J, ncls, r2, g3, gg2, p_run, p_gain, p_g, alive.copy())
    # a class over flat totals (the first class: zeros) read off its sums is the halving's result, bit for bit
    pref = np.concatenate([[0.0], np.cumsum(np.sort(gain[gangs == 2])[::-1])])
    C = data.draw(st.sampled_from([0.0, 7.5, 1e6 + 0.25, 3e15]))
    if len(pref) > 1 and pr._increasing(C, pref, 0, len(pref) - 1):
        cnt = len(pref) - 1
        F0, Fa, Fb = np.full(total + 1, C), np.empty(total + 1), np.empty(total + 1)
        pa, pb = np.empty(total + 1, np.int64), np.empty(total + 1, np.int64)
        stack = np.empty((4 * (total + 2), 4), np.int64)
        for rho in range(min(2, total + 1)):
            pr._class_step(F0, Fa, pa, pref, 0, cnt, 2, rho, (total - rho) // 2 + 1, stack)
        pr._flat_class(Fb, pb, C, pref, 0, cnt, 2, total)
        assert Fa.tobytes() == Fb.tobytes() and pa.tolist() == pb.tolist()


@settings(max_examples=60, deadline=None)
@given(sub=st.lists(st.sampled_from([0.0, 5.0, 60.0, 61.5, 300.0]), min_size=1, max_size=30),
       att=st.lists(st.sampled_from([0.0, 0.0, 0.0, 60.0, 120.0, 480.0, -0.0]), min_size=30, max_size=30),
       in_order=st.booleans(), data=st.data())
def test_the_round_order_is_numpys_two_stable_sorts(sub, att, in_order, data):
    """optimize's job order (attained GPU-seconds, then submit time) with less sorting
    (_order) is numpy's two stable argsorts, jobs in workload order or not."""
    from fastblox.kernels.pollux_rigid import _order

    n = len(sub)
    submit = np.sort(sub) if in_order else np.array(sub)
    attained = np.array(att[:n])
    a = np.array(sorted(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))), np.int64)
    o1 = np.argsort(submit[a], kind="mergesort")
    o2 = np.argsort(attained[a[o1]], kind="mergesort")
    out = np.empty(len(a), np.int64)
    _order(a, submit, attained, out)
    assert out.tolist() == a[o1[o2]].tolist()


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 60), data=st.data())
def test_the_round_order_sorted_from_the_last_is_the_order_anew(n, data):
    """_order_from (insertion from the last round's order, stale or of other jobs; the jobs new
    to it after) gives _order's order, round after round as the running jobs' GPU-seconds grow,
    with ties, -0.0 and NaN; and keeps each job's position and this order for the next round."""
    from fastblox.kernels.pollux_rigid import _order, _order_from

    submit = np.array(data.draw(st.lists(st.sampled_from([0.0, 5.0, 60.0, 300.0]), min_size=n, max_size=n)))
    if data.draw(st.booleans()):
        submit = np.sort(submit)  # (workload order)
    attained = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.0, -0.0, 60.0, 120.0, 480.0]), min_size=n,
                                           max_size=n)))
    carry, carry_n = np.full((4, n), -1, np.int64), np.zeros(2, np.int64)
    prev = data.draw(st.permutations(range(n)))[:data.draw(st.integers(0, n))]
    carry[0, :len(prev)], carry_n[0] = prev, len(prev)
    for rid in range(3):
        a = np.array(sorted(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))), np.int64)
        want, got = np.empty(len(a), np.int64), np.empty(len(a), np.int64)
        _order(a, submit, attained, want)
        _order_from(a, submit, attained, got, carry, carry_n, rid)
        assert got.tolist() == want.tolist()
        assert carry_n[0] == len(a) and carry[0, :len(a)].tolist() == want.tolist()
        assert all(carry[2, j] == i for i, j in enumerate(want)) and (carry[3, a] >= 2 * rid).all()
        attained[a[: len(a) // 2]] += np.array(data.draw(st.lists(st.sampled_from([0.0, 60.0, 480.0, 7680.0]),
                                                                 min_size=len(a) // 2, max_size=len(a) // 2)))
        if data.draw(st.integers(0, 3)) == 0:
            attained[a[-1] if data.draw(st.booleans()) else a[0]] = np.nan


@settings(max_examples=150, deadline=None)
@given(J=st.integers(1, 80), data=st.data())
def test_the_classes_sorted_from_the_last_are_the_classes_anew(J, data):
    """_classes_from (insertion from the last classes' order by job, the other candidates after;
    a full sort when the insertion gives up) gives _classes's order and classes, with ties, NaN
    and orders far from sorted; and keeps this order, by job, for the next sort."""
    from fastblox.kernels.pollux_rigid import _classes, _classes_from

    n = J + data.draw(st.integers(0, 10))
    ord_j = np.array(data.draw(st.permutations(range(n)))[:J], np.int64)
    run = np.array(data.draw(st.lists(st.sampled_from([-1, 1, 1, 2]), min_size=J, max_size=J)), np.int64)
    gain = np.array(data.draw(st.lists(st.sampled_from([984.25, 992.06, 992.06, 996.0, 0.5, 0.0]), min_size=J,
                                       max_size=J)))
    if data.draw(st.integers(0, 2)) == 0:
        gain[data.draw(st.integers(0, J - 1))] = np.nan
    g = np.array(data.draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=J, max_size=J)), np.int64)
    carry, carry_n = np.full((4, n), -1, np.int64), np.zeros(2, np.int64)
    carry[3, ord_j], carry[2, ord_j] = 2 * 5, np.arange(J)
    prev = data.draw(st.permutations(range(n)))[:data.draw(st.integers(0, n))]
    carry[1, :len(prev)], carry_n[1] = prev, len(prev)
    want = [np.empty(k, np.int64) for k in (J, J, J + 1)]
    got = [np.empty(k, np.int64) for k in (J, J, J + 1)]
    m, ncls = _classes(J, run, gain, g, *want)
    assert _classes_from(J, run, gain, g, *got, ord_j, carry, carry_n, 5, np.empty(J, bool)) == (m, ncls)
    assert got[0][:m].tolist() == want[0][:m].tolist()
    assert got[1][:ncls].tolist() == want[1][:ncls].tolist() and got[2][:ncls + 1].tolist() == want[2][:ncls + 1].tolist()
    assert carry_n[1] == m and carry[1, :m].tolist() == ord_j[want[0][:m]].tolist()


def test_the_objective_runs_many_small_gangs_rather_than_one_big():
    """Pollux's power mean (p = -1) of speedups over the fair share: on one 8-GPU node, a running
    8-GPU job gives way to eight 1-GPU jobs (their harmonic mean is far higher), and the node is
    never over its GPUs. Fails if the objective or the capacity were handled otherwise."""
    gangs = np.array([8] + [1] * 8)
    dur = np.array([50_000.0] + [600.0] * 8)
    submit = np.array([0.0] + [3000.0] * 8)
    out = mixed.simulate_rigid(gangs, dur, submit, 60.0, np.zeros(1, np.int64), 8)
    assert out["preemptions"][0] >= 1  # (the big job stopped for the small ones)
    # (all eight at once, at the first interval they are older than 0 s: a job of age 0 has factor 0)
    assert (out["start_s"][1:] == 3060.0).all()
    assert (out["finish_s"][1:] == 3060.0 + 30.0 + 600.0).all()
    # and one 1-GPU job more than the node holds waits for a GPU
    more = mixed.simulate_rigid(np.append(gangs, 1), np.append(dur, 600.0), np.append(submit, 3000.0), 60.0,
                                np.zeros(1, np.int64), 8)
    assert (more["start_s"][1:] == 3060.0).sum() == 8


def test_where_every_plan_packs_rigid_runs_are_the_elastic_engines_job_by_job():
    """Where every round's first plan over GPU counts packs (here: 150 short Philly jobs on 2x8,
    contended in 43 rounds), the compiled rule gives the elastic engine's run (its programme,
    packing and local search) bit for bit: each such plan is an optimum, which the search cannot
    improve, and here the two plans choose alike among equals."""
    from fastblox.traces import read_trace

    w = read_trace(need_shared(SHARED / "traces" / "philly-rfold" / "jobs.csv.gz"), on_bad_rows="drop").head(5000)
    w = w.take(np.flatnonzero(w.duration_s < 7200)[:150])
    gangs = np.minimum(w.num_gpus, 16)
    a = _twin(gangs, w.duration_s, w.submit_s, 2, 8, search=True)
    b = mixed.simulate_rigid(gangs, w.duration_s, w.submit_s, 60.0, np.zeros(2, np.int64), 8)
    assert b["unproven_rounds"] == 0 and b["programme_rounds"] > 0
    for k in KEYS:
        assert np.array_equal(np.asarray(a[k]), np.asarray(b[k])), k


def test_several_gpu_types_run_type_blind_at_the_tables_speeds():
    """--policy pollux on rigid jobs over two GPU types: packed blind to types (the first nodes, the
    V100s, first), each gang at its type's speed from the built-in table (the same model as the
    native engine's); elastic rows on several types and the fixed-batch policies are refused."""
    from fastblox.throughput import ThroughputTable

    w = fastblox.Workload.from_arrays([0.0, 0.0, 0.0], [4, 4, 4], duration_s=[1000.0, 1000.0, 1000.0])
    res = fastblox.simulate(w, policy="pollux", cluster="v100:2x4,k80:1x4")
    f = res.jobs["finish_s"].to_numpy()
    k80 = float(ThroughputTable.builtin().type_speed(("k80",), "v100")[0])
    assert 0 < k80 < 1
    assert sorted(f.tolist()) == pytest.approx([60.0 + 30.0 + 1000.0] * 2 + [60.0 + 30.0 + 1000.0 / k80])
    assert "blind to GPU types" in res.summary["engine"]
    el = fastblox.Workload.from_arrays([0.0], [1], duration_s=[5.0], elastic=np.array([True]),
                                       model=np.array(["ncf"], dtype=object), batch_size=np.array([32768]))
    with pytest.raises(ConfigError, match="runs elastic jobs on one GPU type"):
        fastblox.simulate(el, policy="pollux", cluster="v100:1x4,k80:1x4")
    with pytest.raises(OptionError, match="--policy elastic-tiresias runs on one GPU type"):
        RunSpec(policy="elastic-tiresias", cluster="v100:2x4,k80:2x4").resolved(source=False)


def test_the_cli_reports_a_rigid_only_run_without_an_empty_elastic_mean(tmp_path, capsys):
    """A workload of rigid jobs under --policy pollux prints their mean JCT and no 'nan' for the
    elastic jobs it has none of."""
    from fastblox.cli import main

    assert main(["run", "--policy", "pollux", "--workload", "sample", "--num-jobs", "40", "--cluster",
                 "v100:2x8,k80:2x8", "--out", str(tmp_path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("elastic "))
    assert "nan" not in line and line.split("|")[0].strip() == "elastic    0 elastic jobs"
    assert "40 rigid, mean JCT" in line
