"""L-BFGS-B compiled: scipy's ``_lbfgsb.setulb`` (L-BFGS-B 3.0, Zhu, Byrd, Lu and Nocedal, with
Morales and Nocedal's 2011 subspace step) followed step by step, driven the way
``scipy.optimize.minimize(method="L-BFGS-B")`` drives it, on the Pollux/Sia throughput model's
fitting loss (``fit_loss``; its plain-numpy twin is ``fastblox.elastic._fit_objective``).

Why: a fit of the 7-parameter model takes ~36 loss evaluations and ~60 calls of scipy's routine;
from Python each costs more than its arithmetic (``fastblox.elastic.lbfgsb``). Here the fit is one
call. The arithmetic is the routine's, in its order, except that dot products and norms are plain
loops (scipy calls BLAS) and the loss's logs and powers are libm's (numpy's SIMD ones differ in the
last bit): the iterates agree with scipy's to rounding, and where rounding flips one of the
routine's tests the fit stops an iteration earlier or later (tests/test_lbfgsb.py measures both
against scipy's on the same compiled loss).

Array layout: the routine's column-major work arrays as 2-D arrays ``a[row, column]``: ``ws``,
``wy`` [variable, correction]; ``sy``, ``ss``, ``wt`` [m, m]; ``wn``, ``snd`` [2m, 2m]. Reference:
R. H. Byrd, P. Lu, J. Nocedal and C. Zhu, *A limited memory algorithm for bound constrained
optimization*, SIAM J. Sci. Comput. 16 (1995); J. L. Morales and J. Nocedal, *Remark on
Algorithm 778*, ACM TOMS 38 (2011); the line search is Moré and Thuente's (MINPACK-2 ``dcsrch``).
"""

from __future__ import annotations

import math

import numpy as np

from ._jit import jit
from .elastic import pairwise_sum

TINY = 1e-8
EPSMACH = 2.220446049250313e-16
#: the line search's task codes (as the routine's)
LS_START, LS_FG, LS_CONV, LS_WARN, LS_ERROR = 0, 3, 4, 6, 7
#: lbfgsb_fit's outcome codes
CONVERGED_GRAD, CONVERGED_F, ABNORMAL, STOPPED = 0, 1, 2, 3
#: scipy's L-BFGS-B defaults as ``minimize`` passes them (corrections, line-search steps, iterations, evaluations)
LBFGSB_M, LBFGSB_MAXLS, LBFGSB_MAXITER, LBFGSB_MAXFUN = 10, 20, 15000, 15000


# ---------------------------------------------------------------------------------------------------- the loss
@jit(nrt=False, error_model="numpy")
def fit_loss(x, data, g):
    """adaptdl's fitting loss of the throughput model (``fastblox.elastic._fit_objective``) at the
    free parameters ``x``; its gradient in them into ``g``. ``data``: :func:`fit_data`'s.

    The network term N = a + b max(GPUs - 2, 1e-8), N^gamma and log N are computed once per group
    of observations with the same (a, b) pair and GPUs (:func:`fit_data`), the same operations on
    the same values as per observation; the sums run over the observations in their order."""
    p0, free, pair, grp, obs, grp_pair, grp_m, p, grad, work, gwork = data
    for k in range(7):
        p[k] = p0[k]
    for k in range(free.shape[0]):
        p[free[k]] = x[k]
    n = obs.shape[1]
    gm = p[6]
    for j in range(grp_pair.shape[0]):
        k = grp_pair[j]
        a, b = (p[k], p[k + 1]) if k > 0 else (TINY, TINY)
        N = a + b * grp_m[j]
        gwork[0, j], gwork[1, j], gwork[2, j] = N, N ** gm, math.log(N)
    s1 = 0.0
    s2 = 0.0
    for i in range(n):
        A = p[0] + p[1] * obs[0, i]
        Ag, Ng = A ** gm, gwork[1, grp[i]]
        S = Ag + Ng
        logA, logS = math.log(A), math.log(S)
        d1 = logA - obs[1, i]
        d2 = logS / gm - obs[2, i]
        s1 += d1 * d1
        s2 += d2 * d2
        work[0, i], work[1, i], work[2, i], work[3, i] = A, Ag, S, logA
        work[4, i], work[5, i], work[6, i] = logS, d1, d2
    e1, e2 = math.sqrt(s1 / n), math.sqrt(s2 / n)
    f = e1 + e2 + 1e-3 * (gm - 1) ** 2 + 1e-2 * ((p[3] / p[2]) ** 2 + (p[5] / p[4]) ** 2)
    _fit_grad(data, n, gm, e1, e2)
    grad[2] += -2e-2 * p[3] ** 2 / p[2] ** 3
    grad[3] += 2e-2 * p[3] / p[2] ** 2
    grad[4] += -2e-2 * p[5] ** 2 / p[4] ** 3
    grad[5] += 2e-2 * p[5] / p[4] ** 2
    grad[6] += 2e-3 * (gm - 1)
    for k in range(free.shape[0]):
        g[k] = grad[free[k]]
    return f


@jit(nrt=False, inline=True, error_model="numpy")
def _fit_grad(data, n, gm, e1, e2):
    """The sums of :func:`fit_loss`'s gradient over the observations into ``grad`` (from the terms
    its loss left in ``work`` and ``gwork``; ``e1``, ``e2``: the two RMS errors)."""
    p0, free, pair, grp, obs, grp_pair, grp_m, p, grad, work, gwork = data
    for k in range(7):
        grad[k] = 0.0
    ne1, ne2, gm2 = n * e1, n * e2, gm ** 2
    for i in range(n):
        A, Ag, S, logA = work[0, i], work[1, i], work[2, i], work[3, i]
        logS, d1, d2 = work[4, i], work[5, i], work[6, i]
        j = grp[i]
        N, Ng, logN = gwork[0, j], gwork[1, j], gwork[2, j]
        w1 = d1 / ne1 if e1 > 0 else 0.0
        w2 = d2 / ne2 if e2 > 0 else 0.0
        dA = w1 / A + w2 * Ag / (A * S)
        grad[0] += dA
        grad[1] += dA * obs[0, i]
        k = pair[i]
        if k > 0:
            dN = w2 * Ng / (N * S)
            grad[k] += dN
            grad[k + 1] += dN * grp_m[j]
        grad[6] += w2 * (-logS / gm2 + (Ag * logA + Ng * logN) / (gm * S))


