"""Gavel's finish-time fairness at scale: the exact test and the allocation without LPs when
throughputs are proportional across types, the certified bisection otherwise — each against
the LP bisection it replaces (``ftf_allocation_lp``)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fastblox.policies import gavel
from fastblox.reference.planners import uniform_rate_allocation_reference


@st.composite
def uniform_case(draw):
    a = draw(st.integers(1, 14))
    T = draw(st.integers(1, 3))
    s = np.array(draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.6, 1.0]), min_size=T, max_size=T)))
    s[0] = max(s[0], 0.5)
    amax = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5, 3.0]), min_size=a, max_size=a)))
    sf = np.array(draw(st.lists(st.sampled_from([1, 2, 4, 8]), min_size=a, max_size=a)))
    cap = np.array(draw(st.lists(st.integers(0, 24), min_size=T, max_size=T)), dtype=np.float64)
    cap[0] = max(cap[0], 4.0)
    need = np.array(draw(st.lists(st.one_of(st.just(0.0), st.floats(0.05, 1.0)), min_size=a, max_size=a))) * amax
    return s, amax, sf, cap, need


def _edge(s, amax, sf, cap, need):
    """The largest ``f`` with ``need * f`` feasible (by the exact test)."""
    lo, hi = 0.0, 1e3
    for _ in range(60):
        m = 0.5 * (lo + hi)
        lo, hi = (m, hi) if gavel.uniform_rate_feasible(s, amax, sf, cap, need * m) else (lo, m)
    return lo


def _lp_feasible(s, amax, sf, cap, need):
    thr = amax[:, None] * s[None, :]
    return gavel._feasible_rate(thr, sf, cap, need, thr > 0) is not None


def _holds(x, thr, sf, cap, need):
    assert (x >= 0).all() and (x.sum(axis=1) <= 1 + 1e-9).all()
    assert ((sf[:, None] * x).sum(axis=0) <= cap + 1e-9).all()
    assert (x[thr <= 0] == 0).all()
    assert ((thr * x).sum(axis=1) >= need - 1e-9 * max(need.max(), 1.0)).all()


@given(uniform_case())
@settings(max_examples=60, deadline=None)
def test_uniform_test_is_the_lp_feasibility(case):
    s, amax, sf, cap, need = case
    if not (need > 0).any():
        assert gavel.uniform_rate_feasible(s, amax, sf, cap, need)
        return
    f = _edge(s, amax, sf, cap, need)
    # just inside the edge the LP finds a point, just outside it finds none
    assert _lp_feasible(s, amax, sf, cap, need * f * (1 - 1e-5))
    assert not _lp_feasible(s, amax, sf, cap, need * f * (1 + 1e-5) + 1e-9)


@given(uniform_case())
@settings(max_examples=60, deadline=None)
def test_uniform_allocation_meets_the_edge_needs_like_its_twin(case):
    s, amax, sf, cap, need = case
    need = need * _edge(s, amax, sf, cap, need)
    x = gavel.uniform_rate_allocation(s, amax, sf, cap, need)
    _holds(x, amax[:, None] * s[None, :], sf, cap, need)
    ref = np.array(uniform_rate_allocation_reference(s, amax, sf, cap, need)).reshape(x.shape)
    np.testing.assert_allclose(x, ref, atol=1e-9)


@given(uniform_case())
@settings(max_examples=40, deadline=None)
def test_uniform_allocation_max_has_the_lps_throughput(case):
    """The class LP gives the feasibility LP's secondary optimum (total throughput)."""
    s, amax, sf, cap, need = case
    need = need * _edge(s, amax, sf, cap, need) * (1 - 1e-6)
    thr = amax[:, None] * s[None, :]
    x = gavel.uniform_rate_allocation_max(s, amax, sf, cap, need)
    _holds(x, thr, sf, cap, need)
    lp = gavel._feasible_rate(thr, sf, cap, need, thr > 0).reshape(x.shape)
    assert abs((thr * x).sum() - (thr * lp).sum()) <= 1e-6 * max((thr * lp).sum(), 1.0)


@st.composite
def ftf_case(draw):
    a = draw(st.integers(1, 10))
    T = draw(st.integers(1, 3))
    proportional = draw(st.booleans())
    if proportional:
        s = np.array(draw(st.lists(st.floats(0.2, 1.0), min_size=T, max_size=T)))
        thr = np.array(draw(st.lists(st.floats(0.5, 4.0), min_size=a, max_size=a)))[:, None] * s[None, :]
    else:
        thr = np.array(draw(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]), min_size=T, max_size=T),
                                     min_size=a, max_size=a)))
        thr[:, 0] = np.maximum(thr[:, 0], 0.5)
    sf = np.array(draw(st.lists(st.sampled_from([1, 2, 4]), min_size=a, max_size=a)))
    cap = np.array(draw(st.lists(st.integers(2, 16), min_size=T, max_size=T)), dtype=np.float64)
    elapsed = np.array(draw(st.lists(st.floats(0.0, 5000.0), min_size=a, max_size=a)))
    remaining = np.array(draw(st.lists(st.floats(10.0, 20_000.0), min_size=a, max_size=a)))
    share = draw(st.floats(0.05, 1.0))
    return thr, sf, cap, elapsed, remaining, remaining / (share * thr.max(axis=1)) + draw(st.floats(0, 1000))


def _rho(thr, elapsed, remaining, denom, x):
    rate = (thr * x).sum(axis=1)
    return float(np.max((elapsed + remaining / np.maximum(rate, 1e-300)) / denom))


@given(ftf_case())
@settings(max_examples=60, deadline=None)
def test_ftf_allocation_reaches_the_lp_bisections_rho(case):
    thr, sf, cap, elapsed, remaining, denom = case
    x, lps = gavel.ftf_allocation(thr, sf, cap, elapsed, remaining, denom)
    ref, ref_lps = gavel.ftf_allocation_lp(thr, sf, cap, elapsed, remaining, denom)
    _holds(x, thr, sf, cap, np.zeros(len(sf)))
    got, want = _rho(thr, elapsed, remaining, denom, x), _rho(thr, elapsed, remaining, denom, ref)
    assert got <= want * (1 + 1.01e-3) and want <= got * (1 + 1.01e-3)
    assert lps <= ref_lps + 1
    if gavel._proportional(thr) is None:
        # the same probes answered alike and the same final LP: the reference's allocation
        np.testing.assert_allclose(x, ref, atol=1e-9)


def test_certified_probes_spare_most_lps():
    """Not proportional (two job kinds preferring different types): the bounds from the
    max-scale LPs answer most probes, the allocation stays the reference's."""
    rng = np.random.default_rng(3)
    a = 40
    thr = np.where(np.arange(a)[:, None] % 2 == 0, [3.0, 1.0, 0.5], [1.0, 2.0, 1.5])
    sf = rng.choice([1, 2, 4], a)
    cap = np.array([16.0, 16.0, 32.0])
    el, rem = rng.uniform(0, 3000, a), rng.uniform(100, 10_000, a)
    den = rem / thr.max(axis=1) * 3
    x, lps = gavel.ftf_allocation(thr, sf, cap, el, rem, den, tol=1e-5)
    ref, ref_lps = gavel.ftf_allocation_lp(thr, sf, cap, el, rem, den, tol=1e-5)
    np.testing.assert_allclose(x, ref, atol=1e-9)
    assert ref_lps >= 12 and lps <= ref_lps // 2
