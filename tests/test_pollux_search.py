"""Pollux's allocation search (kernels/pollux.py, run by fastblox.compat_pollux.PolluxPolicy) against
its plain-Python twin and against every allocation of tiny clusters (fastblox.reference.pollux)."""

from __future__ import annotations

import functools
import itertools
import json
import types
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastblox import compat_pollux as cp
from fastblox import elastic
from fastblox.kernels import pollux as kp
from fastblox.reference import pollux as ref


@st.composite
def problem(draw, max_jobs=6, max_nodes=4, max_per_node=4):
    """A search problem shaped like Pollux's: a job's speedup grows with its GPUs and falls with its
    nodes, a changed row is discounted (its restart), the base rows are a feasible allocation."""
    J = draw(st.integers(1, max_jobs))
    N = draw(st.integers(1, max_nodes))
    P = draw(st.integers(1, max_per_node))
    R = N * P
    table = np.full((J, N + 1, R + 1), np.inf)
    table[:, 0, 0] = 1e3
    keep = np.empty(J)
    maxr = np.array([draw(st.integers(1, R)) for _ in range(J)], dtype=np.int64)
    base = np.zeros((J, N), dtype=np.int64)
    free, multi = np.full(N, P), np.zeros(N, dtype=bool)
    for j in range(J):
        a, c = draw(st.floats(0.3, 1.0)), draw(st.floats(0.0, 0.6))
        factor = draw(st.floats(0.3, 1.0))
        for r in range(1, R + 1):
            for n in range(-(-r // P), min(r, N) + 1):
                table[j, n, r] = 1.0 / (r ** a / (1 + c * (n - 1)) * factor + 1e-3)
        k = draw(st.integers(0, 2))
        nodes = [n for n in range(N) if free[n] > 0 and (k < 2 or not multi[n])]
        if k == 1 and nodes:
            n = nodes[draw(st.integers(0, len(nodes) - 1))]
            base[j, n] = draw(st.integers(1, int(free[n])))
        elif k == 2 and len(nodes) >= 2:
            base[j, nodes[:2]] = 1
            multi[nodes[:2]] = True
        free -= base[j]
        maxr[j] = max(maxr[j], base[j].sum())
        rb, nb = int(base[j].sum()), int(np.count_nonzero(base[j]))
        keep[j] = 1e3 if rb == 0 else 1.0 / (rb ** a / (1 + c * (nb - 1)) + 1e-3)
    return base, table, keep, maxr, P


def run_kernel(start, base, table, keep, maxr, P, kicks=3, pair_cap=0):
    J, N = start.shape
    state = start.copy()
    taken = kp.search(state, base, table, keep, maxr, P, N, 50, kicks, pair_cap, 
                      *kp.scratch(J, N, table.shape[2], P))
    return state, taken


def total(rows, base, table, keep):
    return sum(ref.value(j, list(rows[j]), base.tolist(), table.tolist(), keep.tolist()) for j in range(len(rows)))


@settings(max_examples=150, deadline=None)
@given(problem(), st.booleans(), st.integers(0, 4))
def test_search_is_its_plain_python_twin(case, from_base, pair_cap):
    # (pair_cap 1..4 below the jobs: pair moves to the jobs furthest above their least value only)
    base, table, keep, maxr, P = case
    start = base if from_base else np.zeros_like(base)
    state, taken = run_kernel(start, base, table, keep, maxr, P, pair_cap=pair_cap)
    rows, taken_ref = ref.search(start.tolist(), base.tolist(), table.tolist(), keep.tolist(), maxr.tolist(), P,
                                 base.shape[1], 50, 3, pair_cap)
    assert state.tolist() == rows and taken == taken_ref
    assert ref.feasible(rows, maxr.tolist(), P, base.shape[1])
    assert total(rows, base, table, keep) <= total(start, base, table, keep)


def _rows_of(per_node, n_nodes, most):
    """Every row (GPUs per node) of at most ``most`` GPUs on a tiny cluster."""
    return [list(c) for c in itertools.product(range(per_node + 1), repeat=n_nodes) if sum(c) <= most]


@settings(max_examples=120, deadline=None)
@given(problem(max_jobs=3, max_nodes=3, max_per_node=2))
def test_search_ends_where_no_job_alone_can_do_better_on_tiny_clusters(case):
    # The search is local: what it guarantees is a feasible allocation no worse than the one it starts
    # from, where no job changing its own row (to any row at all: brute force) lowers the sum. The
    # optimum over every allocation may need several jobs to move at once (see the next test).
    base, table, keep, maxr, P = case
    J, N = base.shape
    state, _ = run_kernel(base, base, table, keep, maxr, P)
    rows = state.tolist()
    assert ref.feasible(rows, maxr.tolist(), P, N)
    got = total(state, base, table, keep)
    assert got <= total(base, base, table, keep) * (1 + 1e-9)
    best, _ = ref.brute_force(base.tolist(), table.tolist(), keep.tolist(), maxr.tolist(), P, N)
    assert best <= got * (1 + 1e-9)
    for j in range(J):
        for row in _rows_of(P, N, int(maxr[j])):
            other = [list(r) for r in rows]
            other[j] = row
            if ref.feasible(other, maxr.tolist(), P, N):
                assert total(np.array(other), base, table, keep) >= got * (1 - 1e-9), (j, row)


def test_the_search_is_local_a_three_job_rearrangement_is_beyond_it():
    # Found by hypothesis: job 0 spread over nodes 0-1 (its base row, discounted as kept), jobs 1 and 2
    # without GPUs. The search gives job 2 node 0, job 0 three GPUs on nodes 1-2, job 1 the last GPU of
    # node 2; the optimum puts job 0 back on its base row, job 2 on node 2 and job 1 on node 0's second
    # GPU: three jobs move at once, which no best response, pair move or kick does. The sum is 8 % above.
    base = np.array([[1, 1, 0], [0, 0, 0], [0, 0, 0]], dtype=np.int64)
    table = np.full((3, 4, 7), np.inf)
    table[:, 0, 0] = 1e3
    one = [[1.99600798, 0.999000999], [0.999000999, 0.499750125], [0.999000999, 0.499750125]]
    more = [[0.999000999, 0.666222518, 0.499750125, 0.399840064, 0.333222259],
            [0.499750125, 0.333222259, 0.249937516, 0.199960008, 0.166638894],
            [0.499750125, 0.333222259, 0.249937516, 0.199960008, 0.166638894]]
    for j in range(3):
        table[j, 1, 1:3] = one[j]
        table[j, 2, 2:5] = more[j][:3]
        table[j, 3, 3:7] = more[j][1:]
    keep = np.array([0.499750125, 1e3, 1e3])
    maxr = np.array([5, 1, 2], dtype=np.int64)
    state, _ = run_kernel(base, base, table, keep, maxr, 2)
    best, arg = ref.brute_force(base.tolist(), table.tolist(), keep.tolist(), maxr.tolist(), 2, 3)
    assert arg[0] == [1, 1, 0] and sorted(map(sum, arg)) == [1, 2, 2]
    assert state.tolist() != arg and total(state, base, table, keep) > best * 1.05


def test_a_kick_puts_a_job_back_on_its_base_row():
    # job 0 moved off its node by the others: a best response or pair move alone cannot bring it back
    # (found by the brute-force test before kicks existed); with kicks the search does
    base = np.array([[2, 0], [0, 0], [0, 0]], dtype=np.int64)
    table = np.full((3, 3, 5), np.inf)
    table[:, 0, 0] = 1e3
    table[:, 1, 1], table[:, 1, 2] = [1.5993, 1.1264, 1.5409], [0.848, 0.5765, 0.9165]
    table[:, 2, 2], table[:, 2, 3] = [1.1243, 0.7031, 1.0005], [0.7757, 0.4752, 0.7382]
    table[:, 2, 4] = [0.596, 0.3598, 0.5949]
    keep = np.array([0.5933, 1e3, 1e3])
    maxr = np.array([2, 3, 1], dtype=np.int64)
    start = np.array([[0, 2], [1, 0], [1, 0]], dtype=np.int64)
    without, _ = run_kernel(start, base, table, keep, maxr, 2, kicks=0)
    with_kicks, taken = run_kernel(start, base, table, keep, maxr, 2)
    assert without.tolist() == start.tolist()
    assert taken == 1 and with_kicks.tolist() == [[2, 0], [0, 1], [0, 1]]
    assert total(with_kicks, base, table, keep) < total(start, base, table, keep)


def test_a_start_row_the_table_does_not_value_is_moved():
    # a seed row on more nodes than the table values (inf) must not block the search or its kicks
    base = np.zeros((2, 3), dtype=np.int64)
    table = np.full((2, 4, 5), np.inf)
    table[:, 0, 0] = 1e3
    table[:, 1, 1], table[:, 1, 2] = 2.0, 1.0
    keep = np.full(2, 1e3)
    maxr = np.array([2, 2], dtype=np.int64)
    start = np.array([[1, 1, 0], [0, 0, 2]], dtype=np.int64)  # job 0: 2 GPUs on 2 nodes (not in the table)
    state, _ = run_kernel(start, base, table, keep, maxr, 2)
    rows, _ = ref.search(start.tolist(), base.tolist(), table.tolist(), keep.tolist(), maxr.tolist(), 2, 3, 50, 3)
    assert state.tolist() == rows and total(state, base, table, keep) == 2.0
    assert sorted(state.sum(axis=1).tolist()) == [2, 2] and (np.count_nonzero(state, axis=1) == 1).all()


def test_layouts_are_the_fewest_nodes_and_a_few_more():
    a = cp._layouts(9, 16, 4, 16, 3)
    assert not a.flags.writeable
    got = {(int(n), int(r)) for n, r in a}
    assert (1, 4) in got and (4, 4) in got and (3, 9) in got and (6, 9) in got
    assert (2, 4) in got and (7, 9) not in got and (2, 9) not in got and (1, 5) not in got
    assert (np.diff(a[:, 1]) >= 0).all()  # by GPUs (PolluxPolicy._table takes a prefix)


ROUNDS = Path(__file__).resolve().parents[1] / "datasets" / "pollux" / "nsga2_rounds.json"


def _policy_on(rnd):
    """PolluxPolicy on a saved allocation problem (jobs as the policy sees them)."""
    jobs = {}
    for jd in rnd["jobs"]:
        jobs[jd["key"]] = types.SimpleNamespace(
            app=jd["app"], prof=elastic.profile(jd["app"]), pp=None if jd["pp"] is None else np.array(jd["pp"]),
            grad=None if jd["grad"] is None else tuple(jd["grad"]), attained_gpu=jd["attained"], submit=jd["submit"],
            restarts=jd["restarts"], max_replicas=functools.partial(lambda m, g: m, jd["max_replicas"]), gang=0)
        jobs[jd["key"]]._bkey = jobs[jd["key"]]._bmemo = None
        for m in ("speedups", "best_batches", "memo"):
            setattr(jobs[jd["key"]], m, functools.partial(getattr(cp.ElasticJob, m), jobs[jd["key"]]))
    pol = cp.PolluxPolicy(jobs, rnd["nodes"], rnd["per_node"])
    prev = {jd["key"]: jd["base"] for jd in rnd["jobs"] if jd["base"]}
    with elastic.one_blas_thread():
        out = pol.optimize([jd["key"] for jd in rnd["jobs"]], prev, rnd["now"])
    return pol.objectives[-1][1], out


def test_search_matches_nsga2_where_the_dp_alone_fell_short():
    # 7 rounds of workload-6 where the search before the local search scored 0.985-0.999 of Pollux's
    # NSGA-II (its objective recorded in the file); now it is at least NSGA-II's in all (without the
    # kicks to a job's best GPUs on one node, 0.9963 in the round at 22,200 s: a move of three jobs)
    rounds = json.loads(ROUNDS.read_text())["rounds"]
    ratios = np.array([_policy_on(r)[0] / r["nsga2"] for r in rounds])
    assert len(ratios) == 7 and (ratios >= 1 - 1e-9).all()
    for r in rounds[:2]:  # and the allocations are feasible
        _, out = _policy_on(r)
        for key, alloc in out.items():
            assert len(alloc) <= next(jd["max_replicas"] for jd in r["jobs"] if jd["key"] == key)
        per_node = np.bincount([n for a in out.values() for n in a], minlength=r["nodes"])
        assert (per_node <= r["per_node"]).all()


def _answers(state, base, table, keep, maxr, P, i, j):
    """For each finite option of ``j`` in a pair move with ``i`` emptied (the kernel's own steps):
    (``_answer_value``'s value of i, ``best_response``'s value of i with j's row written)."""
    J, N = state.shape
    state = state.copy()
    w = kp.scratch(J, N, table.shape[2], P)
    tot, used, multi, order, row = w[3], w[4], w[5], w[6], w[7]
    opt_v, opt_w, ctx, hist = w[11], w[12], w[13], w[-1]
    kp._totals(state, tot)
    kp._set_row(i, np.zeros(N, dtype=np.int64), state, tot)
    m, maxfree = kp._context(j, state, tot, P, ctx[0], ctx[1], ctx[2])
    fits = kp._keep_fits(j, base, maxr, P, ctx[0], ctx[1])
    count = kp._options(j, table, keep, fits, maxfree, P, N, ctx[0], ctx[2], m, kp._top(j, maxr, table), opt_v)
    H, A, first, mark, rk, rx, bnodes = hist
    kp._histograms(ctx[0], ctx[1], P, H, A, first, mark)
    nb_i, rb_i = int(np.count_nonzero(base[i])), int(base[i].sum())
    bnodes[:nb_i] = np.flatnonzero(base[i])
    pmin = w[-2]
    kp.lowest(table, keep, w[0], pmin)
    out = []
    for o in range(count):
        if not np.isfinite(opt_v[o]):
            continue
        nr = kp._row_nodes(j, kp._kind(o), o // 2, base, P, ctx[0], ctx[2], m, A, first, rk, rx)
        fast = kp._answer_value(i, nr, rk, rx, ctx[0], ctx[1], base, table, keep, maxr, P, N, kp._top(i, maxr, table),
                                nb_i, rb_i, H, A, mark, bnodes, pmin)
        kp._write_row(j, kp._kind(o), o // 2, base, P, ctx[0], ctx[2], m, row)
        assert sorted(zip(rk[:nr].tolist(), rx[:nr].tolist())) == [(k, int(x)) for k, x in enumerate(row) if x]
        kp._set_row(j, row, state, tot)
        slow = kp.best_response(i, state, tot, base, table, keep, maxr, P, N, used, multi, order, row, opt_w)
        out.append((fast, slow, float(opt_v[o])))
    return out


@settings(max_examples=60, deadline=None)
@given(problem(max_jobs=5, max_nodes=6, max_per_node=4), st.booleans())
def test_pair_move_answers_and_bounds_are_the_plain_steps(case, from_base):
    # the pair move's shortcuts: i's value from histograms is best_response's, bit for bit, for every
    # option of j; the pair's lower bound and the option bounds are at most what the options reach
    base, table, keep, maxr, P = case
    J, N = base.shape
    state = base.copy() if from_base else run_kernel(np.zeros_like(base), base, table, keep, maxr, P)[0]
    w = kp.scratch(J, N, table.shape[2], P)
    kp.lowest(table, keep, w[0], w[-2])
    tot = w[3]
    for i in range(J):
        for j in range(J):
            if i == j:
                continue
            got = _answers(state, base, table, keep, maxr, P, i, j)
            assert all(a == b for a, b, _ in got)
            kp._totals(state, tot)
            bound = kp._pair_bound(i, j, state, tot, base, keep, maxr, table, P, w[-2])
            assert all(bound <= vj + vi for vi, _, vj in got)