@jit(error_model="numpy")
def fit_data(nodes, reps, atomic, accum_time, step_time, p0, free):
    """:func:`fit_loss`'s data for the observations (nodes, GPUs, atomic batch, compute s, step s),
    all 7 parameters ``p0`` and the indices ``free`` of those fitted: (p0, free, pair: per
    observation the index of its (a, b) parameters, 2 inter-node, 4 intra-node, 0 one GPU (a = b =
    1e-8), grp: per observation its group (same pair and GPUs), obs: [3, n] atomic batch, log
    compute s, log step s, grp_pair and grp_m: per group its pair and max(GPUs - 2, 1e-8), then
    scratch: p and grad (7 floats), work [7, n], gwork [3, groups])."""
    n = nodes.shape[0]
    pair, grp, grp_pair, grp_m = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n)
    obs = np.empty((3, n))
    ng = 0
    for i in range(n):
        k = 2 if nodes[i] > 1 else 4 if reps[i] > 1 else 0
        m = max(reps[i] - 2.0, TINY)
        j = 0
        while j < ng and not (grp_pair[j] == k and grp_m[j] == m):
            j += 1
        if j == ng:
            grp_pair[j], grp_m[j] = k, m
            ng += 1
        pair[i], grp[i] = k, j
        obs[0, i], obs[1, i], obs[2, i] = atomic[i], math.log(accum_time[i]), math.log(step_time[i])
    return (p0, free, pair, grp, obs, grp_pair[:ng], grp_m[:ng], np.empty(7), np.empty(7), np.empty((7, n)),
            np.empty((3, ng)))


# ---------------------------------------------------------------------------------------------------- linear algebra
@jit(nrt=False, inline=True)
def _next(k, m):
    """``(k + 1) % m`` for 0 <= k < m, without the division (the correction ring's next slot)."""
    return k + 1 if k + 1 < m else 0


@jit(nrt=False, inline=True, error_model="numpy")
def _potrf(a, o, nn):
    """Cholesky ``A = U'U`` of the block ``a[o:o+nn, o:o+nn]`` (LAPACK ``dpotrf``, upper), U in
    its upper triangle; 0, or the 1-based column where A is not positive definite (then that row
    is left as it was, but for its diagonal: the failed pivot).

    Row j's elements past the diagonal four at a time: their dot products (k = 0, 1, ..., in that
    order, as one at a time) side by side in registers, not one chain of dependent subtractions
    after another (the routine spends most of its time in these small triangular loops)."""
    for j in range(nn):
        s = a[o + j, o + j]
        for k in range(j):
            s -= a[o + k, o + j] * a[o + k, o + j]
        if s <= 0.0 or math.isnan(s):
            a[o + j, o + j] = s
            return j + 1
        s = math.sqrt(s)
        a[o + j, o + j] = s
        r = 1.0 / s
        i = j + 1
        while i + 4 <= nn:
            v0, v1, v2, v3 = a[o + j, o + i], a[o + j, o + i + 1], a[o + j, o + i + 2], a[o + j, o + i + 3]
            for k in range(j):
                c = a[o + k, o + j]
                v0 -= c * a[o + k, o + i]
                v1 -= c * a[o + k, o + i + 1]
                v2 -= c * a[o + k, o + i + 2]
                v3 -= c * a[o + k, o + i + 3]
            a[o + j, o + i], a[o + j, o + i + 1] = v0 * r, v1 * r
            a[o + j, o + i + 2], a[o + j, o + i + 3] = v2 * r, v3 * r
            i += 4
        for i in range(i, nn):
            v = a[o + j, o + i]
            for k in range(j):
                v -= a[o + k, o + j] * a[o + k, o + i]
            a[o + j, o + i] = v * r
    return 0


@jit(nrt=False, inline=True, error_model="numpy")
def _trsv(a, ar, ac, nn, b, bo, trans):
    """Solve ``U x = b`` (``trans`` False) or ``U' x = b`` in place, U upper triangular =
    ``a[ar:ar+nn, ac:ac+nn]``, b = ``b[bo:bo+nn]`` (LAPACK ``dtrtrs``); 0, or the 1-based index of
    a zero diagonal (then nothing is solved)."""
    for i in range(nn):
        if a[ar + i, ac + i] == 0.0:
            return i + 1
    if trans:  # (x[k] known, subtracted from every later element: each its dot product's order)
        for k in range(nn):
            xk = b[bo + k] / a[ar + k, ac + k]
            b[bo + k] = xk
            for i in range(k + 1, nn):
                b[bo + i] -= a[ar + k, ac + i] * xk
    else:
        for i in range(nn - 1, -1, -1):
            v = b[bo + i]
            for k in range(i + 1, nn):
                v -= a[ar + i, ac + k] * b[bo + k]
            b[bo + i] = v / a[ar + i, ac + i]
    return 0


@jit(nrt=False, inline=True, error_model="numpy")
def _bmv(m, sy, wt, col, v, p):
    """``p`` = the 2col x 2col middle matrix of the compact L-BFGS formula times ``v`` (``bmv``); info."""
    if col == 0:
        return 0
    p[col] = v[col]
    for i in range(1, col):
        s = 0.0
        for k in range(i):
            s = s + sy[i, k] * v[k] / sy[k, k]
        p[col + i] = v[col + i] + s
    info = _trsv(wt, 0, 0, col, p, col, True)
    if info != 0:
        return info
    for i in range(col):
        p[i] = v[i] / math.sqrt(sy[i, i])
    info = _trsv(wt, 0, 0, col, p, col, False)
    if info != 0:
        return info
    for i in range(col):
        p[i] = -p[i] / math.sqrt(sy[i, i])
    for i in range(col):
        s = 0.0
        for k in range(i + 1, col):
            s = s + sy[k, i] * p[col + k] / sy[i, i]
        p[i] = p[i] + s
    return 0


@jit(nrt=False, error_model="numpy")
def _projgr(n, lo, hi, nbd, x, g):
    """The infinity norm of the projected gradient (``projgr``; NaN if the gradient has one)."""
    out = 0.0
    for i in range(n):
        gi = g[i]
        if gi != gi:
            return gi
        if nbd[i] != 0:
            if gi < 0.0:
                if nbd[i] >= 2:
                    gi = max(x[i] - hi[i], gi)
            elif nbd[i] <= 2:
                gi = min(x[i] - lo[i], gi)
        out = max(out, abs(gi))
    return out


@jit(nrt=False, error_model="numpy")
def _hpsolb(n, t, iorder, iheap):
    """The least of ``t[0..n]`` into ``t[n]``, the rest kept a heap (``hpsolb``; ``iheap`` 0: build it first)."""
    if iheap == 0:
        for k in range(2, n + 2):
            ddum = t[k - 1]
            indxin = iorder[k - 1]
            i = k
            while i > 1:
                j = i // 2
                if ddum < t[j - 1]:
                    t[i - 1] = t[j - 1]
                    iorder[i - 1] = iorder[j - 1]
                    i = j
                else:
                    break
            t[i - 1] = ddum
            iorder[i - 1] = indxin
    if n > 0:
        i = 1
        out = t[0]
        indxout = iorder[0]
        ddum = t[n]
        indxin = iorder[n]
        while True:
            j = i + i
            if j <= n:
                if t[j] < t[j - 1]:
                    j += 1
                if t[j - 1] < ddum:
                    t[i - 1] = t[j - 1]
                    iorder[i - 1] = iorder[j - 1]
                    i = j
                else:
                    break
            else:
                break
        t[i - 1] = ddum
        iorder[i - 1] = indxin
        t[n] = out
        iorder[n] = indxout


