"""Samplers of a search: they propose the knob values of a round of trials (``ask(n)``) and are told
the objective of each (``tell``). Both are deterministic functions of the config's seed and of the
values they are told, so a search run again proposes the same trials (which is how it resumes).

* :class:`RandomSampler` — independent uniform draws (log-uniform with ``log = true``, a grid of
  ``step``) from a :class:`numpy.random.Generator` seeded with the config's ``seed``; trial k's values
  do not depend on the number of trials, the batch or the objectives.
* :class:`TPESampler` — Optuna's Tree-structured Parzen Estimator through its ask-and-tell
  interface (``pip install 'fastblox[search]'``), seeded; with ``batch > 1`` the trials of a round
  are asked together (``constant_liar``: a trial still running counts as a poor one).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import ConfigError

INSTALL_HINT = "the TPE sampler needs Optuna: pip install 'fastblox[search]'"


def import_optuna():
    try:
        import optuna
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None
    return optuna


class RandomSampler:
    def __init__(self, knobs: list, seed: int, direction: str, batch: int):
        self.knobs = knobs
        self.rng = np.random.default_rng(seed)

    def ask(self, n: int) -> list[dict]:
        return [{k.name: k.clean(self._draw(k)) for k in self.knobs} for _ in range(n)]

    def tell(self, outcomes: list) -> None:
        """Random search learns nothing."""

    def _draw(self, k):
        r = self.rng
        if k.kind == "choice":
            return k.choices[int(r.integers(len(k.choices)))]
        if k.step is not None:
            n = int(round((k.high - k.low) / k.step))
            return round(k.low + k.step * int(r.integers(n + 1)), 12)
        if k.kind == "int":
            if k.log:  # log-uniform over [low, high + 1), floored
                return min(k.high, int(math.floor(math.exp(r.uniform(math.log(k.low), math.log(k.high + 1))))))
            return int(r.integers(k.low, k.high + 1))
        if k.log:
            return math.exp(r.uniform(math.log(k.low), math.log(k.high)))
        return r.uniform(k.low, k.high)


class TPESampler:
    def __init__(self, knobs: list, seed: int, direction: str, batch: int):
        optuna = import_optuna()
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.knobs = knobs
        self.dists = {k.name: _distribution(optuna, k) for k in knobs}
        with warnings.catch_warnings():  # constant_liar is marked experimental
            warnings.simplefilter("ignore")
            sampler = optuna.samplers.TPESampler(seed=seed, constant_liar=batch > 1, constraints_func=_violation)
        self.study = optuna.create_study(direction="minimize" if direction == "min" else "maximize", sampler=sampler)
        self.pending: list = []

    def ask(self, n: int) -> list[dict]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.pending = [self.study.ask(self.dists) for _ in range(n)]
        return [{k.name: k.clean(t.params[k.name]) for k in self.knobs} for t in self.pending]

    def tell(self, outcomes: list) -> None:
        """``outcomes``: ``(objective, unfinished)`` of each trial asked last; objective None: the
        trial failed (Optuna ignores it). A trial whose runs stopped with ``unfinished`` tracked
        jobs is infeasible (a constraint violated by that much), so TPE learns to avoid it while
        its biased objective never makes it a best."""
        state = self.optuna.trial.TrialState
        for t, (v, unfinished) in zip(self.pending, outcomes):
            if v is None:
                self.study.tell(t, state=state.FAIL)
            else:
                t.set_user_attr(VIOLATION, float(unfinished))
                self.study.tell(t, float(v))
        self.pending = []


VIOLATION = "unfinished_tracked_jobs"


def _violation(frozen) -> list:
    return [frozen.user_attrs.get(VIOLATION, 0.0)]


def _distribution(optuna, k):
    d = optuna.distributions
    if k.kind == "choice":
        return d.CategoricalDistribution(list(k.choices))
    if k.kind == "int":
        return d.IntDistribution(k.low, k.high, log=k.log, step=k.step or 1)
    return d.FloatDistribution(k.low, k.high, log=k.log, step=k.step)


SAMPLERS = {"random": RandomSampler, "tpe": TPESampler}


def make_sampler(name: str, knobs: list, seed: int, direction: str, batch: int):
    return SAMPLERS[name](knobs, seed, direction, batch)
