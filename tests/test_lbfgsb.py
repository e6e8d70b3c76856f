"""The compiled L-BFGS-B (kernels/lbfgsb.py) against scipy's: its loss against the numpy loss
(fastblox.elastic._fit_objective), its linear algebra against numpy's, and the whole minimiser
against scipy.optimize.minimize driving the same compiled loss (so that only the two minimisers'
rounding differs), then fastblox.elastic.fit_perf_params(compiled=True) against the numpy fit.
The loss and the triangular loops are also checked bit for bit against plain-Python twins of their
first, one-element-at-a-time forms (what makes --compat sia's replays keep their bits)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.linalg import solve_triangular
from scipy.optimize import Bounds, minimize

from fastblox import elastic
from fastblox.kernels import lbfgsb as K


def observations(rng, n):
    """n configurations a job ran: nodes, GPUs, atomic batch, compute s, step s (as the Sia tests draw them)."""
    nodes = rng.integers(1, 4, n).astype(float)
    reps = nodes * rng.integers(1, 5, n)
    atomic = rng.integers(1, 128, n).astype(float)
    acc = rng.uniform(0.01, 1, n)
    return nodes, reps, atomic, acc, acc + rng.uniform(0, 0.5, n)


def problem(obs):
    """(start, lower, upper, free mask, the kernel's data) of fit_perf_params' fit of ``obs``."""
    nodes, reps, atomic, acc, step = obs
    p0, lo, hi, free = elastic._fit_start(nodes, reps, atomic, acc)
    data = K.fit_data(nodes, reps, atomic, acc, step, p0, np.flatnonzero(free).astype(np.int64))
    return p0, lo, hi, free, data


# ------------------------------------------------------------------ the loss
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_fit_loss_is_the_numpy_loss(n, seed):
    rng = np.random.default_rng(seed)
    obs = observations(rng, n)
    p0, lo, hi, free, data = problem(obs)
    p = p0.copy()
    p[free] = np.clip(p0[free] * rng.uniform(0.2, 5, free.sum()), lo[free], np.minimum(hi[free], 1e3))
    f_ref, g_ref = elastic._fit_objective(p, obs[0], obs[1], obs[2], obs[3], obs[4])
    g = np.empty(int(free.sum()))
    f = K.fit_loss(p[free], data, g)
    assert f == pytest.approx(f_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref[free], rtol=1e-9, atol=1e-12 * np.abs(g_ref).max())


def reference_loss(x, p0, free, nodes, reps, atomic, acc, step):
    """(loss, gradient in the free parameters) of fit_loss as first written, one observation at a time, in
    plain Python floats: the same libm logs, powers and square roots, and numba's ``x ** k`` for an int k
    (products: x * x, x * (x * x)). fit_loss's groups and hoisted terms must give these bits."""
    sq, cube = (lambda v: v * v), (lambda v: v * (v * v))
    p = p0.tolist()
    for k, v in zip(free.tolist(), x.tolist()):
        p[k] = v
    nodes, reps, atomic, acc, step = (a.tolist() for a in (nodes, reps, atomic, acc, step))
    n, gm, tiny = len(nodes), p[6], K.TINY
    s1 = s2 = 0.0
    terms = []
    for i in range(n):
        A = p[0] + p[1] * atomic[i]
        a, b = (p[2], p[3]) if nodes[i] > 1 else (p[4], p[5]) if reps[i] > 1 else (tiny, tiny)
        N = a + b * max(reps[i] - 2.0, tiny)
        Ag, Ng = A ** gm, N ** gm
        logA, logS = math.log(A), math.log(Ag + Ng)
        d1, d2 = logA - math.log(acc[i]), logS / gm - math.log(step[i])
        s1 += d1 * d1
        s2 += d2 * d2
        terms.append((A, N, Ag, Ng, logA, logS, d2))
    e1, e2 = math.sqrt(s1 / n), math.sqrt(s2 / n)
    f = e1 + e2 + 1e-3 * sq(gm - 1) + 1e-2 * (sq(p[3] / p[2]) + sq(p[5] / p[4]))
    grad = [0.0] * 7
    for i, (A, N, Ag, Ng, logA, logS, d2) in enumerate(terms):
        S = Ag + Ng
        w1 = (logA - math.log(acc[i])) / (n * e1) if e1 > 0 else 0.0
        w2 = d2 / (n * e2) if e2 > 0 else 0.0
        dA = w1 / A + w2 * Ag / (A * S)
        grad[0] += dA
        grad[1] += dA * atomic[i]
        if nodes[i] > 1 or reps[i] > 1:
            dN = w2 * Ng / (N * S)
            k = 2 if nodes[i] > 1 else 4
            grad[k] += dN
            grad[k + 1] += dN * max(reps[i] - 2.0, tiny)
        grad[6] += w2 * (-logS / sq(gm) + (Ag * logA + Ng * math.log(N)) / (gm * S))
    grad[2] += -2e-2 * sq(p[3]) / cube(p[2])
    grad[3] += 2e-2 * p[3] / sq(p[2])
    grad[4] += -2e-2 * sq(p[5]) / cube(p[4])
    grad[5] += 2e-2 * p[5] / sq(p[4])
    grad[6] += 2e-3 * (gm - 1)
    return f, np.array(grad)[free]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 24), st.integers(0, 2**32 - 1), st.integers(1, 6))
