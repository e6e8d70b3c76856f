"""Gavel's LPs solved as Gavel solves them: ECOS on the problem data cvxpy builds, for
``--compat gavel``'s ``optimum=ecos``.

Gavel (stanford-futuredata/gavel ``c4fa400``) writes its max-min and finish-time-fairness
allocations in cvxpy (``policies/max_min_fairness.py``, ``finish_time_fairness.py``) and solves them
with ECOS. Where an LP has many optima, ECOS's interior point is what Gavel's simulator runs, and
only ECOS's own path gives it (docs/fidelity.md, the ``--compat gavel`` section). cvxpy is a big
dependency and slow to canonicalise; this module writes the standard-form data
``min c'z s.t. h - G z in K`` that ``cvxpy.Problem(...).get_problem_data(cvxpy.ECOS)`` gives for
Gavel's two problems (cvxpy 1.9: the same variable order, rows, values and sparsity, explicit
zeros removed; ``tests/test_compat_gavel.py`` checks equality with cvxpy's) and calls
``ecos.solve`` directly, as cvxpy's ECOS interface does (no options).

ECOS is GPL-3.0: an optional dependency, ``pip install "fastblox[gavel]"``.

Layouts (``x`` is the jobs x types allocation, flattened in column order as cvxpy does):

* max-min (``Maximize(min_j sum_t coef[j,t] x[j,t])`` over the base constraints): variables
  ``[t, x]``, objective ``t``; rows ``-t - coef_j . x_j <= 0`` (one per job), ``-x <= 0``,
  ``sum_j sf_j x[j,t] <= C_t`` (one per type), ``sum_t x[j,t] <= 1`` (one per job).
* finish-time fairness (``Minimize(max_j (s_j + R_j inv_pos(thr_j . x_j)) / I_j)``), two or more
  jobs: variables ``[t, x, u]``, objective ``t``; rows ``-t + (R_j / I_j) u_j <= -s_j / I_j``, the
  base rows, then one second-order cone per job ``||(a_j - u_j, 2)|| <= a_j + u_j`` with
  ``a_j = thr_j . x_j`` (cvxpy's ``inv_pos``: ``a_j u_j >= 1``). One job: variables ``[u, x]``,
  objective ``(R / I) u`` (plus the constant ``s / I``), no ``t`` rows.
"""

from __future__ import annotations

import numpy as np

from .errors import ConfigError, SimulationError

#: what to install for ``optimum=ecos``
EXTRA = 'pip install "fastblox[gavel]"'


def have_ecos() -> bool:
    """True when the ``ecos`` package imports."""
    try:
        import ecos  # noqa: F401
    except ImportError:
        return False
    return True


def require_ecos(what: str = "optimum=ecos") -> None:
    """Raise a one-line ConfigError naming the extra and the alternative when ECOS is missing."""
    if not have_ecos():
        raise ConfigError(f"--compat gavel {what} needs the ecos package (GPL-3.0, an optional extra): "
                          f"{EXTRA}, or choose --policy-opt optimum=central (fastblox's own analytic centre)")


def _csc(rows: list, cols: list, vals: list, shape: tuple):
    """``G`` as cvxpy hands it to ECOS: CSC, sorted indices, duplicates summed, zeros removed."""
    from scipy import sparse

    r = np.concatenate(rows).astype(np.int64)
    c = np.concatenate(cols).astype(np.int64)
    v = np.concatenate(vals).astype(np.float64)
    g = sparse.coo_matrix((v, (r, c)), shape=shape).tocsc()
    g.sum_duplicates()
    g.eliminate_zeros()
    g.sort_indices()
    return sparse.csc_matrix((g.data, g.indices, g.indptr), shape=shape)


def _base_rows(m: int, n: int, sf: np.ndarray, x0: int, r0: int):
    """Gavel's ``get_base_constraints`` (``x >= 0``; ``sum_j sf_j x[j,t] <= C_t``;
    ``sum_t x[j,t] <= 1``) as rows from ``r0`` over ``x`` at columns ``x0 + j + m t``."""
    j = np.tile(np.arange(m), n)  # column-order flattening: index k = j + m t
    t = np.repeat(np.arange(n), m)
    col = x0 + j + m * t
    k = np.arange(m * n)
    rows = [r0 + k, r0 + m * n + t, r0 + m * n + n + j]
    cols = [col, col, col]
    vals = [-np.ones(m * n), np.asarray(sf, dtype=np.float64)[j], np.ones(m * n)]
    return rows, cols, vals, r0 + m * n + n + m


def max_min_data(coef: np.ndarray, sf: np.ndarray, cap: np.ndarray) -> dict:
    """``c, G, h, dims`` of Gavel's max-min problem with objective coefficients ``coef`` (jobs x
    types, Gavel's ``throughputs * priority_weights * scale_factors_array``), and ``x_at``, the
    first column of ``x``."""
    m, n = coef.shape
    j = np.tile(np.arange(m), n)
    t = np.repeat(np.arange(n), m)
    rows = [np.arange(m), j]
    cols = [np.zeros(m, dtype=np.int64), 1 + j + m * t]
    vals = [-np.ones(m), -coef[j, t]]
    r2, c2, v2, nrow = _base_rows(m, n, sf, 1, m)
    nvar = 1 + m * n
    g = _csc(rows + r2, cols + c2, vals + v2, (nrow, nvar))
    h = np.concatenate([np.zeros(m + m * n), np.asarray(cap, dtype=np.float64), np.ones(m)])
    c = np.zeros(nvar)
    c[0] = 1.0
    return {"c": c, "G": g, "h": h, "dims": {"l": nrow, "q": [], "e": 0}, "x_at": 1}


