"""Hypothesis strategies for small random workloads and clusters."""

import numpy as np
from hypothesis import strategies as st


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