def test_fit_loss_is_its_plain_python_twin_bit_for_bit(n, seed, configs):
    """fit_loss (per-observation constants, network terms once per group) gives the bits of the loss
    computed one observation at a time; ``configs``: how many placements the observations share."""
    rng = np.random.default_rng(seed)
    nodes, reps, atomic, acc, step = observations(rng, n)
    pick = rng.integers(0, min(configs, n), n)  # (several atomic batches on each of a few placements: groups)
    nodes, reps = nodes[pick], reps[pick]
    obs = nodes, reps, atomic, acc, step
    p0, lo, hi, free, data = problem(obs)
    x = np.clip(p0[free] * rng.uniform(0.2, 5, free.sum()), lo[free], np.minimum(hi[free], 1e3))
    g = np.empty(int(free.sum()))
    f = K.fit_loss(x, data, g)
    f_ref, g_ref = reference_loss(x, p0, np.flatnonzero(free), *obs)
    assert np.float64(f).tobytes() == np.float64(f_ref).tobytes()
    assert g.tobytes() == g_ref.tobytes()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2**32 - 1), st.booleans())
def test_fit_start_is_fit_perf_params_start(n, seed, one_batch):
    rng = np.random.default_rng(seed)
    nodes, reps, atomic, acc, _ = observations(rng, n)
    if one_batch:
        atomic[:] = atomic[0]
    want = elastic._fit_start(nodes, reps, atomic, acc)[:3]
    got = np.empty(7), np.empty(7), np.empty(7)
    K.fit_start(nodes, reps, atomic, acc, *got)
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()


# ------------------------------------------------------------------ the linear algebra
@settings(max_examples=40, deadline=None)
@given(st.integers(1, 10), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_cholesky_and_triangular_solves_are_lapacks(nn, off, seed):
    rng = np.random.default_rng(seed)
    b = rng.normal(size=(nn, nn))
    spd = b @ b.T + nn * np.eye(nn)
    a = np.full((nn + off, nn + off), np.nan)
    a[off:, off:] = spd
    assert K._potrf(a, off, nn) == 0
    u = np.triu(a[off:, off:])
    np.testing.assert_allclose(u, np.linalg.cholesky(spd).T, rtol=1e-12, atol=1e-12)
    rhs = rng.normal(size=nn)
    for trans in (False, True):
        v = np.concatenate([np.zeros(off), rhs])
        assert K._trsv(a, off, off, nn, v, off, trans) == 0
        np.testing.assert_allclose(v[off:], solve_triangular(u, rhs, trans=1 if trans else 0), rtol=1e-9, atol=1e-12)
    spd[nn - 1, nn - 1] = -1.0  # (not positive definite: its column, 1-based)
    assert K._potrf(spd.copy(), 0, nn) == nn
    u[nn - 1, nn - 1] = 0.0  # (singular: nothing solved)
    v = rhs.copy()
    assert K._trsv(u, 0, 0, nn, v, 0, False) == nn and (v == rhs).all()


def dot_potrf(a, nn):
    """LAPACK's upper Cholesky as dot products, one element at a time (the kernels' first form), on a list of rows."""
    for j in range(nn):
        s = a[j][j]
        for k in range(j):
            s -= a[k][j] * a[k][j]
        if s <= 0.0 or math.isnan(s):
            a[j][j] = s
            return j + 1
        a[j][j] = s = math.sqrt(s)
        r = 1.0 / s
        for i in range(j + 1, nn):
            v = a[j][i]
            for k in range(j):
                v -= a[k][j] * a[k][i]
            a[j][i] = v * r
    return 0


def dot_forward(u, b):
    """``U' x = b`` by dot products (the kernels' first form), U a list of rows, b a list."""
    for i in range(len(b)):
        v = b[i]
        for k in range(i):
            v -= u[k][i] * b[k]
        b[i] = v / u[i][i]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20), st.integers(0, 2**32 - 1), st.booleans())
