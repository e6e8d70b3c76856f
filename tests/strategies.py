"""Hypothesis strategies for small random workloads and clusters."""

from dataclasses import dataclass

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st


def per_item(share: int = 2):
    """Settings for a property test parametrized over a few configurations (e.g. one item per
    policy, so that every policy is drawn whatever hypothesis picks): each item gets ``1/share`` of
    the profile's examples, at least 10. A policy left to ``sampled_from`` among 30 configurations
    in 60 examples could go undrawn (issue 19: ``las-gpu`` did)."""
    return settings(max_examples=max(10, settings().max_examples // share))


@st.composite
def small_case(draw, max_jobs=24, integral=True):
    nodes = draw(st.integers(1, 4))
    per_node = draw(st.sampled_from([1, 2, 4, 8]))
    total = nodes * per_node
    n = draw(st.integers(1, max_jobs))
    gaps = draw(st.lists(st.integers(0, 900), min_size=n, max_size=n))
    submit = np.cumsum(np.asarray(gaps, dtype=np.float64))
    sizes = [s for s in (1, 2, 3, 4, 8) if s <= total]
    gpus = np.asarray(draw(st.lists(st.sampled_from(sizes), min_size=n, max_size=n)), dtype=np.int64)
    if integral:
        dur = np.asarray(draw(st.lists(st.integers(1, 4000), min_size=n, max_size=n)), dtype=np.float64)
    else:
        dur = np.asarray(draw(st.lists(st.floats(0.5, 4000.0, allow_nan=False), min_size=n, max_size=n)))
    return submit, gpus, dur, [per_node] * nodes


# ------------------------------------------------------------------------------------------ realism
@dataclass
class RealCase:
    """A workload on a heterogeneous cluster with a speed model and node events.

    Nodes: ``node_gpus``, ``node_type`` (indices into ``type_names``, numbered in order of first
    appearance, as ``fastblox.Cluster`` numbers them), ``node_rack`` (None: one rack). Jobs (sorted
    by submit): ``submit``, ``gpus``, ``work`` (work units), ``cls`` (-1: unknown model),
    ``ref_rate``. Speed: ``tab[c, t, n]`` (0: cannot run there), ``type_speed[t]``,
    ``node_factor[c]`` (NaN: the run's multi-node factor), ``spread[c, t, n]`` a measured
    multi-node throughput (0: none, use the factor). ``events``: ``(time_s, event, node)``
    records, a valid fail/recover sequence per node. ``g_max``: the largest gang possible."""

    submit: np.ndarray
    gpus: np.ndarray
    work: np.ndarray
    node_gpus: list
    node_type: list
    type_names: tuple
    node_rack: list | None
    cls: np.ndarray
    ref_rate: np.ndarray
    tab: np.ndarray
    type_speed: np.ndarray
    node_factor: np.ndarray
    spread: np.ndarray
    events: list
    g_max: int

    def type_capacity(self):
        cap = [0] * len(self.type_names)
        for g, t in zip(self.node_gpus, self.node_type):
            cap[t] += g
        return cap

    def base_rate(self, j, t, n):
        """The spec's rate of job ``j`` on ``n`` GPUs of type ``t`` in one node (for choosing plans)."""
        c = int(self.cls[j])
        if c < 0:
            sp = float(self.type_speed[t])
            g = int(self.gpus[j])
            return sp if n == g else sp * (n / (1 + 0.05 * (n - 1))) / (g / (1 + 0.05 * (g - 1)))
        return float(self.tab[c, t, n])


def _rate():
    """A throughput: mostly positive (some awkward binary fractions), sometimes 0 (cannot run)."""
    return st.integers(0, 11).flatmap(
        lambda k: st.just(0.0) if k == 0 else st.sampled_from([0.5, 1.0, 2.0, 3.0]) if k < 5
        else st.floats(0.05, 20.0, allow_nan=False, allow_infinity=False))


@st.composite
def node_events(draw, num_nodes, horizon=20000, integral=True):
    """Valid node event records: per node, optionally out of service at the start (first event
    ``add``), then up to two outages (``fail``/``remove`` ... ``recover``), rarely one that lasts.
    Node 0 never starts out of service (a run needs a node at the start)."""
    if integral:
        gap = lambda hi: float(draw(st.integers(0, hi)))  # noqa: E731
    else:
        gap = lambda hi: draw(st.floats(0.0, float(hi), allow_nan=False))  # noqa: E731
    recs = []
    for nd in range(num_nodes):
        t = 0.0
        if nd > 0 and draw(st.integers(0, 5)) == 0:
            t = gap(horizon // 4)
            recs.append((t, "add", nd))
        for _ in range(draw(st.integers(0, 2))):
            t += gap(horizon // 3)
            recs.append((t, draw(st.sampled_from(["fail", "fail", "remove"])), nd))
            if draw(st.integers(0, 9)) == 0:
                break  # out of service for good
            t += gap(horizon // 4)
            recs.append((t, draw(st.sampled_from(["recover", "recover", "add"])), nd))
    return recs


@st.composite
def real_case(draw, max_jobs=14, max_types=3, with_events=True, integral=None, max_nodes=5, node_sizes=(1, 2, 4),
              max_gap=600, min_jobs=1):
    """``integral``: whole-second submit times, work and event times (None: drawn). Jobs arrive
    ``0..max_gap`` seconds apart (a small gap: a contended cluster)."""
    if integral is None:
        integral = draw(st.booleans())
    n_types = draw(st.integers(1, max_types))
    n_nodes = draw(st.integers(n_types, max(max_nodes, n_types)))
    raw = draw(st.lists(st.integers(0, n_types - 1), min_size=n_nodes, max_size=n_nodes))
    raw[: n_types] = draw(st.permutations(list(range(n_types))))  # every type has a node
    first = []
    for t in raw:
        if t not in first:
            first.append(t)
    node_type = [first.index(t) for t in raw]  # types numbered in order of first appearance
    type_names = ("v100", "p100", "k80")[:n_types]
    node_gpus = draw(st.lists(st.sampled_from(list(node_sizes)), min_size=n_nodes, max_size=n_nodes))
    rack_kind = draw(st.sampled_from(["one", "blocks", "random"]))
    if rack_kind == "one":
        node_rack = None
    elif rack_kind == "blocks":
        k = draw(st.integers(1, 3))
        node_rack = [nd // k for nd in range(n_nodes)]
    else:
        steps = draw(st.lists(st.booleans(), min_size=n_nodes, max_size=n_nodes))
        node_rack = list(np.cumsum([0] + [int(s) for s in steps[1:]]))
        node_rack = [int(r) for r in node_rack]
    cap = [0] * n_types
    for g, t in zip(node_gpus, node_type):
        cap[t] += g
    g_max = max(cap)

    n = draw(st.integers(min_jobs, max_jobs))
    if integral:
        gaps = draw(st.lists(st.integers(0, max_gap), min_size=n, max_size=n))
        work = draw(st.lists(st.integers(1, 3000), min_size=n, max_size=n))
    else:
        gaps = draw(st.lists(st.floats(0.0, float(max_gap), allow_nan=False), min_size=n, max_size=n))
        work = draw(st.lists(st.floats(0.5, 3000.0, allow_nan=False), min_size=n, max_size=n))
    submit = np.cumsum(np.asarray(gaps, dtype=np.float64))
    work = np.asarray(work, dtype=np.float64)
    sizes = [s for s in (1, 2, 3, 4, 8) if s <= g_max]
    gpus = np.asarray(draw(st.lists(st.sampled_from(sizes), min_size=n, max_size=n)), dtype=np.int64)

    n_models = draw(st.integers(0, 3))
    tab = np.zeros((n_models, n_types, g_max + 1))
    for c in range(n_models):
        for t in range(n_types):
            for k in range(1, g_max + 1):
                tab[c, t, k] = draw(_rate())
    type_speed = np.asarray([1.0] + [draw(st.sampled_from([0.0, 0.5, 1.5, 2.0, 0.3])) for _ in range(n_types - 1)])
    node_factor = np.asarray([draw(st.sampled_from([np.nan, 1.0, 0.75, 0.3])) for _ in range(n_models)], dtype=np.float64)
    spread = np.zeros_like(tab)
    for c in range(n_models):
        if draw(st.booleans()):  # this model has measured multi-node throughputs (some sizes)
            for t in range(n_types):
                for k in range(2, g_max + 1):
                    spread[c, t, k] = tab[c, t, k] * draw(st.sampled_from([0.0, 0.4, 0.9, 1.2]))
    cls = np.asarray([draw(st.integers(-1, n_models - 1)) for _ in range(n)], dtype=np.int64)
    ref_rate = np.ones(n)
    for j in range(n):
        c = cls[j]
        if c >= 0:
            r = tab[c, 0, gpus[j]]
            if r > 0:
                ref_rate[j] = r
            else:
                cls[j] = -1  # as fastblox.speed does: no rate on the reference type -> unknown model
    # every job can run on some type large enough (as fastblox.simulate requires)
    for j in range(n):
        g = int(gpus[j])
        ok_types = [t for t in range(n_types) if cap[t] >= g]
        rates = [(tab[cls[j], t, g] if cls[j] >= 0 else type_speed[t]) for t in ok_types]
        if not any(r > 0 for r in rates):
            t = ok_types[-1]
            if cls[j] >= 0:
                tab[cls[j], t, g] = 1.0
            else:
                type_speed[t] = 1.0
    events = draw(node_events(n_nodes, integral=integral)) if with_events else []
    return RealCase(submit, gpus, work, node_gpus, node_type, type_names, node_rack, cls, ref_rate, tab,
                    type_speed, node_factor, spread, events, g_max)