# ---------------------------------------------------------------------------------------------------- the Cauchy point
@jit(nrt=False, error_model="numpy")
def _cauchy(n, x, lo, hi, nbd, g, iorder, iwhere, t, d, xcp, m, wy, ws, sy, wt, theta, col, head, p, c, wbp, v,
            sbgnrm):
    """The generalized Cauchy point into ``xcp`` (``cauchy``: the first local minimiser of the
    quadratic model along the projected steepest descent path); ``c`` = W'(xcp - x). Returns
    (info, segments explored)."""
    if sbgnrm <= 0.0:
        for i_ in range(n):
            xcp[i_] = x[i_]
        return 0, 0
    f1, tl, tu = 0.0, 0.0, 0.0
    bnded = True
    nfree = n
    nbreak = -1
    ibkmin = 0
    bkmin = 0.0
    col2 = 2 * col
    p[:col2] = 0.0
    for i in range(n):
        neggi = -g[i]
        if iwhere[i] != 3 and iwhere[i] != -1:
            if nbd[i] <= 2:
                tl = x[i] - lo[i]
            if nbd[i] >= 2:
                tu = hi[i] - x[i]
            xlower = nbd[i] <= 2 and tl <= 0.0
            xupper = nbd[i] >= 2 and tu <= 0.0
            iwhere[i] = 0
            if xlower:
                if neggi <= 0.0:
                    iwhere[i] = 1
            elif xupper:
                if neggi >= 0.0:
                    iwhere[i] = 2
            elif abs(neggi) <= 0.0:
                iwhere[i] = -3
        pointr = head
        if iwhere[i] != 0 and iwhere[i] != -1:
            d[i] = 0.0
        else:
            d[i] = neggi
            f1 = f1 - neggi * neggi
            for j in range(col):
                p[j] = p[j] + wy[i, pointr] * neggi
                p[col + j] = p[col + j] + ws[i, pointr] * neggi
                pointr = _next(pointr, m)
            if nbd[i] <= 2 and nbd[i] != 0 and neggi < 0.0:
                nbreak += 1
                iorder[nbreak] = i
                t[nbreak] = tl / (-neggi)
                if nbreak == 0 or t[nbreak] < bkmin:
                    bkmin = t[nbreak]
                    ibkmin = nbreak
            elif nbd[i] >= 2 and neggi > 0.0:
                nbreak += 1
                iorder[nbreak] = i
                t[nbreak] = tu / neggi
                if nbreak == 0 or t[nbreak] < bkmin:
                    bkmin = t[nbreak]
                    ibkmin = nbreak
            else:
                nfree -= 1
                iorder[nfree] = i
                if abs(neggi) > 0.0:
                    bnded = False
    if theta != 1.0:
        for j in range(col):
            p[col + j] = theta * p[col + j]
    for i_ in range(n):
        xcp[i_] = x[i_]
    if nbreak == -1 and nfree == n:
        return 0, 0
    c[:col2] = 0.0
    f2 = -theta * f1
    f2_org = f2
    if col > 0:
        info = _bmv(m, sy, wt, col, p, v)
        if info != 0:
            return info, 0
        s = 0.0
        for j in range(col2):
            s += v[j] * p[j]
        f2 = f2 - s
    dtm = -f1 / f2
    tsum = 0.0
    nseg = 1
    if nbreak >= 0:
        nleft = nbreak
        it = 0
        tj = 0.0
        while True:
            tj0 = tj
            if it == 0:
                tj = bkmin
                ibp = iorder[ibkmin]
            else:
                if it == 1 and ibkmin != nbreak:
                    t[ibkmin] = t[nbreak]
                    iorder[ibkmin] = iorder[nbreak]
                _hpsolb(nleft, t, iorder, it - 1)
                tj = t[nleft]
                ibp = iorder[nleft]
            dt = tj - tj0
            if dtm < dt:
                break
            tsum = tsum + dt
            nleft -= 1
            it += 1
            dibp = d[ibp]
            d[ibp] = 0.0
            if dibp > 0.0:
                zibp = hi[ibp] - x[ibp]
                xcp[ibp] = hi[ibp]
                iwhere[ibp] = 2
            else:
                zibp = lo[ibp] - x[ibp]
                xcp[ibp] = lo[ibp]
                iwhere[ibp] = 1
            if nleft == -1 and nbreak == n:
                dtm = dt
                for j in range(col2):
                    c[j] += dtm * p[j]
                return 0, nseg
            nseg += 1
            dibp2 = dibp ** 2.0
            f1 = f1 + dt * f2 + dibp2 - theta * dibp * zibp
            f2 = f2 - theta * dibp2
            if col > 0:
                for j in range(col2):
                    c[j] += dt * p[j]
                pointr = head
                for j in range(col):
                    wbp[j] = wy[ibp, pointr]
                    wbp[col + j] = theta * ws[ibp, pointr]
                    pointr = _next(pointr, m)
                info = _bmv(m, sy, wt, col, wbp, v)
                if info != 0:
                    return info, nseg
                wmc, wmp, wmw = 0.0, 0.0, 0.0
                for j in range(col2):
                    wmc += c[j] * v[j]
                    wmp += p[j] * v[j]
                    wmw += wbp[j] * v[j]
                for j in range(col2):
                    p[j] += -dibp * wbp[j]
                f1 = f1 + dibp * wmc
                f2 = f2 + dibp * 2.0 * wmp - dibp2 * wmw
            f2 = max(EPSMACH * f2_org, f2)
            if nleft >= 0:
                dtm = -f1 / f2
            elif bnded:
                dtm = 0.0
                break
            else:
                dtm = -f1 / f2
                break
    if dtm <= 0.0:
        dtm = 0.0
    tsum = tsum + dtm
    for i in range(n):
        xcp[i] += tsum * d[i]
    if col > 0:
        for j in range(col2):
            c[j] += dtm * p[j]
    return 0, nseg