def test_blocked_forms_give_the_dot_product_bits(nn, seed, indefinite):
    """_potrf and formk's Gram sums (_add_upper_gram) four elements at a time, _trsv's forward solve and
    formk's (1,2)-block solve (_solve_upper_block) a row update at a time: each element's operations are
    still those of its dot product, in their order, so the bits are the same."""
    rng = np.random.default_rng(seed)
    b = rng.normal(size=(nn, nn))
    spd = b @ b.T + (0.1 if indefinite else nn) * np.eye(nn)
    if indefinite:
        spd[nn // 2, nn // 2] = -1.0
    a, ref = spd.copy(), spd.tolist()
    assert K._potrf(a, 0, nn) == dot_potrf(ref, nn)
    assert a.tobytes() == np.array(ref).tobytes()
    u = np.triu(np.linalg.cholesky(spd + (nn + 1) * np.eye(nn)).T)
    rhs = rng.normal(size=nn)
    got, want = rhs.copy(), rhs.tolist()
    assert K._trsv(u, 0, 0, nn, got, 0, True) == 0
    dot_forward(u.tolist(), want)
    assert got.tobytes() == np.array(want).tobytes()
    col = nn // 2 + 1  # (formk: U' X = B on the (1,2) block, then the (2,2) block plus X'X)
    wn = rng.normal(size=(2 * col, 2 * col))
    wn[:col, :col] = np.triu(np.linalg.cholesky(wn[:col, :col] @ wn[:col, :col].T + col * np.eye(col)).T)
    ref = wn.tolist()
    for j in range(col, 2 * col):
        x = [ref[k][j] for k in range(col)]
        dot_forward(ref, x)
        for k in range(col):
            ref[k][j] = x[k]
    for i in range(col, 2 * col):
        for j in range(i, 2 * col):
            s = 0.0
            for k in range(col):
                s += ref[k][i] * ref[k][j]
            ref[i][j] = ref[i][j] + s
    K._solve_upper_block(wn, col)
    K._add_upper_gram(wn, col)
    assert wn.tobytes() == np.array(ref).tobytes()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 100), min_size=1, max_size=12))
def test_heap_hands_out_breakpoints_in_order(ts):
    t = np.array(ts)
    order = np.arange(len(t))
    out = []
    for k, last in enumerate(range(len(t) - 1, -1, -1)):  # (as cauchy: the least into t[last], then the rest a heap)
        K._hpsolb(last, t, order, k)
        out.append((t[last], order[last]))
    assert [v for v, _ in out] == sorted(ts)
    assert [ts[i] for _, i in out] == [v for v, _ in out]


# ------------------------------------------------------------------ the minimiser against scipy's
def both(obs, tol):
    """(scipy's result, ours: (x, f, evaluations, iterations, outcome)) on the same compiled loss."""
    p0, lo, hi, free, data = problem(obs)

    def fun(x):
        g = np.empty(len(x))
        return K.fit_loss(x, data, g), g

    ref = minimize(fun, p0[free], jac=True, method="L-BFGS-B", bounds=Bounds(lo[free], hi[free]), tol=tol)
    x = np.clip(p0[free], lo[free], hi[free])
    lf, hf = lo[free], hi[free]
    nbd = np.where(np.isfinite(lf), np.where(np.isfinite(hf), 2, 1), np.where(np.isfinite(hf), 3, 0))
    ftol, pgtol = (2.2204460492503131e-09, 1e-5) if tol is None else (tol, tol)
    f, nfev, nit, how = K.lbfgsb_fit(x, np.where(np.isfinite(lf), lf, 0.0), np.where(np.isfinite(hf), hf, 0.0),
                                     nbd.astype(np.int64), ftol / np.finfo(float).eps, pgtol, K.LBFGSB_M,
                                     K.LBFGSB_MAXLS, K.LBFGSB_MAXITER, K.LBFGSB_MAXFUN, data)
    return ref, (x, f, nfev, nit, how)


