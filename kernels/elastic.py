"""Kernel of the elastic job model's fit (``fastblox.elastic.fit_perf_params``): adaptdl's fitting
loss and its exact gradient, compiled. The plain-numpy twin is ``fastblox.elastic._fit_objective``;
the tests compare the two."""

from __future__ import annotations

import math

import numpy as np

from ._jit import jit

TINY = 1e-8


@jit
def fit_objective(p, nodes, reps, atomic, accum_time, step_time, grad):
    """Loss (RMS log errors of compute and step time, a pull of gamma towards 1 and of the betas
    towards 0) of parameters ``p`` (7: alpha_c, beta_c, alpha_n, beta_n, alpha_r, beta_r, gamma)
    on the observations; its gradient is written into ``grad`` (7)."""
    n = nodes.shape[0]
    g = p[6]
    A = np.empty(n)
    N = np.empty(n)
    S = np.empty(n)
    d1 = np.empty(n)
    d2 = np.empty(n)
    s1 = 0.0
    s2 = 0.0
    for i in range(n):
        A[i] = p[0] + p[1] * atomic[i]
        if nodes[i] > 1:
            a, b = p[2], p[3]
        elif reps[i] > 1:
            a, b = p[4], p[5]
        else:
            a, b = TINY, TINY
        N[i] = a + b * max(reps[i] - 2.0, TINY)
        S[i] = math.pow(A[i], g) + math.pow(N[i], g)
        d1[i] = math.log(A[i]) - math.log(accum_time[i])
        d2[i] = math.log(S[i]) / g - math.log(step_time[i])
        s1 += d1[i] * d1[i]
        s2 += d2[i] * d2[i]
    e1 = math.sqrt(s1 / n)
    e2 = math.sqrt(s2 / n)
    f = e1 + e2 + 1e-3 * (g - 1.0) ** 2 + 1e-2 * ((p[3] / p[2]) ** 2 + (p[5] / p[4]) ** 2)
    for k in range(7):
        grad[k] = 0.0
    for i in range(n):
        w1 = d1[i] / (n * e1) if e1 > 0 else 0.0
        w2 = d2[i] / (n * e2) if e2 > 0 else 0.0
        Ag = math.pow(A[i], g)
        Ng = math.pow(N[i], g)
        dA = w1 / A[i] + w2 * Ag / (A[i] * S[i])
        dN = w2 * Ng / (N[i] * S[i])
        grad[0] += dA
        grad[1] += dA * atomic[i]
        m = max(reps[i] - 2.0, TINY)
        if nodes[i] > 1:
            grad[2] += dN
            grad[3] += dN * m
        elif reps[i] > 1:
            grad[4] += dN
            grad[5] += dN * m
        grad[6] += w2 * (-math.log(S[i]) / (g * g) + (Ag * math.log(A[i]) + Ng * math.log(N[i])) / (g * S[i]))
    grad[2] -= 2e-2 * p[3] ** 2 / p[2] ** 3
    grad[3] += 2e-2 * p[3] / p[2] ** 2
    grad[4] -= 2e-2 * p[5] ** 2 / p[4] ** 3
    grad[5] += 2e-2 * p[5] / p[4] ** 2
    grad[6] += 2e-3 * (g - 1.0)
    return f