@jit(nrt=False, error_model="numpy")
def _freev(n, nfree, index, indx2, iwhere, updatd, cnstnd, it):
    """The free and active variables at the Cauchy point into ``index`` and those entering and
    leaving the free set into ``indx2`` (``freev``). Returns (free, entering, leaving's first, wrk)."""
    nenter = 0
    ileave = n
    if it > 0 and cnstnd:
        for i in range(nfree):
            k = index[i]
            if iwhere[k] > 0:
                ileave -= 1
                indx2[ileave] = k
        for i in range(nfree, n):
            k = index[i]
            if iwhere[k] <= 0:
                indx2[nenter] = k
                nenter += 1
    wrk = ileave < n or nenter > 0 or updatd
    nfree = 0
    iact = n
    for i in range(n):
        if iwhere[i] <= 0:
            index[nfree] = i
            nfree += 1
        else:
            iact -= 1
            index[iact] = i
    return nfree, nenter, ileave, wrk


# ---------------------------------------------------------------------------------------------------- subspace step
@jit(nrt=False, error_model="numpy")
def _formk(n, nsub, ind, nenter, ileave, indx2, iupdat, updatd, wn, wn1, m, ws, wy, sy, theta, col, head):
    """The LEL' factorization of the indefinite matrix K of the subspace step into ``wn`` (``formk``;
    ``wn1`` keeps the inner products between calls); info (0, -1 or -2: not positive definite)."""
    if updatd:
        if iupdat > m:
            for jy in range(m - 1):
                js = m + jy
                for k in range(m - (jy + 1)):
                    wn1[jy + k, jy] = wn1[jy + 1 + k, jy + 1]
                    wn1[js + k, js] = wn1[js + 1 + k, js + 1]
                for k in range(m - 1):
                    wn1[m + k, jy] = wn1[m + 1 + k, jy + 1]
        iy = col - 1
        is_ = m + col - 1
        ipntr = head + col - 1
        if ipntr >= m:
            ipntr -= m
        jpntr = head
        for jy in range(col):
            js = m + jy
            t1, t2, t3 = 0.0, 0.0, 0.0
            for k in range(nsub):
                k1 = ind[k]
                t1 = t1 + wy[k1, ipntr] * wy[k1, jpntr]
            for k in range(nsub, n):
                k1 = ind[k]
                t2 = t2 + ws[k1, ipntr] * ws[k1, jpntr]
                t3 = t3 + ws[k1, ipntr] * wy[k1, jpntr]
            wn1[iy, jy] = t1
            wn1[is_, js] = t2
            wn1[is_, jy] = t3
            jpntr = _next(jpntr, m)
        jy = col - 1
        jpntr = head + col - 1
        if jpntr >= m:
            jpntr -= m
        ipntr = head
        for i in range(col):
            is_ = m + i
            t3 = 0.0
            for k in range(nsub):
                k1 = ind[k]
                t3 = t3 + ws[k1, ipntr] * wy[k1, jpntr]
            ipntr = _next(ipntr, m)
            wn1[is_, jy] = t3
        upcl = col - 1
    else:
        upcl = col
    ipntr = head
    for iy in range(upcl):
        is_ = m + iy
        jpntr = head
        for jy in range(iy + 1):
            js = m + jy
            t1, t2, t3, t4 = 0.0, 0.0, 0.0, 0.0
            for k in range(nenter):
                k1 = indx2[k]
                t1 = t1 + wy[k1, ipntr] * wy[k1, jpntr]
                t2 = t2 + ws[k1, ipntr] * ws[k1, jpntr]
            for k in range(ileave, n):
                k1 = indx2[k]
                t3 = t3 + wy[k1, ipntr] * wy[k1, jpntr]
                t4 = t4 + ws[k1, ipntr] * ws[k1, jpntr]
            wn1[iy, jy] = wn1[iy, jy] + t1 - t3
            wn1[is_, js] = wn1[is_, js] - t2 + t4
            jpntr = _next(jpntr, m)
        ipntr = _next(ipntr, m)
    ipntr = head
    for is_ in range(m, m + upcl):
        jpntr = head
        for jy in range(upcl):
            t1, t3 = 0.0, 0.0
            for k in range(nenter):
                k1 = indx2[k]
                t1 = t1 + ws[k1, ipntr] * wy[k1, jpntr]
            for k in range(ileave, n):
                k1 = indx2[k]
                t3 = t3 + ws[k1, ipntr] * wy[k1, jpntr]
            if is_ <= jy + m:
                wn1[is_, jy] = wn1[is_, jy] + t1 - t3
            else:
                wn1[is_, jy] = wn1[is_, jy] - t1 + t3
            jpntr = _next(jpntr, m)
        ipntr = _next(ipntr, m)
    for iy in range(col):
        is_ = col + iy
        is1 = m + iy
        for jy in range(iy + 1):
            js = col + jy
            js1 = m + jy
            wn[jy, iy] = wn1[iy, jy] / theta
            wn[js, is_] = wn1[is1, js1] * theta
        for jy in range(iy):
            wn[jy, is_] = -wn1[is1, jy]
        for jy in range(iy, col):
            wn[jy, is_] = wn1[is1, jy]
        wn[iy, iy] = wn[iy, iy] + sy[iy, iy]
    if _potrf(wn, 0, col) != 0:
        return -1
    _solve_upper_block(wn, col)
    _add_upper_gram(wn, col)
    if _potrf(wn, col, col) != 0:
        return -2
    return 0


@jit(nrt=False, inline=True, error_model="numpy")
def _solve_upper_block(wn, col):
    """L^-1 of the (1,2) block of ``formk``'s K: ``U' X = B`` in place, U = ``wn[:col, :col]``,
    B = ``wn[:col, col:2col]`` (``dtrtrs`` with col right-hand sides; nothing solved if U has a
    zero diagonal). :func:`_trsv`'s forward solve on all columns at once: each element's
    operations in the same order, the columns side by side in the inner loop."""
    for i in range(col):
        if wn[i, i] == 0.0:
            return
    for k in range(col):
        u = wn[k, k]
        for j in range(col, 2 * col):
            wn[k, j] = wn[k, j] / u
        for i in range(k + 1, col):
            c = wn[k, i]
            for j in range(col, 2 * col):
                wn[i, j] -= c * wn[k, j]


@jit(nrt=False, inline=True, error_model="numpy")
def _add_upper_gram(wn, col):
    """``wn[i, j] += sum_k wn[k, i] * wn[k, j]`` (k < col, each sum from 0.0 in k's order) over
    the upper triangle of the (2,2) block of ``formk``'s K (i <= j, both in [col, 2col)): four j
    at a time, their sums side by side in registers."""
    col2 = 2 * col
    for i in range(col, col2):
        j = i
        while j + 4 <= col2:
            s0 = s1 = s2 = s3 = 0.0
            for k in range(col):
                c = wn[k, i]
                s0 += c * wn[k, j]
                s1 += c * wn[k, j + 1]
                s2 += c * wn[k, j + 2]
                s3 += c * wn[k, j + 3]
            wn[i, j] = wn[i, j] + s0
            wn[i, j + 1] = wn[i, j + 1] + s1
            wn[i, j + 2] = wn[i, j + 2] + s2
            wn[i, j + 3] = wn[i, j + 3] + s3
            j += 4
        for j in range(j, col2):
            s0 = 0.0
            for k in range(col):
                s0 += wn[k, i] * wn[k, j]
            wn[i, j] = wn[i, j] + s0