#: (tolerance, share of fits on scipy's path, share of the same parameters to 1e-8, loss to within): measured
#: on these 100 fits, ours against scipy's 90 %, 86 %, 7.6e-5 at Sia's 1e-5 and 67 %, 49 %, 5.8e-3 at
#: scipy's default (ftol 2.2e-9: long runs along flat directions); scipy against itself with the loss one
#: ulp higher: at most 3.2e-5 and 5.8e-3 apart. A bug on any of the routine's paths (Cauchy point,
#: subspace step, line search, the memory's wrap past 10 corrections) leaves the path on most fits.
PATHS = [(1e-5, 0.85, 0.8, 2e-4), (None, 0.55, 0.4, 1e-2)]


@pytest.mark.parametrize("tol, path, same, rel", PATHS)
def test_lbfgsb_follows_scipys_steps(tol, path, same, rel):
    """On 100 fits, our iterates are scipy's but for rounding (the loss is flat along some
    directions: rounding moves scipy's own result as much, PATHS)."""
    rng = np.random.default_rng(7)
    same_path = same_x = 0
    runs = 100
    for _ in range(runs):
        ref, (x, f, nfev, nit, how) = both(observations(rng, int(rng.integers(1, 13))), tol)
        assert how in (K.CONVERGED_GRAD, K.CONVERGED_F)
        assert f == pytest.approx(ref.fun, rel=rel)
        same_path += nit == ref.nit and nfev == ref.nfev
        same_x += bool(np.all(np.abs(x - ref.x) <= 1e-8 * np.abs(ref.x)))
    assert same_path >= path * runs
    assert same_x >= same * runs


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_compiled_fit_keeps_the_numpy_fits_bounds_and_pins(n, seed):
    """fit_perf_params(compiled=True) on any observations: finite parameters inside the fit's
    bounds, those the observations cannot tell pinned exactly as the numpy fit pins them."""
    obs = observations(np.random.default_rng(seed), n)
    ours = elastic.fit_perf_params(*obs, tol=1e-5, compiled=True)
    ref = elastic.fit_perf_params(*obs, tol=1e-5)
    _, lo, hi, _ = elastic._fit_start(obs[0], obs[1], obs[2], obs[3])
    assert np.isfinite(ours).all() and np.isfinite(elastic._fit_objective(ours, *obs)[0])
    pinned = lo == hi
    inter = np.zeros(7, bool)
    if not (obs[0] > 1).any():  # without a multi-node run the inter-node terms follow the intra-node ones
        inter[2:4] = True
        assert (ours[2:4] == np.maximum(lo[2:4], 1.1 * ours[4:6])).all()
    assert (ours[~inter] >= lo[~inter]).all() and (ours[~inter] <= hi[~inter]).all()
    assert (ours[pinned & ~inter] == ref[pinned & ~inter]).all()


#: (fits, share within 2e-4 of the numpy fit's loss at least, share of those worse at most). The loss
#: is flat along some directions and has several minima, so a change in its last bits can end the
#: minimiser elsewhere, better or worse: measured on 2,400 fits (n = 1..12, seeds 0..199 each), scipy
#: against itself with its loss one ulp higher ends more than 2e-4 apart on 11 (7 worse), the compiled
#: fit against the numpy fit on 13 (9 worse); on these 300 fits, 1 and 1. A wrong minimiser or loss
#: leaves most fits.
FITS = (300, 0.97, 0.02)


def test_compiled_fit_is_as_good_as_the_numpy_fit():
    """fit_perf_params(compiled=True) against the numpy fit (scipy on the numpy loss) at Sia's
    tolerance on a fixed sample: the numpy loss at both within 2e-4 on nearly every fit, and
    where they part, not worse more often than rounding alone makes scipy part from itself."""
    rng = np.random.default_rng(11)
    runs, close_share, worse_share = FITS
    close = worse = 0
    for _ in range(runs):
        obs = observations(rng, int(rng.integers(1, 13)))
        f_ours = elastic._fit_objective(elastic.fit_perf_params(*obs, tol=1e-5, compiled=True), *obs)[0]
        f_ref = elastic._fit_objective(elastic.fit_perf_params(*obs, tol=1e-5), *obs)[0]
        if f_ours == pytest.approx(f_ref, rel=2e-4):
            close += 1
        else:
            worse += f_ours > f_ref
    assert close >= close_share * runs
    assert worse <= worse_share * runs
