"""The scheduling policies beyond the simple orderings: Tiresias (discretized 2D-LAS and its
Gittins-index variant), Themis (finish-time fairness), Gavel (heterogeneity-aware allocations
solved as linear programs) and Optimus (elastic sizes by marginal gain).

Each module registers its policies in ``fastblox.parts.POLICIES``. ``PREPARE`` maps a policy name
to a function ``(options, workload, speed_model) -> options`` that derives what a policy needs
from the workload before a run (e.g. the Gittins index table)."""

from __future__ import annotations

PREPARE: dict = {}

from . import gavel, optimus, themis, tiresias  # noqa: E402,F401  (registers the policies)