@jit(nrt=False, error_model="numpy")
def _formt(m, wt, sy, ss, col, theta):
    """T = theta S'S + L D^-1 L' Cholesky-factorized into ``wt``'s upper triangle (``formt``); info."""
    for j in range(col):
        wt[0, j] = theta * ss[0, j]
    for i in range(1, col):
        for j in range(i, col):
            k1 = min(i, j)
            ddum = 0.0
            for k in range(k1):
                ddum = ddum + ((sy[i, k] * sy[j, k]) / sy[k, k])
            wt[i, j] = ddum + theta * ss[i, j]
    return -3 if _potrf(wt, 0, col) != 0 else 0


@jit(nrt=False, error_model="numpy")
def _cmprlb(n, m, x, g, ws, wy, sy, wt, z, r, wa_p, wa_c, index, theta, col, head, nfree, cnstnd):
    """r = -Z'B(xcp - x) - Z'g (``cmprlb``, from ``wa_c`` = W'(xcp - x)); info."""
    if not cnstnd and col > 0:
        for i in range(n):
            r[i] = -g[i]
        return 0
    for i in range(nfree):
        k = index[i]
        r[i] = -theta * (z[k] - x[k]) - g[k]
    if _bmv(m, sy, wt, col, wa_c, wa_p) != 0:
        return -8
    pointr = head
    for j in range(col):
        a1 = wa_p[j]
        a2 = theta * wa_p[col + j]
        for i in range(nfree):
            k = index[i]
            r[i] = r[i] + wy[k, pointr] * a1 + ws[k, pointr] * a2
        pointr = _next(pointr, m)
    return 0


@jit(nrt=False, error_model="numpy")
def _subsm(n, m, nsub, ind, lo, hi, nbd, x, d, xp, ws, wy, theta, xx, gg, col, head, wv, wn):
    """The subspace Newton step from the Cauchy point ``x`` (``subsm``, Morales and Nocedal's
    projection and backtrack); info."""
    if nsub <= 0:
        return 0
    pointr = head
    for i in range(col):
        t1, t2 = 0.0, 0.0
        for j in range(nsub):
            k = ind[j]
            t1 += wy[k, pointr] * d[j]
            t2 += ws[k, pointr] * d[j]
        wv[i] = t1
        wv[col + i] = theta * t2
        pointr = _next(pointr, m)
    col2 = 2 * col
    info = _trsv(wn, 0, 0, col2, wv, 0, True)
    if info != 0:
        return info
    for i in range(col):
        wv[i] = -wv[i]
    info = _trsv(wn, 0, 0, col2, wv, 0, False)
    if info != 0:
        return info
    pointr = head
    for jy in range(col):
        js = col + jy
        for i in range(nsub):
            k = ind[i]
            d[i] = d[i] + (wy[k, pointr] * wv[jy] / theta) + (ws[k, pointr] * wv[js])
        pointr = _next(pointr, m)
    temp = 1.0 / theta
    for i in range(nsub):
        d[i] = temp * d[i]
    iword = 0
    for i_ in range(n):
        xp[i_] = x[i_]
    for i in range(nsub):
        k = ind[i]
        dk = d[i]
        xk = x[k]
        if nbd[k] != 0:
            if nbd[k] == 1:
                x[k] = max(lo[k], xk + dk)
                if x[k] == lo[k]:
                    iword = 1
            elif nbd[k] == 2:
                xk = max(lo[k], xk + dk)
                x[k] = min(hi[k], xk)
                if x[k] == lo[k] or x[k] == hi[k]:
                    iword = 1
            elif nbd[k] == 3:
                x[k] = min(hi[k], xk + dk)
                if x[k] == hi[k]:
                    iword = 1
        else:
            x[k] = xk + dk
    if iword == 0:
        return 0
    dd_p = 0.0
    for i in range(n):
        dd_p = dd_p + (x[i] - xx[i]) * gg[i]
    if dd_p <= 0.0:
        return 0
    for i_ in range(n):
        x[i_] = xp[i_]
    alpha = 1.0
    temp1 = 1.0
    ibd = 0
    for i in range(nsub):
        k = ind[i]
        dk = d[i]
        if nbd[k] != 0:
            if dk < 0.0 and nbd[k] <= 2:
                temp2 = lo[k] - x[k]
                if temp2 >= 0.0:
                    temp1 = 0.0
                elif dk * alpha < temp2:
                    temp1 = temp2 / dk
            elif dk > 0.0 and nbd[k] >= 2:
                temp2 = hi[k] - x[k]
                if temp2 <= 0.0:
                    temp1 = 0.0
                elif dk * alpha > temp2:
                    temp1 = temp2 / dk
            if temp1 < alpha:
                alpha = temp1
                ibd = i
    if alpha < 1.0:
        dk = d[ibd]
        k = ind[ibd]
        if dk > 0.0:
            x[k] = hi[k]
            d[ibd] = 0.0
        elif dk < 0.0:
            x[k] = lo[k]
            d[ibd] = 0.0
    for i in range(nsub):
        k = ind[i]
        x[k] = x[k] + alpha * d[i]
    return 0


@jit(nrt=False, error_model="numpy")
def _matupd(n, m, ws, wy, sy, ss, d, r, itail, iupdat, col, head, rr, dr, stp, dtd):
    """The newest correction pair into ``ws``, ``wy`` and the middle matrix's ``sy``, ``ss``
    (``matupd``). Returns (itail, col, head, theta)."""
    if iupdat <= m:
        col = iupdat
        itail = (head + iupdat - 1) % m
    else:
        itail = _next(itail, m)
        head = _next(head, m)
    for i in range(n):
        ws[i, itail] = d[i]
        wy[i, itail] = r[i]
    theta = rr / dr
    if iupdat > m:
        for j in range(1, col):
            for k in range(j):
                ss[k, j - 1] = ss[1 + k, j]
            for k in range(col - j):
                sy[j - 1 + k, j - 1] = sy[j + k, j]
    pointr = head
    for j in range(col - 1):
        s1, s2 = 0.0, 0.0
        for i in range(n):
            s1 += d[i] * wy[i, pointr]
            s2 += ws[i, pointr] * d[i]
        sy[col - 1, j] = s1
        ss[j, col - 1] = s2
        pointr = _next(pointr, m)
    ss[col - 1, col - 1] = dtd if stp == 1.0 else stp * stp * dtd
    sy[col - 1, col - 1] = dr
    return itail, col, head, theta