def ftf_data(thr: np.ndarray, sf: np.ndarray, cap: np.ndarray, since: np.ndarray, remaining: np.ndarray,
             isolated: np.ndarray) -> dict:
    """``c, G, h, dims`` of Gavel's finish-time-fairness problem (``thr`` jobs x types, ``since``
    the seconds since each job's arrival, ``remaining`` its steps left, ``isolated`` its expected
    isolated time), and ``x_at``, the first column of ``x``."""
    m, n = thr.shape
    one = m == 1
    x0 = 1  # [t, x, u] or [u, x]: x starts at column 1 either way
    u_col = (np.array([0]) if one else 1 + m * n + np.arange(m))
    nvar = 1 + m * n + (0 if one else m)
    inv_iso = 1.0 / np.asarray(isolated, dtype=np.float64)  # cvxpy divides by a constant as this product
    ratio = np.asarray(remaining, dtype=np.float64) * inv_iso
    rows, cols, vals = [], [], []
    r0 = 0
    if not one:  # -t + (R_j / I_j) u_j <= -s_j / I_j
        rows += [np.arange(m), np.arange(m)]
        cols += [np.zeros(m, dtype=np.int64), u_col]
        vals += [-np.ones(m), ratio]
        r0 = m
    r2, c2, v2, r_soc = _base_rows(m, n, sf, x0, r0)
    rows, cols, vals = rows + r2, cols + c2, vals + v2
    # cones: rows (a + u, a - u, 2) per job: -(thr . x) -/+ u
    j = np.tile(np.arange(m), n)
    t = np.repeat(np.arange(n), m)
    xc = x0 + j + m * t
    w = -np.asarray(thr, dtype=np.float64)[j, t]
    rows += [r_soc + 3 * j, r_soc + 3 * j + 1, r_soc + 3 * np.arange(m), r_soc + 3 * np.arange(m) + 1]
    cols += [xc, xc, u_col, u_col]
    vals += [w, w, -np.ones(m), np.ones(m)]
    nrow = r_soc + 3 * m
    g = _csc(rows, cols, vals, (nrow, nvar))
    h = np.zeros(nrow)
    if not one:
        h[:m] = -(np.asarray(since, dtype=np.float64) * inv_iso)
    h[r0 + m * n:r0 + m * n + n] = cap
    h[r0 + m * n + n:r_soc] = 1.0
    h[r_soc + 3 * np.arange(m) + 2] = 2.0
    c = np.zeros(nvar)
    c[0] = ratio[0] if one else 1.0
    return {"c": c, "G": g, "h": h, "dims": {"l": r_soc, "q": [3] * m, "e": 0}, "x_at": x0}


#: ECOS exit flags with a solution (cvxpy 1.9: optimal, optimal_inaccurate, and user_limit for
#: ECOS' iteration limit, whose last iterate cvxpy hands back too)
_SOLVED = (0, 10, -1)
#: ECOS exit flags cvxpy reports as infeasible or unbounded (no solution, no error)
_NO_SOLUTION = (1, 2, 11, 12)


def solve(data: dict, shape: tuple):
    """ECOS on ``data``: the allocation ``x`` (jobs x types, as cvxpy's ``x.value``: not yet
    clipped), or None when ECOS finds the problem infeasible (cvxpy: ``x.value`` is None). A
    solver failure raises SimulationError (cvxpy raises SolverError and Gavel stops)."""
    require_ecos()
    import ecos

    sol = ecos.solve(data["c"], data["G"], data["h"], data["dims"], None, None, verbose=False)
    flag = int(sol["info"]["exitFlag"])
    if flag in _NO_SOLUTION:
        return None
    if flag not in _SOLVED:
        raise SimulationError(f"--compat gavel optimum=ecos: ECOS failed on a {shape[0]}-job allocation "
                              f"(exit flag {flag}); Gavel's cvxpy stops here too")
    m, n = shape
    k = data["x_at"]
    return np.asarray(sol["x"][k:k + m * n]).reshape((m, n), order="F")


def max_min(coef: np.ndarray, sf: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """Gavel's max-min allocation (ECOS's point, clipped to [0, 1] as Gavel does)."""
    x = solve(max_min_data(coef, sf, cap), coef.shape)
    if x is None:
        raise SimulationError("--compat gavel optimum=ecos: ECOS finds Gavel's max-min LP infeasible; "
                              "this should not happen — please report it")
    return x.clip(min=0.0).clip(max=1.0)


def ftf(thr, sf, cap, since, remaining, isolated):
    """Gavel's finish-time-fairness allocation (ECOS's point, clipped), or None when ECOS finds
    no solution (Gavel then falls back to the isolated allocation)."""
    x = solve(ftf_data(thr, sf, cap, since, remaining, isolated), thr.shape)
    return None if x is None else x.clip(min=0.0).clip(max=1.0)
