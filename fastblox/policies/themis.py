"""Themis (Mahajan et al., NSDI'20): finish-time fairness with a fairness knob.

A job's finish-time fairness is ``rho = T_shared / T_alone``: the time it will have spent in the
cluster (elapsed since it arrived + its remaining work alone) over its whole work alone (times at
the reference speed on the GPUs it asked for). At every lease (a round of ``--round-s``; Themis
runs in rounds by default) the ``ceil((1 - f) · active)`` jobs with the worst ``rho`` as it will
stand at the end of the lease if they get no GPUs (``(elapsed + lease + remaining) / alone``: the
``rho_old`` of Themis' partial-allocation auction, which also favours short jobs a lease hurts
most; ties at the cut all bid) take part in the auction and are served first, in the order of their bid — how much a lease on GPUs improves
their ``rho`` (``rho`` after the lease without GPUs over ``rho`` after it with them, the
partial-allocation auction's objective, taken greedily); the other jobs get what is left over, the
worst ``rho`` first. ``f = 0``: every job bids (efficiency); ``f`` near 1: the worst-off job first
(fairness). Placement is the run's placement part. Implemented in the kernel (``themis_keys``).
"""

from __future__ import annotations

from .. import parts
from ..kernels import enums
from ._opts import fraction

THEMIS = parts.Policy(
    "themis", enums.POL_THEMIS, True, True,
    "Themis' finish-time fairness: the worst-rho fraction 1-f bids for each lease, the rest gets leftovers",
    kind=enums.KIND_FULL, default_time_model="rounds",
    options=(parts.Option("f", 0.8, fraction, "fairness knob in [0, 1): the 1-f fraction with the worst rho bids"),),
)
parts.POLICIES.register(THEMIS.name, THEMIS)