# ---------------------------------------------------------------------------------------------------- line search
@jit(nrt=False, error_model="numpy")
def _dcstep(stx, fx, dx, sty, fy, dy, stp, fp, dp, brackt, stpmin, stpmax):
    """Moré and Thuente's safeguarded step (MINPACK-2 ``dcstep``). Returns (stx, fx, dx, sty, fy,
    dy, stp, brackt)."""
    sgnd = dp * (dx / abs(dx))
    if fp > fx:
        theta = 3.0 * (fx - fp) / (stp - stx) + dx + dp
        s = max(abs(theta), max(abs(dx), abs(dp)))
        gamma = s * math.sqrt((theta / s) ** 2.0 - (dx / s) * (dp / s))
        if stp < stx:
            gamma = -gamma
        p = (gamma - dx) + theta
        q = ((gamma - dx) + gamma) + dp
        r = p / q
        stpc = stx + r * (stp - stx)
        stpq = stx + ((dx / ((fx - fp) / (stp - stx) + dx)) / 2.0) * (stp - stx)
        if abs(stpc - stx) < abs(stpq - stx):
            stpf = stpc
        else:
            stpf = stpc + (stpq - stpc) / 2.0
        brackt = True
    elif sgnd < 0.0:
        theta = 3.0 * (fx - fp) / (stp - stx) + dx + dp
        s = max(abs(theta), max(abs(dx), abs(dp)))
        gamma = s * math.sqrt((theta / s) ** 2.0 - (dx / s) * (dp / s))
        if stp > stx:
            gamma = -gamma
        p = (gamma - dp) + theta
        q = ((gamma - dp) + gamma) + dx
        r = p / q
        stpc = stp + r * (stx - stp)
        stpq = stp + (dp / (dp - dx)) * (stx - stp)
        if abs(stpc - stp) > abs(stpq - stp):
            stpf = stpc
        else:
            stpf = stpq
        brackt = True
    elif abs(dp) < abs(dx):
        theta = 3.0 * (fx - fp) / (stp - stx) + dx + dp
        s = max(abs(theta), max(abs(dx), abs(dp)))
        gamma = s * math.sqrt(max(0.0, (theta / s) ** 2.0 - (dx / s) * (dp / s)))
        if stp > stx:
            gamma = -gamma
        p = (gamma - dp) + theta
        q = (gamma + (dx - dp)) + gamma
        r = p / q
        if r < 0.0 and gamma != 0.0:
            stpc = stp + r * (stx - stp)
        elif stp > stx:
            stpc = stpmax
        else:
            stpc = stpmin
        stpq = stp + (dp / (dp - dx)) * (stx - stp)
        if brackt:
            if abs(stpc - stp) < abs(stpq - stp):
                stpf = stpc
            else:
                stpf = stpq
            if stp > stx:
                stpf = min(stp + 0.66 * (sty - stp), stpf)
            else:
                stpf = max(stp + 0.66 * (sty - stp), stpf)
        else:
            if abs(stpc - stp) > abs(stpq - stp):
                stpf = stpc
            else:
                stpf = stpq
            stpf = min(stpmax, stpf)
            stpf = max(stpmin, stpf)
    else:
        if brackt:
            theta = 3.0 * (fp - fy) / (sty - stp) + dy + dp
            s = max(abs(theta), max(abs(dy), abs(dp)))
            gamma = s * math.sqrt((theta / s) ** 2.0 - (dy / s) * (dp / s))
            if stp > sty:
                gamma = -gamma
            p = (gamma - dp) + theta
            q = ((gamma - dp) + gamma) + dy
            r = p / q
            stpc = stp + r * (sty - stp)
            stpf = stpc
        elif stp > stx:
            stpf = stpmax
        else:
            stpf = stpmin
    if fp > fx:
        sty, fy, dy = stp, fp, dp
    else:
        if sgnd < 0.0:
            sty, fy, dy = stx, fx, dx
        stx, fx, dx = stp, fp, dp
    return stx, fx, dx, sty, fy, dy, stpf, brackt


@jit(nrt=False, error_model="numpy")
def _dcsrch(f, g, stp, ftol, gtol, xtol, stpmin, stpmax, task, isave, dsave):
    """One step of Moré and Thuente's line search (MINPACK-2 ``dcsrch``; state in ``isave`` [2]
    and ``dsave`` [13] between calls). Returns (the next step, task)."""
    xtrapl, xtrapu = 1.1, 4.0
    if task == LS_START:
        if stp < stpmin or stp > stpmax or g >= 0.0 or ftol < 0.0 or gtol < 0.0 or xtol < 0.0 or stpmin < 0.0 \
                or stpmax < stpmin:
            return stp, LS_ERROR
        width = stpmax - stpmin
        isave[0], isave[1] = 0, 1
        dsave[0], dsave[1], dsave[2], dsave[3] = g, ftol * g, g, g
        dsave[4], dsave[5], dsave[6], dsave[7], dsave[8] = f, f, f, 0.0, 0.0
        dsave[9], dsave[10], dsave[11], dsave[12] = 0.0, stp + xtrapu * stp, width, width / 0.5
        return stp, LS_FG
    brackt, stage = isave[0] == 1, isave[1]
    ginit, gtest, gx, gy, finit, fx, fy = dsave[0], dsave[1], dsave[2], dsave[3], dsave[4], dsave[5], dsave[6]
    stx, sty, stmin, stmax, width, width1 = dsave[7], dsave[8], dsave[9], dsave[10], dsave[11], dsave[12]
    ftest = finit + stp * gtest
    if stage == 1 and f <= ftest and g >= 0.0:
        stage = 2
    task = LS_FG
    if brackt and (stp <= stmin or stp >= stmax):
        task = LS_WARN
    if brackt and stmax - stmin <= xtol * stmax:
        task = LS_WARN
    if stp == stpmax and f <= ftest and g <= gtest:
        task = LS_WARN
    if stp == stpmin and (f > ftest or g >= gtest):
        task = LS_WARN
    if f <= ftest and abs(g) <= gtol * (-ginit):
        task = LS_CONV
    if task == LS_FG:
        if stage == 1 and f <= fx and f > ftest:
            fm = f - stp * gtest
            fxm = fx - stx * gtest
            fym = fy - sty * gtest
            gm = g - gtest
            gxm = gx - gtest
            gym = gy - gtest
            stx, fxm, gxm, sty, fym, gym, stp, brackt = _dcstep(stx, fxm, gxm, sty, fym, gym, stp, fm, gm, brackt,
                                                                 stmin, stmax)
            fx = fxm + stx * gtest
            fy = fym + sty * gtest
            gx = gxm + gtest
            gy = gym + gtest
        else:
            stx, fx, gx, sty, fy, gy, stp, brackt = _dcstep(stx, fx, gx, sty, fy, gy, stp, f, g, brackt, stmin, stmax)
        if brackt:
            if abs(sty - stx) >= 0.66 * width1:
                stp = stx + 0.5 * (sty - stx)
            width1 = width
            width = abs(sty - stx)
        if brackt:
            stmin = min(stx, sty)
            stmax = max(stx, sty)
        else:
            stmin = stp + xtrapl * (stp - stx)
            stmax = stp + xtrapu * (stp - stx)
        stp = max(stp, stpmin)
        stp = min(stp, stpmax)
        if (brackt and (stp <= stmin or stp >= stmax)) or (brackt and stmax - stmin <= xtol * stmax):
            stp = stx
    isave[0], isave[1] = 1 if brackt else 0, stage
    dsave[0], dsave[1], dsave[2], dsave[3], dsave[4], dsave[5], dsave[6] = ginit, gtest, gx, gy, finit, fx, fy
    dsave[7], dsave[8], dsave[9], dsave[10], dsave[11], dsave[12] = stx, sty, stmin, stmax, width, width1
    return stp, task


