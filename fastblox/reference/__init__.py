"""Plain-Python reference engines: slow, obviously correct oracles for the numba kernels."""