# ---------------------------------------------------------------------------------------------------- the driver
@jit(nrt=False, error_model="numpy")
def _active(n, lo, hi, nbd, x, iwhere):
    """``x`` projected onto the bounds, ``iwhere`` initialised (``active``). Returns (constrained, boxed)."""
    cnstnd, boxed = False, True
    for i in range(n):
        if nbd[i] > 0:
            if nbd[i] <= 2 and x[i] <= lo[i]:
                if x[i] < lo[i]:
                    x[i] = lo[i]
            elif nbd[i] >= 2 and x[i] >= hi[i]:
                if x[i] > hi[i]:
                    x[i] = hi[i]
    for i in range(n):
        if nbd[i] != 2:
            boxed = False
        if nbd[i] == 0:
            iwhere[i] = -1
        else:
            cnstnd = True
            iwhere[i] = 3 if nbd[i] == 2 and hi[i] - lo[i] <= 0.0 else 0
    return cnstnd, boxed


@jit(nrt=False, error_model="numpy")
def _line_search(n, lo, hi, nbd, x, f, g, d, r, t, z, it, boxed, cnstnd, maxls, ls_i, ls_d, data):
    """``lnsrlb`` along ``d`` from ``x`` (kept in ``t``, its gradient in ``r``), the loss evaluated
    at each step it asks for. Returns (f, f before, step, slope, slope before, |d|^2, whether it
    succeeded, evaluations); on failure the caller restores x, g and f from ``t``, ``r``, f before."""
    dnorm = 0.0
    for i in range(n):
        dnorm += d[i] * d[i]
    dnorm = math.sqrt(dnorm)
    dtd = dnorm ** 2.0
    stpmx = 1.0e10
    if cnstnd:
        if it == 0:
            stpmx = 1.0
        else:
            for i in range(n):
                a1 = d[i]
                if nbd[i] != 0:
                    if a1 < 0.0 and nbd[i] <= 2:
                        a2 = lo[i] - x[i]
                        if a2 >= 0.0:
                            stpmx = 0.0
                        elif a1 * stpmx < a2:
                            stpmx = a2 / a1
                    elif a1 > 0.0 and nbd[i] >= 2:
                        a2 = hi[i] - x[i]
                        if a2 <= 0.0:
                            stpmx = 0.0
                        elif a1 * stpmx > a2:
                            stpmx = a2 / a1
    stp = min(1.0 / dnorm, stpmx) if it == 0 and not boxed else 1.0
    for i in range(n):
        t[i] = x[i]
        r[i] = g[i]
    fold = f
    ifun, nev, task = 0, 0, LS_START
    gd, gdold = 0.0, 0.0
    while True:
        gd = 0.0
        for i in range(n):
            gd += g[i] * d[i]
        if ifun == 0:
            gdold = gd
            if gd >= 0.0:  # (not a descent direction)
                return f, fold, stp, gd, gdold, dtd, False, nev
        stp, task = _dcsrch(f, gd, stp, 1e-3, 0.9, 0.1, 0.0, stpmx, task, ls_i, ls_d)
        if task == LS_CONV or task == LS_WARN:
            return f, fold, stp, gd, gdold, dtd, True, nev
        ifun += 1
        if stp == 1.0:
            for i in range(n):
                x[i] = z[i]
        else:
            for i in range(n):
                x[i] = stp * d[i] + t[i]
                if nbd[i] == 1 or nbd[i] == 2:
                    x[i] = max(x[i], lo[i])
                if nbd[i] == 2 or nbd[i] == 3:
                    x[i] = min(x[i], hi[i])
        if ifun - 1 >= maxls:
            return f, fold, stp, gd, gdold, dtd, False, nev
        f = fit_loss(x, data, g)
        nev += 1


@jit(error_model="numpy")
def lbfgsb_fit(x, lo, hi, nbd, factr, pgtol, m, maxls, maxiter, maxfun, data):
    """Minimise :func:`fit_loss` (on ``data``) from ``x`` (changed in place to the result) within
    [``lo``, ``hi``] (``nbd``: 0 no bound, 1 lower, 2 both, 3 upper), as ``_lbfgsb.setulb``
    driven by scipy's ``_minimize_lbfgsb`` (``factr`` = ftol / eps, ``pgtol``, ``m`` corrections,
    ``maxls`` line-search steps, ``maxiter`` iterations, ``maxfun`` evaluations). Returns
    (f, evaluations, iterations, outcome: CONVERGED_GRAD, CONVERGED_F, ABNORMAL or STOPPED)."""
    n = x.shape[0]
    g = np.zeros(n)
    ws, wy = np.zeros((n, m)), np.zeros((n, m))
    sy, ss, wt = np.zeros((m, m)), np.zeros((m, m)), np.zeros((m, m))
    wn, snd = np.zeros((2 * m, 2 * m)), np.zeros((2 * m, 2 * m))
    z, r, d, t, xp = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    wa_p, wa_c, wa_wbp, wa_v = np.zeros(2 * m), np.zeros(2 * m), np.zeros(2 * m), np.zeros(2 * m)
    index, iwhere, indx2 = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    ls_i, ls_d = np.zeros(2, np.int64), np.zeros(13)
    tol = factr * EPSMACH
    cnstnd, boxed = _active(n, lo, hi, nbd, x, iwhere)
    f = fit_loss(x, data, g)
    nfev = 1
    sbgnrm = _projgr(n, lo, hi, nbd, x, g)
    if sbgnrm <= pgtol:
        return f, nfev, 0, CONVERGED_GRAD
    col, head, itail, iupdat, it, nit, nfree = 0, 0, 0, 0, 0, 0, n
    theta, updatd, wrk = 1.0, False, False
    nenter, ileave = 0, n
    while True:
        info = 0
        if not cnstnd and col > 0:
            z[:] = x
            wrk = updatd
        else:
            info, _ = _cauchy(n, x, lo, hi, nbd, g, indx2, iwhere, t, d, z, m, wy, ws, sy, wt, theta, col, head,
                              wa_p, wa_c, wa_wbp, wa_v, sbgnrm)
            if info != 0:  # (a singular system: the memory refreshed)
                col, head, theta, iupdat, updatd = 0, 0, 1.0, 0, False
                continue
            nfree, nenter, ileave, wrk = _freev(n, nfree, index, indx2, iwhere, updatd, cnstnd, it)
        if nfree != 0 and col != 0:
            if wrk:
                info = _formk(n, nfree, index, nenter, ileave, indx2, iupdat, updatd, wn, snd, m, ws, wy, sy, theta,
                              col, head)
            if info == 0:
                info = _cmprlb(n, m, x, g, ws, wy, sy, wt, z, r, wa_p, wa_c, index, theta, col, head, nfree, cnstnd)
            if info == 0:
                info = _subsm(n, m, nfree, index, lo, hi, nbd, z, r, xp, ws, wy, theta, x, g, col, head, wa_p, wn)
            if info != 0:
                col, head, theta, iupdat, updatd = 0, 0, 1.0, 0, False
                continue
        for i in range(n):
            d[i] = z[i] - x[i]
        f, fold, stp, gd, gdold, dtd, ok, nev = _line_search(n, lo, hi, nbd, x, f, g, d, r, t, z, it, boxed, cnstnd,
                                                             maxls, ls_i, ls_d, data)
        nfev += nev
        if not ok:
            x[:] = t
            g[:] = r
            f = fold
            if col == 0:
                return f, nfev, nit, ABNORMAL
            col, head, theta, iupdat, updatd = 0, 0, 1.0, 0, False
            continue
        it += 1
        sbgnrm = _projgr(n, lo, hi, nbd, x, g)
        nit += 1
        if nit >= maxiter or nfev > maxfun:
            return f, nfev, nit, STOPPED
        if sbgnrm <= pgtol:
            return f, nfev, nit, CONVERGED_GRAD
        if fold - f <= tol * max(max(abs(fold), abs(f)), 1.0):
            return f, nfev, nit, CONVERGED_F
        rr = 0.0
        for i in range(n):
            r[i] = g[i] - r[i]
            rr += r[i] * r[i]
        rr = math.sqrt(rr) ** 2.0
        if stp == 1.0:
            dr = gd - gdold
            ddum = -gdold
        else:
            dr = (gd - gdold) * stp
            for i in range(n):
                d[i] = stp * d[i]
            ddum = -gdold * stp
        if dr <= EPSMACH * ddum:  # (the update skipped)
            updatd = False
            continue
        updatd = True
        iupdat += 1
        itail, col, head, theta = _matupd(n, m, ws, wy, sy, ss, d, r, itail, iupdat, col, head, rr, dr, stp, dtd)
        if _formt(m, wt, sy, ss, col, theta) != 0:
            col, head, theta, iupdat, updatd = 0, 0, 1.0, 0, False


# ---------------------------------------------------------------------------------------------------- a whole fit
@jit(nrt=False, error_model="numpy")
def fit_start(nodes, reps, atomic, accum_time, p0, lo, hi):
    """``fastblox.elastic._fit_start`` into ``p0``, ``lo``, ``hi`` (upper inf where unbounded):
    the start and bounds of the 7 parameters, those the observations cannot tell pinned."""
    n = nodes.shape[0]
    for k in range(3):
        p0[2 * k], p0[2 * k + 1], lo[2 * k], lo[2 * k + 1] = 1e-1, 1e-2, 1e-8, 1e-8
        hi[2 * k], hi[2 * k + 1] = np.inf, np.inf
    p0[6], lo[6], hi[6] = 1.0 + 1e-3, 1.0, 10.0
    one_batch, multi, single_multi, above2 = True, False, False, False
    for i in range(n):
        one_batch &= atomic[i] == atomic[0]
        multi |= nodes[i] > 1
        single_multi |= nodes[i] == 1 and reps[i] > 1
        above2 |= reps[i] > 2
    if one_batch:
        p0[0] = lo[0] = hi[0] = pairwise_sum(accum_time, 0, n) / n / 2  # (np.mean's bits)
    for k in range(6):
        if (k >= 2 and k <= 3 and not multi) or (k >= 4 and not single_multi) or (k % 2 == 1 and k >= 3 and not above2):
            p0[k] = hi[k] = lo[k]


@jit(error_model="numpy")
def fit_model(nodes, reps, atomic, accum_time, step_time, ftol, pgtol, out):
    """``fastblox.elastic.fit_perf_params(..., compiled=True)`` into ``out`` (7 floats): the fit's
    start and pins (:func:`fit_start`), :func:`lbfgsb_fit` over the free parameters with
    ``minimize``'s defaults for ``ftol``/``pgtol``, and adaptdl's rule for the inter-node terms
    without a multi-node run. Returns :func:`lbfgsb_fit`'s (f, evaluations, iterations, outcome)."""
    n = nodes.shape[0]
    p0, lo, hi = np.empty(7), np.empty(7), np.empty(7)
    fit_start(nodes, reps, atomic, accum_time, p0, lo, hi)
    nf = 0
    for k in range(7):
        nf += lo[k] < hi[k]
    free = np.empty(nf, np.int64)
    x, lo_f, hi_f, nbd = np.empty(nf), np.empty(nf), np.empty(nf), np.empty(nf, np.int64)
    j = 0
    for k in range(7):
        if lo[k] < hi[k]:
            free[j] = k
            x[j] = min(max(p0[k], lo[k]), hi[k])
            lo_f[j] = lo[k]
            hi_f[j] = hi[k] if hi[k] < np.inf else 0.0
            nbd[j] = 2 if hi[k] < np.inf else 1
            j += 1
    data = fit_data(nodes, reps, atomic, accum_time, step_time, p0, free)
    res = lbfgsb_fit(x, lo_f, hi_f, nbd, ftol / EPSMACH, pgtol, LBFGSB_M, LBFGSB_MAXLS, LBFGSB_MAXITER,
                     LBFGSB_MAXFUN, data)
    out[:] = p0
    for k in range(nf):
        out[free[k]] = x[k]
    multi = False
    for i in range(n):
        multi |= nodes[i] > 1
    if not multi:
        out[2] = max(out[2], out[4] * 1.1)
        out[3] = max(out[3], out[5] * 1.1)
    return res
